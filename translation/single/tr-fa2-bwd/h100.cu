// PopcornBench glue: CUTLASS example 88's Hopper FMHA backward (device/fmha_device_bwd.hpp: the
// sum_OdO kernel, the TMA warp-specialized cooperative backward collective with wgmma and
// mbarrier pipelines and dQ reduced in fp32, the convert kernel) as the H100 reference,
// instantiated as 88_hopper_fmha.cu's BwdRunner instantiates it for fp16 with fp32 accumulation:
// tile 64x128xD ("tma ws cooperative 64x128x128", the example's only head-dim-128 backward
// configuration, and its first for head dim 64), with DefaultFusion (no mask), ResidualFusion
// (seqlen not a multiple of the 128-key tile) or CausalFusion, as its main() picks them. Only
// the kernel headers are included: the example's main() instantiates its whole benchmark sweep.
// 88 takes (batch, head, seq, dim) strides at run time, so FlashAttention's [b, s, h, d] buffers
// and the [b, h, s] lse are read in place: no layout conversion. Its workspace (sum_OdO and the
// fp32 dQ accumulator, cleared by FmhaBwd::run on every call) is a grow-only device buffer kept
// across calls, so allocation is never timed.
#include "entry.h"
#include "popcorn_scratch.h"
#include <cstdio>
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "collective/fmha_fusion.hpp"
#include "device/fmha_device_bwd.hpp"

namespace {

using namespace cute;
using Element = cutlass::half_t;

template <class HeadDim, class Fusion>
using FmhaBwd = cutlass::fmha::device::FmhaBwd<Element, float, Shape<_64, _128, HeadDim>, Fusion>;

popcorn::Scratch scratch;  // grow-only, kept across calls (popcorn_scratch.h)

struct Problem {
  int batch, seqlen, heads, head_dim;
  const void *Q, *K, *V, *O, *dO;
  const float* lse;
  void *dQ, *dK, *dV;
};

template <class Operation>
cudaError_t run(Problem const& p, cudaStream_t stream) {
  static int sm_count = 0;
  cutlass::KernelHardwareInfo hw_info;
  cudaGetDevice(&hw_info.device_id);
  if (sm_count == 0) sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
  hw_info.sm_count = sm_count;
  // (batch, head, seq, dim) strides of the [b, s, h, d] buffers; lse [b, h, s] as (batch, head, seq).
  const int row = p.heads * p.head_dim;
  cute::tuple<int, int, int, _1> stride{row * p.seqlen, p.head_dim, row, _1{}};
  cute::tuple<int, int, _1> stride_lse{p.heads * p.seqlen, p.seqlen, _1{}};
  auto in = [](const void* ptr) { return static_cast<const Element*>(ptr); };
  auto out = [](void* ptr) { return static_cast<Element*>(ptr); };
  typename Operation::Arguments arguments{
      cute::make_tuple(p.batch, p.heads, p.seqlen, p.seqlen, p.head_dim),
      in(p.Q), stride, in(p.K), stride, in(p.V), stride,
      in(p.O), stride, p.lse, stride_lse,
      in(p.dO), stride,
      out(p.dQ), stride, out(p.dK), stride, out(p.dV), stride,
      hw_info};
  if (Operation::can_implement(arguments) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  cudaError_t err = scratch.reserve(Operation::get_workspace_size(arguments), stream);
  if (err != cudaSuccess) return err;
  Operation op;
  if (op.initialize(arguments, scratch.ptr, stream) != cutlass::Status::kSuccess ||
      op.run(stream) != cutlass::Status::kSuccess) {
    err = cudaPeekAtLastError();
    return err != cudaSuccess ? err : cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

template <class HeadDim>
cudaError_t dispatch_fusion(Problem const& p, bool causal, cudaStream_t stream) {
  using cutlass::fmha::collective::CausalFusion;
  using cutlass::fmha::collective::DefaultFusion;
  using cutlass::fmha::collective::ResidualFusion;
  if (causal) return run<FmhaBwd<HeadDim, CausalFusion>>(p, stream);
  if (p.seqlen % 128 != 0) return run<FmhaBwd<HeadDim, ResidualFusion>>(p, stream);
  return run<FmhaBwd<HeadDim, DefaultFusion>>(p, stream);
}

}  // namespace

extern "C" int popcorn_fa_bwd(int batch, int seqlen, int heads, int head_dim, const void* Q, const void* K,
                              const void* V, const void* O, const void* dO, const float* lse, void* dQ, void* dK,
                              void* dV, int causal, cudaStream_t stream) {
  if (batch < 1 || heads < 1 || seqlen < 1 || (causal != 0 && seqlen % 64 != 0))
    return static_cast<int>(cudaErrorInvalidValue);  // 88's causal backward skips a partial last query tile
  const Problem p{batch, seqlen, heads, head_dim, Q, K, V, O, dO, lse, dQ, dK, dV};
  cudaError_t err;
  if (head_dim == 64) {
    err = dispatch_fusion<_64>(p, causal != 0, stream);
  } else if (head_dim == 128) {
    err = dispatch_fusion<_128>(p, causal != 0, stream);
  } else {
    err = cudaErrorInvalidValue;
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaPeekAtLastError());
}
