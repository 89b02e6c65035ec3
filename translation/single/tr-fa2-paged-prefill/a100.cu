// PopcornBench glue: FlashInfer's FA2-style batched prefill over a paged KV cache
// (BatchPrefillWithPagedKVCacheKernel, include/flashinfer/attention/prefill.cuh) as the A100 baseline.
// What FlashInfer's BatchPrefillWithPagedKVCacheWrapper does for fp16/bf16, head_dim 128, causal,
// no RoPE, no soft cap, no sliding window, NHD pages: PrefillPlan on the host (the
// BatchPrefillWithKVCachePlan of csrc/batch_prefill.cu), then the paged run
// (BatchPrefillWithPagedKVCacheRun) with the kernel instantiations its JIT renders from
// batch_prefill_paged_kernel_inst.jinja (CTA_TILE_Q 16, 64, 128). The parameter block is FlashInfer's
// own BatchPrefillPagedParams (default_prefill_params.cuh, the AOT build's), which carries the fields
// the JIT's rendered batch_prefill_customize_config.jinja declares for the default variant.
// On sm_90 FlashInfer launches with programmatic dependent launch (device_support_pdl), as here.
#include "entry.h"
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

// How the harness's workspace is split, and the page-locked host buffer FlashInfer's planner writes
// its schedule into (the Python wrapper's `_pin_memory_int_workspace_buffer`).
namespace popcorn {

constexpr size_t kFloatBytes = size_t(128) << 20;  // FlashInfer's default float workspace (split-KV partials)
constexpr size_t kIntBytes = size_t(8) << 20;      // FlashInfer's default int workspace (the schedule)
constexpr size_t kPinnedBytes = size_t(16) << 20;  // plan (kIntBytes) + the H100 side's staging

struct Workspace {
  void* float_buf;     // kFloatBytes
  void* int_buf;       // kIntBytes
  char* extra;         // the rest of the workspace
  size_t extra_bytes;
  char* pinned;        // kPinnedBytes of page-locked host memory
};

// The page-locked buffer lives as long as the process; one call's asynchronous copies out of it
// must have finished before the next call's planner writes it again.
struct Pinned {
  char* host = nullptr;
  cudaEvent_t copied = nullptr;
};

inline Pinned& pinned_state() {
  static Pinned state;
  return state;
}

// Splits `workspace` and waits until the page-locked buffer is free again.
inline cudaError_t acquire(void* workspace, size_t bytes, Workspace* out) {
  if (bytes < kFloatBytes + kIntBytes) return cudaErrorInvalidValue;
  Pinned& p = pinned_state();
  if (p.host == nullptr) {
    cudaError_t err = cudaMallocHost(reinterpret_cast<void**>(&p.host), kPinnedBytes);
    if (err != cudaSuccess) return err;
    err = cudaEventCreateWithFlags(&p.copied, cudaEventDisableTiming);
    if (err != cudaSuccess) return err;
  } else {
    cudaError_t err = cudaEventSynchronize(p.copied);
    if (err != cudaSuccess) return err;
  }
  char* base = static_cast<char*>(workspace);
  out->float_buf = base;
  out->int_buf = base + kFloatBytes;
  out->extra = base + kFloatBytes + kIntBytes;
  out->extra_bytes = bytes - kFloatBytes - kIntBytes;
  out->pinned = p.host;
  return cudaSuccess;
}

// Marks the point on `stream` after which the page-locked buffer may be rewritten.
inline cudaError_t release(cudaStream_t stream) { return cudaEventRecord(pinned_state().copied, stream); }

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace popcorn

namespace {

using namespace flashinfer;
using IdType = int32_t;
constexpr uint32_t kHeadDim = 128;
constexpr bool kEnablePdl = true;

template <typename DType>
cudaError_t run(int batch, int heads_qo, int heads_kv, int page_size, const void* q, const int32_t* qo_indptr,
                const void* k_pages, const void* v_pages, const int32_t* kv_indptr, const int32_t* kv_indices,
                const int32_t* last_page_len, const int32_t* qo_indptr_host, const int32_t* kv_indptr_host, void* o,
                const popcorn::Workspace& ws, cudaStream_t stream) {
  using Params = BatchPrefillPagedParams<DType, DType, DType, IdType>;
  using Variant = DefaultAttention</*use_custom_mask=*/false, /*use_sliding_window=*/false,
                                   /*use_logits_soft_cap=*/false, /*use_alibi=*/false>;
  const uint32_t total_rows = static_cast<uint32_t>(qo_indptr_host[batch]);
  PrefillPlanInfo plan;
  cudaError_t err = PrefillPlan<IdType>(ws.float_buf, popcorn::kFloatBytes, ws.int_buf, ws.pinned, popcorn::kIntBytes,
                                        plan, const_cast<IdType*>(qo_indptr_host),
                                        const_cast<IdType*>(kv_indptr_host), total_rows, batch, heads_qo, heads_kv,
                                        kHeadDim, kHeadDim, page_size, /*enable_cuda_graph=*/false,
                                        /*sizeof_dtype_o=*/sizeof(DType), stream);
  if (err != cudaSuccess) return err;

  Params params;
  params.q = static_cast<DType*>(const_cast<void*>(q));
  params.paged_kv = paged_kv_t<DType, IdType>(
      heads_kv, page_size, kHeadDim, batch, QKVLayout::kNHD, static_cast<DType*>(const_cast<void*>(k_pages)),
      static_cast<DType*>(const_cast<void*>(v_pages)), const_cast<IdType*>(kv_indices),
      const_cast<IdType*>(kv_indptr), const_cast<IdType*>(last_page_len));
  params.q_indptr = const_cast<IdType*>(qo_indptr);
  params.o = static_cast<DType*>(o);
  params.lse = nullptr;
  params.num_qo_heads = heads_qo;
  params.group_size = uint_fastdiv(heads_qo / heads_kv);
  params.q_stride_n = heads_qo * kHeadDim;
  params.q_stride_h = kHeadDim;
  params.window_left = -1;
  params.logits_soft_cap = 0.0f;
  params.sm_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  params.rope_rcp_scale = 1.0f;        // rope_scale 1 (unused without RoPE)
  params.rope_rcp_theta = 1.0f / 1e4f;  // rope_theta 1e4 (unused without RoPE)

  // As BatchPrefillWithPagedKVCacheRun reads the plan back.
  void* int_buf = ws.int_buf;
  params.request_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.request_indices_offset);
  params.qo_tile_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.qo_tile_indices_offset);
  params.kv_tile_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.kv_tile_indices_offset);
  params.o_indptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.o_indptr_offset);
  params.kv_chunk_size_ptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.kv_chunk_size_ptr_offset);
  DType* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (plan.split_kv) {
    params.merge_indptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.merge_indptr_offset);
    tmp_v = GetPtrFromBaseOffset<DType>(ws.float_buf, plan.v_offset);
    tmp_s = GetPtrFromBaseOffset<float>(ws.float_buf, plan.s_offset);
  }
  params.padded_batch_size = plan.padded_batch_size;
  params.max_total_num_rows = plan.total_num_rows;

  cudaError_t status = cudaSuccess;
  DISPATCH_CTA_TILE_Q(plan.cta_tile_q, CTA_TILE_Q, {
    status = BatchPrefillWithPagedKVCacheDispatched<CTA_TILE_Q, kHeadDim, kHeadDim, PosEncodingMode::kNone,
                                                    /*USE_FP16_QK_REDUCTION=*/false, MaskMode::kCausal, Variant,
                                                    Params>(params, tmp_v, tmp_s, kEnablePdl, stream);
  });
  return status;
}

}  // namespace

