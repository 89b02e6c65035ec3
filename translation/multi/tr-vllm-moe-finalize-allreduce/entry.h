// PopcornBench glue (not upstream code): the entry point of tr-vllm-moe-finalize-allreduce.
//
// MoE finalize (un-permute + weighted top-k sum) + all-reduce + residual add + RMSNorm
// across world_size GPUs (one process per GPU, all calling together), bf16 storage,
// row-major, on every rank:
//   t[i]      = sum over j < top_k of scales[i, j] * expert_out[permuted_index[i, j]]   (this rank)
//   r         = residual_in + sum over ranks q of t_q          (this rank's residual_in)
//   residual_out = r
//   norm_out  = r * rsqrt(mean(r * r over hidden) + eps) * gamma     (gamma: [hidden])
// expert_out is [tokens * top_k, hidden] (the experts' output rows in permuted order),
// scales [tokens, top_k] fp32, permuted_index [tokens, top_k] int32 (a permutation of
// 0 .. tokens * top_k - 1), residual_in / residual_out / norm_out [tokens, hidden].
// Sums and the norm may be formed in fp32. The inputs are read only; residual_out and
// norm_out are this rank's device buffers (not shared). hidden is a multiple of 8;
// 1 <= tokens <= 128; 1 <= top_k <= 8.
//
// The harness gives every rank two buffers per rank that all ranks can address (CUDA
// IPC), zero-filled once when the group starts and never cleared by the harness:
//   peer_buffers[q]: 6 * world_size * tokens * hidden bytes on rank q's GPU (data exchange)
//   peer_flags[q]:   65536 + 2 * tokens * hidden bytes on rank q's GPU (flags / scratch)
// (sizes for the largest shape of the run). Every rank makes the same sequence of calls
// with the same shape. Returns a cudaError_t value (0 = success); launches on `stream`
// and may leave work there (the harness synchronizes).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" int popcorn_moe_finalize_allreduce(int rank, int world_size, void* const* peer_buffers,
                                              void* const* peer_flags, const void* expert_out,
                                              const float* scales, const int* permuted_index, int top_k,
                                              const void* residual_in, const void* gamma, float eps,
                                              void* residual_out, void* norm_out, int tokens, int hidden,
                                              cudaStream_t stream);
