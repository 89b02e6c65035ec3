"""Tool plumbing that needs no model: trimming, argument errors, ncu and SASS parsing."""
from __future__ import annotations

import json

from orchestrator.agent.tools import (HARNESS_TOOLS, filter_ptx, filter_sass, format_ncu, format_verdict,
                                      ncu_command, parse_ncu_raw, parse_probe, tool_schemas, trim)


def test_trim_keeps_head_and_tail_with_a_note():
    text = "".join(f"line {i}\n" for i in range(10_000))
    out, trimmed = trim(text, 3000)
    assert trimmed and out.startswith("line 0\n") and out.endswith("line 9999\n")
    assert f"of {len(text)} characters trimmed" in out
    assert len(out) < 3000 + 200
    assert trim("short", 3000) == ("short", False)


def test_harness_tool_sets_match_the_seed():
    assert [t["function"]["name"] for t in tool_schemas("st")] == ["submit"]
    assert set(HARNESS_TOOLS["mt-default"]) == {"compile", "check", "specs", "static_analysis", "submit"}
    assert set(HARNESS_TOOLS["mt-all"]) == set(HARNESS_TOOLS["mt-default"]) | {"profile", "disassemble", "roofline"}
    for harness in HARNESS_TOOLS:
        for tool in tool_schemas(harness):
            assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


NCU_RAW = '''==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "_spmv_row" - 0: 0%....50%....100% - 38 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum.per_second","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","launch__registers_per_thread","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","","","","","","","","","","","Tbyte/second","%","%","usecond","register/thread","%","%","%","ratio","ratio"
"0","4242","python3.11","gpu-host","_spmv_row","1","7","(128, 1, 1)","(1000000, 1, 1)","0","9.0","3.12","71.40","80.02","1,412.35","32","0","22.1","85.3","14.25","1.10"
"1","4242","python3.11","gpu-host","vectorized_elementwise_kernel","1","7","(128, 1, 1)","(7813, 1, 1)","0","9.0","2.50","60.00","61.00","4.10","16","0","10.0","70.0","3.00","0.50"
==PROF== Disconnected from process 4242
'''


def test_parse_ncu_raw_and_format():
    kernels = parse_ncu_raw(NCU_RAW)
    assert [k["name"] for k in kernels] == ["_spmv_row", "vectorized_elementwise_kernel"]
    assert kernels[0]["metrics"]["gpu__time_duration.sum"] == (1412.35, "usecond")
    text = format_ncu(kernels)
    assert "kernel _spmv_row grid (1000000, 1, 1) block (128, 1, 1): 1412 usecond" in text
    assert "SM 22.1%" in text and "DRAM 71.4%" in text and "memory 80.0%" in text
    assert "DRAM throughput 3.12 Tbyte/second" in text and "achieved occupancy 85.3%" in text
    assert "tensor pipe: idle" in text
    busy = [dict(k, metrics={**k["metrics"],
                             "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": (41.0, "%"),
                             "sm__pipe_tensor_op_hmma_type_hmma_hgmma_cycles_active.avg.pct_of_peak_sustained_active":
                                 (12.0, "%")}) for k in kernels]
    assert "tensor pipe: hmma 41.0%" in format_ncu(busy)  # one figure per family, its largest
    # the longest kernels come first, whatever the launch order
    assert format_ncu(kernels[::-1]).index("_spmv_row") < format_ncu(kernels[::-1]).index("vectorized_elementwise")
    assert "warp stalls (cycles per issued instruction): long_scoreboard 14.25, wait 1.10" in text
    assert parse_ncu_raw("==ERROR== no kernels were profiled") == []


def test_ncu_command_profiles_only_the_marked_range():
    argv = ncu_command("/usr/local/cuda/bin/ncu", "python3", extra_metrics=False)
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--page") + 1] == "raw" and "--metrics" not in argv
    assert argv[-5:] == ["python3", "popcorn_probe.py", "run", "--iters", "1"]


CUOBJDUMP = '''
Fatbin elf code:
================
arch = sm_90
code version = [1,7]

\tcode for sm_90
\t\tFunction : _spmv_row
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                          /* 0x00000a00ff017b82 */
                                                                                   /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_CTAID.X ;                            /* 0x0000000000007919 */
                                                                                   /* 0x000e220000002500 */
        /*0020*/              @!P0 EXIT ;                                          /* 0x000000000000894d */
        /*0030*/                   BRA 0x30;                                       /* 0xfffffffc00fc7947 */
\t\t..........
'''


