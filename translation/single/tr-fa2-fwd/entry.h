// PopcornBench glue (not upstream code): the entry point of tr-fa2-fwd.
//
// Multi-head attention forward, fp16, no dropout, scale 1/sqrt(head_dim):
//   S = Q K^T / sqrt(head_dim)  (per batch b and head h; with causal = 1, S[i, j] = -inf for j > i)
//   O = softmax(S) V,  lse[i] = log(sum_j exp(S[i, j]))  (natural log)
// Q, K, V, O: [batch, seqlen, heads, head_dim] fp16, contiguous (FlashAttention's layout:
//   element (b, s, h, d) at ((b * seqlen + s) * heads + h) * head_dim + d).
// lse: [batch, heads, seqlen] fp32, contiguous.
// head_dim is 128; seqlen is a multiple of 8, otherwise arbitrary (not a multiple of any tile).
// Returns a cudaError_t value (0 = success); launches on `stream`.
#pragma once
#include <cuda_runtime.h>

extern "C" int popcorn_fa_fwd(int batch, int seqlen, int heads, int head_dim, const void* Q, const void* K,
                              const void* V, void* O, float* lse, int causal, cudaStream_t stream);
