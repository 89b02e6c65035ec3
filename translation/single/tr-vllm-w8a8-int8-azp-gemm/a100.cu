// PopcornBench glue: vLLM's CUTLASS 2.x W8A8 int8 GEMM with per-token activation zero points for sm80
// (scaled_mm_c2x_sm80_dispatch.cuh: M-bucketed GemmUniversal configurations, with the azp
// correction in the EVT epilogues ScaledEpilogueBiasAzpToken of scaled_mm_epilogues_c2x.hpp)
// as the A100 baseline, called as scaled_mm_c2x.cu's cutlass_scaled_mm_azp_sm80 calls it for
// bf16 output. vLLM's torch::Tensor code runs unchanged over our torch shim
// (translation/common/torch_shim/popcorn_torch.h: views of the raw buffers, no libtorch).
//
// vLLM wraps its sm80 kernels in `enable_sm80_to_sm89`, which compiles the kernel body only
// for 8.0 <= __CUDA_ARCH__ < 8.9, so built for sm_90 it would launch empty kernels. The
// baseline is this same code run on the H100: while the sm80 dispatch is included, the
// guard's name is redirected to a wrapper that keeps the body.
#include "entry.h"
#include <torch/all.h>
#include "quantization/cutlass_w8a8/scaled_mm_c2x.cuh"

namespace vllm {
template <typename Kernel>
struct popcorn_sm80_kernel_on_sm90 : Kernel {
  template <typename... Args>
  CUTLASS_DEVICE static void invoke(Args&&... args) {
    Kernel::invoke(std::forward<Args>(args)...);
  }
};
}  // namespace vllm

#define enable_sm80_to_sm89 popcorn_sm80_kernel_on_sm90
#include "quantization/cutlass_w8a8/scaled_mm_c2x_sm80_dispatch.cuh"
#undef enable_sm80_to_sm89
#include "cutlass_extensions/epilogue/scaled_mm_epilogues_c2x.hpp"

extern "C" int popcorn_w8a8_int8_azp_gemm(int m, int n, int k, const int8_t* A, const int8_t* B,
                                          const float* a_scales, const float* b_scales, const int32_t* azp_adj,
                                          const int32_t* azp, const void* bias, void* D, cudaStream_t stream) {
  popcorn::StreamScope on(stream);
  popcorn::reset_pool();
  try {
    torch::Tensor a(const_cast<int8_t*>(A), torch::kInt8, {m, k}, {k, 1});
    torch::Tensor b(const_cast<int8_t*>(B), torch::kInt8, {k, n}, {1, k});  // column-major K x N
    torch::Tensor out(D, torch::kBFloat16, {m, n}, {n, 1});
    torch::Tensor sa(const_cast<float*>(a_scales), torch::kFloat32, {m, 1}, {});
    torch::Tensor sb(const_cast<float*>(b_scales), torch::kFloat32, {1, n}, {});
    torch::Tensor adj(const_cast<int32_t*>(azp_adj), torch::kInt32, {1, n}, {});
    std::optional<torch::Tensor> bias_t;
    if (bias) bias_t = torch::Tensor(const_cast<void*>(bias), torch::kBFloat16, {n}, {});
    torch::Tensor azp_t(const_cast<int32_t*>(azp), torch::kInt32, {m}, {});
    // cutlass_scaled_mm_azp_sm80 (azp given) -> cutlass_scaled_mm_sm80_epilogue<...AzpToken>, bf16 out:
    using vllm::c2x::ScaledEpilogueBiasAzpToken;
    vllm::cutlass_gemm_sm80_dispatch<int8_t, cutlass::bfloat16_t, ScaledEpilogueBiasAzpToken>(out, a, b, sa, sb, adj,
                                    azp_t, bias_t);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
