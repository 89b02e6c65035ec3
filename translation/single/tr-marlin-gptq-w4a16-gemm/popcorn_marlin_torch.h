// PopcornBench glue (not upstream code, not PyTorch): the torch/ATen/c10 names that vLLM's
// Marlin (gptq_marlin.cu, gptq_marlin_repack.cu, awq_marlin_repack.cu) and Machete
// (machete_*.cuh, generated/machete_mm_dispatch.cu and impl files) host code uses around
// their kernels, over raw device pointers. Shared by the two Marlin tasks.
//
// translation/common/torch_shim covers vLLM's CUTLASS w8a8 code; Marlin and Machete also
// need Tensor::sizes(), Tensor::t(), dtype().itemsize(), empty_like, c10::Half/BFloat16
// tags and the registration macros, so these tasks carry this self-contained variant:
//   - a Tensor is a view (pointer, dtype, up to 4 sizes and strides) of a device buffer;
//   - torch::empty takes memory from a per-process pool that grows and is kept, so no
//     cudaMalloc is timed with the kernels (vLLM's caching allocator behaves the same);
//     popcorn::place_next_empty(ptr, bytes) makes the next torch::empty of exactly that
//     size return `ptr` (so a wrapper that allocates its output writes the caller's buffer);
//   - the current stream is the one the entry point was given (popcorn::StreamScope);
//   - TORCH_LIBRARY_IMPL blocks become uninstantiated templates (no op registry).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <tuple>
#include <variant>
#include <vector>

namespace c10 {

enum class ScalarType : int8_t { Byte, Char, Short, Int, Long, Half, Float, Double, BFloat16, Float8_e4m3fn,
                                 Float8_e8m0fnu, Bool };

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
    case ScalarType::Float8_e8m0fnu: return "Float8_e8m0fnu";
    case ScalarType::Bool: return "Bool";
  }
  return "Unknown";
}
inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << toString(t); }

inline size_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Bool:
    case ScalarType::Float8_e4m3fn: case ScalarType::Float8_e8m0fnu: return 1;
    case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16: return 2;
    case ScalarType::Int: case ScalarType::Float: return 4;
    case ScalarType::Long: case ScalarType::Double: return 8;
  }
  return 1;
}

// What Tensor::dtype() returns: a ScalarType that also answers itemsize().
struct Dtype {
  ScalarType type;
  constexpr Dtype(ScalarType t) : type(t) {}
  constexpr operator ScalarType() const { return type; }
  size_t itemsize() const { return elementSize(type); }
};
inline bool operator==(Dtype a, ScalarType b) { return a.type == b; }
inline bool operator!=(Dtype a, ScalarType b) { return a.type != b; }

// Storage tags: vLLM only names them in data_ptr<T>() and type maps.
struct alignas(2) Half { uint16_t x; };
struct alignas(2) BFloat16 { uint16_t x; };
struct Float8_e4m3fn { uint8_t x; };
struct Float8_e8m0fnu { uint8_t x; };

template <typename T>
struct CppTypeToScalarType;
template <> struct CppTypeToScalarType<Half> { static constexpr ScalarType value = ScalarType::Half; };
template <> struct CppTypeToScalarType<BFloat16> { static constexpr ScalarType value = ScalarType::BFloat16; };
template <> struct CppTypeToScalarType<float> { static constexpr ScalarType value = ScalarType::Float; };
template <> struct CppTypeToScalarType<int32_t> { static constexpr ScalarType value = ScalarType::Int; };
template <> struct CppTypeToScalarType<int8_t> { static constexpr ScalarType value = ScalarType::Char; };
template <> struct CppTypeToScalarType<uint8_t> { static constexpr ScalarType value = ScalarType::Byte; };

using SymInt = int64_t;
enum class MemoryFormat { Contiguous, Preserve };

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

// Device memory handed out by torch::empty: chunks that are kept while the process lives.
// Every torch::empty of one entry-point call gets its own slice; a call that needs more
// than the pool holds adds a chunk (earlier slices stay valid), and the next call starts
// from one merged chunk, so after the first call of a shape nothing is allocated.
struct Pool {
  std::vector<std::pair<char*, size_t>> chunks;  // (base, bytes)
  size_t used = 0;                               // in the last chunk
  size_t total = 0;
  void* placed = nullptr;  // see place_next_empty
  size_t placed_bytes = 0;
};
inline Pool& pool() {
  static Pool p;
  return p;
}
inline void add_chunk(size_t bytes) {
  char* base = nullptr;
  if (cudaMalloc(&base, bytes) != cudaSuccess) throw std::runtime_error("popcorn torch shim: cudaMalloc failed");
  pool().chunks.emplace_back(base, bytes);
  pool().total += bytes;
  pool().used = 0;
}
// Called by the adapters at the start of every entry-point call.
inline void reset_pool() {
  Pool& p = pool();
  if (p.chunks.size() > 1) {  // merge: the previous call's kernels are done with them after a sync
    size_t total = p.total;
    cudaDeviceSynchronize();
    for (auto& c : p.chunks) cudaFree(c.first);
    p.chunks.clear();
    p.total = 0;
    add_chunk(total);
  }
  p.used = 0;
  p.placed = nullptr;
}

