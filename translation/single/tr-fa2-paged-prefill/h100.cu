// PopcornBench glue: FlashInfer's Hopper batched prefill over a paged KV cache
// (include/flashinfer/attention/hopper/prefill_sm90.cuh with sparse_mainloop.cuh: TMA for Q and O,
// producer warps gathering K/V rows with cp.async, wgmma, warpgroup register reallocation, a
// persistent cost-balanced schedule) as the H100 reference. What FlashInfer's
// BatchPrefillWithPagedKVCacheWrapper does with backend "fa3" for fp16/bf16, head_dim 128, causal,
// no soft cap, no sliding window, NHD pages:
//   plan: kv lengths from the page table, the token-level ("vector sparse") kv indptr when
//         page_size > 1, then PrefillSM90Plan (BatchPrefillWithKVCacheSM90Plan, csrc/batch_prefill_sm90.cu);
//   run:  block_sparse_indices_to_vector_sparse_offsets (per-token offsets of the paged rows), then
//         BatchPrefillWithPagedKVCacheSM90Run's parameter block and the instantiations its JIT
//         renders from batch_prefill_paged_sm90_kernel_inst.jinja (SAME_SCHEDULER_FOR_ALL_HEADS
//         true and false, DefaultAttention<false>).
// The parameter block is FlashInfer's own hopper BatchPrefillPagedParams (hopper/default_params.cuh,
// the AOT build's), whose AdditionalParams are the ones the JIT renders for this variant.
#include "entry.h"
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <flashinfer/attention/hopper/default_params.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/cutlass_utils.cuh>
#include <flashinfer/page.cuh>

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

// Host-side arrays the Python wrapper computes in plan() (kv_lens_arr_host, vector_sparse_indptr_host),
// staged in page-locked memory behind the planner's region and copied to the device once.
struct KvTables {
  IdType* lens_host;
  IdType* indptr_host;  // token-level kv indptr (batch + 1)
  IdType* lens_dev;
  IdType* indptr_dev;
  IdType* offsets_dev;  // one entry per kv token
};

cudaError_t stage_kv_tables(int batch, int page_size, const int32_t* kv_indptr_host,
                            const int32_t* last_page_len_host, const popcorn::Workspace& ws, KvTables* t) {
  char* host = ws.pinned + popcorn::kIntBytes;
  size_t lens_bytes = popcorn::align_up(sizeof(IdType) * batch, 256);
  size_t indptr_bytes = popcorn::align_up(sizeof(IdType) * (batch + 1), 256);
  if (lens_bytes + indptr_bytes > popcorn::kPinnedBytes - popcorn::kIntBytes) return cudaErrorInvalidValue;
  t->lens_host = reinterpret_cast<IdType*>(host);
  t->indptr_host = reinterpret_cast<IdType*>(host + lens_bytes);
  t->indptr_host[0] = 0;
  for (int i = 0; i < batch; ++i) {  // flashinfer.page.get_seq_lens
    int pages = kv_indptr_host[i + 1] - kv_indptr_host[i];
    t->lens_host[i] = pages > 0 ? (pages - 1) * page_size + last_page_len_host[i] : 0;
    t->indptr_host[i + 1] = t->indptr_host[i] + t->lens_host[i];
  }
  size_t offsets_bytes = popcorn::align_up(sizeof(IdType) * (t->indptr_host[batch] + 1), 256);
  if (lens_bytes + indptr_bytes + offsets_bytes > ws.extra_bytes) return cudaErrorInvalidValue;
  t->lens_dev = reinterpret_cast<IdType*>(ws.extra);
  t->indptr_dev = reinterpret_cast<IdType*>(ws.extra + lens_bytes);
  t->offsets_dev = reinterpret_cast<IdType*>(ws.extra + lens_bytes + indptr_bytes);
  return cudaSuccess;
}

