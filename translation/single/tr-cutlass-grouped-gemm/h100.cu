// PopcornBench glue: FlashInfer's SM90 SegmentGEMM (CUTLASS 3.x pointer-array TMA
// warp-specialized cooperative) as the H100 reference; fp16 -> fp16 and bf16 -> bf16
// instantiations, as FlashInfer's group_gemm_sm90_kernel_inst.jinja renders them.
#include "entry.h"
#include <flashinfer/gemm/group_gemm_sm90.cuh>
#include "segment_args.cuh"

extern "C" int popcorn_segment_gemm(int num_segments, const int64_t* seg_indptr, const int64_t* weight_indices,
                                    int d_in, int d_out, const void* x, const void* W, void* y, void* workspace,
                                    size_t workspace_bytes, int dtype_bf16, cudaStream_t stream) {
  popcorn::SegmentArgs a;
  cudaError_t err = popcorn::prepare(num_segments, seg_indptr, weight_indices, d_in, d_out, x, W, y, workspace,
                                     workspace_bytes, stream, &a);
  if (err != cudaSuccess) return static_cast<int>(err);
  // FlashInfer splits its buffers into a float workspace (CUTLASS's) and an int one (unused here).
  size_t half = popcorn::align_up(a.rest_bytes / 2, 256);
  void* int_buffer = static_cast<char*>(a.rest) + half;
  try {
    using flashinfer::group_gemm::CutlassSegmentGEMMSM90Run;
    err = dtype_bf16
        ? CutlassSegmentGEMMSM90Run<cutlass::bfloat16_t, cutlass::bfloat16_t>(
              a.rest, half, int_buffer, a.rest_bytes - half, a.problems, num_segments, a.x_ptrs, a.w_ptrs,
              a.y_ptrs, a.x_ld, a.w_ld, a.y_ld, true, stream)
        : CutlassSegmentGEMMSM90Run<cutlass::half_t, cutlass::half_t>(
              a.rest, half, int_buffer, a.rest_bytes - half, a.problems, num_segments, a.x_ptrs, a.w_ptrs,
              a.y_ptrs, a.x_ld, a.w_ld, a.y_ld, true, stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorLaunchFailure);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaPeekAtLastError());
}
