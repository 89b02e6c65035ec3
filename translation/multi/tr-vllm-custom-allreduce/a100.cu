// PopcornBench glue: vLLM's CustomAllreduce (csrc/custom_all_reduce.cuh) as the A100 baseline.
// As vLLM does outside CUDA graphs, the input is copied into the rank's registered IPC
// buffer and reduced from there (one-shot or two-shot, chosen by vLLM).
#include "entry.h"
#include <cuda.h>
#include <memory>
#include "custom_all_reduce.cuh"

// The header's graph-capture path names the driver's cuPointerGetAttribute; build machines
// have no libcuda to link, so this forwards to the driver through the runtime at call time.
extern "C" CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  using Fn = CUresult(CUDAAPI*)(void*, CUpointer_attribute, CUdeviceptr);
  static Fn fn = nullptr;
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult status;
    cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", reinterpret_cast<void**>(&fn), 12000,
                                     cudaEnableDefault, &status);
  }
  return fn != nullptr ? fn(data, attribute, ptr) : CUDA_ERROR_NOT_FOUND;
}

namespace {
std::unique_ptr<vllm::CustomAllreduce> state;
void* rank_data = nullptr;
}  // namespace

extern "C" int popcorn_allreduce(int rank, int world_size, void* const* peer_buffers, void* const* peer_flags,
                                 const void* input, void* output, size_t numel, int dtype_bf16,
                                 cudaStream_t stream) {
  try {
    if (!state) {  // one group per process: the harness's buffers never move
      const size_t rank_data_bytes = 8 << 20;
      cudaError_t err = cudaMalloc(&rank_data, rank_data_bytes);
      if (err != cudaSuccess) return static_cast<int>(err);
      vllm::Signal* signals[8];
      for (int r = 0; r < world_size; ++r) signals[r] = static_cast<vllm::Signal*>(peer_flags[r]);
      state = std::make_unique<vllm::CustomAllreduce>(signals, rank_data, rank_data_bytes, rank, world_size, true);
      state->register_buffer(const_cast<void**>(peer_buffers));
    }
    cudaError_t err = cudaMemcpyAsync(peer_buffers[rank], input, numel * 2, cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
    if (dtype_bf16) {
      state->allreduce<nv_bfloat16>(stream, static_cast<nv_bfloat16*>(peer_buffers[rank]),
                                    static_cast<nv_bfloat16*>(output), static_cast<int>(numel));
    } else {
      state->allreduce<half>(stream, static_cast<half*>(peer_buffers[rank]), static_cast<half*>(output),
                             static_cast<int>(numel));
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
