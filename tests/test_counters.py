from orchestrator.scoring.counters import flags, parse_raw_csv, summarize

RAW = '''==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
"","","nsecond","%","%","%","%"
"0","k1","3,000","10","80","85","0"
"1","k2","1,000","50","20","30","40"
'''


def test_parse_and_weight_by_duration():
    kernels = parse_raw_csv(RAW)
    assert [k["gpu__time_duration.sum"] for k in kernels] == [3000.0, 1000.0]
    s = summarize(kernels)
    assert s["kernels"] == 2
    assert abs(s["dram_throughput_pct"] - 65.0) < 1e-9        # (80*3 + 20*1) / 4
    assert abs(s["sm_throughput_pct"] - 20.0) < 1e-9           # (10*3 + 50*1) / 4
    assert abs(s["sol_pct"] - max(20.0, (85 * 3 + 30) / 4)) < 1e-9
    assert abs(s["tensor_pipe_pct"] - 10.0) < 1e-9


def test_idle_kernels_with_a_big_speedup_are_flagged():
    idle = {"status": "passed", "sm_throughput_pct": 0.2, "dram_throughput_pct": 0.1, "memory_throughput_pct": 0.3}
    assert flags(idle, 20.0) == ["counters:idle_speedup"]
    assert flags(idle, 1.1) == []
    busy = {**idle, "dram_throughput_pct": 70.0}
    assert flags(busy, 20.0) == []
    assert flags({"status": "skipped"}, 20.0) == []


def test_a_timed_median_far_below_the_kernels_ncu_measured_is_flagged():
    """The candidate's process measures and reports its own time; ncu sees its kernels from outside."""
    counters = {"status": "passed", "sm_throughput_pct": 60.0, "metrics": {"kernel_time_ms": 2.0}}
    assert flags(counters, 5.0, candidate_ms=0.4) == ["counters:time_below_kernels"]
    assert flags(counters, 5.0, candidate_ms=1.9) == []      # ncu's clocks and replays: within the floor
    assert flags(counters, 5.0) == []                        # no timed median (a check-only run)
    assert flags({**counters, "metrics": {}}, 5.0, candidate_ms=0.4) == []
    assert flags(counters, None, candidate_ms=0.4) == []     # a failed candidate has no speedup to doubt


class ScriptedNcuSandbox:
    """Answers ncu's command lines as ncu does (no GPU here): the first run, while another
    profiling session is open, is refused; later ones print RAW. Records each run's job."""

    name, python, workdir = "scripted", "python3", "/w"

    def __init__(self, refusals: int):
        self.refusals = refusals
        self.jobs: list[dict] = []
        self.argvs: list[list[str]] = []

    def exec(self, argv, *, timeout_s, stdin=None, env=None, cwd=None):
        import json

        from orchestrator.sandbox.base import ExecResult

        assert argv[0] == "ncu" and argv[-1] == "orchestrator.runner.profile_target"
        self.jobs.append(json.loads(stdin))
        self.argvs.append(list(argv))
        if self.refusals:
            self.refusals -= 1
            return ExecResult(1, "==ERROR== Failed to profile kernel: a driver resource was unavailable\n", "", 1.0)
        from orchestrator.runner.profile_target import PROFILED_LINE

        return ExecResult(0, RAW, "[judge 01:02:03] " + PROFILED_LINE.format(seconds=2.5, waited=0.75) + "\n", 1.0)


def _counters_of(sandbox, overlap: bool, gpu_lock: str | None = "/tmp/popcorn-gpu0.lock", **settings):
    from orchestrator.config import Settings
    from orchestrator.scoring.pipeline import _counters

    job = {"problem_dir": "/w/problem", "solution": "/w/candidate.py", "gpu_lock": gpu_lock}
    return _counters(sandbox, job, Settings(counters_overlap=overlap, **settings))


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_ncu_samples_a_loops_repeats_per_launch_configuration():
    """A forward of hundreds of launches held the GPU alone for minutes under ncu: by default
    each launch configuration is profiled once, and the record says so."""
    sandbox = ScriptedNcuSandbox(refusals=0)
    result = _counters_of(sandbox, overlap=True)
    argv = sandbox.argvs[0]
    assert (_option(argv, "--filter-mode"), _option(argv, "--launch-count")) == ("per-launch-config", "1")
    assert argv.index("--launch-count") < argv.index("python3")  # an ncu option, not the target's
    assert result["max_launches_per_config"] == 1
    assert (result["profiled_s"], result["profiled_lock_wait_s"]) == (2.5, 0.75)  # the GPU held alone, and the wait
    sandbox = ScriptedNcuSandbox(refusals=2)    # the profiled-alone retry keeps the cap
    result = _counters_of(sandbox, overlap=True, counters_max_launches=16)
    assert "refused" in result["retried"]
    assert [_option(a, "--launch-count") for a in sandbox.argvs] == ["16", "16", "16"]
    sandbox = ScriptedNcuSandbox(refusals=0)
    result = _counters_of(sandbox, overlap=True, counters_max_launches=None)
    assert "--launch-count" not in sandbox.argvs[0] and "max_launches_per_config" not in result


class OldNcuSandbox(ScriptedNcuSandbox):
    """An ncu that knows no launch filters: it refuses the options, as ncu refuses any unknown one."""

    def exec(self, argv, *, timeout_s, stdin=None, env=None, cwd=None):
        from orchestrator.sandbox.base import ExecResult

        if "--filter-mode" in argv:
            self.argvs.append(list(argv))
            return ExecResult(1, "", "==ERROR== unrecognised option '--filter-mode'\n", 0.1)
        return super().exec(argv, timeout_s=timeout_s, stdin=stdin, env=env, cwd=cwd)


def test_an_ncu_without_launch_filters_profiles_every_launch_and_says_so():
    sandbox = OldNcuSandbox(refusals=0)
    result = _counters_of(sandbox, overlap=True)
    assert result["status"] == "passed" and "refused" in result["launch_cap"]
    assert "max_launches_per_config" not in result
    assert ["--filter-mode" in a for a in sandbox.argvs] == [True, True, False]


def test_overlapping_counters_take_the_profiler_lock_in_the_profiled_process():
    sandbox = ScriptedNcuSandbox(refusals=0)
    result = _counters_of(sandbox, overlap=True)
    assert result["status"] == "passed" and "retried" not in result
    assert [(j["gpu_lock"], j["profiler_lock"]) for j in sandbox.jobs] == [("/tmp/popcorn-gpu0.lock", True)]
    sandbox = ScriptedNcuSandbox(refusals=0)
    _counters_of(sandbox, overlap=False)
    assert [j["profiler_lock"] for j in sandbox.jobs] == [False]
    sandbox = ScriptedNcuSandbox(refusals=0)                  # a container: the host holds every lock
    _counters_of(sandbox, overlap=True, gpu_lock=None)
    assert [(j["gpu_lock"], j["profiler_lock"]) for j in sandbox.jobs] == [(None, False)]


def test_a_refused_profiling_session_is_profiled_again_alone():
    sandbox = ScriptedNcuSandbox(refusals=2)   # both metric sets refused beside another session
    result = _counters_of(sandbox, overlap=True)
    assert result["status"] == "passed" and result["kernels"] == 2
    assert "refused" in result["retried"]
    assert [j["profiler_lock"] for j in sandbox.jobs] == [True, True, False]
    sandbox = ScriptedNcuSandbox(refusals=2)   # without overlap nothing is retried: the error stands
    result = _counters_of(sandbox, overlap=False)
    assert result["status"] == "error" and len(sandbox.jobs) == 2
