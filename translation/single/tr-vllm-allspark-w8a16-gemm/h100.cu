// PopcornBench glue: vLLM's Machete (CUTLASS 3.x mixed-input GEMM for sm90: TMA + wgmma with
// the uint8 weights upconverted in registers, warp-specialized cooperative kernel with
// stream-K) as the H100 reference, called as vLLM's MacheteLinearKernel calls it for
// uint8b128 weights with one scale per channel and fp16 activations. popcorn_w8a16_prepare
// does what MacheteLinearKernel does once at load time: machete_prepack_B on the K-contiguous
// weights (w_q.t().contiguous().t() in vLLM; a byte transpose kernel here), kept with a copy
// of the scales; popcorn_w8a16_gemm is the timed machete_mm with group scales [1, N] and group
// size K, whose generated dispatch (machete_mm_dispatch.cu) picks the tile schedule from M, N
// and K. The Machete build is the one of tr-marlin-gptq-w4a16-gemm (its torch shim; the
// dispatch's other kernels declared weak).
//
// Only the fp16 x uint8b128 kernels are compiled: they sit in machete_mm_impl_part2.cu (eight
// schedules) and machete_mm_impl_part3.cu (the 256x16 schedule); the other kernels of those
// files are not instantiated, and part3's copies of the schedule structs and of the kernel
// alias that part2 already defines are renamed.
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
  static constexpr bool built = std::is_same_v<A, cutlass::half_t> &&
                                std::is_same_v<B, cutlass::vllm_uint8b128_t> && std::is_same_v<GroupZero, void>;
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
#include "quantization/machete/generated/machete_mm_impl_part2.cu"
#define sch_128x64_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_128x64
#define sch_256x64_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_256x64
#define sch_128x16_1x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_128x16
#define sch_256x16_1x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_256x16
#define sch_256x128_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_256x128
#define sch_128x32_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_128x32
#define sch_256x32_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_256x32
#define sch_128x256_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_128x256
#define sch_128x128_2x1x1_TmaMI__TmaCoop_streamK popcorn_part3_sch_128x128
#define Kernel_f16u8b128f16voidvoidvoidf16f32 popcorn_part3_Kernel_f16u8b128f16voidvoidvoidf16f32
#include "quantization/machete/generated/machete_mm_impl_part3.cu"
#undef sch_128x64_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x64_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x16_1x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x16_1x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x128_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x32_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_256x32_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x256_2x1x1_TmaMI__TmaCoop_streamK
#undef sch_128x128_2x1x1_TmaMI__TmaCoop_streamK
#undef Kernel_f16u8b128f16voidvoidvoidf16f32
#undef run_impl

namespace popcorn_allspark {
// rows x cols bytes row-major -> cols x rows row-major (vLLM: w_q.t().contiguous() before
// machete_prepack_B, which wants each output column's K weights contiguous).
__global__ void transpose_u8(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, int rows, int cols) {
  __shared__ uint8_t tile[32][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    int r = blockIdx.y * 32 + dy;
    if (r < rows && c < cols) tile[dy][threadIdx.x] = in[static_cast<int64_t>(r) * cols + c];
  }
  __syncthreads();
  int r = blockIdx.y * 32 + threadIdx.x;
  for (int dx = threadIdx.y; dx < 32; dx += blockDim.y) {
    int cc = blockIdx.x * 32 + dx;
    if (cc < cols && r < rows) out[static_cast<int64_t>(cc) * rows + r] = tile[threadIdx.x][dx];
  }
}

// What machete_prepack_B dispatches to (generated/machete_prepack.cu) for fp16 activations
// and 8-bit weights.
using PrepackedLayoutB =
    machete::PrepackedLayoutBTemplate<cutlass::half_t, uint8_t, cutlass::half_t, float, cutlass::layout::ColumnMajor,
                                      cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
}  // namespace popcorn_allspark

namespace popcorn_allspark {
// packed: Machete's prepacked weights (as many bytes as Q), then a copy of the scales.
size_t weight_bytes(int n, int k) { return static_cast<size_t>(k) * n; }
}  // namespace popcorn_allspark

extern "C" int popcorn_w8a16_prepare(int n, int k, const uint8_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    char* out = static_cast<char*>(packed);
    // [K, N] bytes -> [N, K] bytes = [N, K/4] int32, seen as the [K/4, N] K-contiguous B
    torch::Tensor qt = torch::empty({n, k / 4}, torch::TensorOptions().dtype(torch::kInt));
    dim3 grid((n + 31) / 32, (k + 31) / 32);
    popcorn_allspark::transpose_u8<<<grid, dim3(32, 8), 0, stream>>>(Q, static_cast<uint8_t*>(qt.data_ptr()), k, n);
    torch::Tensor b(qt.data_ptr(), torch::kInt, {k / 4, n}, {1, k / 4}, dev);
    torch::Tensor b_packed = machete::prepack_impl<popcorn_allspark::PrepackedLayoutB>(b);
    cudaMemcpyAsync(out, b_packed.data_ptr(), popcorn_allspark::weight_bytes(n, k), cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(out + popcorn_allspark::weight_bytes(n, k), scales, static_cast<size_t>(n) * sizeof(__half),
                    cudaMemcpyDeviceToDevice, stream);
  });
}

extern "C" int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    char* base = static_cast<char*>(const_cast<void*>(packed));
    torch::Tensor b_packed(base, torch::kInt, {k / 4, n}, {}, dev);  // prepack_impl's output: [K/4, N] contiguous
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    std::optional<torch::Tensor> group_scales =
        torch::Tensor(base + popcorn_allspark::weight_bytes(n, k), torch::kHalf, {1, n}, {}, dev);
    std::optional<torch::Tensor> none;
    std::optional<at::ScalarType> out_type;
    popcorn::place_next_empty(C, static_cast<size_t>(m) * n * sizeof(__half));  // run_impl's output D
    torch::Tensor d = machete::mm_dispatch({.A = a,
                                            .B = b_packed,
                                            .b_type = vllm::kU8B128,
                                            .maybe_out_type = out_type,
                                            .maybe_group_scales = group_scales,
                                            .maybe_group_zeros = none,
                                            .maybe_group_size = k,
                                            .maybe_channel_scales = none,
                                            .maybe_token_scales = none,
                                            .maybe_schedule = std::nullopt});
    if (d.data_ptr() != C) {
      cudaMemcpyAsync(C, d.data_ptr(), static_cast<size_t>(m) * n * sizeof(__half), cudaMemcpyDeviceToDevice, stream);
    }
  });
}
