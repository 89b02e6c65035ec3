#!/usr/bin/env bash
# Prepare .carry/docker/ (ignored; carried to the GPU machine, which has no Docker engine
# and reaches no registry): Debian bookworm's dockerd, containerd, its runc shim, runc and
# docker-init, xz-compressed (~30 MB), the non-glibc libraries they load (used there only
# if missing), and the wheels of the Python packages the orchestrator needs that the GPU
# image lacks (docker SDK, pydantic-settings). Idempotent; run here, before the device run.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.carry/docker
grep -qxF '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
mkdir -p "$dest" && work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT

if [ ! -s "$dest/bins.tar.xz" ]; then
    (cd "$work" && apt-get download -qq docker.io containerd runc tini >/dev/null 2>&1)
    for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
    mkdir -p "$work/bin"
    cp "$work/x/usr/sbin/dockerd" "$work/x/usr/bin/containerd" "$work/x/usr/bin/containerd-shim-runc-v2" \
       "$work/x/usr/sbin/runc" "$work/bin/"
    cp "$work/x/usr/bin/tini-static" "$work/bin/docker-init"
    mkdir -p "$work/lib"
    for b in "$work/bin/dockerd" "$work/bin/runc"; do
        ldd "$b" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv)\.so' \
            | xargs -r cp -L -t "$work/lib/"
    done
    tar -C "$work/bin" -cf - . | xz -9 -T2 > "$dest/bins.tar.xz.tmp" && mv "$dest/bins.tar.xz.tmp" "$dest/bins.tar.xz"
    tar -C "$work" -cf - lib | xz -9 > "$dest/libs.tar.xz"
fi
if ! ls "$dest"/wheels/docker-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest/wheels" \
        docker==7.1.0 pydantic==2.13.4 pydantic-core==2.46.4 pydantic-settings==2.14.1 \
        annotated-types==0.7.0 typing-inspection==0.4.2 python-dotenv==1.2.2
fi
du -sh "$dest"; ls -la "$dest" "$dest/wheels"
