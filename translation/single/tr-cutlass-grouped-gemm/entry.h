// PopcornBench glue (not upstream code): the entry point of tr-cutlass-grouped-gemm.
//
// Segment GEMM (LoRA / MoE): for every segment i in [0, num_segments), rows
// r in [seg_indptr[i], seg_indptr[i+1]) of x get
//     y[r, :] = x[r, :] @ W[weight_indices[i]]^T
// x: [total_rows, d_in] row-major; W: [num_weights, d_out, d_in] row-major (each
// weight is d_out x d_in, i.e. the K x N operand stored column-major); y:
// [total_rows, d_out] row-major, zero on entry. fp16 (dtype_bf16 = 0) or bf16 (= 1)
// everywhere, fp32 accumulation. seg_indptr and weight_indices are device arrays of
// int64; segments may be empty. d_in and d_out are multiples of 8 (16-byte rows).
// `workspace` is a device buffer of workspace_bytes (64 MiB) the kernel may use freely.
// Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" int popcorn_segment_gemm(int num_segments, const int64_t* seg_indptr, const int64_t* weight_indices,
                                    int d_in, int d_out, const void* x, const void* W, void* y, void* workspace,
                                    size_t workspace_bytes, int dtype_bf16, cudaStream_t stream);
