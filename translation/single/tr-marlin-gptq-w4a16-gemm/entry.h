// PopcornBench glue (not upstream code): the entry points of tr-marlin-gptq-w4a16-gemm.
//
// C = A @ W, W dequantized from 4-bit GPTQ weights with a bias of 8 and fp16 group scales:
//   W[p, j] = (q(p, j) - 8) * scales[p / 128, j]      (group size 128 along K)
//   C[i, j] = fp16( sum_p A[i, p] * W[p, j] )          (fp32 accumulation)
// A: M x K fp16 row-major (leading dimension K).
// Q: the weights in GPTQ's checkpoint layout: K/8 x N uint32 row-major; bits 4*t .. 4*t+3
//    of Q[r, j] hold q(8*r + t, j), an unsigned value in 0..15 (t = 0 is the lowest nibble).
// scales: K/128 x N fp16 row-major.
// C: M x N fp16 row-major (leading dimension N).
// N is a multiple of 256, K a multiple of 128, M >= 1 is arbitrary. All pointers are device
// pointers, 16-byte aligned (`packed`: 256-byte aligned).
//
// Two calls, as a deployment runs them (vLLM repacks quantized weights once, at load time):
// 1. popcorn_w4a16_prepare, once per weight, NOT timed: read Q and scales and write whatever
//    layout your kernel wants into `packed`, popcorn_w4a16_packed_bytes(n, k) bytes of device
//    memory that are yours (the bytes of Q plus twice those of scales, plus 1 KiB). Q and
//    scales must stay unchanged.
// 2. popcorn_w4a16_gemm, timed: C from A and `packed` alone (a fresh copy of what prepare
//    wrote, at another address every call).
// Both return a cudaError_t value (0 = success) and launch on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

static inline size_t popcorn_w4a16_packed_bytes(int n, int k) {
  return static_cast<size_t>(k) * n / 2 + 2 * (static_cast<size_t>(k / 128) * n * 2) + 1024;
}

extern "C" int popcorn_w4a16_prepare(int n, int k, const uint32_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream);
extern "C" int popcorn_w4a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream);
