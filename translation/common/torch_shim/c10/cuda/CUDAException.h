// PopcornBench shim (see popcorn_torch.h): C10_CUDA_CHECK and C10_CUDA_KERNEL_LAUNCH_CHECK
// throw std::runtime_error on a CUDA error, as PyTorch's do (with c10::Error).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

#define C10_CUDA_CHECK(EXPR)                                                                   \
  do {                                                                                         \
    const cudaError_t popcorn_err_ = (EXPR);                                                   \
    if (popcorn_err_ != cudaSuccess)                                                           \
      throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(popcorn_err_)); \
  } while (0)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