template <typename DType>
cudaError_t run(int batch, int heads_qo, int heads_kv, int page_size, const void* q, const void* k_pages,
                const void* v_pages, const int32_t* kv_indptr, const int32_t* kv_indices,
                const int32_t* qo_indptr_host, const int32_t* kv_indptr_host, const int32_t* last_page_len_host,
                void* o, const popcorn::Workspace& ws, cudaStream_t stream) {
  using Params = BatchPrefillPagedParams<DType, DType, DType, IdType>;
  using Variant = DefaultAttention</*use_logits_soft_cap=*/false>;
  KvTables tables;
  cudaError_t err = stage_kv_tables(batch, page_size, kv_indptr_host, last_page_len_host, ws, &tables);
  if (err != cudaSuccess) return err;
  // page_size 1: the page table already lists one row per token (the wrapper plans with it as is).
  const IdType* plan_kv_indptr = page_size == 1 ? kv_indptr_host : tables.indptr_host;
  const uint32_t total_rows = static_cast<uint32_t>(qo_indptr_host[batch]);
  PrefillPlanSM90Info plan;
  err = PrefillSM90Plan<IdType>(ws.float_buf, popcorn::kFloatBytes, ws.int_buf, ws.pinned, popcorn::kIntBytes, plan,
                                const_cast<IdType*>(qo_indptr_host), const_cast<IdType*>(plan_kv_indptr),
                                tables.lens_host, total_rows, batch, heads_qo, heads_kv, kHeadDim, kHeadDim,
                                page_size, /*causal=*/true, /*enable_cuda_graph=*/false,
                                /*sizeof_dtype_o=*/sizeof(DType), stream);
  if (err != cudaSuccess) return err;

  IdType* sparse_indices = const_cast<IdType*>(kv_indices);
  if (page_size != 1) {
    size_t lens_bytes = reinterpret_cast<char*>(tables.indptr_host) - reinterpret_cast<char*>(tables.lens_host);
    size_t staged = lens_bytes + sizeof(IdType) * (batch + 1);
    if ((err = cudaMemcpyAsync(tables.lens_dev, tables.lens_host, staged, cudaMemcpyHostToDevice, stream)) !=
        cudaSuccess)
      return err;
    // The wrapper divides the page and row strides by the row stride: offsets count kv rows.
    err = BlockSparseIndicesToVectorSparseOffset<IdType>(const_cast<IdType*>(kv_indices), const_cast<IdType*>(kv_indptr),
                                                         tables.offsets_dev, tables.indptr_dev, tables.lens_dev,
                                                         /*stride_block=*/page_size, /*stride_n=*/1, batch, page_size,
                                                         stream);
    if (err != cudaSuccess) return err;
    sparse_indices = tables.offsets_dev;
  }

  const int64_t q_row = static_cast<int64_t>(heads_qo) * kHeadDim;
  const int64_t kv_row = static_cast<int64_t>(heads_kv) * kHeadDim;  // stride of a token in NHD pages
  Params params = {};
  params.q_ptr = static_cast<DType*>(const_cast<void*>(q));
  params.k_ptr = static_cast<DType*>(const_cast<void*>(k_pages));
  params.v_ptr = static_cast<DType*>(const_cast<void*>(v_pages));
  params.o_ptr = static_cast<DType*>(o);
  params.lse_ptr = nullptr;
  params.q_stride_n = q_row;
  params.q_stride_h = kHeadDim;
  params.o_stride_n = q_row;
  params.o_stride_h = kHeadDim;
  params.k_stride_n = kv_row;
  params.k_stride_h = kHeadDim;
  params.v_stride_n = kv_row;
  params.v_stride_h = kHeadDim;
  params.nnz_qo = total_rows;
  params.num_qo_heads = heads_qo;
  params.num_kv_heads = heads_kv;
  params.group_size = heads_qo / heads_kv;
  params.page_size = page_size;
  params.window_left = -1;
  params.causal = true;
  params.additional_params.logits_soft_cap = 0.0f;
  params.additional_params.sm_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  void* int_buf = ws.int_buf;
  params.qo_tile_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.qo_tile_indices_offset);
  params.qo_indptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.qo_indptr_offset);
  params.kv_indptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.kv_indptr_offset);
  params.qo_lens = GetPtrFromBaseOffset<IdType>(int_buf, plan.qo_len_offset);
  params.kv_lens = GetPtrFromBaseOffset<IdType>(int_buf, plan.kv_len_offset);
  params.head_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.head_indices_offset);
  params.work_indptr = GetPtrFromBaseOffset<IdType>(int_buf, plan.work_indptr_offset);
  params.batch_indices = GetPtrFromBaseOffset<IdType>(int_buf, plan.batch_indices_offset);
  params.kv_indices = sparse_indices;

  if (plan.same_schedule_for_all_heads) {
    return BatchPrefillWithPagedKVCacheDispatched<kHeadDim, kHeadDim, MaskMode::kCausal,
                                                  /*LEFT_SLIDING_WINDOW=*/false,
                                                  /*SAME_SCHEDULE_FOR_ALL_HEADS=*/true, Variant, Params>(
        params, kEnablePdl, stream);
  }
  return BatchPrefillWithPagedKVCacheDispatched<kHeadDim, kHeadDim, MaskMode::kCausal, /*LEFT_SLIDING_WINDOW=*/false,
                                                /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false, Variant, Params>(
      params, kEnablePdl, stream);
}

}  // namespace

extern "C" int popcorn_paged_prefill(int batch, int heads_qo, int heads_kv, int head_dim, int page_size,
                                     const void* q, const int32_t* qo_indptr, const void* k_pages,
                                     const void* v_pages, const int32_t* kv_indptr, const int32_t* kv_indices,
                                     const int32_t* last_page_len, const int32_t* qo_indptr_host,
                                     const int32_t* kv_indptr_host, const int32_t* last_page_len_host, void* o,
                                     void* workspace, size_t workspace_bytes, int dtype_bf16, cudaStream_t stream) {
  (void)qo_indptr;      // the SM90 schedule carries each work item's query offset and length
  (void)last_page_len;  // kv lengths come from the host tables
  if (head_dim != static_cast<int>(kHeadDim) || heads_kv <= 0 || heads_qo % heads_kv != 0 || batch <= 0)
    return static_cast<int>(cudaErrorInvalidValue);
  popcorn::Workspace ws;
  cudaError_t err = popcorn::acquire(workspace, workspace_bytes, &ws);
  if (err != cudaSuccess) return static_cast<int>(err);
  try {  // FlashInfer reports planning errors by throwing
    err = dtype_bf16 ? run<cutlass::bfloat16_t>(batch, heads_qo, heads_kv, page_size, q, k_pages, v_pages, kv_indptr,
                                                kv_indices, qo_indptr_host, kv_indptr_host, last_page_len_host, o,
                                                ws, stream)
                     : run<cutlass::half_t>(batch, heads_qo, heads_kv, page_size, q, k_pages, v_pages, kv_indptr,
                                            kv_indices, qo_indptr_host, kv_indptr_host, last_page_len_host, o, ws,
                                            stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    err = cudaErrorLaunchFailure;
  }
  cudaError_t released = popcorn::release(stream);  // after every copy out of the page-locked buffer
  if (err != cudaSuccess) return static_cast<int>(err);
  if (released != cudaSuccess) return static_cast<int>(released);
  return static_cast<int>(cudaPeekAtLastError());
}
