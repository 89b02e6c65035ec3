"""Docker sandbox figures (printed, not asserted): exec overhead per tool call over the
bare command (goal <= 60 ms), container start and removal, file transfer, and image
build time and size per layer.

    python scripts/bench_docker.py [--image REF] [--calls 30] [--rebuild]

Without --image it builds (or reuses) the host toolchain and the csr_spmv image chain.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.config import Settings  # noqa: E402
from orchestrator.images import (build_all, build_host_toolchain, engine, plan, resolve_image,  # noqa: E402
                                 select, write_lock, merge_lock, lock_entries)
from orchestrator.sandbox.base import SandboxSpec, create  # noqa: E402

PROBLEM = "graph/l1/csr_spmv"


def ms(values: list[float]) -> str:
    values = sorted(v * 1000 for v in values)
    return f"median {statistics.median(values):7.1f} ms  p10 {values[len(values) // 10]:7.1f}  p90 {values[(len(values) * 9) // 10]:7.1f}"


def bench_layers(client, rebuild: bool) -> str:
    started = time.monotonic()
    toolchain = build_host_toolchain(client, "python", force=rebuild)
    print(f"toolchain (host python, docker import): {time.monotonic() - started:6.1f} s  "
          f"{client.images.get(toolchain).attrs['Size'] / 1e6:7.0f} MB  {toolchain}")
    settings = Settings()
    specs = select(plan(settings, toolchain, client), PROBLEM)
    report = build_all(client, specs, settings, force=rebuild, progress=False)
    for spec in specs:
        image = client.images.get(spec.ref)
        parent = client.images.get(spec.parent.ref).attrs["Size"] if spec.parent else 0
        seconds = report.seconds.get(spec.ref)
        took = f"{seconds:6.1f} s" if seconds is not None else "  cached"
        print(f"{spec.kind:9s} {took}  layer {(image.attrs['Size'] - parent) / 1e3:9.1f} kB  {spec.ref}")
    lock = Path(tempfile.mkdtemp()) / "images.lock.json"
    write_lock(lock, merge_lock(lock, lock_entries(client, specs), toolchain))
    return resolve_image(PROBLEM, lock, client=client)[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rebuild", action="store_true", help="time the builds from scratch")
    args = parser.parse_args()
    client = engine()
    image = args.image or bench_layers(client, args.rebuild)

    starts, closes = [], []
    for _ in range(5):
        t0 = time.monotonic()
        sandbox = create("docker", SandboxSpec(image=image, run_id="bench", episode="start"))
        starts.append(time.monotonic() - t0)
        t0 = time.monotonic()
        sandbox.close()
        closes.append(time.monotonic() - t0)
    print(f"container start (create+start, hardened): {ms(starts)}")
    print(f"container removal:                        {ms(closes)}")

    bare = []
    for _ in range(args.calls):
        t0 = time.monotonic()
        subprocess.run(["true"], check=True)
        bare.append(time.monotonic() - t0)
    with create("docker", SandboxSpec(image=image, run_id="bench", episode="exec")) as sandbox:
        calls, pycalls = [], []
        for _ in range(args.calls):
            t0 = time.monotonic()
            sandbox.exec(["true"], timeout_s=30)
            calls.append(time.monotonic() - t0)
        for _ in range(max(args.calls // 3, 3)):
            t0 = time.monotonic()
            sandbox.exec([sandbox.python, "-c", "pass"], timeout_s=30)
            pycalls.append(time.monotonic() - t0)
        payload = {f"f{i}.py": b"x" * 100_000 for i in range(10)}
        t0 = time.monotonic()
        sandbox.put_files(payload)
        put = time.monotonic() - t0
        t0 = time.monotonic()
        sandbox.get_files(list(payload))
        get = time.monotonic() - t0
    overhead = statistics.median(calls) - statistics.median(bare)
    print(f"bare `true` on the host:                  {ms(bare)}")
    print(f"`true` by exec in the episode container:  {ms(calls)}")
    print(f"python -c pass by exec:                   {ms(pycalls)}")
    print(f"exec overhead per tool call: {overhead * 1000:.1f} ms (goal <= 60 ms)")
    print(f"put_files 1 MB in 10 files: {put * 1000:.0f} ms; get_files back: {get * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
