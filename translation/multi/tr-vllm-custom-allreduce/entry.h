// PopcornBench glue (not upstream code): the entry point of tr-vllm-custom-allreduce.
//
// All-reduce across world_size GPUs (one process per GPU, all calling together):
// output[i] = sum over ranks r of input_r[i], numel elements of fp16 (dtype_bf16 = 0)
// or bf16 (= 1); sums may be formed in fp32. input and output are this rank's device
// buffers (not shared). The harness gives every rank two buffers per rank that all
// ranks can address (CUDA IPC, zero-filled once when the group starts, then never
// cleared by the harness):
//   peer_buffers[r]: world_size * numel * 2 bytes on rank r's GPU (data exchange)
//   peer_flags[r]:   65536 + numel * 2 bytes on rank r's GPU (flags / scratch)
// Every rank makes the same sequence of calls with the same numel. numel is a
// multiple of 8 * world_size. Returns a cudaError_t value (0 = success); launches on
// `stream` and may leave work there (the harness synchronizes).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" int popcorn_allreduce(int rank, int world_size, void* const* peer_buffers, void* const* peer_flags,
                                 const void* input, void* output, size_t numel, int dtype_bf16,
                                 cudaStream_t stream);
