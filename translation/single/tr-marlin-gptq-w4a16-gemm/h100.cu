// PopcornBench glue: vLLM's Machete (CUTLASS 3.x mixed-input GEMM for sm90: TMA + wgmma with
// the weights upconverted in registers, warp-specialized cooperative kernel with stream-K) as
// the H100 reference, called as vLLM's MacheteLinearKernel calls it for uint4b8 weights, fp16
// activations and group size 128. popcorn_w4a16_prepare does what MacheteLinearKernel does
// once at load time: machete_prepack_B on the K-contiguous weights (w_q.t().contiguous().t()
// in vLLM; a transpose kernel here), and keeps the scales next to them; popcorn_w4a16_gemm is
// the timed machete_mm, whose generated dispatch (machete_mm_dispatch.cu) picks the tile
// schedule from M, N and K. vLLM's torch::Tensor code runs unchanged over this task's torch
// shim (popcorn_marlin_torch.h: views of the raw buffers, no libtorch).
//
// Only the fp16 x uint4b8 kernels are compiled: the dispatch's declarations of the other
// type combinations' kernels (defined in the other generated impl files) are made weak, so
// they need no definition, and machete_mm_impl_part1.cu's bf16 kernels are not instantiated.
#include "entry.h"
#include <torch/all.h>
#include "marlin_prep.cuh"
#include "quantization/machete/machete_mm_launcher.cuh"
#include "quantization/machete/machete_prepack_launcher.cuh"

#define extern extern __attribute__((weak))
#include "quantization/machete/generated/machete_mm_dispatch.cu"
#undef extern

namespace machete {

template <typename Kernel>
struct popcorn_kernel_types;
template <typename A, typename B, typename D, typename Acc, typename GroupScale, typename GroupZero, typename... Rest>
struct popcorn_kernel_types<MacheteKernelTemplate<A, B, D, Acc, GroupScale, GroupZero, Rest...>> {
  static constexpr bool built = std::is_same_v<A, cutlass::half_t> && std::is_same_v<B, cutlass::vllm_uint4b8_t> &&
                                std::is_same_v<GroupZero, void>;
};

// What the generated impl functions call instead of run_impl (see the #define below).
template <typename MacheteKernel>
torch::Tensor popcorn_run_impl(MMArgs args) {
  if constexpr (popcorn_kernel_types<MacheteKernel>::built) {
    return run_impl<MacheteKernel>(args);
  } else {
    throw std::runtime_error("popcorn: this Machete type combination is not built for this task");
  }
}

}  // namespace machete

#define run_impl popcorn_run_impl
#include "quantization/machete/generated/machete_mm_impl_part1.cu"
#undef run_impl

namespace {
// What machete_prepack_B dispatches to (generated/machete_prepack.cu) for fp16 activations
// and 4-bit weights.
using PrepackedLayoutB =
    machete::PrepackedLayoutBTemplate<cutlass::half_t, cutlass::uint4b_t, cutlass::half_t, float,
                                      cutlass::layout::ColumnMajor, cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
}  // namespace

namespace {
// packed: Machete's prepacked weights (as many bytes as Q), then a copy of the scales.
size_t weight_bytes(int n, int k) { return static_cast<size_t>(k) * n / 2; }
}  // namespace

extern "C" int popcorn_w4a16_prepare(int n, int k, const uint32_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    torch::Tensor qt = torch::empty({n, k / 8}, torch::TensorOptions().dtype(torch::kInt));
    popcorn::launch_transpose_u32(Q, qt.data_ptr<uint32_t>(), k / 8, n, stream);
    torch::Tensor b(qt.data_ptr(), torch::kInt, {k / 8, n}, {1, k / 8}, dev);  // [K/8, N], K-contiguous
    torch::Tensor b_packed = machete::prepack_impl<PrepackedLayoutB>(b);
    char* out = static_cast<char*>(packed);
    cudaMemcpyAsync(out, b_packed.data_ptr(), weight_bytes(n, k), cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(out + weight_bytes(n, k), scales, static_cast<size_t>(k / 128) * n * sizeof(__half),
                    cudaMemcpyDeviceToDevice, stream);
  });
}

extern "C" int popcorn_w4a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    char* base = static_cast<char*>(const_cast<void*>(packed));
    torch::Tensor b_packed(base, torch::kInt, {k / 8, n}, {}, dev);  // prepack_impl's output: [K/8, N] contiguous
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    std::optional<torch::Tensor> group_scales = torch::Tensor(base + weight_bytes(n, k), torch::kHalf, {k / 128, n},
                                                              {}, dev);
    std::optional<torch::Tensor> none;
    std::optional<at::ScalarType> out_type;
    popcorn::place_next_empty(C, static_cast<size_t>(m) * n * sizeof(__half));  // run_impl's output D
    torch::Tensor d = machete::mm_dispatch({.A = a,
                                            .B = b_packed,
                                            .b_type = vllm::kU4B8,
                                            .maybe_out_type = out_type,
                                            .maybe_group_scales = group_scales,
                                            .maybe_group_zeros = none,
                                            .maybe_group_size = 128,
                                            .maybe_channel_scales = none,
                                            .maybe_token_scales = none,
                                            .maybe_schedule = std::nullopt});
    if (d.data_ptr() != C) {
      cudaMemcpyAsync(C, d.data_ptr(), static_cast<size_t>(m) * n * sizeof(__half), cudaMemcpyDeviceToDevice, stream);
    }
  });
}
