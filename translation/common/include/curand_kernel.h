// PopcornBench shim (our code, not NVIDIA's): the part of the cuRAND device API that
// CUTLASS's reference fill helpers (cutlass/util/reference/device/tensor_fill.h) name.
//
// Upstream examples include those helpers for their own main(), which the harness
// never calls; the CPU build machines have no cuRAND headers (a 60 MB wheel). This
// header makes such files compile everywhere with one behaviour: a counter-based
// splitmix64 stream, uniform in (0, 1], normals by Box-Muller. It is not cuRAND's
// XORWOW sequence, and nothing the harness scores depends on it.
#pragma once
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

struct popcorn_curand_state {
  uint64_t counter;
};
typedef popcorn_curand_state curandState_t;
typedef popcorn_curand_state curandState;

__host__ __device__ inline uint64_t popcorn_splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__host__ __device__ inline void curand_init(unsigned long long seed, unsigned long long subsequence,
                                            unsigned long long offset, curandState_t* state) {
  state->counter = popcorn_splitmix64(seed ^ popcorn_splitmix64(subsequence)) + offset;
}

__host__ __device__ inline uint64_t popcorn_curand_next(curandState_t* state) {
  return popcorn_splitmix64(state->counter++);
}

__host__ __device__ inline float curand_uniform(curandState_t* state) {
  return (static_cast<float>(popcorn_curand_next(state) >> 40) + 1.0f) * (1.0f / 16777216.0f);
}

__host__ __device__ inline double curand_uniform_double(curandState_t* state) {
  return (static_cast<double>(popcorn_curand_next(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

__host__ __device__ inline double curand_normal_double(curandState_t* state) {
  double u1 = curand_uniform_double(state), u2 = curand_uniform_double(state);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

__host__ __device__ inline float curand_normal(curandState_t* state) {
  return static_cast<float>(curand_normal_double(state));
}
