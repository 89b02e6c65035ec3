// PopcornBench glue (not upstream code): the entry point of tr-flux-ag-gemm.
//
// All-gather + GEMM across world_size GPUs (one process per GPU, all calling together): a
// column-parallel linear layer. Every rank holds its block of rows of the activations and
// its slice of the weight's output features; every rank ends with the product of ALL the
// activations' rows and its own weight slice:
//   A_q  [m / world_size, k] bf16, row-major   (rank q's rows: rows [q m / W, (q + 1) m / W) of the full A)
//   W    [n, k]              bf16, row-major   (this rank's weight slice; column-major K x N)
//   out  [m, n]              bf16, row-major   = cat over ranks q of A_q (in rank order) @ W^T
// Products accumulate in fp32 and are rounded to bf16 once. A and W are read only; out is
// this rank's device buffer (not shared). m is a multiple of 128 * world_size, n a multiple
// of 128, k a multiple of 1024.
//
// The harness gives every rank two buffers per rank that all ranks can address (CUDA IPC),
// zero-filled once when the group starts and never cleared by the harness:
//   peer_buffers[q]: 2 * m * k bytes on rank q's GPU (room for the gathered A, [m, k] bf16)
//   peer_signals[q]: 8192 bytes on rank q's GPU (barrier slots and ready flags)
// (sizes for the largest shape of the run). Every rank makes the same sequence of calls with
// the same m, n and k; a call must leave the signals as it needs them for the next one. No
// libcuda is linked: a driver API function the candidate names (cuStreamWriteValue32, or
// CUTLASS 3.5's cuTensorMapEncodeTiled) must be resolved at run time, e.g. with
// cudaGetDriverEntryPointByVersion. Returns a cudaError_t value (0 = success); launches on
// `stream` and may leave work there, on streams joined back to `stream` before returning
// (the harness synchronizes the device).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" int popcorn_ag_gemm(int rank, int world_size, int m, int n, int k, const void* A, const void* W,
                               void* const* peer_buffers, void* const* peer_signals, void* out,
                               cudaStream_t stream);
