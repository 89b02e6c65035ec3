// PopcornBench glue: vLLM's AllSpark W8A16 GEMM (csrc/quantization/gptq_allspark: Ampere
// mma.sync m16n8k16 with the uint8 weights dequantized in registers, ldmatrix, cp.async
// multistage, split-K with a fused or separate reduction) as the A100 baseline, called as
// vLLM's AllSparkLinearKernel calls it for uint8b128 weights and fp16 activations:
//   1. popcorn_w8a16_prepare, untimed, once per weight as vLLM's process_weights_after_loading:
//      rearrange_kn_weight_as_n32k16_order (allspark_repack.cu), the K x N uint8 weight and
//      its scales into the N32K16 order, written into `packed`;
//   2. popcorn_w8a16_gemm, timed: the body of allspark_w8a16_gemm: workspace size and
//      tile/split-K choice from M, N, K and the SM count (allspark_qgemm_w8a16_perc_n32k16_ampere_workspace_size), then
//      allspark_qgemm_w8a16_perc_ampere writing straight into C (the wrapper would allocate
//      C itself; the arithmetic is the same). CUBLAS_M_THRESHOLD is vLLM's 1024, above every
//      m of this task, so the cuBLAS fallback is never taken.
// vLLM's torch::Tensor code compiles unchanged over the Marlin tasks' torch shim and this
// folder's additions (popcorn_allspark_torch.h, cublas_v2.h): no libtorch.
#include "entry.h"
#include <torch/all.h>
#include "popcorn_allspark_torch.h"
#include "quantization/gptq_allspark/allspark_qgemm_w8a16.cu"
#include "quantization/gptq_allspark/allspark_repack.cu"

namespace {
constexpr int kCublasMThreshold = 1024;  // vLLM's ALLSPARK_AMPERE_M_CUBLAS_THRESHOLD

struct DeviceInfo {
  int index = 0;
  int sm_count = 0;
  int sm_version = 0;
};

const DeviceInfo& device_info() {
  static DeviceInfo info = [] {
    DeviceInfo d;
    cudaGetDevice(&d.index);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, d.index);
    d.sm_count = prop.multiProcessorCount;
    d.sm_version = prop.major * 10 + prop.minor;  // as vLLM's process_weights_after_loading
    return d;
  }();
  return info;
}

// packed: the N32K16-ordered weight ([N_32align, K] bytes; N is a multiple of 128, so as
// many bytes as Q), then the reordered scales ([1, N_32align] fp16).
size_t weight_bytes(int n, int k) { return static_cast<size_t>((n + 31) / 32 * 32) * k; }
}  // namespace

extern "C" int popcorn_w8a16_prepare(int n, int k, const uint8_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    const DeviceInfo& dev = device_info();
    const int n_32align = (n + 31) / 32 * 32;
    char* out = static_cast<char*>(packed);
    // ops.allspark_repack_weight
    torch::Tensor q(const_cast<uint8_t*>(Q), torch::kByte, {k, n}, {}, dev.index);
    torch::Tensor s(const_cast<void*>(scales), torch::kHalf, {1, n}, {}, dev.index);
    torch::Tensor q_reorder(out, torch::kByte, {n_32align, k}, {}, dev.index);
    torch::Tensor s_reorder(out + weight_bytes(n, k), torch::kHalf, {1, n_32align}, {}, dev.index);
    rearrange_kn_weight_as_n32k16_order(q, s, std::nullopt, false, q_reorder, s_reorder, std::nullopt, k, n,
                                        n_32align);
  });
}

extern "C" int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    const DeviceInfo& dev = device_info();
    const int n_32align = (n + 31) / 32 * 32;
    const char* base = static_cast<const char*>(packed);
    // allspark_w8a16_gemm(a, q_reorder, s_reorder, None, n, -1, sm_count, sm_version, 1024, False, True)
    allspark::BlockTileSplitkParams fused_gemm_params;
    const size_t ws_size = allspark::allspark_qgemm_w8a16_perc_n32k16_ampere_workspace_size(
        m, n, k, dev.sm_count, fused_gemm_params);
    torch::Tensor ws = torch::empty({static_cast<int64_t>(ws_size)},
                                    torch::TensorOptions().dtype(torch::kByte).device(c10::Device{dev.index}));
    allspark::allspark_qgemm_w8a16_perc_ampere<__half, uint8_t>(
        static_cast<const __half*>(A), reinterpret_cast<const uint8_t*>(base),
        reinterpret_cast<const __half*>(base + weight_bytes(n, k)), nullptr, static_cast<__half*>(C), m, n_32align, n,
        k, ws.data_ptr(), fused_gemm_params, -1, kCublasMThreshold, dev.sm_version, stream,
        at::cuda::getCurrentCUDABlasHandle());
  });
}
