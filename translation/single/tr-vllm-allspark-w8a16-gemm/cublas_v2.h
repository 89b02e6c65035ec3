// PopcornBench glue (not cuBLAS): the few cuBLAS names vLLM's AllSpark source names.
// AllSpark falls back to dequantize + cublasGemmEx above CUBLAS_M_THRESHOLD (1024 rows in
// vLLM); this task's shapes stay far below it (m <= 256), so the fallback is compiled but
// never taken. Build machines have no cuBLAS headers and the task library links no cuBLAS:
// the stub reports CUBLAS_STATUS_NOT_SUPPORTED if it were ever called.
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                   const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                   cudaDataType, int, cudaDataType, cublasGemmAlgo_t) {
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
