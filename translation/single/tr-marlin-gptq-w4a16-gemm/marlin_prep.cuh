// PopcornBench glue (not upstream code): the layout steps vLLM runs in PyTorch (not in its
// CUDA sources) when it loads GPTQ/AWQ weights for Marlin and Machete, as small kernels, so
// the adapters can take the task's neutral GPTQ layout at every call. Shared by the Marlin
// tasks (tr-marlin-gptq-w4a16-gemm, tr-marlin-awq-w4a16-zp-gemm).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace popcorn {

// vLLM marlin_utils.marlin_permute_scales for group_size < K:
//   s.reshape(-1, 64)[:, scale_perm] with scale_perm[8 * i + j] = i + 8 * j.
// Also the column order marlin_zero_points applies before packing (same permutation).
// The source index of output element `idx` (index math shared with the CPU test).
__host__ __device__ inline int64_t scale_perm_source(int64_t idx) {
  int col = static_cast<int>(idx % 64);
  return idx - col + (col / 8 + 8 * (col % 8));
}

template <typename T>
__global__ void marlin_permute_groups64(const T* __restrict__ in, T* __restrict__ out, int64_t numel) {
  int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (idx >= numel) return;
  out[idx] = in[scale_perm_source(idx)];
}

template <typename T>
inline void launch_marlin_permute_scales(const T* in, T* out, int64_t numel, cudaStream_t stream) {
  int threads = 256;
  marlin_permute_groups64<T><<<static_cast<unsigned>((numel + threads - 1) / threads), threads, 0, stream>>>(in, out,
                                                                                                          numel);
}

// rows x cols uint32 row-major -> cols x rows row-major (vLLM: x.t().contiguous() before
// machete_prepack_B, which wants the packed weights K-contiguous per output column).
__global__ void transpose_u32(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int rows, int cols) {
  __shared__ uint32_t tile[32][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    int r = blockIdx.y * 32 + dy;
    if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(int64_t)r * cols + c];
  }
  __syncthreads();
  int r = blockIdx.y * 32 + threadIdx.x;
  for (int dx = threadIdx.y; dx < 32; dx += blockDim.y) {
    int cc = blockIdx.x * 32 + dx;
    if (cc < cols && r < rows) out[(int64_t)cc * rows + r] = tile[threadIdx.x][dx];
  }
}

inline void launch_transpose_u32(const uint32_t* in, uint32_t* out, int rows, int cols, cudaStream_t stream) {
  dim3 grid((cols + 31) / 32, (rows + 31) / 32);
  transpose_u32<<<grid, dim3(32, 8), 0, stream>>>(in, out, rows, cols);
}

// 4-bit zero points packed 8 per uint32 along N (vLLM pack_cols: nibble t of word w holds
// column 8w + t), rows of N/8 words.
__host__ __device__ inline uint32_t nibble(const uint32_t* __restrict__ packed, int64_t row_words, int64_t row,
                                           int col) {
  return (packed[row * row_words + col / 8] >> (4 * (col % 8))) & 0xFu;
}

// vLLM marlin_utils.marlin_zero_points for 4 bits, on zero points packed by pack_cols: permute
// the columns as the scales (groups of 64), interleave groups of 8 as [0, 2, 4, 6, 1, 3, 5, 7]
// (Marlin's dequantization order), pack_cols again. One output word (shared with the CPU test).
__host__ __device__ inline uint32_t marlin_zero_point_word(const uint32_t* __restrict__ in, int64_t row_words,
                                                           int64_t row, int word) {
  const int interleave[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  uint32_t packed = 0;
  for (int t = 0; t < 8; ++t) {
    int permuted = 8 * word + interleave[t];  // the column of the permuted row this nibble takes
    packed |= nibble(in, row_words, row, static_cast<int>(scale_perm_source(permuted))) << (4 * t);
  }
  return packed;
}

__global__ void marlin_zero_points_u4(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int groups,
                                      int n) {
  int64_t words = n / 8;
  int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (idx >= groups * words) return;
  out[idx] = marlin_zero_point_word(in, words, idx / words, static_cast<int>(idx % words));
}

inline void launch_marlin_zero_points_u4(const uint32_t* in, uint32_t* out, int groups, int n, cudaStream_t stream) {
  int64_t total = static_cast<int64_t>(groups) * (n / 8);
  marlin_zero_points_u4<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(in, out, groups, n);
}

// Machete's zero points (vLLM test_machete_mm.maybe_convert_zeropoints): pre-scaled and
// negated in the scale type, z' = -(s * z), so that W = q * s + z'.
__global__ void machete_prescaled_zeros(const uint32_t* __restrict__ zeros, const __half* __restrict__ scales,
                                        __half* __restrict__ out, int groups, int n) {
  int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(groups) * n) return;
  int64_t row = idx / n;
  int col = static_cast<int>(idx % n);
  __half z = __uint2half_rn(nibble(zeros, n / 8, row, col));
  out[idx] = __hneg(__hmul(scales[idx], z));
}

inline void launch_machete_prescaled_zeros(const uint32_t* zeros, const __half* scales, __half* out, int groups, int n,
                                           cudaStream_t stream) {
  int64_t total = static_cast<int64_t>(groups) * n;
  machete_prescaled_zeros<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(zeros, scales, out, groups,
                                                                                          n);
}

inline int current_device() {
  int dev = 0;
  cudaGetDevice(&dev);
  return dev;
}

}  // namespace popcorn
