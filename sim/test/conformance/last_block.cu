// The threadfence reduction: every block stores its partial sum, fences, and takes a ticket; the
// block that takes the last ticket adds all partial sums (the CUDA Programming Guide's example).
// PLANT: the "am I last" flag, set by thread 0, is read by the other threads without the barrier
// between (a read-after-write race).
// EXPECT PLANTED: (shared|global)-memory race
#include "conformance.h"

const char* conformance::name = "last_block";

__device__ unsigned tickets = 0;

__global__ void sum(const float* in, int n, float* partial, float* total) {
  __shared__ float scratch[128];
  __shared__ bool am_last;
  const int t = threadIdx.x;
  float v = 0;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) v += in[i];
  scratch[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) scratch[t] += scratch[t + s];
    __syncthreads();
  }
  if (t == 0) {
    partial[blockIdx.x] = scratch[0];
    __threadfence();
    am_last = atomicInc(&tickets, gridDim.x) == gridDim.x - 1;
  }
#ifndef PLANT
  __syncthreads();
#endif
  if (am_last) {
    float s = 0;
    for (int b = t; b < gridDim.x; b += blockDim.x) s += partial[b];
    scratch[t] = s;
    __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step /= 2) {
      if (t < step) scratch[t] += scratch[t + step];
      __syncthreads();
    }
    if (t == 0) *total = scratch[0];
  }
}

int main() {
  const int n = 7000, blocks = 9;
  const std::vector<float> in = conformance::random_floats(n, 9);
  double expected = 0;
  for (float v : in) expected += v;
  float* d_in = conformance::to_device(in);
  float* d_partial = conformance::to_device(std::vector<float>(blocks, 0.0f));
  float* d_total = conformance::to_device(std::vector<float>(1, 0.0f));
  sum<<<blocks, 128>>>(d_in, n, d_partial, d_total);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_total, 1), std::vector<float>{static_cast<float>(expected)}, 1e-4);
}
