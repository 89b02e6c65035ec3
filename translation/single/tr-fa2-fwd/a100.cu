// PopcornBench glue: FlashAttention-2's sm80 forward kernel (flash_fwd_kernel.h, through the
// run_mha_fwd_<half, 128, causal> instantiations of its hdim128 fp16 translation units)
// as the A100 baseline. The parameter block is filled as FlashAttention's mha_fwd fills it
// (flash_api.cpp, set_params_fprop) for fp16, no dropout, no window, no softcap, no alibi,
// one split. FlashAttention's torch includes resolve to our shim (translation/common/torch_shim).
// FlashAttention's own build options (setup.py) drop the kernel variants these calls never take;
// they are defined here so that this file builds the same kernels wherever it is compiled.
#define FLASHATTENTION_DISABLE_DROPOUT
#define FLASHATTENTION_DISABLE_ALIBI
#define FLASHATTENTION_DISABLE_SOFTCAP
#define FLASHATTENTION_DISABLE_LOCAL
#define FLASHATTENTION_DISABLE_UNEVEN_K
#include "entry.h"
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include "flash_fwd_hdim128_fp16_sm80.cu"
#include "flash_fwd_hdim128_fp16_causal_sm80.cu"

namespace {

int round_multiple(int x, int m) { return (x + m - 1) / m * m; }

flash::Flash_fwd_params make_params(int batch, int seqlen, int heads, int head_dim, const void* Q, const void* K,
                                    const void* V, void* O, float* lse, bool causal) {
  flash::Flash_fwd_params params = {};
  params.is_bf16 = false;
  params.q_ptr = const_cast<void*>(Q);
  params.k_ptr = const_cast<void*>(K);
  params.v_ptr = const_cast<void*>(V);
  params.o_ptr = O;
  const int64_t row = static_cast<int64_t>(heads) * head_dim;  // strides in elements, [b, s, h, d]
  params.q_row_stride = params.k_row_stride = params.v_row_stride = params.o_row_stride = row;
  params.q_head_stride = params.k_head_stride = params.v_head_stride = params.o_head_stride = head_dim;
  params.q_batch_stride = params.k_batch_stride = params.v_batch_stride = params.o_batch_stride = row * seqlen;
  params.softmax_lse_ptr = lse;
  params.b = batch;
  params.h = params.h_k = heads;
  params.h_h_k_ratio = 1;
  params.seqlen_q = params.seqlen_k = seqlen;
  params.seqlen_q_rounded = params.seqlen_k_rounded = round_multiple(seqlen, 128);
  params.d = head_dim;
  params.d_rounded = round_multiple(head_dim, 32);
  const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  params.softcap = 0.0f;
  params.scale_softmax = softmax_scale;
  params.scale_softmax_log2 = softmax_scale * static_cast<float>(M_LOG2E);
  params.p_dropout = 1.0f;  // probability of keeping an element
  params.p_dropout_in_uint8_t = 255;
  params.rp_dropout = 1.0f;
  params.scale_softmax_rp_dropout = softmax_scale;
  // mha_fwd: causal is window (-1, 0), then the left window becomes seqlen_k; no causal for seqlen_q == 1.
  params.is_causal = causal && seqlen > 1;
  params.window_size_left = params.is_causal ? seqlen : -1;
  params.window_size_right = params.is_causal ? 0 : -1;
  params.is_seqlens_k_cumulative = true;
  params.num_splits = 1;
  return params;
}

}  // namespace

extern "C" int popcorn_fa_fwd(int batch, int seqlen, int heads, int head_dim, const void* Q, const void* K,
                              const void* V, void* O, float* lse, int causal, cudaStream_t stream) {
  if (head_dim != 128) return static_cast<int>(cudaErrorInvalidValue);
  flash::Flash_fwd_params params = make_params(batch, seqlen, heads, head_dim, Q, K, V, O, lse, causal != 0);
  try {
    params.is_causal ? flash::run_mha_fwd_<cutlass::half_t, 128, true>(params, stream)
                     : flash::run_mha_fwd_<cutlass::half_t, 128, false>(params, stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorLaunchFailure);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
