// PopcornBench glue: vLLM's Marlin (gptq_marlin.cu: marlin_mm's thread-config choice and
// launch of the Marlin<> kernels of marlin_template.h, for sm80) as the A100 baseline, called
// as vLLM's MarlinLinearKernel calls gptq_marlin_gemm for uint4 weights with group zero points,
// fp16 activations and group size 128 (is_k_full, use_fp32_reduce, no atomic add, integer zero
// points). popcorn_w4a16_zp_prepare does what MarlinLinearKernel does once at load time: the
// weights repacked into Marlin's tile layout by vLLM's own gptq_marlin_repack kernel (the
// packing is the same for uint4 and uint4b8), the scales permuted as marlin_permute_scales
// does and the zero points as marlin_zero_points does; popcorn_w4a16_zp_gemm is the timed
// gptq_marlin_gemm alone. vLLM's host code (marlin_host.cuh of tr-marlin-gptq-w4a16-gemm:
// gptq_marlin.cu and gptq_marlin_repack.cu compiled with the 5 Marlin<> instantiations this
// task's shapes select) runs over the Marlin tasks' torch shim.
#include "entry.h"
#define POPCORN_MARLIN_WEIGHT_TYPE vllm::kU4
#include "../tr-marlin-gptq-w4a16-gemm/marlin_host.cuh"

namespace {
// packed: the repacked weights (K/16 x 2N int32, as many bytes as Q), the permuted scales
// (K/128 x N fp16), the permuted zero points (K/128 x N/8 int32).
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
    torch::Tensor q(const_cast<uint32_t*>(Q), torch::kInt, {k / 8, n}, {}, dev);
    torch::Tensor no_perm = torch::empty({0}, torch::TensorOptions().dtype(torch::kInt));
    // gptq_marlin_repack(b_q_weight, perm (empty: no act order), size_k, size_n, num_bits)
    torch::Tensor b_q = gptq_marlin_repack(q, no_perm, k, n, 4);
    cudaMemcpyAsync(out + off.weights, b_q.data_ptr(), off.scales, cudaMemcpyDeviceToDevice, stream);
    popcorn::launch_marlin_permute_scales(static_cast<const __half*>(scales), reinterpret_cast<__half*>(out + off.scales),
                                          static_cast<int64_t>(groups) * n, stream);
    popcorn::launch_marlin_zero_points_u4(zeros, reinterpret_cast<uint32_t*>(out + off.zeros), groups, n, stream);
  });
}

extern "C" int popcorn_w4a16_zp_gemm(int m, int n, int k, const void* A, const void* packed, void* C,
                                     cudaStream_t stream) {
  return popcorn::entry_call(stream, [&] {
    int dev = popcorn::current_device();
    const int groups = k / 128;
    const Layout off(n, k);
    char* base = static_cast<char*>(const_cast<void*>(packed));
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    torch::Tensor c(C, torch::kHalf, {m, n}, {}, dev);
    torch::Tensor b_q(base + off.weights, torch::kInt, {k / 16, n * 2}, {}, dev);  // gptq_marlin_repack's output shape
    torch::Tensor s(base + off.scales, torch::kHalf, {groups, n}, {}, dev);
    torch::Tensor zp(base + off.zeros, torch::kInt, {groups, n / 8}, {}, dev);
    gptq_marlin_gemm(a, c, b_q, std::nullopt, s, std::nullopt, zp, std::nullopt, std::nullopt,
                     popcorn::marlin_workspace(dev), vllm::kU4.id(), m, n, k, /*is_k_full=*/true,
                     /*use_atomic_add=*/false, /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
  });
}
