// PopcornBench glue (not upstream code): the entry point of tr-vllm-w8a8-int8-gemm.
//
// D = a_scales * b_scales * (A @ B) + bias, int8 operands with exact int32 accumulation:
//   D[i, j] = bf16( a_scale(i) * b_scale(j) * sum_p A[i, p] * B[p, j] + bias[j] )
// A: M x K int8 row-major (leading dimension K).
// B: K x N int8 column-major (leading dimension K; i.e. B^T is N x K row-major).
// a_scales: fp32, M values (a_per_token = 1: a_scale(i) = a_scales[i]) or one value
//           (a_per_token = 0: a_scale(i) = a_scales[0]).
// b_scales: fp32, N values (b_per_channel = 1) or one value (b_per_channel = 0).
// bias: N bf16 values, or NULL (no bias).
// D: M x N bf16 row-major (leading dimension N).
// N and K are multiples of 16; M >= 1 is arbitrary. All pointers are device pointers,
// 16-byte aligned. Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int popcorn_w8a8_int8_gemm(int m, int n, int k, const int8_t* A, const int8_t* B, const float* a_scales,
                                      int a_per_token, const float* b_scales, int b_per_channel, const void* bias,
                                      void* D, cudaStream_t stream);
