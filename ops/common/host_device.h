// BS_HOST_DEVICE: a function both backends compile -- __host__ __device__ under a CUDA
// compiler (nvcc, nvcc-sim), plain elsewhere -- for the code the CPU and the CUDA kernels share
// so they give the same bits (online softmax state, fast division, the FP8 scale rule).
#pragma once

#ifndef BS_HOST_DEVICE
#ifdef __CUDACC__
#define BS_HOST_DEVICE __host__ __device__
#else
#define BS_HOST_DEVICE
#endif
#endif