def test_filter_sass_keeps_instructions_only():
    functions = filter_sass(CUOBJDUMP)
    assert functions == [("_spmv_row", ["LDC R1, c[0x0][0x28]", "S2R R0, SR_CTAID.X", "@!P0 EXIT", "BRA 0x30"])]


def test_filter_ptx_drops_comments_and_debug_sections():
    ptx = "//\n// Generated by LLVM\n.version 8.4\n.target sm_90a\n\t.loc 1 10 0\n\tld.global.f32 %f1, [%rd1];\n.section .debug_abbrev\n{ junk }\n"
    assert filter_ptx(ptx) == ".version 8.4\n.target sm_90a\n\tld.global.f32 %f1, [%rd1];"


def test_probe_output_is_the_last_marked_line():
    out = 'POPCORN_PROBE {"a": 1}\nnoise\nPOPCORN_PROBE {"a": 2}\ntrailing print\n'
    assert parse_probe(out) == {"a": 2}
    assert parse_probe("POPCORN_PROBE not json") is None


def test_format_verdict_shows_disclosed_trials_not_stress():
    verdict = {"status": "failed", "failure_class": "incorrect", "failure_detail": "output 0: 12 of 20000 elements differ",
               "stages": {"load": {"status": "passed", "wall_s": 1.5},
                          "correctness": {"status": "failed", "shape": {"n": 5},
                                          "trials": [{"kind": "fresh", "passed": True, "max_abs_err": 1e-7},
                                                     {"kind": "fresh", "passed": False, "max_abs_err": 0.5,
                                                      "message": "first bad indices (3,)"}]},
                          "stress": {"status": "failed", "seed": 99, "trials": [{"kind": "stress", "passed": False,
                                                                                 "shape": {"n": 77}}]}}}
    text = format_verdict(verdict, "check")
    assert text.startswith("check: failed (incorrect)")
    assert 'correctness at the disclosed shape {"n": 5}: failed' in text
    assert "trial 1 (fresh): FAILED [max_abs_err=0.5]: first bad indices (3,)" in text
    assert "77" not in text and "99" not in text  # nothing about hidden shapes or the seed
    assert json.dumps(verdict)  # unchanged, serialisable


class GpuLikeSandbox:
    """Stands in for a GPU sandbox (no GPU, ncu or cuobjdump here): answers the commands
    the tools send with the outputs those programs print, and records the commands."""

    workdir = "/w"
    python = "python3"

    def __init__(self, counters_restricted: bool = False):
        self.files: dict[str, bytes] = {}
        self.commands: list[list[str]] = []
        self.restricted = counters_restricted

    def put_files(self, files):
        self.files.update(files)

    def get_files(self, paths):
        return {p: self.files[p] for p in paths if p in self.files}

    def exec(self, argv, *, timeout_s, stdin=None, env=None, cwd=None):
        from orchestrator.sandbox.base import ExecResult

        self.commands.append(list(argv))
        out, code = "", 0
        if argv[0] == "sh":
            out = "/usr/local/cuda/bin/" + argv[-1].split()[2] + "\n"
        elif argv[1:3] == ["popcorn_probe.py", "kernels"]:
            assert cwd == "/w/.probe" and env["TRITON_CACHE_DIR"] == "/w/.probe/triton_cache"
            self.files[".probe/triton_cache/ab/_spmv_row.ptx"] = b".version 8.4\n// c\n\tld.global.f32 %f1, [%rd1];\n"
            out = 'POPCORN_PROBE {"cubin": ["/w/.probe/triton_cache/ab/_spmv_row.cubin"], ' \
                  '"ptx": ["/w/.probe/triton_cache/ab/_spmv_row.ptx"], "so": []}\n'
        elif argv[0].endswith("cuobjdump"):
            out = CUOBJDUMP
        elif argv[0].endswith("ncu"):
            if self.restricted:
                out, code = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n", 1
            else:
                self.files[".probe/ncu.csv"] = NCU_RAW.encode()
        return ExecResult(code, out, "", 0.1)

    def close(self):
        pass


def _gpu_workspace(tmp_path, sandbox):
    from pathlib import Path
    from types import SimpleNamespace

    from orchestrator.agent.tools import Scoring, Workspace
    from orchestrator.config import REPO_ROOT, Settings

    folder = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
    entry = SimpleNamespace(id="graph/l1/csr_spmv", path=folder, kind="problem",
                            manifest=json.loads((folder / "manifest.json").read_text()))
    return Workspace(entry=entry, settings=Settings(cache_dir=tmp_path), scoring=Scoring(None, None),  # type: ignore[arg-type]
                     device="cuda", host_dir=Path(tmp_path), sandbox_factory=lambda: sandbox)


