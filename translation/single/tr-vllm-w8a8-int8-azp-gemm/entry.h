// PopcornBench glue (not upstream code): the entry point of tr-vllm-w8a8-int8-azp-gemm.
//
// W8A8 int8 GEMM with asymmetric activations (per-token zero points), int32 accumulation:
//   acc[i, j] = sum_p A[i, p] * B[p, j]                       (exact, int32)
//   D[i, j] = bf16( a_scales[i] * b_scales[j] * float(acc[i, j] - azp[i] * azp_adj[j]) + bias[j] )
// The caller precomputes azp_adj[j] = sum_p B[p, j] (J @ B), so that
// D = a_scales * b_scales * ((A - azp) @ B) + bias: the zero-point correction is rank one.
// A: M x K int8 row-major (leading dimension K).
// B: K x N int8 column-major (leading dimension K; i.e. B^T is N x K row-major).
// a_scales: M fp32 (per token); b_scales: N fp32 (per channel).
// azp: M int32 (per-token zero points); azp_adj: N int32. bias: N bf16 values, or NULL.
// D: M x N bf16 row-major (leading dimension N).
// N and K are multiples of 16; M >= 1 is arbitrary. All pointers are device pointers,
// 16-byte aligned. Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int popcorn_w8a8_int8_azp_gemm(int m, int n, int k, const int8_t* A, const int8_t* B,
                                          const float* a_scales, const float* b_scales, const int32_t* azp_adj,
                                          const int32_t* azp, const void* bias, void* D, cudaStream_t stream);
