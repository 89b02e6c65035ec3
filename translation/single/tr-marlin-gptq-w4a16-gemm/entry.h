// PopcornBench glue (not upstream code): the entry point of tr-marlin-gptq-w4a16-gemm.
//
// C = A @ W, W dequantized from 4-bit GPTQ weights with a bias of 8 and fp16 group scales:
//   W[p, j] = (q(p, j) - 8) * scales[p / 128, j]      (group size 128 along K)
//   C[i, j] = fp16( sum_p A[i, p] * W[p, j] )          (fp32 accumulation)
// A: M x K fp16 row-major (leading dimension K).
// Q: the weights in GPTQ's checkpoint layout: K/8 x N uint32 row-major; bits 4*t .. 4*t+3
//    of Q[r, j] hold q(8*r + t, j), an unsigned value in 0..15 (t = 0 is the lowest nibble).
// scales: K/128 x N fp16 row-major.
// C: M x N fp16 row-major (leading dimension N).
// N is a multiple of 256, K a multiple of 128, M >= 1 is arbitrary. All pointers are device
// pointers, 16-byte aligned. The weights arrive in this layout at every call: a kernel that
// wants another layout (Marlin's tiles, or one made for Hopper's tensor cores) converts them
// in the call, as the A100 adapter does. Returns a cudaError_t value (0 = success); launches
// on `stream`.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" int popcorn_w4a16_gemm(int m, int n, int k, const void* A, const uint32_t* Q, const void* scales, void* C,
                                  cudaStream_t stream);
