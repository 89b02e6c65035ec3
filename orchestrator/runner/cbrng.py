"""Counter-based RNG shared by the stochastic problems (from the problem catalog).

Pure 32-bit integer arithmetic on int64 tensors, so a CUDA kernel reproduces every
draw bit for bit with uint32 arithmetic. Problems import it as
`from orchestrator.runner.cbrng import cb_uniform`; candidates may import it too.
"""
import math, torch
M32 = 0xFFFFFFFF
def _mul32(a, c): return (a * (c & 0xFFFF) + (((a * (c >> 16)) & 0xFFFF) << 16)) & M32   # (a*c) mod 2^32 without int64 overflow
def hash32(x):    # lowbias32 finalizer (C. Wellons)
    x = x ^ (x >> 16); x = _mul32(x, 0x7FEB352D); x = x ^ (x >> 15); x = _mul32(x, 0x846CA68B); return x ^ (x >> 16)
def cb_u32(seed, *ctr):   # uint32 (held in int64) from (seed, counters...); counters may be broadcastable tensors
    h = hash32(torch.as_tensor(seed, dtype=torch.int64) & M32)
    for c in ctr: h = hash32(((h + 0x9E3779B9) & M32) ^ (torch.as_tensor(c, dtype=torch.int64) & M32))
    return h
def cb_uniform(seed, *ctr):     # float32 in (0,1): 23 random bits + 1/2 ulp, exactly representable
    return ((cb_u32(seed, *ctr) >> 9).float() + 0.5) * 2.0 ** -23
def cb_uniform64(seed, *ctr):   # float64 in (0,1): 53 bits from two draws (counter suffix 0/1), forced odd so never 0
    a, c = cb_u32(seed, *ctr, 0) >> 5, cb_u32(seed, *ctr, 1) >> 6
    return ((a << 26) | c | 1).double() * 2.0 ** -53
def cb_normal(seed, *ctr):      # Box-Muller on two float32 uniforms; exact up to libm ulps of log/cos/sqrt
    u1, u2 = cb_uniform(seed, *ctr, 0), cb_uniform(seed, *ctr, 1)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2 * math.pi * u2)
def owner_of(code, world_size):   # k-mer code (int64 < 2^62) -> owning rank
    return cb_u32(0, code & M32, code >> 32) % world_size
