// PopcornBench glue (not upstream code): the entry point of tr-cutlass-tf32-gemm.
//
// D = alpha * A * B + beta * C on TF32 tensor cores with fp32 accumulation.
// A: M x K row-major (leading dimension K); B: K x N column-major (leading dimension K);
// C, D: M x N column-major (leading dimension M); all fp32, 16-byte aligned, M, N, K
// multiples of 4. Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>

extern "C" int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B,
                                 float beta, const float* C, float* D, cudaStream_t stream);
