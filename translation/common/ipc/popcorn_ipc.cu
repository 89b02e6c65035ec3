// PopcornBench harness helper (our code): device buffers that every rank of a
// multi-GPU translation task can address, through CUDA IPC. Each rank allocates its
// buffers here, the judge passes the 64-byte handles around, and every rank opens its
// peers' handles, so candidates and references receive plain device pointers.
#include <cuda_runtime.h>
#include <stddef.h>
#include <string.h>

extern "C" int popcorn_ipc_alloc(size_t bytes, void** ptr, void* handle_out) {
  cudaError_t err = cudaMalloc(ptr, bytes);
  if (err != cudaSuccess) return static_cast<int>(err);
  err = cudaMemset(*ptr, 0, bytes);  // flag areas start at zero, as the kernels expect
  if (err != cudaSuccess) return static_cast<int>(err);
  cudaIpcMemHandle_t handle;
  err = cudaIpcGetMemHandle(&handle, *ptr);
  if (err != cudaSuccess) return static_cast<int>(err);
  memcpy(handle_out, &handle, sizeof(handle));
  return static_cast<int>(cudaDeviceSynchronize());
}

extern "C" int popcorn_ipc_open(const void* handle_in, void** ptr) {
  cudaIpcMemHandle_t handle;
  memcpy(&handle, handle_in, sizeof(handle));
  return static_cast<int>(cudaIpcOpenMemHandle(ptr, handle, cudaIpcMemLazyEnablePeerAccess));
}

extern "C" int popcorn_ipc_close(void* ptr) { return static_cast<int>(cudaIpcCloseMemHandle(ptr)); }

extern "C" int popcorn_ipc_free(void* ptr) { return static_cast<int>(cudaFree(ptr)); }

extern "C" int popcorn_ipc_handle_bytes(void) { return static_cast<int>(sizeof(cudaIpcMemHandle_t)); }
