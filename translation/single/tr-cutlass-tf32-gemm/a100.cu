// PopcornBench glue: builds CUTLASS example 14 (Ampere TF32 tensor-op GEMM) as the A100 baseline.
// The upstream file has its own main(); it is renamed so the file links as a library.
#include "entry.h"
#define main popcorn_upstream_main
#include "ampere_tf32_tensorop_gemm.cu"
#undef main

extern "C" int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B,
                                 float beta, const float* C, float* D, cudaStream_t stream) {
  // Example 14 writes D row-major. Column-major D (M x N) is row-major D^T (N x M) = B^T A^T,
  // and B^T / A^T are B / A read as row-major / column-major: swap the operands, no copies.
  cutlass::gemm::GemmCoord problem(n, m, k);
  typename Gemm::Arguments arguments{
      problem,
      {B, LayoutInputA(k)},
      {A, LayoutInputB(k)},
      {const_cast<float*>(C), LayoutOutput(m)},
      {D, LayoutOutput(m)},
      {alpha, beta},
      1};
  Gemm gemm_op;
  if (gemm_op.can_implement(arguments) != cutlass::Status::kSuccess) return static_cast<int>(cudaErrorInvalidValue);
  if (gemm_op(arguments, nullptr, stream) != cutlass::Status::kSuccess) {
    cudaError_t err = cudaPeekAtLastError();
    return static_cast<int>(err != cudaSuccess ? err : cudaErrorLaunchFailure);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
