// PopcornBench glue: FlashInfer's SM80 SegmentGEMM (CUTLASS 2.x GemmGrouped) as the A100 baseline.
#include "entry.h"
#include <flashinfer/gemm/group_gemm.cuh>
#include "segment_args.cuh"

extern "C" int popcorn_segment_gemm(int num_segments, const int64_t* seg_indptr, const int64_t* weight_indices,
                                    int d_in, int d_out, const void* x, const void* W, void* y, void* workspace,
                                    size_t workspace_bytes, int dtype_bf16, cudaStream_t stream) {
  popcorn::SegmentArgs a;
  cudaError_t err = popcorn::prepare(num_segments, seg_indptr, weight_indices, d_in, d_out, x, W, y, workspace,
                                     workspace_bytes, stream, &a);
  if (err != cudaSuccess) return static_cast<int>(err);
  try {  // FlashInfer reports CUTLASS failures by throwing
    using flashinfer::group_gemm::CutlassSegmentGEMMRun;
    err = dtype_bf16
        ? CutlassSegmentGEMMRun<cutlass::bfloat16_t>(a.rest, a.rest_bytes, a.problems, num_segments, a.x_ptrs,
                                                      a.w_ptrs, a.y_ptrs, a.x_ld, a.w_ld, a.y_ld, true, stream)
        : CutlassSegmentGEMMRun<cutlass::half_t>(a.rest, a.rest_bytes, a.problems, num_segments, a.x_ptrs,
                                                  a.w_ptrs, a.y_ptrs, a.x_ld, a.w_ld, a.y_ld, true, stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorLaunchFailure);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaPeekAtLastError());
}
