// PopcornBench glue: builds the CuTe SM90 wgmma+TMA tutorial HGEMM as the H100 reference.
// The upstream file has its own main(); it is renamed so the file links as a library.
#include "entry.h"
#define main popcorn_upstream_main
#include "wgmma_tma_sm90.cu"
#undef main

extern "C" int popcorn_hgemm_tn(int m, int n, int k, float alpha, const void* A, int ldA,
                                const void* B, int ldB, float beta, void* C, int ldC,
                                cudaStream_t stream) {
  using T = cute::half_t;
  gemm('T', 'N', m, n, k, T(alpha), static_cast<const T*>(A), ldA, static_cast<const T*>(B), ldB,
       T(beta), static_cast<T*>(C), ldC, stream);
  return static_cast<int>(cudaPeekAtLastError());
}
