// PopcornBench glue: the A100 baseline of tr-flux-ag-gemm is Flux's GemmV2AGKernel
// (src/all_gather/gemm_v2_ag_kernel.hpp, sm80_all_gather_gemm.hpp) for sm80, bf16, RCR,
// intra-node, run as Flux's AGKernel op runs it (src/all_gather/ths_op/
// all_gather_gemm_kernel.cc, forward() in its all-to-all ring mode):
//   1. copy_local: this rank's A rows into its slot of its own gather buffer, its ready flag
//      raised by a stream memory write, then Flux's CUDA-IPC barrier (every rank's own slot
//      is in place before peers read it);
//   2. copy_all_to_all on a copy stream: each peer's slot pulled from that peer's buffer by
//      the copy engine, each followed by a stream write of that slot's ready flag;
//   3. at the same time, on `stream`, the CUTLASS 2.x GEMM over the whole gathered A: its
//      threadblock swizzle starts at this rank's own rows and every threadblock waits for
//      the ready flags of the rows of its tile (AGThreadblockSwizzleStreamKRankOffset);
//   4. reset_signals: `stream` joins the copy stream, the IPC barrier again (no rank refills
//      its slot while peers still read it), the flags zeroed.
// Hyper-parameters: Flux's sm80 TP8 NVLink tuning for bf16 RCR at 4096 x 1536 x 8192
// (config_ag_gemm_kernel_sm80_tp8_nnodes1.cu): stream-K in data-parallel mode, tile
// 128x128x64, warp 64x64x32, 4 stages, raster along M.
#include "entry.h"
#include <cuda.h>
#include <cute/container/tuple.hpp>
namespace bytedance::flux {
// flux.h defines this after the comparator that applies it to nested cute::tuples; host
// g++ >= 12 no longer finds it there, so it is declared first (same template, same namespace).
template <class... Ts>
constexpr bool operator<(cute::tuple<Ts...> const& lhs, cute::tuple<Ts...> const& rhs);
}  // namespace bytedance::flux
#include "all_gather/gemm_v2_ag_kernel.hpp"
#include "cuda/cudaipc_barrier_all.cu"

