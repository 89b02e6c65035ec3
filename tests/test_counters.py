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
