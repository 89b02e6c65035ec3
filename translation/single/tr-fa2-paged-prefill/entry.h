// PopcornBench glue (not upstream code): the entry point of tr-fa2-paged-prefill.
//
// Batched causal prefill attention over a paged KV cache with grouped-query attention.
// Request i (0 <= i < batch) owns
//   queries  rows qo_indptr[i] .. qo_indptr[i+1] of q (qo_len_i = qo_indptr[i+1] - qo_indptr[i] >= 1);
//   keys     the pages kv_indices[kv_indptr[i]] .. kv_indices[kv_indptr[i+1] - 1], in that order:
//            kv_len_i = (kv_indptr[i+1] - kv_indptr[i] - 1) * page_size + last_page_len[i],
//            1 <= last_page_len[i] <= page_size; qo_len_i <= kv_len_i. Slots past kv_len_i in the
//            last page hold stale values that must not be attended to.
// For query row t of request i (0-based in the request), query head h and kv head g = h / (heads_qo / heads_kv):
//   s_j = q[t] . k[j] / sqrt(head_dim) for keys j <= t + kv_len_i - qo_len_i (causal, aligned to the
//   end: the queries are the last qo_len_i positions of the sequence), o[t] = softmax(s) V.
// Layouts (row-major, contiguous):
//   q, o               [total_q, heads_qo, head_dim], total_q = qo_indptr[batch]
//   k_pages, v_pages   [num_pages, page_size, heads_kv, head_dim] (FlashInfer's NHD paged layout)
// Element type: fp16 (dtype_bf16 = 0) or bf16 (= 1) everywhere; fp32 accumulation.
// head_dim is 128; heads_qo = 32, heads_kv = 8; page_size is 1 or 16.
// qo_indptr, kv_indptr, kv_indices, last_page_len are device arrays (int32); the *_host arrays are
// identical copies in host memory (batch + 1, batch + 1 and batch entries) for host-side scheduling.
// `workspace` is a device buffer of workspace_bytes (144 MiB) the kernel may use freely.
// Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" int popcorn_paged_prefill(int batch, int heads_qo, int heads_kv, int head_dim, int page_size,
                                     const void* q, const int32_t* qo_indptr, const void* k_pages,
                                     const void* v_pages, const int32_t* kv_indptr, const int32_t* kv_indices,
                                     const int32_t* last_page_len, const int32_t* qo_indptr_host,
                                     const int32_t* kv_indptr_host, const int32_t* last_page_len_host, void* o,
                                     void* workspace, size_t workspace_bytes, int dtype_bf16, cudaStream_t stream);