namespace {
using namespace bytedance::flux;
using namespace cute;

constexpr auto kMeta = make_gemm_meta(make_gemm_dtype_config(_BF16{}, _BF16{}, _Void{}, _BF16{}), _Sm80{},
                                      _AGKernel{}, _RCR{}, _GemmV2{});
constexpr auto kHParams = materialize_hparams(
    kMeta, make_gemm_hparams(make_gemm_v2_hparams(Shape<_64, _64, _32>{}, Shape<_16, _8, _16>{}, _StreamkDP{}),
                             Auto{}, Shape<_128, _128, _64>{}, _GemmStreamK{}, cute::_4{}, _RasterAlongM{}));
using Op = GemmV2AGKernel<std::decay_t<decltype(kMeta)>, std::decay_t<decltype(kHParams)>>;

// peer_signals: [0, 4096) Flux's barrier-all slots (one int per rank), then the ready flags
// (Flux's barrier_buffer: one int per rank's slot, MAX_NUM_SIGNAL = 64 of them).
constexpr size_t kFlagsOffset = 4096;
constexpr size_t kNumFlags = 64;

// Flux calls cuStreamWriteValue32_v2 through its dlopen stub of libcuda; build machines
// have no libcuda, so the same driver function is resolved through the runtime.
using WriteValue32 = CUresult(CUDAAPI*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct State {
  Op op;
  WriteValue32 write_value = nullptr;
  cudaStream_t cp_stream = nullptr;  // AGKernel's cp_streams[0], non-blocking (a pool stream)
  cudaEvent_t ready_event = nullptr;
  cudaEvent_t cp_event = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
State* state = nullptr;

cudaError_t init_state() {
  cudaError_t err;
  state = new State();
  cudaDriverEntryPointQueryResult status;
  err = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", reinterpret_cast<void**>(&state->write_value),
                                         12000, cudaEnableDefault, &status);
  if (err != cudaSuccess) return err;
  if (state->write_value == nullptr) return cudaErrorSymbolNotFound;
  if ((err = cudaStreamCreateWithFlags(&state->cp_stream, cudaStreamNonBlocking)) != cudaSuccess) return err;
  if ((err = cudaEventCreateWithFlags(&state->ready_event, cudaEventDisableTiming)) != cudaSuccess) return err;
  return cudaEventCreateWithFlags(&state->cp_event, cudaEventDisableTiming);
}

cudaError_t set_ready(int32_t* flags, int segment, cudaStream_t stream) {
  CUresult res = state->write_value(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flags + segment),
                                    1, CU_STREAM_WRITE_VALUE_DEFAULT);
  return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
}  // namespace

extern "C" int popcorn_ag_gemm(int rank, int world_size, int m, int n, int k, const void* A, const void* W,
                               void* const* peer_buffers, void* const* peer_signals, void* out,
                               cudaStream_t stream) {
  try {
    cudaError_t err;
    if (state == nullptr && (err = init_state()) != cudaSuccess) return static_cast<int>(err);
    int32_t* sync[kMaxWorldSize];
    for (int q = 0; q < world_size; ++q) sync[q] = static_cast<int32_t*>(peer_signals[q]);
    int32_t* flags = reinterpret_cast<int32_t*>(static_cast<char*>(peer_signals[rank]) + kFlagsOffset);
    char* gathered = static_cast<char*>(peer_buffers[rank]);
    const size_t chunk = static_cast<size_t>(m / world_size) * k * sizeof(cutlass::bfloat16_t);

    const AGKernelArguments args{.m = m, .n = n, .k = k, .rank = rank, .world_size = world_size, .nnodes = 1,
                                 .alpha = 1.0f, .beta = 0.0f, .input = const_cast<void*>(A),
                                 .input_buffer = gathered, .weight = W, .bias = nullptr, .output = out,
                                 .barrier_buffer = flags};
    const size_t need = state->op.get_workspace_size(args);
    if (need > state->workspace_bytes) {  // grows and is kept, as AGKernel's gemm_buffer
      if (state->workspace != nullptr) cudaFree(state->workspace);
      const size_t bytes = (need + 127) / 128 * 128;
      if ((err = cudaMalloc(&state->workspace, bytes)) != cudaSuccess) return static_cast<int>(err);
      state->workspace_bytes = bytes;
    }

    // 1. copy_local
    if ((err = cudaMemcpyAsync(gathered + rank * chunk, A, chunk, cudaMemcpyDefault, stream)) != cudaSuccess)
      return static_cast<int>(err);
    if ((err = set_ready(flags, rank, stream)) != cudaSuccess) return static_cast<int>(err);
    cudaipc_barrier_all_on_stream_impl(stream, sync, rank, world_size);
    if ((err = cudaEventRecord(state->ready_event, stream)) != cudaSuccess) return static_cast<int>(err);

    // 2. copy_all_to_all: pull every peer's slot
    if ((err = cudaStreamWaitEvent(state->cp_stream, state->ready_event)) != cudaSuccess) return static_cast<int>(err);
    for (int i = rank + 1; i < world_size + rank; ++i) {
      const int id = i % world_size;
      err = cudaMemcpyAsync(gathered + id * chunk, static_cast<const char*>(peer_buffers[id]) + id * chunk, chunk,
                            cudaMemcpyDefault, state->cp_stream);
      if (err != cudaSuccess) return static_cast<int>(err);
      if ((err = set_ready(flags, id, state->cp_stream)) != cudaSuccess) return static_cast<int>(err);
    }
    if ((err = cudaEventRecord(state->cp_event, state->cp_stream)) != cudaSuccess) return static_cast<int>(err);

    // 3. the GEMM, waiting on the ready flags tile by tile
    state->op.run(args, state->workspace, stream);

    // 4. reset_signals
    if ((err = cudaStreamWaitEvent(stream, state->cp_event)) != cudaSuccess) return static_cast<int>(err);
    cudaipc_barrier_all_on_stream_impl(stream, sync, rank, world_size);
    if ((err = cudaMemsetAsync(flags, 0, kNumFlags * sizeof(int32_t), stream)) != cudaSuccess)
      return static_cast<int>(err);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaPeekAtLastError());
}
