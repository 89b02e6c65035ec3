// PopcornBench glue: the H100 reference of tr-vllm-moe-finalize-allreduce is TRT-LLM's fused
// MoE-finalize + all-reduce + residual + RMSNorm kernel as shipped by FlashInfer
// (include/flashinfer/comm/trtllm_moe_allreduce_fusion.cuh,
// moefinalize_allreduce_fusion_kernel_oneshot_lamport): one kernel, one cluster per token,
// Lamport IPC buffers, DSMEM reduction of the norm, launched with PDL. The scales are
// read as fp32 (the kernel's ScaleType template argument), as vLLM's topk weights are.
//
// FlashInfer's workspace (trtllm_create_ipc_workspace_for_all_reduce_fusion) is laid over
// the harness's buffers: the Lamport triple buffer is peer_buffers. The Lamport buffers
// must hold -0.0 wherever no peer has written yet and their stride is the current
// shape's, so when the shape changes (first call included) every rank refills its own
// buffer with -0.0 and waits for all peers before anyone writes (our small IPC barrier
// kernel below; upstream does this once, at workspace creation, with a torch.distributed
// barrier). Upstream dispatches 2, 4, 8 and 16 ranks; the same kernel template is
// instantiated here for every world size from 2 to 8.
#include "entry.h"
#include <flashinfer/comm/trtllm_moe_allreduce_fusion.cuh>

namespace {
using namespace flashinfer::trtllm_moe_allreduce_fusion;
using T = __nv_bfloat16;

constexpr size_t kInitBarrierOffset = 32768;  // bytes into peer_flags: our barrier's slots
constexpr int kMaxRanks = 8;

struct PeerSlots {
  int* slot[kMaxRanks];
};

// Every rank tells every peer it arrived (release, system scope), then waits for all.
__global__ void ipc_barrier(PeerSlots peers, int rank, int world_size, int generation) {
  const int peer = threadIdx.x;
  if (peer < world_size) {
    int* to_peer = peers.slot[peer] + rank;
    asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(to_peer), "r"(generation) : "memory");
    int* mine = peers.slot[rank] + peer;
    int seen;
    do {
      asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(seen) : "l"(mine) : "memory");
    } while (seen < generation);
  }
}

__global__ void fill_negative_zero(uint32_t* words, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    words[i] = 0x80008000u;  // two bf16 -0.0
}

struct State {
  void** workspace = nullptr;  // device array: FlashInfer's 3 * world_size + 1 pointers
  int* flags = nullptr;        // [counter, two-shot flag, Lamport flag, Lamport stride (bytes), clear size]
  int tokens = -1, hidden = -1, generation = 0;
};
State state;

cudaError_t setup(int world_size, void* const* peer_buffers, void* const* peer_flags) {
  FLASHINFER_CUDA_CALL(cudaMalloc(&state.flags, 5 * sizeof(int)));
  FLASHINFER_CUDA_CALL(cudaMemset(state.flags, 0, 5 * sizeof(int)));
  void* host[3 * kMaxRanks + 1];
  for (int r = 0; r < world_size; ++r) {
    host[r] = peer_buffers[r];  // two-shot slots: unused by the one-shot MoE kernel
    host[world_size + r] = peer_flags[r];
    host[2 * world_size + r] = peer_buffers[r];  // Lamport triple buffer
  }
  host[3 * world_size] = state.flags;
  FLASHINFER_CUDA_CALL(cudaMalloc(&state.workspace, (3 * world_size + 1) * sizeof(void*)));
  FLASHINFER_CUDA_CALL(
      cudaMemcpy(state.workspace, host, (3 * world_size + 1) * sizeof(void*), cudaMemcpyHostToDevice));
  return cudaSuccess;
}

// A new shape: fresh -0.0 Lamport buffers, stride and flags reset, all ranks ready.
cudaError_t reset_lamport(int rank, int world_size, void* const* peer_buffers, void* const* peer_flags,
                          size_t stride_bytes, cudaStream_t stream) {
  const size_t words = 3 * stride_bytes / 4;
  fill_negative_zero<<<1024, 256, 0, stream>>>(static_cast<uint32_t*>(peer_buffers[rank]), words);
  static int host_flags[3];  // [Lamport flag, stride, clear size]; static: the copy reads it later
  host_flags[0] = 0;
  host_flags[1] = static_cast<int>(stride_bytes);
  host_flags[2] = 0;
  FLASHINFER_CUDA_CALL(
      cudaMemcpyAsync(state.flags + 2, host_flags, sizeof(host_flags), cudaMemcpyHostToDevice, stream));
  PeerSlots peers{};
  for (int r = 0; r < world_size; ++r)
    peers.slot[r] = reinterpret_cast<int*>(static_cast<char*>(peer_flags[r]) + kInitBarrierOffset);
  ipc_barrier<<<1, 32, 0, stream>>>(peers, rank, world_size, ++state.generation);
  return cudaGetLastError();
}

template <int N>
cudaError_t launch(MoeFinalizeAllReduceFusionParams<T> const& params) {
  return moefinalize_allreduce_fusion_kernel_launcher<T, N, /*ResidualOut=*/true, /*NormOut=*/true,
                                                      /*QuantOut=*/false, /*ScaleType=*/float>(
      params, /*launch_with_pdl=*/true);
}
}  // namespace

extern "C" int popcorn_moe_finalize_allreduce(int rank, int world_size, void* const* peer_buffers,
                                              void* const* peer_flags, const void* expert_out,
                                              const float* scales, const int* permuted_index, int top_k,
                                              const void* residual_in, const void* gamma, float eps,
                                              void* residual_out, void* norm_out, int tokens, int hidden,
                                              cudaStream_t stream) {
  if (world_size < 2 || world_size > kMaxRanks) return static_cast<int>(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  try {
    if (state.workspace == nullptr && (err = setup(world_size, peer_buffers, peer_flags)) != cudaSuccess)
      return static_cast<int>(err);
    if (tokens != state.tokens || hidden != state.hidden) {
      const size_t stride = size_t(world_size) * tokens * hidden * sizeof(T);
      if ((err = reset_lamport(rank, world_size, peer_buffers, peer_flags, stride, stream)) != cudaSuccess)
        return static_cast<int>(err);
      state.tokens = tokens;
      state.hidden = hidden;
    }
    MoeFinalizeAllReduceFusionParams<T> params;
    params.nranks = world_size;
    params.rank = rank;
    params.size = tokens * hidden;
    params.hidden_dim = hidden;
    params.workspace = state.workspace;
    params.allreduce_in = const_cast<void*>(expert_out);
    params.allreduce_out = nullptr;
    params.residual_in = const_cast<void*>(residual_in);
    params.residual_out = residual_out;
    params.norm_out = norm_out;
    params.quant_out = nullptr;
    params.scale_out = nullptr;
    params.rms_gamma = const_cast<void*>(gamma);
    params.rms_eps = eps;
    params.scale_factor = 1.f;
    params.stream = stream;
    params.moe_allreduce_out = nullptr;
    params.top_k = top_k;
    params.expert_scale_factor = const_cast<float*>(scales);
    params.shared_expert_output = nullptr;
    params.expanded_idx_to_permuted_idx = const_cast<int32_t*>(permuted_index);
    switch (world_size) {
      case 2: err = launch<2>(params); break;
      case 3: err = launch<3>(params); break;
      case 4: err = launch<4>(params); break;
      case 5: err = launch<5>(params); break;
      case 6: err = launch<6>(params); break;
      case 7: err = launch<7>(params); break;
      default: err = launch<8>(params); break;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaPeekAtLastError());
}
