// PopcornBench glue: builds CUTLASS example 48 (Hopper warp-specialized GEMM) as the H100 reference.
// The upstream file has its own main(); it is renamed so the file links as a library.
#include "entry.h"
#define main popcorn_upstream_main
#include "48_hopper_warp_specialized_gemm.cu"
#undef main

namespace {
// Grown on demand and kept: a cudaMalloc per call would be timed with the kernel.
void* workspace_ptr = nullptr;
size_t workspace_bytes = 0;
}  // namespace

extern "C" int popcorn_tf32_gemm(int m, int n, int k, float alpha, const float* A, const float* B,
                                 float beta, const float* C, float* D, cudaStream_t stream) {
  cutlass::KernelHardwareInfo hw_info;
  cudaGetDevice(&hw_info.device_id);
  hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k},
      {A, cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}),
       B, cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1})},
      {{alpha, beta}, C, cutlass::make_cute_packed_stride(StrideC{}, {m, n, 1}),
       D, cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1})},
      hw_info};
  Gemm gemm_op;
  if (gemm_op.can_implement(arguments) != cutlass::Status::kSuccess) return static_cast<int>(cudaErrorInvalidValue);
  size_t need = Gemm::get_workspace_size(arguments);
  if (need > workspace_bytes) {
    if (workspace_ptr) cudaFree(workspace_ptr);
    if (cudaMalloc(&workspace_ptr, need) != cudaSuccess) return static_cast<int>(cudaErrorMemoryAllocation);
    workspace_bytes = need;
  }
  if (gemm_op.initialize(arguments, workspace_ptr, stream) != cutlass::Status::kSuccess ||
      gemm_op.run(stream) != cutlass::Status::kSuccess) {
    cudaError_t err = cudaPeekAtLastError();
    return static_cast<int>(err != cudaSuccess ? err : cudaErrorLaunchFailure);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