// The frame of every entry point of the quantized tasks: the caller's stream current, the pool
// reset, and an exception (a shape a kernel rejects) returned as cudaErrorInvalidValue instead of
// crossing the C boundary; otherwise the launches' own error.
template <class Body>
int entry_call(cudaStream_t stream, Body&& body) {
  StreamScope on(stream);
  reset_pool();
  try {
    body();
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
// The next torch::empty of exactly `bytes` bytes returns `ptr` (the caller's output buffer).
inline void place_next_empty(void* ptr, size_t bytes) {
  pool().placed = ptr;
  pool().placed_bytes = bytes;
}
inline void* pool_alloc(size_t bytes) {
  Pool& p = pool();
  if (p.placed && bytes == p.placed_bytes) {
    void* out = p.placed;
    p.placed = nullptr;
    return out;
  }
  size_t need = ((bytes + 255) / 256) * 256;
  if (p.chunks.empty() || p.used + need > p.chunks.back().second) add_chunk(need < (4u << 20) ? (4u << 20) : 2 * need);
  void* out = p.chunks.back().first + p.used;
  p.used += need;
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
constexpr ScalarType kUInt8 = ScalarType::Byte;
constexpr ScalarType kU8 = ScalarType::Byte;
constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kInt8 = ScalarType::Char;
constexpr ScalarType kChar = ScalarType::Char;
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

constexpr int kMaxDims = 4;

// What Tensor::sizes() returns: enough of IntArrayRef for rank checks.
struct IntArrayRef {
  const int64_t* data_;
  size_t size_;
  size_t size() const { return size_; }
  int64_t operator[](size_t i) const { return data_[i]; }
};

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
    if (i == 0) set_contiguous_strides();
  }

  void* data_ptr() const { return data_; }
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(data_); }
  void* mutable_data_ptr() const { return data_; }
  template <typename T>
  T* mutable_data_ptr() const { return static_cast<T*>(data_); }
  const void* const_data_ptr() const { return data_; }
  template <typename T>
  const T* const_data_ptr() const { return static_cast<const T*>(data_); }
  int64_t dim() const { return dim_; }
  int64_t size(int64_t d) const { return sizes_[d < 0 ? d + dim_ : d]; }
  int64_t stride(int64_t d) const { return strides_[d < 0 ? d + dim_ : d]; }
  IntArrayRef sizes() const { return {sizes_, static_cast<size_t>(dim_)}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < dim_; ++d) n *= sizes_[d];
    return n;
  }
  c10::Dtype dtype() const { return dtype_; }
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
  // The transpose of a 2-D tensor (a view, as in torch).
  Tensor t() const {
    if (dim_ != 2) throw std::runtime_error("popcorn torch shim: t() of a tensor that is not 2-D");
    Tensor out = *this;
    std::swap(out.sizes_[0], out.sizes_[1]);
    std::swap(out.strides_[0], out.strides_[1]);
    return out;
  }
  // Same sizes, contiguous strides (what empty_like(..., Contiguous) allocates).
  Tensor contiguous_like(void* data) const {
    Tensor out = *this;
    out.data_ = data;
    out.set_contiguous_strides();
    return out;
  }

 private:
  void set_contiguous_strides() {
    int64_t step = 1;
    for (int d = dim_ - 1; d >= 0; --d) {
      strides_[d] = step;
      step *= sizes_[d];
    }
  }

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
inline Tensor empty_symint(std::initializer_list<int64_t> sizes, const TensorOptions& options) {
  return empty(sizes, options);
}
inline c10::Device device_of(const Tensor& t) { return t.device(); }  // found by ADL, as at::device_of

inline Tensor empty_like(const Tensor& like, const TensorOptions& /*unused*/, c10::MemoryFormat /*contiguous*/) {
  void* p = popcorn::pool_alloc(static_cast<size_t>(like.numel()) * like.element_size());
  return like.contiguous_like(p);
}

}  // namespace torch

namespace at {
using torch::Tensor;
using c10::ScalarType;
using c10::Half;
using c10::BFloat16;
using c10::Float8_e4m3fn;
using c10::Float8_e8m0fnu;
using c10::MemoryFormat;
using torch::kFloat;
using torch::kInt;
using torch::kHalf;
using torch::kBFloat16;
using torch::device_of;
namespace cuda {
inline cudaStream_t getCurrentCUDAStream(int /*device*/ = -1) { return popcorn::current_stream(); }
struct OptionalCUDAGuard {
  explicit OptionalCUDAGuard(c10::Device) {}
};
}  // namespace cuda
}  // namespace at

#define TORCH_CHECK(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      throw std::runtime_error(popcorn::concat("Expected " #cond " to be true. ", ##__VA_ARGS__)); \
    }                                                                                            \
  } while (0)
#define TORCH_CHECK_NOT_IMPLEMENTED(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)

// vLLM registers its wrappers with the torch op registry; here each registration block is a
// function template that is never instantiated (no registry, no libtorch).
#define POPCORN_CONCAT_(a, b) a##b
#define POPCORN_CONCAT(a, b) POPCORN_CONCAT_(a, b)
#define TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)                                           \
  template <typename PopcornLibrary>                                                       \
  [[maybe_unused]] static void POPCORN_CONCAT(popcorn_unused_registration_, __COUNTER__)( \
      PopcornLibrary & MODULE)
#define TORCH_LIBRARY(NAME, MODULE) TORCH_LIBRARY_IMPL(NAME, Def, MODULE)