extern "C" int popcorn_paged_prefill(int batch, int heads_qo, int heads_kv, int head_dim, int page_size,
                                     const void* q, const int32_t* qo_indptr, const void* k_pages,
                                     const void* v_pages, const int32_t* kv_indptr, const int32_t* kv_indices,
                                     const int32_t* last_page_len, const int32_t* qo_indptr_host,
                                     const int32_t* kv_indptr_host, const int32_t* last_page_len_host, void* o,
                                     void* workspace, size_t workspace_bytes, int dtype_bf16, cudaStream_t stream) {
  (void)last_page_len_host;  // PrefillPlan schedules by pages; the kernel reads last_page_len on the device
  if (head_dim != static_cast<int>(kHeadDim) || heads_kv <= 0 || heads_qo % heads_kv != 0 || batch <= 0)
    return static_cast<int>(cudaErrorInvalidValue);
  popcorn::Workspace ws;
  cudaError_t err = popcorn::acquire(workspace, workspace_bytes, &ws);
  if (err != cudaSuccess) return static_cast<int>(err);
  try {  // FlashInfer reports planning and dispatch errors by throwing
    err = dtype_bf16 ? run<nv_bfloat16>(batch, heads_qo, heads_kv, page_size, q, qo_indptr, k_pages, v_pages,
                                        kv_indptr, kv_indices, last_page_len, qo_indptr_host, kv_indptr_host, o, ws,
                                        stream)
                     : run<half>(batch, heads_qo, heads_kv, page_size, q, qo_indptr, k_pages, v_pages, kv_indptr,
                                 kv_indices, last_page_len, qo_indptr_host, kv_indptr_host, o, ws, stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    err = cudaErrorLaunchFailure;
  }
  cudaError_t released = popcorn::release(stream);  // after every copy out of the page-locked buffer
  if (err != cudaSuccess) return static_cast<int>(err);
  if (released != cudaSuccess) return static_cast<int>(released);
  return static_cast<int>(cudaPeekAtLastError());
}