def test_disassemble_plumbing(tmp_path):
    from orchestrator.agent.tools import call_tool

    sandbox = GpuLikeSandbox()
    ws = _gpu_workspace(tmp_path, sandbox)
    result = call_tool(ws, "mt-all", "disassemble", json.dumps({"code": "class ModelNew: pass", "what": "both"}))
    assert result.ok, result.text
    assert result.text.splitlines() == ["== SASS _spmv_row (4 instructions) ==", "LDC R1, c[0x0][0x28]",
                                        "S2R R0, SR_CTAID.X", "@!P0 EXIT", "BRA 0x30", "== PTX _spmv_row.ptx ==",
                                        ".version 8.4", "\tld.global.f32 %f1, [%rd1];"]
    assert ["/usr/local/cuda/bin/cuobjdump", "-sass", "/w/.probe/triton_cache/ab/_spmv_row.cubin"] in sandbox.commands
    assert sandbox.files[".probe/candidate.py"] == b"class ModelNew: pass"
    assert ".probe/orchestrator/runner/judge.py" in sandbox.files and ".probe/problem/reference.py" in sandbox.files
    bad = call_tool(ws, "mt-all", "disassemble", json.dumps({"what": "assembly"}))
    assert not bad.ok and "`what` must be" in bad.text


def test_profile_plumbing_and_restricted_counters(tmp_path):
    from orchestrator.agent.tools import call_tool

    sandbox = GpuLikeSandbox()
    result = call_tool(_gpu_workspace(tmp_path, sandbox), "mt-all", "profile", json.dumps({"code": "x", "kernel": "spmv"}))
    assert result.ok and result.text.startswith("1 kernel launch(es) profiled") and "_spmv_row" in result.text
    ncu = next(c for c in sandbox.commands if c[0].endswith("ncu"))
    assert ncu[ncu.index("--log-file") + 1] == "ncu.csv" and "--metrics" in ncu
    restricted = GpuLikeSandbox(counters_restricted=True)
    result = call_tool(_gpu_workspace(tmp_path, restricted), "mt-all", "profile", json.dumps({"code": "x"}))
    assert not result.ok and "ERR_NVGPUCTRPERM" in result.text and result.data["counters_restricted"]
    assert sum(c[0].endswith("ncu") for c in restricted.commands) == 2  # retried without the extra metrics


def test_the_disassemble_probe_runs_the_candidate_under_the_hosts_gpu_lock_files(tmp_path):
    """Scoring holds the lease for its busy accounting only: another episode's disassemble
    probe must keep off a timing or a profiled range through the host's lock files, as a
    judge's trials do. The real probe in a real local sandbox (on the CPU), against a held lock."""
    import threading
    import time
    from pathlib import Path
    from types import SimpleNamespace

    from orchestrator.agent.tools import Scoring, Workspace
    from orchestrator.config import REPO_ROOT, Settings
    from orchestrator.runner.judge import gpu_lock
    from orchestrator.sandbox.base import SandboxSpec, create

    folder = REPO_ROOT / "problems" / "graph" / "l1" / "csr_spmv"
    entry = SimpleNamespace(id="graph/l1/csr_spmv", path=folder, kind="problem",
                            manifest=json.loads((folder / "manifest.json").read_text()))
    code = (folder / "reference.py").read_text().replace("class Model(", "class ModelNew(")

    def workspace(device: str) -> Workspace:
        return Workspace(entry=entry, settings=Settings(cache_dir=tmp_path), scoring=Scoring(None, None),  # type: ignore[arg-type]
                         device=device, host_dir=Path(tmp_path), sandbox_factory=lambda: create("local", SandboxSpec(gpus=(97,))))

    on_gpu = workspace("cuda")
    assert on_gpu.probe_env()["POPCORN_GPU_LOCK"] == "/tmp/popcorn-gpu97.lock"
    on_gpu.close()
    ws = workspace("cpu")                              # the same probe, run here
    assert "POPCORN_GPU_LOCK" not in ws.probe_env()
    ws.put_probe(code)
    lock, done = str(tmp_path / "gpu0.lock"), []
    worker = threading.Thread(target=lambda: done.append(ws.exec(
        [ws.sandbox.python, "popcorn_probe.py", "kernels"], 300, env={"POPCORN_GPU_LOCK": lock})))
    try:
        with gpu_lock(lock):                           # another evaluation times
            worker.start()
            time.sleep(6)
            assert not done, "the probe ran kernels while another evaluation held the GPU alone"
        worker.join(300)
        assert done and done[0].returncode == 0, done and done[0].stderr[-2000:]
        assert "POPCORN_PROBE" in done[0].stdout
    finally:
        ws.close()
