// PopcornBench glue (not upstream code, not PyTorch): the few torch/ATen names vLLM's CUDA
// sources use around their kernels, over raw device pointers.
//
// vLLM's host wrappers take torch::Tensor arguments, read sizes, strides, dtypes and data
// pointers from them, allocate CUTLASS workspaces with torch::empty and launch on
// at::cuda::getCurrentCUDAStream(). Linking libtorch into a task library would tie it to
// one torch build; this header gives those calls the same meaning without it:
//   - popcorn::torch_view(ptr, dtype, sizes, strides) wraps a device buffer as a Tensor;
//   - torch::empty returns memory from a per-process pool that grows and is kept, so
//     no allocation is timed with the kernel (vLLM's caching allocator behaves the same);
//   - the current stream is the one the entry point was given (popcorn::StreamScope).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace c10 {

enum class ScalarType : int8_t { Byte, Char, Short, Int, Long, Half, Float, Double, BFloat16, Float8_e4m3fn, Bool };

inline const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::BFloat16: return "BFloat16";
    case ScalarType::Float8_e4m3fn: return "Float8_e4m3fn";
    case ScalarType::Bool: return "Bool";
  }
  return "Unknown";
}
inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << toString(t); }

inline size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Float8_e4m3fn: case ScalarType::Bool: return 1;
    case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16: return 2;
    case ScalarType::Int: case ScalarType::Float: return 4;
    case ScalarType::Long: case ScalarType::Double: return 8;
  }
  return 1;
}

struct Device {
  int index_ = 0;
  int index() const { return index_; }
  bool is_cuda() const { return true; }
};

}  // namespace c10

namespace popcorn {

// The stream the entry point was called with; at::cuda::getCurrentCUDAStream() returns it.
inline cudaStream_t& current_stream() {
  static thread_local cudaStream_t stream = nullptr;
  return stream;
}

struct StreamScope {
  cudaStream_t saved;
  explicit StreamScope(cudaStream_t s) : saved(current_stream()) { current_stream() = s; }
  ~StreamScope() { current_stream() = saved; }
};

// Device memory handed out by torch::empty: one buffer, grown on demand and never freed
// while the process lives. Every torch::empty of one call gets its own slice; a call
// that needs more grows the buffer first (cudaMalloc outside the kernels it feeds).
struct Pool {
  char* base = nullptr;
  size_t capacity = 0;
  size_t used = 0;
};
inline Pool& pool() {
  static Pool p;
  return p;
}
// Called by the adapters at the start of every entry-point call.
inline void reset_pool() { pool().used = 0; }
inline void* pool_alloc(size_t bytes) {
  Pool& p = pool();
  size_t need = p.used + ((bytes + 255) / 256) * 256;
  if (need > p.capacity) {
    // Slices handed out earlier in this call stay valid only if nothing was handed out yet.
    if (p.used != 0) throw std::runtime_error("popcorn torch shim: workspace pool grown mid-call");
    if (p.base) {
      cudaDeviceSynchronize();
      cudaFree(p.base);
    }
    size_t cap = need < (1u << 20) ? (1u << 20) : need * 2;
    if (cudaMalloc(&p.base, cap) != cudaSuccess) {
      p.base = nullptr;
      p.capacity = 0;
      throw std::runtime_error("popcorn torch shim: cudaMalloc of the workspace pool failed");
    }
    p.capacity = cap;
  }
  void* out = p.base + p.used;
  p.used = need;
  return out;
}

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace popcorn

namespace torch {

using c10::ScalarType;
using Device = c10::Device;
using Dtype = c10::ScalarType;
constexpr ScalarType kUInt8 = ScalarType::Byte;
constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kInt8 = ScalarType::Char;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kInt16 = ScalarType::Short;
constexpr ScalarType kInt32 = ScalarType::Int;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kInt64 = ScalarType::Long;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kFloat16 = ScalarType::Half;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kFloat32 = ScalarType::Float;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kFloat64 = ScalarType::Double;
constexpr ScalarType kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;
constexpr ScalarType kBool = ScalarType::Bool;

constexpr int kMaxDims = 4;

// A view of a device buffer: what vLLM's wrappers read from a torch::Tensor.
class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, ScalarType dtype, std::initializer_list<int64_t> sizes, std::initializer_list<int64_t> strides,
         int device = 0)
      : data_(data), dtype_(dtype), device_{device} {
    for (int64_t s : sizes) sizes_[dim_++] = s;
    int i = 0;
    for (int64_t s : strides) strides_[i++] = s;
    if (i == 0) {  // contiguous
      int64_t step = 1;
      for (int d = dim_ - 1; d >= 0; --d) {
        strides_[d] = step;
        step *= sizes_[d];
      }
    }
  }

  void* data_ptr() const { return data_; }
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(data_); }
  template <typename T>
  T* mutable_data_ptr() const { return static_cast<T*>(data_); }
  template <typename T>
  const T* const_data_ptr() const { return static_cast<const T*>(data_); }
  int64_t dim() const { return dim_; }
  int64_t size(int64_t d) const { return sizes_[d < 0 ? d + dim_ : d]; }
  int64_t stride(int64_t d) const { return strides_[d < 0 ? d + dim_ : d]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < dim_; ++d) n *= sizes_[d];
    return n;
  }
  ScalarType dtype() const { return dtype_; }
  ScalarType scalar_type() const { return dtype_; }
  size_t element_size() const { return c10::elementSize(dtype_); }
  Device device() const { return device_; }
  int get_device() const { return device_.index(); }
  bool is_cuda() const { return true; }
  bool is_contiguous() const {
    int64_t step = 1;
    for (int d = dim_ - 1; d >= 0; --d) {
      if (sizes_[d] != 1 && strides_[d] != step) return false;
      step *= sizes_[d];
    }
    return true;
  }

 private:
  void* data_ = nullptr;
  ScalarType dtype_ = ScalarType::Float;
  Device device_{};
  int dim_ = 0;
  int64_t sizes_[kMaxDims] = {};
  int64_t strides_[kMaxDims] = {};
};

class TensorOptions {
 public:
  TensorOptions dtype(ScalarType t) const { TensorOptions o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { TensorOptions o = *this; o.device_ = d; return o; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }

 private:
  ScalarType dtype_ = ScalarType::Float;
  Device device_{};
};

inline Tensor empty(int64_t numel, const TensorOptions& options) {
  void* p = popcorn::pool_alloc(static_cast<size_t>(numel) * c10::elementSize(options.dtype()));
  return Tensor(p, options.dtype(), {numel}, {1}, options.device().index());
}
inline Tensor empty(std::initializer_list<int64_t> sizes, const TensorOptions& options) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  Tensor flat = empty(n, options);
  return Tensor(flat.data_ptr(), options.dtype(), sizes, {}, options.device().index());
}

}  // namespace torch

namespace at {
using torch::Tensor;
namespace cuda {
inline cudaStream_t getCurrentCUDAStream(int /*device*/ = -1) { return popcorn::current_stream(); }
}  // namespace cuda
}  // namespace at

#define TORCH_CHECK(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      throw std::runtime_error(popcorn::concat("Expected " #cond " to be true. ", ##__VA_ARGS__)); \
    }                                                                                            \
  } while (0)
