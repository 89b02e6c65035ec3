// PopcornBench glue (not upstream code): the torchrun variables Flux's sm80 reduce-scatter
// swizzle reads on every call.
//
// Flux's ThreadblockSwizzleStreamKRankOffset (src/reduce_scatter/tile_scheduler/
// threadblock_swizzle.hpp) sets its local_rank and local_world_size from the LOCAL_RANK and
// LOCAL_WORLD_SIZE environment variables, which torchrun exports, and leaves both members
// uninitialized when they are absent. CUTLASS builds that swizzle afresh in every
// GemmUniversalBase::initialize, i.e. on every call, as a stack temporary: without the
// variables each call's tile rotation (m + tiled_m / local_world_size * local_rank) % tiled_m
// comes from whatever the stack held. A fresh process's stack reads as zeros (the identity
// rotation, a correct first call); later calls get garbage, hence row tiles stored to wrong or
// negative rows of the peers' buffers, stray stores that can land in the IPC barrier slots,
// and a hung rank. The harness's rank processes are not started by torchrun, so the adapter
// exports the two variables itself before Flux reads them.
#pragma once
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Sets LOCAL_RANK=rank and LOCAL_WORLD_SIZE=world_size unless they already hold those values
// (the environment is written once per process, not on every call). Returns 0 or an errno.
static inline int popcorn_flux_export_local_ranks(int rank, int world_size) {
  const char* names[2] = {"LOCAL_RANK", "LOCAL_WORLD_SIZE"};
  const int values[2] = {rank, world_size};
  for (int i = 0; i < 2; ++i) {
    char text[16];
    snprintf(text, sizeof(text), "%d", values[i]);
    const char* current = getenv(names[i]);
    if (current != nullptr && strcmp(current, text) == 0) continue;
    if (setenv(names[i], text, 1) != 0) return errno != 0 ? errno : EINVAL;
  }
  return 0;
}
