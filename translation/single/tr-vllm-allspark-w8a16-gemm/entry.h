// PopcornBench glue (not upstream code): the entry points of tr-vllm-allspark-w8a16-gemm.
//
// W8A16 GEMM with per-channel symmetric uint8 weights (vLLM's uint8b128):
//   A      [m, k] fp16, row-major                 (activations)
//   Q      [k, n] uint8, row-major                (quantized weight; weight[kk, j] = (Q[kk, j] - 128) * scales[j])
//   scales [n]    fp16                            (one scale per output channel)
//   C      [m, n] fp16, row-major                 = A @ weight, fp32 accumulation
// m <= 256, n and k multiples of 128. A, Q and scales are read only. Q is the plain K x N
// layout vLLM's AllSpark path starts from. Pointers are device pointers, 16-byte aligned
// (`packed`: 256-byte aligned).
//
// Two calls, as a deployment runs them (vLLM repacks quantized weights once, at load time):
// 1. popcorn_w8a16_prepare, once per weight, NOT timed: read Q and scales and write whatever
//    layout your kernel wants (AllSpark's N32K16 order, another one on the H100) into
//    `packed`, popcorn_w8a16_packed_bytes(n, k) bytes of device memory that are yours (the
//    bytes of Q plus twice those of scales, plus 1 KiB). Q and scales must stay unchanged.
// 2. popcorn_w8a16_gemm, timed: C from A and `packed` alone (a fresh copy of what prepare
//    wrote, at another address every call).
// Both return a cudaError_t value (0 = success) and launch on `stream`; they may leave work there.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

static inline size_t popcorn_w8a16_packed_bytes(int n, int k) {
  return static_cast<size_t>(k) * n + 2 * (static_cast<size_t>(n) * 2) + 1024;
}

extern "C" int popcorn_w8a16_prepare(int n, int k, const uint8_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream);
extern "C" int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream);
