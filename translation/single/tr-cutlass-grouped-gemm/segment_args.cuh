// PopcornBench glue (not upstream code): per-segment GEMM arguments on the device, as
// FlashInfer's Python wrapper computes them (flashinfer/triton/gemm.py,
// compute_sm{80,90}_group_gemm_args) before calling its CUTLASS segment GEMMs.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace popcorn {

struct SegmentArgs {
  int* problems;      // [n][3]: m, n, k (cutlass::gemm::GemmCoord / cute::Shape<int,int,int>)
  void** x_ptrs;
  void** w_ptrs;
  void** y_ptrs;
  int64_t* x_ld;      // leading dimensions (sm80) or the dynamic stride (sm90): one int64 each
  int64_t* w_ld;
  int64_t* y_ld;
  void* rest;         // what is left of the workspace, 256-byte aligned
  size_t rest_bytes;
};

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Carves the argument arrays out of the front of `workspace`; false if it is too small.
inline bool carve(void* workspace, size_t bytes, int n, SegmentArgs* out) {
  char* base = static_cast<char*>(workspace);
  size_t off = 0;
  auto take = [&](size_t size) { char* p = base + off; off = align_up(off + size, 256); return p; };
  out->problems = reinterpret_cast<int*>(take(sizeof(int) * 3 * n));
  out->x_ptrs = reinterpret_cast<void**>(take(sizeof(void*) * n));
  out->w_ptrs = reinterpret_cast<void**>(take(sizeof(void*) * n));
  out->y_ptrs = reinterpret_cast<void**>(take(sizeof(void*) * n));
  out->x_ld = reinterpret_cast<int64_t*>(take(sizeof(int64_t) * n));
  out->w_ld = reinterpret_cast<int64_t*>(take(sizeof(int64_t) * n));
  out->y_ld = reinterpret_cast<int64_t*>(take(sizeof(int64_t) * n));
  if (off > bytes) return false;
  out->rest = base + off;
  out->rest_bytes = bytes - off;
  return true;
}

__global__ void fill_segment_args(SegmentArgs a, int n, const int64_t* indptr, const int64_t* windex, int d_in,
                                  int d_out, const char* x, const char* w, char* y, int elem_bytes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t start = indptr[i];
  int64_t wi = windex ? windex[i] : i;
  a.problems[3 * i + 0] = static_cast<int>(indptr[i + 1] - start);
  a.problems[3 * i + 1] = d_out;
  a.problems[3 * i + 2] = d_in;
  a.x_ptrs[i] = const_cast<char*>(x) + start * d_in * elem_bytes;
  a.w_ptrs[i] = const_cast<char*>(w) + wi * static_cast<int64_t>(d_in) * d_out * elem_bytes;
  a.y_ptrs[i] = y + start * d_out * elem_bytes;
  a.x_ld[i] = d_in;
  a.w_ld[i] = d_in;  // weights are column-major K x N (row-major d_out x d_in)
  a.y_ld[i] = d_out;
}

inline cudaError_t prepare(int n, const int64_t* indptr, const int64_t* windex, int d_in, int d_out,
                           const void* x, const void* w, void* y, void* workspace, size_t bytes,
                           cudaStream_t stream, SegmentArgs* args) {
  if (!carve(workspace, bytes, n, args)) return cudaErrorInvalidValue;
  fill_segment_args<<<(n + 127) / 128, 128, 0, stream>>>(*args, n, indptr, windex, d_in, d_out,
                                                         static_cast<const char*>(x), static_cast<const char*>(w),
                                                         static_cast<char*>(y), 2);
  return cudaPeekAtLastError();
}

}  // namespace popcorn
