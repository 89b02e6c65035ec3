"""The timing plan: interleaved rounds, the time budget for short kernels, published samples."""
from __future__ import annotations

import statistics

import pytest
import torch

from orchestrator.runner import timing


def _timers(ms: dict[str, float], calls: list[tuple[str, int, int]]):
    def make(name: str):
        def timed(n: int, warmup: int) -> list[float]:
            calls.append((name, n, warmup))
            return [ms[name]] * n
        return timed

    return {name: make(name) for name in ms}


def test_rounds_alternate_abba_and_keep_the_count_without_a_budget():
    calls: list[tuple[str, int, int]] = []
    replies = timing.interleaved(_timers({"candidate": 0.07, "reference": 0.07}, calls), iters=50, warmup=3)
    assert [c[0] for c in calls[:6]] == ["candidate", "reference", "reference", "candidate", "candidate", "reference"]
    assert sum(map(len, replies["candidate"])) == 50 and calls[0][2] == 3 and calls[2][2] == 1


def test_a_short_kernel_gets_iterations_up_to_the_budget_and_the_cap():
    calls: list[tuple[str, int, int]] = []
    replies = timing.interleaved(_timers({"candidate": 0.07, "reference": 0.08}, calls), iters=30, warmup=3,
                                 budget_ms=100, iters_max=1000, times_of=lambda name, reply: reply)
    n = sum(map(len, replies["candidate"]))
    assert 1000 <= n <= 1100, n  # 100 ms / 0.07 ms = 1429 wanted, capped at about 1000
    assert sum(map(len, replies["reference"])) == n  # both sides the same count
    assert len(replies["candidate"]) == 20  # spread over four times the rounds
    calls.clear()
    replies = timing.interleaved(_timers({"candidate": 0.5, "reference": 0.5}, calls), iters=50, warmup=3,
                                 budget_ms=100, iters_max=1000, times_of=lambda name, reply: reply)
    assert 200 <= sum(map(len, replies["candidate"])) <= 220


def test_each_side_gets_its_own_count():
    # a 0.25 ms oracle beside a 30 ms reference: the oracle fills the budget, the reference keeps ~iters
    calls: list[tuple[str, int, int]] = []
    replies = timing.interleaved(_timers({"candidate": 0.25, "reference": 30.0}, calls), iters=50, warmup=3,
                                 budget_ms=100, iters_max=1000, times_of=lambda name, reply: reply)
    assert 400 <= sum(map(len, replies["candidate"])) <= 440
    assert 50 <= sum(map(len, replies["reference"])) <= 70
    assert len(replies["candidate"]) == len(replies["reference"]) == 20


def test_a_long_kernel_keeps_the_configured_count():
    calls: list[tuple[str, int, int]] = []
    replies = timing.interleaved(_timers({"candidate": 5.0, "reference": 6.0}, calls), iters=50, warmup=3,
                                 budget_ms=100, iters_max=1000, times_of=lambda name, reply: reply)
    assert [len(r) for r in replies["candidate"]] == [10] * 5


def test_no_budget_on_a_cpu():
    assert timing.budget({"budget_ms": 100, "iters_max": 1000}, cpu=True, times_of=lambda n, r: r) == {}
    gpu = timing.budget({"budget_ms": 100, "iters_max": 1000}, cpu=False, times_of=lambda n, r: r)
    assert gpu["budget_ms"] == 100 and gpu["iters_max"] == 1000


def test_stats_publish_every_sample_in_order():
    times = [0.3, 0.1, 0.2, 0.5]
    s = timing.stats(times, device_allocs=2)
    assert s["samples_ms"] == times and s["median_ms"] == statistics.median(times) and s["device_allocs"] == 2
    assert "device_allocs" not in timing.stats(times)


def test_stats_carry_the_harness_floor():
    s = timing.stats([0.3, 0.1, 0.2], floor_ms=[0.05, 0.04, 0.06])
    assert s["floor_ms"] == 0.05
    assert "floor_ms" not in timing.stats([0.3])
    joined = timing.joined([{"times_ms": [1.0], "host_ms": [1.1], "device_allocs": 1, "floor_ms": [0.05],
                             "calls_per_region": 1},
                            {"times_ms": [2.0], "host_ms": [2.1], "device_allocs": 2, "floor_ms": [0.06],
                             "calls_per_region": 4}])
    assert joined == {"times_ms": [1.0, 2.0], "host_ms": [1.1, 2.1], "device_allocs": 3, "floor_ms": [0.05, 0.06],
                      "calls_per_region": [1, 4], "round_sizes": [1, 1]}
    summary = timing.summary(joined)
    assert summary["floor_ms"] == 0.055 and summary["calls_per_region"] == [1, 4] and summary["device_allocs"] == 3
    assert timing.region_times({"times_ms": [0.5, 0.25], "calls_per_region": 4}) == [2.0, 1.0]


