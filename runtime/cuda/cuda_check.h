// Checks for CUDA runtime and cuBLAS(Lt) calls: failures become blockscope::Error naming the
// statement, file and line.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "runtime/error.h"

#define BS_CUDA_CHECK(call)                                                                          \
  do {                                                                                               \
    cudaError_t bs_status_ = (call);                                                                 \
    if (bs_status_ != cudaSuccess) {                                                                 \
      /* Reported here: clear it, or the next launch check (cudaGetLastError) blames a kernel. */     \
      cudaGetLastError();                                                                            \
      throw ::blockscope::Error(::blockscope::ErrorKind::runtime,                                    \
                                std::string("CUDA error ") + cudaGetErrorName(bs_status_) + " (" +   \
                                    cudaGetErrorString(bs_status_) + ") in " #call,                  \
                                __FILE__, __LINE__);                                                 \
    }                                                                                                \
  } while (0)

#define BS_CUBLAS_CHECK(call)                                                                        \
  do {                                                                                               \
    cublasStatus_t bs_status_ = (call);                                                              \
    if (bs_status_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      throw ::blockscope::Error(::blockscope::ErrorKind::runtime,                                    \
                                std::string("cuBLAS error ") + cublasLtGetStatusName(bs_status_) +   \
                                    " (" + cublasLtGetStatusString(bs_status_) + ") in " #call,      \
                                __FILE__, __LINE__);                                                 \
    }                                                                                                \
  } while (0)
