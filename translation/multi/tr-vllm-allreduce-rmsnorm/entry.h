// PopcornBench glue (not upstream code): the entry point of tr-vllm-allreduce-rmsnorm.
//
// All-reduce + residual add + RMSNorm across world_size GPUs (one process per GPU, all
// calling together), bf16 storage, row-major [tokens, hidden]:
//   r         = residual_in + sum over ranks q of input_q      (this rank's residual_in)
//   residual_out = r
//   norm_out  = r * rsqrt(mean(r * r over hidden) + eps) * gamma     (gamma: [hidden])
// Sums and the norm may be formed in fp32. input, residual_in and gamma are read only;
// residual_out and norm_out are this rank's device buffers (not shared). hidden is a
// multiple of 8; tokens >= 1.
//
// The harness gives every rank two buffers per rank that all ranks can address (CUDA
// IPC), zero-filled once when the group starts and never cleared by the harness:
//   peer_buffers[q]: 2 * tokens * hidden * (tokens <= 128 ? max(2, 3 * world_size) : 2)
//                    bytes on rank q's GPU (data exchange)
//   peer_flags[q]:   65536 + 2 * tokens * hidden bytes on rank q's GPU (flags / scratch)
// (sizes for the largest shape of the run). Every rank makes the same sequence of calls
// with the same tokens and hidden. Returns a cudaError_t value (0 = success); launches on
// `stream` and may leave work there (the harness synchronizes).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" int popcorn_allreduce_rmsnorm(int rank, int world_size, void* const* peer_buffers,
                                         void* const* peer_flags, const void* input, const void* residual_in,
                                         const void* gamma, float eps, void* residual_out, void* norm_out,
                                         int tokens, int hidden, cudaStream_t stream);
