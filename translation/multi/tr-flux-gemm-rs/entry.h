// PopcornBench glue (not upstream code): the entry point of tr-flux-gemm-rs.
//
// GEMM + reduce-scatter across world_size GPUs (one process per GPU, all calling
// together): a row-parallel linear layer. Rank q holds its K-slice of the activations and
// of the weight; every rank ends with its block of rows of the sum over ranks:
//   A_q  [m, k_local]  bf16, row-major        (this rank's input)
//   W_q  [n, k_local]  bf16, row-major        (this rank's weight; column-major K x N)
//   out  [m / world_size, n] bf16, row-major  = rows [rank * m / world_size, (rank + 1) * m / world_size)
//                                               of sum over ranks q of A_q @ W_q^T
// Products accumulate in fp32; partial sums may be rounded to bf16 before the reduction
// across ranks. A and W are read only; out is this rank's device buffer (not shared).
// m is a multiple of 128 * world_size, n a multiple of 128, k_local a multiple of 256.
//
// The harness gives every rank two buffers per rank that all ranks can address (CUDA
// IPC), zero-filled once when the group starts and never cleared by the harness:
//   peer_buffers[q]: 2 * m * n bytes on rank q's GPU (partial products)
//   peer_flags[q]:   65536 + 2048 * (m / 128) * (n / 128) bytes on rank q's GPU (flags)
// (sizes for the largest shape of the run). Every rank makes the same sequence of calls
// with the same m, n and k_local. No libcuda is linked: a driver API function the
// candidate names (CUTLASS 3.5's TMA calls cuTensorMapEncodeTiled) must be resolved at run
// time, e.g. with cudaGetDriverEntryPointByVersion. Returns a cudaError_t value (0 = success); launches on
// `stream` and may leave work there (the harness synchronizes).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" int popcorn_gemm_rs(int rank, int world_size, int m, int n, int k_local, const void* A, const void* W,
                               void* const* peer_buffers, void* const* peer_flags, void* out, cudaStream_t stream);