def test_short_calls_share_a_region_and_long_ones_are_timed_alone():
    most = timing.MAX_CALLS_PER_REGION
    assert timing.calls_per_region(0.07, 1 << 20, 1 << 30, most) == 29  # about 2 ms of work per region
    assert timing.calls_per_region(0.001, 1 << 20, 1 << 30, most) == most
    assert timing.calls_per_region(2.5, 1 << 20, 1 << 30, most) == 1
    assert timing.calls_per_region(0.07, 1 << 20, 10 << 20, most) == 5  # copies and outputs must fit the hold
    assert timing.calls_per_region(0.07, 1 << 20, 1 << 30, 1) == 1  # ranks that must call in step


def test_both_sides_keep_one_region_size_after_their_first_rounds():
    regions = timing.RegionSizes(["candidate", "reference"])
    assert regions.request("candidate") == 0  # the first round sizes its own
    regions.note("candidate", 17)
    assert regions.request("reference") == 0
    regions.note("reference", 29)
    regions.note("candidate", 5)  # later rounds do not re-size
    assert regions.request("candidate") == regions.request("reference") == 29


def test_a_side_of_long_calls_is_not_made_to_hold_the_other_sides_count():
    """A 90 ms reference beside a 0.33 ms candidate: the candidate keeps its 7 calls per
    region; the reference times one call per region, since 7 of them only held the GPU longer."""
    regions = timing.RegionSizes(["candidate", "reference"])
    regions.note("candidate", 7, 0.33)
    regions.note("reference", 1, 90.0)
    assert (regions.request("candidate"), regions.request("reference")) == (7, 1)
    regions = timing.RegionSizes(["candidate", "reference"])
    regions.note("candidate", 7, 0.33)
    regions.note("reference", 1, 10.0)  # 4 calls of 10 ms reach REGION_MOST_MS
    assert regions.request("reference") == int(timing.REGION_MOST_MS // 10.0) == 4
    regions = timing.RegionSizes(["candidate", "reference"])
    regions.note("candidate", 12, 0.15)
    regions.note("reference", 3, 0.9)  # short sides still share the largest count
    assert regions.request("candidate") == regions.request("reference") == 12


def test_a_given_count_is_kept_within_the_hold():
    sets = [(torch.ones(256),)]  # 1 KiB per set
    result = timing.time_calls(lambda x: x + 1, sets, "cpu", iters=3, warmup=0, hold_bytes=1 << 20, calls=7)
    assert result["calls_per_region"] == 7
    result = timing.time_calls(lambda x: x + 1, sets, "cpu", iters=3, warmup=0, hold_bytes=4 << 10, calls=7)
    assert result["calls_per_region"] == 2  # two fresh copies and outputs of 1 KiB fill 4 KiB


def test_every_call_of_a_region_gets_fresh_inputs_and_its_output_checked():
    a, b = torch.arange(4.0), torch.arange(4.0) + 10
    seen, ptrs = [], set()

    def fn(x):
        ptrs.add(x.data_ptr())
        return x * 2

    result = timing.time_calls(fn, [(a,), (b,)], "cpu", iters=3, warmup=1, hold_bytes=1 << 20,
                               on_output=lambda k, out: seen.append((k, float(out.sum()))))
    calls = result["calls_per_region"]
    assert calls == timing.MAX_CALLS_PER_REGION  # a call of microseconds on the CPU
    assert len(result["times_ms"]) == 3 and len(seen) == 3 * calls
    assert seen[:3] == [(0, 12.0), (1, 92.0), (0, 12.0)]  # the sets rotate call by call
    assert result["reused_output_storage"] == 0 and len(ptrs) > 3 * calls // 2
    cached = {}
    memo = timing.time_calls(lambda x: cached.setdefault(x.shape, x * 2), [(a,)], "cpu", iters=2, warmup=1,
                             hold_bytes=1 << 20)
    assert memo["reused_output_storage"] > 0


def _noisy_rounds(rng, median, n_rounds, per_round, spread=0.5):
    """Rounds whose level moves by up to `spread` (host state), samples scattered 2 % inside a round."""
    levels = [1.0 + rng.uniform(0, spread) for _ in range(n_rounds)]
    return [[median * level * rng.gauss(1.0, 0.02) for _ in range(per_round)] for level in levels]


def test_the_interval_resamples_rounds_so_round_level_noise_widens_it():
    import random
    rng = random.Random(7)
    ref, cand = _noisy_rounds(rng, 0.07, 18, 50), _noisy_rounds(rng, 0.07, 18, 50)
    lo, hi = timing.speedup_ci(ref, cand, resamples=400)
    pooled_lo, pooled_hi = timing.speedup_ci([sum(ref, [])], [sum(cand, [])], resamples=400)
    assert hi - lo > 2 * (pooled_hi - pooled_lo)  # pooling 900 correlated samples claims a false precision
    assert lo <= 1.0 <= hi  # the same distribution on both sides


def test_the_interval_still_separates_a_real_difference():
    import random
    rng = random.Random(3)
    ref, cand = _noisy_rounds(rng, 1.0, 5, 10, spread=0), _noisy_rounds(rng, 0.5, 5, 10, spread=0)
    lo, hi = timing.speedup_ci(ref, cand, resamples=400)
    assert 1.9 < lo < 2.0 < hi < 2.1


def _process_rounds(rng, levels, n_rounds, per_round=20):
    """Rounds taken from processes in turn; each process has its own level, its rounds agree within 0.2 %."""
    return [[levels[r % len(levels)] * rng.gauss(1.0, 0.002) for _ in range(per_round)] for r in range(n_rounds)]


def test_a_process_level_apart_needs_a_second_process_per_side():
    """One library, four processes, two per side: one of them sits 2 % slow (as fa2-fwd, gptq
    and ag-gemm did on the H200). One process per side claims a 2 % difference; with the
    processes taken in turn and resampled first, the interval covers 1.0."""
    import random
    rng = random.Random(5)
    ref, cand = _process_rounds(rng, [1.0, 1.0], 8), _process_rounds(rng, [1.0, 1.02], 8)
    cand_alone = _process_rounds(rng, [1.02], 8)
    lo, hi = timing.speedup_ci(ref, cand_alone, resamples=400)
    assert hi < 0.99  # one slow process: a precise, wrong answer
    procs = [r % 2 for r in range(8)]
    lo, hi = timing.speedup_ci(ref, cand, resamples=400, ref_processes=procs, cand_processes=procs)
    assert lo < 0.985 and hi >= 0.999


def test_the_interval_draws_processes_before_rounds():
    """Seven rounds of one process and one of another: drawn as rounds, the odd process is
    outvoted in almost every resample; drawn as processes, it is the whole sample in a quarter."""
    ref = [[1.0] * 5 for _ in range(8)]
    cand = [[1.0] * 5 for _ in range(7)] + [[1.02] * 5]
    by_round = timing.speedup_ci(ref, cand, resamples=400)
    by_process = timing.speedup_ci(ref, cand, resamples=400, ref_processes=[0] * 8, cand_processes=[0] * 7 + [1])
    assert by_round[0] > 0.99 and by_process[0] < 0.99


def test_replicas_take_their_workers_in_turn_and_ship_each_the_sets_once():
    replicas = timing.Replicas(["a", "b"], ["set"])
    taken = [replicas.take() for _ in range(5)]
    assert [w for w, _, _ in taken] == ["a", "b", "a", "b", "a"]
    assert [fresh for _, _, fresh in taken] == [True, True, False, False, False]
    assert [payload() for _, payload, _ in taken] == [{"input_sets": ["set"]}] * 2 + [{}] * 3
    assert replicas.rounds == [0, 1, 0, 1, 0]


def test_a_replicas_timer_warms_each_process_fully_once_and_close_closes_them_all():
    class Worker:
        closed = False

        def close(self):
            self.closed = True

    workers = [Worker(), Worker()]
    replicas = timing.Replicas(workers, ["set"])
    run = replicas.timer(lambda worker, payload, n, w: (workers.index(worker), sorted(payload()), n, w), warmup=3)
    assert [run(10, 1) for _ in range(3)] == [(0, ["input_sets"], 10, 3), (1, ["input_sets"], 10, 3), (0, [], 10, 1)]
    replicas.close()
    assert all(w.closed for w in workers)


def test_joined_rounds_split_back_in_order():
    joined = timing.joined([{"times_ms": [1.0, 2.0], "host_ms": [1.0, 2.0]}, {"times_ms": [3.0], "host_ms": [3.0]}])
    assert joined["round_sizes"] == [2, 1]
    assert timing.rounds(joined) == [[1.0, 2.0], [3.0]]
    assert timing.rounds({"times_ms": [4.0, 5.0]}) == [[4.0, 5.0]]
    assert timing.summary(joined)["round_sizes"] == [2, 1]


def test_input_sets_ship_with_the_first_round_only():
    ship = timing.ships_once(["set"])
    assert ship() == {"input_sets": ["set"]} and ship() == {} and ship() == {}
    cache: dict = {}
    loads = []
    assert timing.cached_sets(cache, {"input_sets": [1, 2]}, lambda s: loads.append(s) or [x * 10 for x in s]) == [10, 20]
    assert timing.cached_sets(cache, {}, lambda s: loads.append(s)) == [10, 20] and loads == [[1, 2]]
    with pytest.raises(ValueError, match="without input sets"):
        timing.cached_sets({}, {}, lambda s: s)


@pytest.mark.gpu
def test_cuda_regions_report_samples_floor_and_allocations():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    a = torch.randn(2048, 2048, device="cuda")
    torch.cuda.empty_cache()  # no cached blocks left by earlier tests to serve the held outputs
    result = timing.time_calls(lambda x: x @ x, [(a,)], "cuda", iters=8, warmup=2, hold_bytes=1 << 30)
    assert len(result["times_ms"]) == 8 and len(result["floor_ms"]) == timing.FLOOR_ITERS
    # an empty call's region is cheaper than a 2048^3 matmul's, and not free
    assert 0 < statistics.median(result["floor_ms"]) < statistics.median(result["times_ms"])
    # a 0.1-0.4 ms matmul shares its region with others
    assert result["calls_per_region"] > 1
    # held inputs and outputs of 16 MiB each: the allocator was primed with them before timing
    assert result["device_allocs"] == 0
    # the host clock around the same regions is not far below the events' time
    assert statistics.median(result["host_ms"]) >= 0.5 * statistics.median(result["times_ms"])


@pytest.mark.gpu
def test_a_tiny_call_pays_a_share_of_the_region_floor():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    a = torch.randn(64, device="cuda")
    result = timing.time_calls(lambda x: x + 1, [(a,)], "cuda", iters=20, warmup=2, hold_bytes=1 << 20)
    assert result["calls_per_region"] == timing.MAX_CALLS_PER_REGION
    # alone in a region, a call of microseconds measured the floor itself (0.014-0.029 ms on the H200)
    assert statistics.median(result["times_ms"]) < statistics.median(result["floor_ms"])


@pytest.mark.gpu
def test_host_work_inside_the_call_is_timed():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    import time as _time
    a = torch.randn(64, device="cuda")

    def busy_host(x):  # 1 ms on the CPU, a trivial kernel on the GPU
        t = _time.perf_counter()
        while _time.perf_counter() - t < 1e-3:
            pass
        return x + 1

    result = timing.time_calls(busy_host, [(a,)], "cuda", iters=10, warmup=2, hold_bytes=1 << 20)
    # the lead hides up to LEAD_MS of a region's first call, and no more
    hidden = timing.LEAD_MS / result["calls_per_region"]
    assert statistics.median(result["times_ms"]) >= 1.0 - hidden - 0.01


@pytest.mark.gpu
def test_the_first_launch_of_a_region_is_hidden_behind_the_lead():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    import time as _time
    a = torch.randn(64, device="cuda")

    def slow_launch(x):  # a launch path of 0.1 ms (the H200 host's slow state took 0.13 ms), then a trivial kernel
        t = _time.perf_counter()
        while _time.perf_counter() - t < 1e-4:
            pass
        return x + 1

    result = timing.time_calls(slow_launch, [(a,)], "cuda", iters=10, warmup=2, hold_bytes=1 << 20,
                               max_calls_per_region=1)
    assert result["calls_per_region"] == 1
    # recorded on an idle GPU, the start event would put the whole 0.1 ms launch in the sample
    assert statistics.median(result["times_ms"]) < 0.06


def test_fingerprint_slack_follows_the_tolerance_or_the_problems_own_statement():
    assert timing.fingerprint_rel({"rtol": 0.0}) == 1e-3
    assert timing.fingerprint_rel({"rtol": 5e-3}) == 5e-3
    assert timing.fingerprint_rel({"rtol": 0.1}) == 1e-2
    assert timing.fingerprint_rel({"rtol": 0.0}, own_checker=True) == 1e-2
    assert timing.fingerprint_rel({"fingerprint_rel": 1e-4}, own_checker=True) == 1e-4
    sums = [(1000.0, 1000.0)]
    assert timing.fingerprints_agree([(1000.5, 1000.0)], sums, 1e-3)
    assert not timing.fingerprints_agree([(1000.5, 1000.0)], sums, 1e-4)
