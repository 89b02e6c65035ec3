// PopcornBench glue: vLLM's Machete (CUTLASS 3.x mixed-input GEMM for sm90: TMA + wgmma with
// the weights upconverted in registers, warp-specialized cooperative kernel with stream-K) as
// the H100 reference, called as vLLM's MacheteLinearKernel calls it for uint4 weights with
// group zero points, fp16 activations and group size 128. popcorn_w4a16_zp_prepare does what
// MacheteLinearKernel does once at load time: machete_prepack_B on the K-contiguous weights
// (w_q.t().contiguous().t() in vLLM; a transpose kernel here) and the zero points pre-scaled
// to -(s * z) (transform_w_zp), kept with a copy of the scales; popcorn_w4a16_zp_gemm is the
// timed machete_mm, whose generated dispatch (machete_mm_dispatch.cu) picks the tile schedule
// from M, N and K. vLLM's torch::Tensor code runs over the Marlin tasks' torch shim.
//
// Only the fp16 x uint4 kernels with zero points are compiled: the dispatch's declarations of
// the other type combinations' kernels are made weak (they need no definition), the other
// kernels of machete_mm_impl_part3.cu and _part4.cu are not instantiated, and part4's copies
// of the schedule structs and kernel alias that part3 already defines are renamed.
#include "entry.h"
#include <torch/all.h>
#include "../tr-marlin-gptq-w4a16-gemm/marlin_prep.cuh"
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
  static constexpr bool built = std::is_same_v<A, cutlass::half_t> && std::is_same_v<B, cutlass::uint4b_t> &&
                                std::is_same_v<GroupZero, cutlass::half_t>;
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
#include "quantization/machete/generated/machete_mm_impl_part3.cu"
#define sch_128x64_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_128x64
#define sch_256x64_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_256x64
#define sch_128x16_1x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_128x16
#define sch_256x16_1x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_256x16
#define sch_256x128_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_256x128
#define sch_128x32_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_128x32
#define sch_256x32_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_256x32
#define sch_128x256_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_128x256
#define sch_128x128_2x1x1_TmaMI__TmaCoop_streamK popcorn_part4_sch_128x128
#define Kernel_f16u4f16f16voidvoidf16f32 popcorn_part4_Kernel_f16u4f16f16voidvoidf16f32
#include "quantization/machete/generated/machete_mm_impl_part4.cu"
#undef sch_128x64_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x64_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x16_1x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x16_1x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x128_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x32_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x32_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x256_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x128_2x1x1_TmaMI__TmaCoop_streamK
#undef Kernel_f16u4f16f16voidvoidf16f32
#undef run_impl

namespace {
// What machete_prepack_B dispatches to (generated/machete_prepack.cu) for fp16 activations
// and 4-bit weights.
using PrepackedLayoutB =
    machete::PrepackedLayoutBTemplate<cutlass::half_t, cutlass::uint4b_t, cutlass::half_t, float,
                                      cutlass::layout::ColumnMajor, cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
}  // namespace

namespace {
// packed: Machete's prepacked weights (as many bytes as Q), a copy of the scales and the
// pre-scaled zero points (K/128 x N fp16 each).
struct Layout {
  size_t weights, scales, zeros;  // byte offsets
  Layout(int n, int k)
      : weights(0),
        scales(static_cast<size_t>(k) * n / 2),
        zeros(scales + static_cast<size_t>(k / 128) * n * sizeof(__half)) {}
};
}  // namespace

extern "C" int popcorn_w4a16_zp_prepare(int n, int k, const uint32_t* Q, const void* scales, const uint32_t* zeros,
                                        void* packed, cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    const int groups = k / 128;
    const Layout off(n, k);
    char* out = static_cast<char*>(packed);
    torch::Tensor qt = torch::empty({n, k / 8}, torch::TensorOptions().dtype(torch::kInt));
    popcorn::launch_transpose_u32(Q, qt.data_ptr<uint32_t>(), k / 8, n, stream);
    torch::Tensor b(qt.data_ptr(), torch::kInt, {k / 8, n}, {1, k / 8}, dev);  // [K/8, N], K-contiguous
    torch::Tensor b_packed = machete::prepack_impl<PrepackedLayoutB>(b);
    cudaMemcpyAsync(out + off.weights, b_packed.data_ptr(), off.scales, cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(out + off.scales, scales, static_cast<size_t>(groups) * n * sizeof(__half),
                    cudaMemcpyDeviceToDevice, stream);
    popcorn::launch_machete_prescaled_zeros(zeros, static_cast<const __half*>(scales),
                                            reinterpret_cast<__half*>(out + off.zeros), groups, n, stream);
  });
}

extern "C" int popcorn_w4a16_zp_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    const int groups = k / 128;
    const Layout off(n, k);
    char* base = static_cast<char*>(const_cast<void*>(packed));
    torch::Tensor b_packed(base + off.weights, torch::kInt, {k / 8, n}, {}, dev);  // prepack_impl's output
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    std::optional<torch::Tensor> group_scales = torch::Tensor(base + off.scales, torch::kHalf, {groups, n}, {}, dev);
    std::optional<torch::Tensor> group_zeros = torch::Tensor(base + off.zeros, torch::kHalf, {groups, n}, {}, dev);
    std::optional<torch::Tensor> none;
    std::optional<at::ScalarType> out_type;
    popcorn::place_next_empty(C, static_cast<size_t>(m) * n * sizeof(__half));  // run_impl's output D
    torch::Tensor d = machete::mm_dispatch({.A = a,
                                            .B = b_packed,
                                            .b_type = vllm::kU4,
                                            .maybe_out_type = out_type,
                                            .maybe_group_scales = group_scales,
                                            .maybe_group_zeros = group_zeros,
                                            .maybe_group_size = 128,
                                            .maybe_channel_scales = none,
                                            .maybe_token_scales = none,
                                            .maybe_schedule = std::nullopt});
    if (d.data_ptr() != C) {
      cudaMemcpyAsync(C, d.data_ptr(), static_cast<size_t>(m) * n * sizeof(__half), cudaMemcpyDeviceToDevice, stream);
    }
  });
}
