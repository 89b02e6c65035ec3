// PopcornBench glue (not PyTorch): the torch names vLLM's AllSpark (A100 side) and Machete
// (H100 side) host code uses. The Marlin tasks' shim (tr-marlin-gptq-w4a16-gemm/
// popcorn_marlin_torch.h: Tensor views of raw device buffers, a kept workspace pool, the
// entry point's stream, registration blocks compiled away) covers Machete; AllSpark adds
// at::kChar and the cuBLAS handle of its never-taken fallback (cublas_v2.h in this folder).
#pragma once
#include "../tr-marlin-gptq-w4a16-gemm/popcorn_marlin_torch.h"
#include "cublas_v2.h"

namespace at {
using torch::kChar;
namespace cuda {
inline cublasHandle_t getCurrentCUDABlasHandle() { return nullptr; }
}  // namespace cuda
}  // namespace at
