// PopcornBench glue (not upstream code): the host side of vLLM's Marlin, shared by the A100
// adapters of the Marlin tasks (tr-marlin-gptq-w4a16-gemm: uint4b8; tr-marlin-awq-w4a16-zp-gemm:
// uint4 with zero points). The including adapter defines POPCORN_MARLIN_WEIGHT_TYPE (the
// vllm::ScalarType of the weights) before including it.
//
// It compiles gptq_marlin.cu (marlin_mm: thread-config choice, launch; gptq_marlin_gemm: the
// torch-facing wrapper vLLM's Python calls) and gptq_marlin_repack.cu (the repacking kernel)
// unchanged, over this task's torch shim (popcorn_marlin_torch.h: views of raw buffers).
//
// Kernel instantiations: vLLM generates them with generate_kernels.py (about 270 per dtype,
// of all weight types, in separate files) and gptq_marlin.cu names each in get_marlin_kernel.
// Here `Marlin<...>` in that function is redirected to popcorn_marlin_kernel<...>, which is
// the real Marlin<...> for the configurations the tasks' shapes select (fp16, the task's
// weight type, group blocks 8, vLLM's first-choice thread configs: 128x128 with 256 threads
// for one 16-row block, 64x256 with 256 threads for 2-4 blocks) and MarlinDefault, which
// get_marlin_kernel reports as "no kernel", for the others. marlin_mm's choice is unchanged:
// for N % 256 == 0 and K % 128 == 0 its first candidate config is always valid, so it never
// falls through to one that is not built.
#pragma once
#ifndef POPCORN_MARLIN_WEIGHT_TYPE
#error "define POPCORN_MARLIN_WEIGHT_TYPE (vllm::kU4B8 or vllm::kU4) before including marlin_host.cuh"
#endif
#include <torch/all.h>
#include "marlin_prep.cuh"
#include "quantization/gptq_marlin/kernel.h"
#include "quantization/gptq_marlin/marlin_template.h"

namespace marlin {

__global__ void MarlinDefault(MARLIN_KERNEL_PARAMS);  // defined in gptq_marlin.cu
using PopcornMarlinPtr = void (*)(MARLIN_KERNEL_PARAMS);

template <typename scalar_t, vllm::ScalarTypeId w_type_id, vllm::ScalarTypeId s_type_id, int threads,
          int thread_m_blocks, int thread_n_blocks, int thread_k_blocks, bool m_block_size_8, int stages,
          int group_blocks, bool is_zp_float>
constexpr bool popcorn_instantiated() {
  bool first_choice = threads == 256 && ((thread_m_blocks == 1 && thread_n_blocks == 8 && thread_k_blocks == 8) ||
                                         (thread_m_blocks > 1 && thread_n_blocks == 16 && thread_k_blocks == 4 &&
                                          !m_block_size_8));
  return std::is_same_v<scalar_t, half> && w_type_id == POPCORN_MARLIN_WEIGHT_TYPE.id() &&
         s_type_id == vllm::kFloat16.id() && group_blocks == 8 && !is_zp_float && first_choice;
}

template <typename scalar_t, vllm::ScalarTypeId w_type_id, vllm::ScalarTypeId s_type_id, int threads,
          int thread_m_blocks, int thread_n_blocks, int thread_k_blocks, bool m_block_size_8, int stages,
          int group_blocks, bool is_zp_float>
PopcornMarlinPtr popcorn_marlin_pick() {
  if constexpr (popcorn_instantiated<scalar_t, w_type_id, s_type_id, threads, thread_m_blocks, thread_n_blocks,
                                     thread_k_blocks, m_block_size_8, stages, group_blocks, is_zp_float>()) {
    return Marlin<scalar_t, w_type_id, s_type_id, threads, thread_m_blocks, thread_n_blocks, thread_k_blocks,
                  m_block_size_8, stages, group_blocks, is_zp_float>;
  } else {
    return MarlinDefault;
  }
}

template <typename scalar_t, vllm::ScalarTypeId w_type_id, vllm::ScalarTypeId s_type_id, int threads,
          int thread_m_blocks, int thread_n_blocks, int thread_k_blocks, bool m_block_size_8, int stages,
          int group_blocks, bool is_zp_float>
inline const PopcornMarlinPtr popcorn_marlin_kernel =
    popcorn_marlin_pick<scalar_t, w_type_id, s_type_id, threads, thread_m_blocks, thread_n_blocks, thread_k_blocks,
                        m_block_size_8, stages, group_blocks, is_zp_float>();

}  // namespace marlin

// `Marlin<` (get_marlin_kernel) becomes the selector above; `Marlin(` (the declaration in
// kernel.h, which gptq_marlin.cu includes again) becomes an unused declaration.
#define popcorn_marlin_kernel(...) popcorn_unused_marlin_declaration(__VA_ARGS__)
#define Marlin popcorn_marlin_kernel
#include "quantization/gptq_marlin/gptq_marlin.cu"
#undef Marlin
#undef popcorn_marlin_kernel
#include "quantization/gptq_marlin/gptq_marlin_repack.cu"

namespace popcorn {
// vLLM's marlin_make_workspace_new: sms ints, zeroed once; the kernels leave them zeroed.
inline torch::Tensor& marlin_workspace(int device) {
  static torch::Tensor workspace;
  if (!workspace.data_ptr()) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    void* p = nullptr;
    if (cudaMalloc(&p, sizeof(int) * sms) != cudaSuccess || cudaMemsetAsync(p, 0, sizeof(int) * sms, current_stream()) != cudaSuccess) {
      throw std::runtime_error("marlin workspace: cudaMalloc failed");
    }
    workspace = torch::Tensor(p, torch::kInt, {sms}, {}, device);
  }
  return workspace;
}
}  // namespace popcorn
