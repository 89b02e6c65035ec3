// PopcornBench glue: the A100 baseline of tr-flux-gemm-rs is Flux's GemmV2ReduceScatter
// (src/reduce_scatter/gemm_v2_reduce_scatter.hpp) for sm80, bf16, RCR, intra-node NVLink,
// no fused reduction, as Flux's GemmRS op runs it (src/reduce_scatter/ths_op/
// gemm_reduce_scatter.cc): a CUTLASS 2.x stream-K GEMM whose EVT epilogue stores each row
// block of the local product straight into its owner's IPC buffer (slot = source rank),
// then Flux's CUDA-IPC barrier (src/cuda/cudaipc_barrier_all.cu), then the sum over the
// world_size slots (a torch .sum(1) in Flux; our small kernel here, fp32 accumulation).
// Tile 128x128x32, 3 stages (Flux's sm80 TP8 NVLink tuning for bf16 RCR); the other
// hyper-parameters are Flux's defaults (materialize_hparams). Flux runs under torchrun, whose
// LOCAL_RANK / LOCAL_WORLD_SIZE its swizzle reads on every call; the adapter exports them
// (flux_local_ranks.h); without them every call after the first rotates its tiles by stack
// garbage (our diagnosis of the rank that hung in its second call on the H200).
#include "entry.h"
#include "flux_local_ranks.h"
#include <cute/container/tuple.hpp>
namespace bytedance::flux {
// flux.h defines this after the comparator that applies it to nested cute::tuples; host
// g++ >= 12 no longer finds it there, so it is declared first (same template, same namespace).
template <class... Ts>
constexpr bool operator<(cute::tuple<Ts...> const& lhs, cute::tuple<Ts...> const& rhs);
}  // namespace bytedance::flux
#include "reduce_scatter/gemm_v2_reduce_scatter.hpp"
#include "cuda/cudaipc_barrier_all.cu"

// A named namespace: nvcc's kernel stubs cannot name an anonymous one while Flux and CuTe
// (brought in by using-directives below) have anonymous namespaces of their own.
namespace popcorn_flux {
// out[i, j] = sum over q of slots[q][i, j]: the [world_size, m / world_size, n] buffer
// this rank received, reduced in fp32 (torch's bf16 sum does the same).
__global__ void sum_slots(const __nv_bfloat16* slots, __nv_bfloat16* out, int world_size, size_t slot_elems) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < slot_elems / 2;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 acc = make_float2(0.f, 0.f);
    for (int q = 0; q < world_size; ++q) {
      float2 v = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(slots + q * slot_elems)[i]);
      acc.x += v.x;
      acc.y += v.y;
    }
    reinterpret_cast<__nv_bfloat162*>(out)[i] = __float22bfloat162_rn(acc);
  }
}
}  // namespace popcorn_flux

namespace {
using namespace bytedance::flux;
using namespace cute;

constexpr auto kMeta = make_gemm_meta(make_gemm_dtype_config(_BF16{}, _BF16{}, _Void{}, _BF16{}), _Sm80{},
                                      _ReduceScatter{}, _RCR{}, _GemmV2{}, None{},
                                      make_reduce_scatter_meta(_False{}, _IntraNode{}));
constexpr auto kHParams =
    materialize_hparams(kMeta, make_gemm_hparams(Auto{}, Auto{}, Shape<_128, _128, _32>{}, Auto{}, cute::_3{}));
using Op = GemmV2ReduceScatter<std::decay_t<decltype(kMeta)>, std::decay_t<decltype(kHParams)>>;

constexpr size_t kFlagsOffset = 4096;  // peer_flags: [0, 4096) Flux's barrier-all slots, then the tile flags

struct State {
  Op op;
  cudaStream_t rs_stream = nullptr;  // Flux's GemmRS owns a reduce-scatter stream and an event
  cudaEvent_t event = nullptr;
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
    // Before anything builds Flux's swizzle (get_workspace_size does too): see flux_local_ranks.h.
    if (popcorn_flux_export_local_ranks(rank, world_size) != 0) return static_cast<int>(cudaErrorUnknown);
    if (state == nullptr) {
      state = new State();
      int least, greatest;
      if ((err = cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess) return static_cast<int>(err);
      err = cudaStreamCreateWithPriority(&state->rs_stream, cudaStreamNonBlocking, greatest);
      if (err != cudaSuccess) return static_cast<int>(err);
      if ((err = cudaEventCreate(&state->event)) != cudaSuccess) return static_cast<int>(err);
    }
    void* scatter[kMaxWorldSize];
    void* barriers[kMaxWorldSize];
    int32_t* sync[kMaxWorldSize];
    for (int q = 0; q < world_size; ++q) {
      scatter[q] = peer_buffers[q];
      sync[q] = static_cast<int32_t*>(peer_flags[q]);
      barriers[q] = static_cast<char*>(peer_flags[q]) + kFlagsOffset;
    }
    ReduceScatterArguments rs_args{.reduce_scatter_num_blocks = 12, .rs_stream = state->rs_stream,
                                   .event = state->event, .use_barrier_queue = false, .use_gemmk = false,
                                   .per_tile_flags = false, .use_cudaMemcpyAsync = false, .n_split = 1,
                                   .sub_world_size = 1, .opaque = nullptr, .use_1d_ring = false,
                                   .use_p2p_read = true};
    const GemmReduceScatterArguments args{.m = m, .n = n, .k = k_local, .rank = rank, .world_size = world_size,
                                          .nnodes = 1, .alpha = 1.0f, .beta = 0.0f, .input = A, .weight = W,
                                          .bias = nullptr, .output_scatter_ptrs = scatter,
                                          .local_reduce_buffer = nullptr, .barrier_ptrs = barriers,
                                          .avail_sms = -1, .reduce_scatter_args = rs_args};
    const size_t need = state->op.get_workspace_size(args);
    if (need > state->workspace_bytes) {  // grows and is kept, as GemmRS's gemm_buffer
      if (state->workspace != nullptr) cudaFree(state->workspace);
      const size_t bytes = (need + 127) / 128 * 128;
      if ((err = cudaMalloc(&state->workspace, bytes)) != cudaSuccess) return static_cast<int>(err);
      state->workspace_bytes = bytes;
    }
    state->op.run(args, state->workspace, stream);
    cudaipc_barrier_all_on_stream_impl(stream, sync, rank, world_size);
    const size_t slot_elems = static_cast<size_t>(m / world_size) * n;
    popcorn_flux::sum_slots<<<1024, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(peer_buffers[rank]),
                                        static_cast<__nv_bfloat16*>(out), world_size, slot_elems);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
