// PopcornBench glue (not upstream code): the entry point of tr-vllm-allspark-w8a16-gemm.
//
// W8A16 GEMM with per-channel symmetric uint8 weights (vLLM's uint8b128):
//   A      [m, k] fp16, row-major                 (activations)
//   Q      [k, n] uint8, row-major                (quantized weight; weight[kk, j] = (Q[kk, j] - 128) * scales[j])
//   scales [n]    fp16                            (one scale per output channel)
//   C      [m, n] fp16, row-major                 = A @ weight, fp32 accumulation
// m <= 256, n and k multiples of 128. A, Q and scales are read only. Q is the plain K x N
// layout vLLM's AllSpark path starts from; any repacking the kernel needs (AllSpark's N32K16
// order, another layout on the H100) happens inside the call and is timed with it.
// Returns a cudaError_t value (0 = success); launches on `stream` and may leave work there.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const uint8_t* Q, const void* scales, void* C,
                                  cudaStream_t stream);
