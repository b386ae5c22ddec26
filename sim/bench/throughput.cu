// How fast the simulated GPU runs kernels: simulated threads per second of wall time for three
// kernels people write, under each check mode. A plain CUDA program; nvcc-sim builds it:
//
//   build/cuda-sim/bin/nvcc-sim -O2 sim/bench/throughput.cu -o /tmp/throughput && /tmp/throughput
//   /tmp/throughput 4     (4× the default sizes: steadier, slower)
//   /tmp/throughput 1 1   (one run per row instead of five: what ctest runs, a check not a measure)
//
// Kernels (256 threads per block, one element per thread, float):
//   copy         y[i] = x[i]: one 4-byte load and store per thread, no barrier (the floor of the
//                per-access cost: a GPU runs it at memory bandwidth)
//   reduce_smem  a block's sum through shared memory, __syncthreads between halvings (llm.c's and
//                the samples' classic): 8 barriers, ~2 shared accesses per thread per step
//   reduce_warp  __shfl_down_sync within warps, one shared slot per warp, one barrier
// Modes: none, memcheck, race, all (BLOCKSCOPE_SIM_CHECKS's values), in order schedule. Each
// row is the best of five runs (or of the second argument) in wall time: run it on an otherwise
// idle machine. Results are checked (a wrong sum exits 1), so a faster
// simulator that drops work shows as a failure, not as a speed-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/sim.h"

#define CHECK_CUDA(call)                                                                             \
  do {                                                                                               \
    const cudaError_t err_ = (call);                                                                 \
    if (err_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(2);                                                                                  \
    }                                                                                                \
  } while (0)

constexpr int kBlock = 256;

__global__ void copy_kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

__global__ void reduce_smem_kernel(const float* x, float* block_sums, int n) {
  __shared__ float partial[kBlock];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = partial[0];
}

__global__ void reduce_warp_kernel(const float* x, float* block_sums, int n) {
  __shared__ float warp_sums[kBlock / 32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kBlock / 32; ++w) sum += warp_sums[w];
    block_sums[blockIdx.x] = sum;
  }
}

struct Kernel {
  const char* name;
  int base_threads;  // threads at scale 1
};

// Launches kernel `k` over n threads and checks its result; returns seconds of wall time.
double run_once(int k, const float* x, float* y, int n, const std::vector<float>& host_x) {
  const int blocks = (n + kBlock - 1) / kBlock;
  const auto start = std::chrono::steady_clock::now();
  if (k == 0) copy_kernel<<<blocks, kBlock>>>(x, y, n);
  if (k == 1) reduce_smem_kernel<<<blocks, kBlock>>>(x, y, n);
  if (k == 2) reduce_warp_kernel<<<blocks, kBlock>>>(x, y, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int outputs = k == 0 ? n : blocks;
  std::vector<float> got(outputs);
  CHECK_CUDA(cudaMemcpy(got.data(), y, outputs * sizeof(float), cudaMemcpyDeviceToHost));
  for (int o = 0; o < outputs; ++o) {
    double want = 0;
    if (k == 0) {
      want = host_x[o];
    } else {
      for (int i = o * kBlock; i < std::min(n, (o + 1) * kBlock); ++i) want += host_x[i];
    }
    if (std::fabs(got[o] - want) > 1e-4 * (1 + std::fabs(want))) {
      std::fprintf(stderr, "kernel %d output %d: %g, expected %g\n", k, o, got[o], want);
      std::exit(1);
    }
  }
  return seconds;
}

int main(int argc, char** argv) {
  const int scale = argc > 1 ? std::atoi(argv[1]) : 1;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  if (argc > 3 || scale < 1 || runs < 1) {
    std::fprintf(stderr, "usage: %s [scale >= 1] [runs per row >= 1]\n", argv[0]);
    return 2;
  }
  const Kernel kernels[] = {{"copy", 1 << 18}, {"reduce_smem", 1 << 17}, {"reduce_warp", 1 << 17}};
  const char* modes[] = {"none", "memcheck", "race", "all"};
  std::printf("%-12s %-9s %10s %9s %12s\n", "kernel", "checks", "threads", "seconds", "Mthreads/s");
  for (int k = 0; k < 3; ++k) {
    const int n = kernels[k].base_threads * scale;
    std::vector<float> host_x(n);
    for (int i = 0; i < n; ++i) host_x[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f;
    float *x = nullptr, *y = nullptr;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&y, n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(x, host_x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(y, 0, n * sizeof(float)));
    for (const char* mode : modes) {
      blockscope::sim::Checks checks;
      std::string error;
      if (!blockscope::sim::parse_checks(mode, &checks, &error)) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 2;
      }
      blockscope::sim::set_checks(checks);
      double best = 1e30;
      for (int r = 0; r < runs; ++r) best = std::min(best, run_once(k, x, y, n, host_x));
      std::printf("%-12s %-9s %10d %9.3f %12.3f\n", kernels[k].name, mode, n, best, n / best / 1e6);
    }
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
  }
  return 0;
}
