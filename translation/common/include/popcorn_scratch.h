// PopcornBench glue (our code): a grow-only device buffer kept for the life of the process.
//
// An entry point without a workspace argument keeps its scratch across calls: allocating inside
// every call would put cudaMalloc inside the timed region. The first call of a larger shape
// grows it; later calls of the same or smaller shapes reuse it.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

namespace popcorn {

struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;

  cudaError_t reserve(size_t need, cudaStream_t stream) {
    if (need <= bytes) return cudaSuccess;
    if (ptr != nullptr) {
      cudaError_t err = cudaStreamSynchronize(stream);  // earlier calls may still use the old buffer
      if (err != cudaSuccess) return err;
      cudaFree(ptr);
      ptr = nullptr;
      bytes = 0;
    }
    cudaError_t err = cudaMalloc(&ptr, need);
    if (err == cudaSuccess) bytes = need;
    return err;
  }
};

}  // namespace popcorn
