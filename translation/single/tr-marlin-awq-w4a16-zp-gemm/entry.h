// PopcornBench glue (not upstream code): the entry point of tr-marlin-awq-w4a16-zp-gemm.
//
// C = A @ W, W dequantized from unsigned 4-bit weights with fp16 group scales and 4-bit group
// zero points (AWQ-style asymmetric quantization, group size 128 along K):
//   W[p, j] = (q(p, j) - z(p / 128, j)) * scales[p / 128, j]
//   C[i, j] = fp16( sum_p A[i, p] * W[p, j] )          (fp32 accumulation)
// A: M x K fp16 row-major (leading dimension K).
// Q: K/8 x N uint32 row-major, packed along K: bits 4*t .. 4*t+3 of Q[r, j] hold q(8*r + t, j),
//    an unsigned value in 0..15 (t = 0 is the lowest nibble).
// scales: K/128 x N fp16 row-major.
// zeros: K/128 x N/8 uint32 row-major, packed along N: bits 4*t .. 4*t+3 of zeros[g, w] hold
//    z(g, 8*w + t), an unsigned value in 0..15.
// C: M x N fp16 row-major (leading dimension N).
// N is a multiple of 256, K a multiple of 128, M >= 1 is arbitrary. All pointers are device
// pointers, 16-byte aligned. These are the layouts vLLM loads checkpoints in (weights packed
// along K, zero points along N); they arrive at every call: a kernel that wants another
// layout (Marlin's tiles and permuted zero points, or one made for Hopper's tensor cores)
// converts them in the call, as the A100 adapter does. Returns a cudaError_t value
// (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int popcorn_w4a16_zp_gemm(int m, int n, int k, const void* A, const uint32_t* Q, const void* scales,
                                     const uint32_t* zeros, void* C, cudaStream_t stream);
