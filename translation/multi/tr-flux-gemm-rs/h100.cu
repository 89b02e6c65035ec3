// PopcornBench glue: the H100 reference of tr-flux-gemm-rs is Flux's GemmV3ReduceScatter
// (src/reduce_scatter/gemm_v3_reduce_scatter.hpp, sm90_gemm_tma_warpspecialized_
// cooperative_reduce_scatter.hpp) for sm90, bf16, RCR, intra-node, as Flux's GemmRS op runs
// it (src/reduce_scatter/ths_op/gemm_reduce_scatter.cc): one TMA warp-specialized
// cooperative GEMM kernel whose epilogue writes the local product into this rank's IPC
// buffer and raises per-tile flags, while its reduce-scatter DMA warps wait for the
// peers' flags, TMA-load the tiles of this rank's rows from every peer and reduce them
// into the rank's reduce buffer (here: `out` itself, which has the same [m / world_size,
// n] layout). Cluster 2x1x1; the other hyper-parameters are Flux's defaults
// (materialize_hparams), as the op registry instantiates them.
#include "entry.h"
#include <cute/container/tuple.hpp>
namespace bytedance::flux {
// flux.h defines this after the comparator that applies it to nested cute::tuples; host
// g++ >= 12 no longer finds it there, so it is declared first (same template, same namespace).
template <class... Ts>
constexpr bool operator<(cute::tuple<Ts...> const& lhs, cute::tuple<Ts...> const& rhs);
}  // namespace bytedance::flux
#include "reduce_scatter/gemm_v3_reduce_scatter.hpp"

// CUTLASS 3.5's TMA descriptors call the driver's cuTensorMapEncodeTiled directly; build
// machines have no libcuda to link, so this forwards to the driver through the runtime.
extern "C" CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType,
                                                   cuuint32_t tensorRank, void* globalAddress,
                                                   const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                                   const cuuint32_t* boxDim, const cuuint32_t* elementStrides,
                                                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                   CUtensorMapL2promotion l2Promotion,
                                                   CUtensorMapFloatOOBfill oobFill) {
  using Fn = CUresult(CUDAAPI*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Fn fn = nullptr;
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult status;
    cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000,
                                     cudaEnableDefault, &status);
  }
  return fn != nullptr ? fn(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim,
                            elementStrides, interleave, swizzle, l2Promotion, oobFill)
                       : CUDA_ERROR_NOT_FOUND;
}

namespace {
using namespace bytedance::flux;
using namespace cute;

constexpr auto kMeta = make_gemm_meta(make_gemm_dtype_config(_BF16{}, _BF16{}, _Void{}, _BF16{}), _Sm90{},
                                      _ReduceScatter{}, _RCR{}, _GemmV3{}, make_gemm_v3_meta(_False{}),
                                      make_reduce_scatter_meta(_False{}, _IntraNode{}));
constexpr auto kHParams = materialize_hparams(
    kMeta, make_gemm_hparams(make_gemm_v3_hparams(Shape<_2, _1, _1>{}), Auto{}, Auto{}, Auto{}, Auto{}, Auto{}));
using Op = GemmV3ReduceScatter<std::decay_t<decltype(kMeta)>, std::decay_t<decltype(kHParams)>>;

constexpr size_t kFlagsOffset = 4096;  // peer_flags: the tile flags after 4 KiB (as the A100 adapter)

struct State {
  Op op;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
State* state = nullptr;
}  // namespace

extern "C" int popcorn_gemm_rs(int rank, int world_size, int m, int n, int k_local, const void* A, const void* W,
                               void* const* peer_buffers, void* const* peer_flags, void* out, cudaStream_t stream) {
  using namespace bytedance::flux;
  try {
    cudaError_t err;
    if (state == nullptr) state = new State();
    void* scatter[kMaxWorldSize];
    void* barriers[kMaxWorldSize];
    for (int q = 0; q < world_size; ++q) {
      scatter[q] = peer_buffers[q];
      barriers[q] = static_cast<char*>(peer_flags[q]) + kFlagsOffset;
    }
    // sm90 intra-node: no separate reduce-scatter stream work and no barrier-all (GemmRS skips it)
    ReduceScatterArguments rs_args{.reduce_scatter_num_blocks = 12, .rs_stream = nullptr, .event = nullptr,
                                   .use_barrier_queue = false, .use_gemmk = false, .per_tile_flags = false,
                                   .use_cudaMemcpyAsync = false, .n_split = 1, .sub_world_size = 1,
                                   .opaque = nullptr, .use_1d_ring = false, .use_p2p_read = true};
    const GemmReduceScatterArguments args{.m = m, .n = n, .k = k_local, .rank = rank, .world_size = world_size,
                                          .nnodes = 1, .alpha = 1.0f, .beta = 0.0f, .input = A, .weight = W,
                                          .bias = nullptr, .output_scatter_ptrs = scatter,
                                          .local_reduce_buffer = out, .barrier_ptrs = barriers,
                                          .avail_sms = -1, .reduce_scatter_args = rs_args};
    const size_t need = state->op.get_workspace_size(args);
    if (need > state->workspace_bytes) {  // grows and is kept, as GemmRS's gemm_buffer
      if (state->workspace != nullptr) cudaFree(state->workspace);
      const size_t bytes = (need + 127) / 128 * 128;
      if ((err = cudaMalloc(&state->workspace, bytes)) != cudaSuccess) return static_cast<int>(err);
      state->workspace_bytes = bytes;
    }
    state->op.run(args, state->workspace, stream);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
