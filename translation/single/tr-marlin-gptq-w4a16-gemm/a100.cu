// PopcornBench glue: vLLM's Marlin (gptq_marlin.cu: marlin_mm's thread-config choice and
// launch of the Marlin<> kernels of marlin_template.h, for sm80) as the A100 baseline, called
// as vLLM's apply_gptq_marlin_linear calls gptq_marlin_gemm for uint4b8 weights with fp16
// activations and group size 128 (is_k_full, use_fp32_reduce, no atomic add, no act order).
// popcorn_w4a16_prepare does what vLLM's MarlinLinearKernel does once at load time: the GPTQ
// weights repacked into Marlin's tile layout by vLLM's own gptq_marlin_repack kernel and the
// scales permuted as marlin_permute_scales does; popcorn_w4a16_gemm is the timed
// gptq_marlin_gemm alone. vLLM's host code (marlin_host.cuh: gptq_marlin.cu and
// gptq_marlin_repack.cu compiled with the 5 Marlin<> instantiations this task's shapes
// select) runs over this task's torch shim.
#include "entry.h"
#define POPCORN_MARLIN_WEIGHT_TYPE vllm::kU4B8
#include "marlin_host.cuh"

namespace {
// packed: the repacked weights (K/16 x 2N int32, as many bytes as Q), then the permuted scales.
size_t weight_bytes(int n, int k) { return static_cast<size_t>(k) * n / 2; }
}  // namespace

extern "C" int popcorn_w4a16_prepare(int n, int k, const uint32_t* Q, const void* scales, void* packed,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    torch::Tensor q(const_cast<uint32_t*>(Q), torch::kInt, {k / 8, n}, {}, dev);
    torch::Tensor no_perm = torch::empty({0}, torch::TensorOptions().dtype(torch::kInt));
    // gptq_marlin_repack(b_q_weight, perm (empty: no act order), size_k, size_n, num_bits)
    torch::Tensor b_q = gptq_marlin_repack(q, no_perm, k, n, 4);
    cudaMemcpyAsync(packed, b_q.data_ptr(), weight_bytes(n, k), cudaMemcpyDeviceToDevice, stream);
    popcorn::launch_marlin_permute_scales(static_cast<const __half*>(scales),
                                          reinterpret_cast<__half*>(static_cast<char*>(packed) + weight_bytes(n, k)),
                                          static_cast<int64_t>(k / 128) * n, stream);
  });
}

extern "C" int popcorn_w4a16_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                  cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    char* base = static_cast<char*>(const_cast<void*>(packed));
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    torch::Tensor c(C, torch::kHalf, {m, n}, {}, dev);
    torch::Tensor b_q(base, torch::kInt, {k / 16, n * 2}, {}, dev);  // gptq_marlin_repack's output shape
    torch::Tensor s(base + weight_bytes(n, k), torch::kHalf, {k / 128, n}, {}, dev);
    gptq_marlin_gemm(a, c, b_q, std::nullopt, s, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                     popcorn::marlin_workspace(dev), vllm::kU4B8.id(), m, n, k, /*is_k_full=*/true,
                     /*use_atomic_add=*/false, /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
  });
}
