// PopcornBench shim (our code, not PyTorch): the torch/c10 names that vLLM's layernorm and
// MoE-finalize sources use, for adapters that launch vLLM's kernels directly.
//
// vLLM's .cu files define torch-facing host wrappers next to their kernels. The harness
// never calls those wrappers (our adapters launch the kernels with raw pointers, the
// launch configuration copied from the wrapper), but they must compile, and linking
// libtorch would tie a task library to one torch build. So:
//   - c10::Half / c10::BFloat16 are 2-byte storage types with float conversions and the
//     arithmetic vLLM's generic (non-vectorized) kernels use; the vectorized kernels only
//     use them as tags for vLLM's _typeConvert (which maps them to __half/__nv_bfloat16);
//   - torch::Tensor answers the size/stride/pointer queries of the wrappers;
//   - the AT_DISPATCH_* switch expands to nothing: wrappers dispatch to no kernel, so no
//     kernel is instantiated from them (only what the adapters launch is compiled).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cstddef>
#include <stdexcept>

namespace c10 {

enum class ScalarType : int8_t { Byte, Char, Short, Int, Long, Half, Float, Double, BFloat16, Float8_e5m2,
                                 Float8_e4m3fn, Bool };

struct alignas(2) Half {
  __half x;
  Half() = default;
  __host__ __device__ Half(float f) : x(__float2half(f)) {}
  __host__ __device__ operator float() const { return __half2float(x); }
  __host__ __device__ Half& operator+=(const Half& o) { return *this = Half(float(*this) + float(o)); }
};

struct alignas(2) BFloat16 {
  __nv_bfloat16 x;
  BFloat16() = default;
  __host__ __device__ BFloat16(float f) : x(__float2bfloat16(f)) {}
  __host__ __device__ operator float() const { return __bfloat162float(x); }
  __host__ __device__ BFloat16& operator+=(const BFloat16& o) { return *this = BFloat16(float(*this) + float(o)); }
};

__host__ __device__ inline Half operator*(Half a, Half b) { return Half(float(a) * float(b)); }
__host__ __device__ inline BFloat16 operator*(BFloat16 a, BFloat16 b) { return BFloat16(float(a) * float(b)); }

struct Device {
  int index() const { return 0; }
};

}  // namespace c10

namespace at {

using c10::ScalarType;

class Tensor {
 public:
  void* data_ptr() const { return nullptr; }
  template <typename T>
  T* data_ptr() const { return nullptr; }
  int64_t size(int64_t) const { return 0; }
  int64_t stride(int64_t) const { return 0; }
  int64_t numel() const { return 0; }
  bool is_contiguous() const { return true; }
  ScalarType scalar_type() const { return ScalarType::Float; }
  c10::Device device() const { return {}; }
};

inline c10::Device device_of(const Tensor& t) { return t.device(); }

namespace cuda {
struct OptionalCUDAGuard {
  explicit OptionalCUDAGuard(c10::Device) {}
};
inline cudaStream_t getCurrentCUDAStream(int = -1) { return nullptr; }
}  // namespace cuda

}  // namespace at

namespace torch {
using at::Tensor;
}

#define TORCH_CHECK(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) throw std::runtime_error("torch_lite shim: check failed: " #cond); \
  } while (0)

// Wrappers dispatch to no kernel (see above).
#define AT_DISPATCH_SWITCH(TYPE, NAME, ...)

// vLLM 0.10 targets CUDA 12 and reduces with cub::Sum, which CUDA 13's CCCL 3 removed
// (use cuda::std::plus); the same functor, for the kernels that name it.
#include <cub/version.cuh>
#if CUB_VERSION >= 300000
namespace cub {
struct Sum {
  template <typename T>
  __host__ __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a + b; }
};
}  // namespace cub
#endif
