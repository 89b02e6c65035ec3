"""Measured ceilings of this GPU: device-to-device copy bandwidth and matrix rates."""
import json
import sys

import torch


def bench(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def main():
    n = 1 << 30  # 4 GiB of fp32 per buffer
    a = torch.randn(n // 4 * 4 // 4, device="cuda")
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    copy_gbs = 2 * a.numel() * 4 / ms / 1e6
    out = {"gpu": torch.cuda.get_device_name(), "copy_gbs": copy_gbs}
    for dtype, name in ((torch.bfloat16, "bf16_tflops"), (torch.float32, "fp32_tflops")):
        torch.backends.cuda.matmul.allow_tf32 = False
        m = 8192
        x, y = torch.randn(m, m, device="cuda", dtype=dtype), torch.randn(m, m, device="cuda", dtype=dtype)
        ms = bench(lambda: x @ y, 10)
        out[name] = 2 * m ** 3 / ms / 1e9
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
