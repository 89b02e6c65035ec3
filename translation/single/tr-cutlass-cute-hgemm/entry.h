// PopcornBench glue (not upstream code): the entry point of tr-cutlass-cute-hgemm.
//
// C = alpha * A * B^T + beta * C, every matrix fp16 (cute::half_t / __half bits),
// fp16 accumulation. A is M x K with row stride ldA (K-major), B is N x K with row
// stride ldB (K-major), C is M x N column-major with column stride ldC, updated in
// place. Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>

extern "C" int popcorn_hgemm_tn(int m, int n, int k, float alpha, const void* A, int ldA,
                                const void* B, int ldB, float beta, void* C, int ldC,
                                cudaStream_t stream);
