// PopcornBench glue (not upstream code): the entry point of tr-fa2-bwd.
//
// Multi-head attention backward, fp16, no dropout, scale 1/sqrt(head_dim), per batch b and head h:
//   S = Q K^T / sqrt(head_dim)  (with causal = 1, S[i, j] = -inf for j > i)
//   P = exp(S - lse[:, None]),  O = P V   (the forward, already run: O and lse are inputs)
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
//   dQ = dS K / sqrt(head_dim),  dK = dS^T Q / sqrt(head_dim)
// Q, K, V, O, dO, dQ, dK, dV: [batch, seqlen, heads, head_dim] fp16, contiguous (FlashAttention's
//   layout: element (b, s, h, d) at ((b * seqlen + s) * heads + h) * head_dim + d).
// lse: [batch, heads, seqlen] fp32, contiguous: the natural-log log-sum-exp of the scaled scores
//   of each query row, as the forward returns it (FlashAttention's softmax_lse).
// head_dim is 64 or 128; seqlen is a multiple of 8, and of 64 when causal = 1, otherwise arbitrary
//   (not a multiple of any tile). Q, K, V, O, dO and lse are only read; dQ, dK, dV hold garbage on
//   entry and must be written whole.
// No workspace is passed: an implementation keeps whatever device scratch it needs (fp32 dQ
//   accumulators, rowsum(dO * O)) allocated across calls, as both harness adapters do; the first
//   call of a shape may allocate, later calls of the same or smaller shapes must not.
// Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>

extern "C" int popcorn_fa_bwd(int batch, int seqlen, int heads, int head_dim, const void* Q, const void* K,
                              const void* V, const void* O, const void* dO, const float* lse, void* dQ, void* dK,
                              void* dV, int causal, cudaStream_t stream);
