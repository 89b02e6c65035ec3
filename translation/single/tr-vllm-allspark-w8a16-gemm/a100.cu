// PopcornBench glue: vLLM's AllSpark W8A16 GEMM (csrc/quantization/gptq_allspark: Ampere
// mma.sync m16n8k16 with the uint8 weights dequantized in registers, ldmatrix, cp.async
// multistage, split-K with a fused or separate reduction) as the A100 baseline, called as
// vLLM's AllSparkLinearKernel calls it for uint8b128 weights and fp16 activations:
//   1. rearrange_kn_weight_as_n32k16_order (allspark_repack.cu): the K x N uint8 weight and
//      its scales into the N32K16 order (vLLM does this once at load time; here at every
//      call, timed, as the H100 side prepacks at every call);
//   2. the body of allspark_w8a16_gemm: workspace size and tile/split-K choice from M, N, K
//      and the SM count (allspark_qgemm_w8a16_perc_n32k16_ampere_workspace_size), then
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
}  // namespace

extern "C" int popcorn_w8a16_gemm(int m, int n, int k, const void* A, const uint8_t* Q, const void* scales, void* C,
                                  cudaStream_t stream) {
  popcorn::StreamScope on(stream);
  popcorn::reset_pool();
  try {
    const DeviceInfo& dev = device_info();
    const c10::Device device{dev.index};
    const int n_32align = (n + 31) / 32 * 32;
    auto byte_options = torch::TensorOptions().dtype(torch::kByte).device(device);
    auto half_options = torch::TensorOptions().dtype(torch::kHalf).device(device);

    // 1. N32K16 repack of the weight and its scales (ops.allspark_repack_weight)
    torch::Tensor q(const_cast<uint8_t*>(Q), torch::kByte, {k, n}, {}, dev.index);
    torch::Tensor s(const_cast<void*>(scales), torch::kHalf, {1, n}, {}, dev.index);
    torch::Tensor q_reorder = torch::empty({n_32align, k}, byte_options);
    torch::Tensor s_reorder = torch::empty({1, n_32align}, half_options);
    rearrange_kn_weight_as_n32k16_order(q, s, std::nullopt, false, q_reorder, s_reorder, std::nullopt, k, n,
                                        n_32align);

    // 2. allspark_w8a16_gemm(a, q_reorder, s_reorder, None, n, -1, sm_count, sm_version, 1024, False, True)
    allspark::BlockTileSplitkParams fused_gemm_params;
    const size_t ws_size = allspark::allspark_qgemm_w8a16_perc_n32k16_ampere_workspace_size(
        m, n, k, dev.sm_count, fused_gemm_params);
    torch::Tensor ws = torch::empty({static_cast<int64_t>(ws_size)}, byte_options);
    allspark::allspark_qgemm_w8a16_perc_ampere<__half, uint8_t>(
        static_cast<const __half*>(A), q_reorder.data_ptr<uint8_t>(),
        reinterpret_cast<const __half*>(s_reorder.data_ptr()), nullptr, static_cast<__half*>(C), m, n_32align, n, k,
        ws.data_ptr(), fused_gemm_params, -1, kCublasMThreshold, dev.sm_version, stream,
        at::cuda::getCurrentCUDABlasHandle());
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
