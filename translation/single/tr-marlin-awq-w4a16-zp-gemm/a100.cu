// PopcornBench glue: vLLM's Marlin (gptq_marlin.cu: marlin_mm's thread-config choice and
// launch of the Marlin<> kernels of marlin_template.h, for sm80) as the A100 baseline, called
// as vLLM's MarlinLinearKernel calls gptq_marlin_gemm for uint4 weights with group zero points,
// fp16 activations and group size 128 (is_k_full, use_fp32_reduce, no atomic add, integer zero
// points). At every call (entry.h) the weights are repacked into Marlin's tile layout by vLLM's
// own gptq_marlin_repack kernel (the packing is the same for uint4 and uint4b8), the scales
// permuted as marlin_permute_scales does and the zero points as marlin_zero_points does.
// vLLM's host code (marlin_host.cuh of tr-marlin-gptq-w4a16-gemm: gptq_marlin.cu and
// gptq_marlin_repack.cu compiled with the 5 Marlin<> instantiations this task's shapes select)
// runs over the Marlin tasks' torch shim.
#include "entry.h"
#define POPCORN_MARLIN_WEIGHT_TYPE vllm::kU4
#include "../tr-marlin-gptq-w4a16-gemm/marlin_host.cuh"

extern "C" int popcorn_w4a16_zp_gemm(int m, int n, int k, const void* A, const uint32_t* Q, const void* scales,
                                     const uint32_t* zeros, void* C, cudaStream_t stream) {
  popcorn::StreamScope on(stream);
  popcorn::reset_pool();
  try {
    int dev = popcorn::current_device();
    const int groups = k / 128;
    torch::Tensor a(const_cast<void*>(A), torch::kHalf, {m, k}, {}, dev);
    torch::Tensor c(C, torch::kHalf, {m, n}, {}, dev);
    torch::Tensor q(const_cast<uint32_t*>(Q), torch::kInt, {k / 8, n}, {}, dev);
    torch::Tensor no_perm = torch::empty({0}, torch::TensorOptions().dtype(torch::kInt));
    // gptq_marlin_repack(b_q_weight, perm (empty: no act order), size_k, size_n, num_bits)
    torch::Tensor b_q = gptq_marlin_repack(q, no_perm, k, n, 4);
    torch::Tensor s = torch::empty({groups, n}, torch::TensorOptions().dtype(torch::kHalf));
    popcorn::launch_marlin_permute_scales(static_cast<const __half*>(scales), s.data_ptr<__half>(),
                                          static_cast<int64_t>(groups) * n, stream);
    torch::Tensor zp = torch::empty({groups, n / 8}, torch::TensorOptions().dtype(torch::kInt));
    popcorn::launch_marlin_zero_points_u4(zeros, zp.data_ptr<uint32_t>(), groups, n, stream);
    gptq_marlin_gemm(a, c, b_q, std::nullopt, s, std::nullopt, zp, std::nullopt, std::nullopt,
                     popcorn::marlin_workspace(dev), vllm::kU4.id(), m, n, k, /*is_k_full=*/true,
                     /*use_atomic_add=*/false, /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
