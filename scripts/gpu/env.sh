# Sourced by every scripts/gpu/*.sh on the device machine: carried wheels, a clean
# PYTHONPATH with the repository, and NVLink multicast off (it can take a shared host's
# GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    # Once per wheel set, under a lock: every lane script sources this file, and a second
    # `pip install --upgrade` into a live /tmp/site removed packages under running lanes
    # (2026-11-30: pydantic_settings vanished from a build lane as a collectives lane started).
    stamp=$(ls -l .whl/*.whl | md5sum | cut -d' ' -f1)
    (
        flock 9
        if [ "$(cat /tmp/site/.popcorn-wheels 2>/dev/null)" != "$stamp" ]; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
                .whl/*.whl >/dev/null 2>&1 && echo "$stamp" > /tmp/site/.popcorn-wheels \
                || echo "env.sh: carried wheels did not install" >&2
        fi
    ) 9>/tmp/popcorn-site.lock
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
