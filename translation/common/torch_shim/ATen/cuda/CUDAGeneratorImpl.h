// PopcornBench shim (see popcorn_torch.h): at::PhiloxCudaState, the RNG state FlashAttention's
// parameter block carries for dropout. Tasks run without dropout; the layout matches PyTorch's.
#pragma once
#include <stdint.h>

namespace at {

struct PhiloxCudaState {
  PhiloxCudaState() = default;
  PhiloxCudaState(uint64_t seed, uint64_t offset) {
    seed_.val = seed;
    offset_.val = offset;
  }
  PhiloxCudaState(int64_t* seed, int64_t* offset_extragraph, uint32_t offset_intragraph) {
    seed_.ptr = seed;
    offset_.ptr = offset_extragraph;
    offset_intragraph_ = offset_intragraph;
    captured_ = true;
  }
  union Payload {
    uint64_t val;
    int64_t* ptr;
  };
  Payload seed_{};
  Payload offset_{};
  uint32_t offset_intragraph_ = 0;
  bool captured_ = false;
};

}  // namespace at
