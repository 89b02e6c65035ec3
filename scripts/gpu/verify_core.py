"""GPU verification of the evaluation core (run on the device machine).

  verify_core.py oracles [GLOB]   score every oracle: 8 hidden shapes, speedup with its
                                  interval, reference time, DRAM fraction of the copy ceiling
  verify_core.py repeat ID N      N evaluations of one oracle in separate processes: CV of
                                  the median time
  verify_core.py references [GLOB] every single-GPU reference: median time at the default shape
                                  (the manifest's reference_h200_ms) and a run at the maximum shape,
                                  each with its peak GPU memory
  verify_core.py ncu ID           the oracle's kernel time by ncu (gpu__time_duration) against
                                  the harness's median at the disclosed shape

Results go to $OUT as JSON lines, written as they come (a timeout loses nothing).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/out"))
sys.path.insert(0, str(REPO))


def append(name: str, record: dict) -> None:
    with open(OUT / name, "a") as f:
        f.write(json.dumps(record, default=str) + "\n")


def ceilings() -> dict:
    path = OUT / "ceilings.json"
    if not path.exists():
        out = subprocess.run([sys.executable, str(REPO / "scripts/gpu/ceilings.py")], capture_output=True, text=True)
        path.write_text(out.stdout)
    return json.loads(path.read_text())


def oracles(pattern: str | None, stress: int) -> None:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from orchestrator.catalog import load_catalog, select
    from orchestrator.config import Settings
    from orchestrator.scoring.pipeline import evaluate

    order: list[str] = []
    if pattern and pattern.startswith("@"):  # a file of ids or globs, one per line, run in that order
        order = [ln.strip() for ln in open(pattern[1:]) if ln.strip()]
        pattern = ",".join(order)
    ceiling = ceilings()["copy_gbs"]
    settings = Settings(device=os.environ.get("DEVICE", "cuda"), sandbox="local", stress=stress)
    entries = select(load_catalog(settings), track="subdomain", pattern=pattern, oracle=True, single_gpu=True)

    def one(e):
        t0 = time.perf_counter()
        return e, evaluate(e, e.oracle, settings), time.perf_counter() - t0

    # Several evaluations at once: their correctness and stress phases (CPU-heavy input
    # generation) overlap; their timing phases take the per-GPU lock one at a time.
    first = {"graph/l1/csr_spmv", "graph/l2/gat_attention", "graph/l3/egnn_stack", "biology/l1/smith_waterman_score",
             "biology/l2/triangle_multiplicative_update", "biology/l3/evoformer_block",
             "robotics/l1/forward_kinematics_dh", "robotics/l2/featherstone_aba", "robotics/l3/rigid_body_simulation",
             "probability/l1/gibbs_ising_checkerboard", "probability/l2/flow_matching_ode_solver",
             "probability/l3/particle_filter_bootstrap"}
    if order:
        entries.sort(key=lambda e: order.index(e.id) if e.id in order else len(order))
    else:
        entries.sort(key=lambda e: (e.id not in first, "popcorn2" not in e.tracks, e.id))
    with ThreadPoolExecutor(int(os.environ.get("PARALLEL", 3))) as pool:
        for future in as_completed([pool.submit(one, e) for e in entries]):
            e, r, wall = future.result()
            report_oracle(e, r, wall, ceiling)


def report_oracle(e, r: dict, wall: float, ceiling: float) -> None:
    from orchestrator.runner.shapes import default_shape, evaluate as formula

    t = r["stages"].get("timing", {})
    row = {"problem": e.id, "status": r["status"], "failure": r["failure_class"],
           "detail": r["failure_detail"][-1500:], "speedup": r["speedup"], "ci95": t.get("speedup_ci95"),
           "oracle_ms": t.get("candidate", {}).get("median_ms"), "reference_ms": t.get("reference", {}).get("median_ms"),
           "oracle_cv": t.get("candidate", {}).get("cv"), "stress_n": r["stages"].get("stress", {}).get("n"),
           "wall_s": round(wall, 1), "counters": r["stages"].get("counters"), "flags": r["flags"],
           "stage_s": {k: round(v.get("stage_wall_s", v.get("wall_s", 0)), 1)
                       for k, v in r["stages"].items() if isinstance(v, dict) and ("stage_wall_s" in v or "wall_s" in v)}}
    row["default_shape"] = default_shape(e.manifest["shapes"], "cuda")  # record_results skips rows of an older default
    if row["oracle_ms"]:
        nbytes = formula(e.manifest["bytes"], row["default_shape"])
        row["dram_gbs"] = nbytes / row["oracle_ms"] / 1e6
        row["dram_fraction"] = row["dram_gbs"] / ceiling
    append("results.jsonl", {"kind": "oracle", **row})
    print(json.dumps(row), flush=True)


REFERENCE_PROBE = r"""
import json, os, sys, torch
from orchestrator.runner.judge import gpu_lock
from orchestrator.runner.problem import load_problem
from orchestrator.runner.shapes import boundary_shape, default_shape
from orchestrator.runner.timing import stats, time_calls
problem, device = load_problem(sys.argv[1]), sys.argv[2]
params = problem.manifest["shapes"]
row = {}
for label in ("default", "maximum"):
    if label == "default":
        shape = default_shape(params, device)
    else:
        shape = boundary_shape(params, problem.manifest.get("constraints", []), "max", "cuda")
    try:
        if label == "maximum" and (device == "cpu" or os.environ.get("REFERENCE_MAX", "1") == "0"):
            continue
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        model = problem.model(shape, device)
        inputs = problem.inputs(shape, 0, device)
        # timed alone on the GPU: the same per-GPU lock as the judges' timing phases
        with torch.no_grad(), gpu_lock(os.environ.get("GPU_LOCK") if device == "cuda" else None):
            t = time_calls(model, [inputs], device, iters=20 if label == "default" else 2, warmup=2, hold_bytes=0)
        row[label] = {"shape": shape, **stats(t["times_ms"])}
        if device == "cuda":  # inputs included: what the judge holds besides the candidate
            row[label]["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    except Exception as exc:
        row[label] = {"shape": shape, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if device == "cuda":
        torch.cuda.empty_cache()
print(json.dumps(row))
"""


def references(pattern: str | None) -> None:
    from orchestrator.catalog import load_catalog, select
    from orchestrator.config import Settings

    from concurrent.futures import ThreadPoolExecutor

    entries = select(load_catalog(Settings()), track="subdomain", pattern=pattern, single_gpu=True)
    if os.environ.get("WITHOUT_ORACLE") == "1":
        entries = [e for e in entries if not e.oracle]
    with ThreadPoolExecutor(int(os.environ.get("PARALLEL", 1))) as pool:
        list(pool.map(reference_one, entries))


def reference_one(e) -> None:
    t0 = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, "-c", REFERENCE_PROBE, str(e.path), os.environ.get("DEVICE", "cuda")],
                             capture_output=True, text=True, cwd=REPO, timeout=int(os.environ.get("REFERENCE_S", 120)))
        row = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {"error": res.stderr[-600:]}
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    row = {"kind": "reference", "problem": e.id, "wall_s": round(time.perf_counter() - t0, 1), **row}
    append("results.jsonl", row)
    print(json.dumps(row)[:400], flush=True)


def repeat(problem: str, n: int) -> None:
    """The same oracle evaluated n times, each in its own process, on the same inputs
    (fixed seed: what varies is the harness and the GPU, not the data). The GPU's clocks,
    power and throttle reasons are sampled alongside (repeat_clocks.csv), and every run's
    timed samples kept, so a spread between runs can be traced to its cause."""
    oracle = REPO / "problems" / problem / "solutions" / "oracle.py"
    gpu = os.environ.get("POPCORN_GPUS", "0").split(",")[0]
    seed = os.environ.get("REPEAT_SEED", "1")
    clocks = subprocess.Popen(
        ["nvidia-smi", "-i", gpu, "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
         "clocks_event_reasons.active", "--format=csv", "-lms", "250"],
        stdout=open(OUT / "repeat_clocks.csv", "w"), stderr=subprocess.DEVNULL)
    medians = []
    try:
        for i in range(n):
            started = time.strftime("%Y/%m/%d %H:%M:%S")
            out = subprocess.run([sys.executable, "-m", "orchestrator", "eval", "--problem", problem, "--solution",
                                  str(oracle), "--device", "cuda", "--stress", "0", "--sandbox", "local", "--json",
                                  "--seed", seed], capture_output=True, text=True, cwd=REPO,
                                 # no ncu counter replay: not what this measures (56 s an evaluation with it)
                                 env={**os.environ, "POPCORN_COUNTERS": "false"})
            record = json.loads(out.stdout)
            timed = record["stages"]["timing"]
            medians.append(timed["candidate"]["median_ms"])
            print(f"run {i}: {medians[-1]:.5f} ms", flush=True)
            append("repeat_runs.jsonl", {
                "kind": "repeat_run", "problem": problem, "run": i, "seed": seed, "median_ms": medians[-1],
                "started": started, "ended": time.strftime("%Y/%m/%d %H:%M:%S"),
                "samples_ms": timed["candidate"].get("samples_ms"),
                "device_allocs": timed["candidate"].get("device_allocs"),
                "reference_median_ms": timed["reference"]["median_ms"],
                "stage_s": {k: v.get("stage_wall_s", v.get("wall_s"))
                            for k, v in record["stages"].items() if isinstance(v, dict)}})
    finally:
        clocks.terminate()
    cv = statistics.pstdev(medians) / statistics.fmean(medians)
    row = {"problem": problem, "runs": n, "seed": seed, "medians_ms": medians, "cv_of_median": cv}
    append("results.jsonl", {"kind": "repeatability", **row})
    print(json.dumps(row), flush=True)


def ncu(problem: str) -> None:
    """Kernel time by ncu vs the harness's median (same shape, same oracle)."""
    script = REPO / "scripts/gpu/_oracle_loop.py"
    rep = OUT / "ncu_kernels.csv"
    from orchestrator.runner.judge import gpu_lock

    gpu = os.environ.get("NCU_GPU", "0")
    cmd = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--kernel-name-base", "function", sys.executable, str(script), problem]
    with gpu_lock(f"/tmp/popcorn-gpu{gpu}.lock"):  # nothing else on that GPU while ncu replays
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu})
    rep.write_text(res.stdout + "\n" + res.stderr[-4000:])
    durations = []
    for line in res.stdout.splitlines():
        parts = [p.strip('"') for p in line.split('","')]
        if len(parts) > 3 and parts[-3] == "gpu__time_duration.sum":
            value, unit = float(parts[-1].replace(",", "")), parts[-2]
            durations.append(value / {"nsecond": 1e6, "usecond": 1e3, "msecond": 1.0}.get(unit, 1e6))
    harness = json.loads(subprocess.run(
        [sys.executable, "-m", "orchestrator", "eval", "--problem", problem, "--solution",
         str(REPO / "problems" / problem / "solutions/oracle.py"), "--device", "cuda", "--stress", "0",
         "--sandbox", "local", "--json"], capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "POPCORN_GPUS": gpu}).stdout)
    h = harness["stages"]["timing"]["candidate"]["median_ms"]
    # the loop runs the oracle 10 times after 3 warm-ups; a forward may launch several kernels
    per_call = sorted(durations)
    row = {"problem": problem, "ncu_kernel_ms": per_call, "harness_median_ms": h}
    if durations:
        calls = 13
        total = sum(durations) / calls
        row.update(ncu_per_call_ms=total, relative_gap=(h - total) / total)
    append("results.jsonl", {"kind": "ncu", **row})
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = sys.argv[1]
    if cmd == "oracles":
        oracles(sys.argv[2] if len(sys.argv) > 2 else None, int(os.environ.get("STRESS", 8)))
    elif cmd == "repeat":
        repeat(sys.argv[2], int(sys.argv[3]))
    elif cmd == "references":
        references(sys.argv[2] if len(sys.argv) > 2 else None)
    elif cmd == "ncu":
        ncu(sys.argv[2])
    elif cmd == "ceilings":
        print(ceilings())
