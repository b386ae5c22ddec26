// Shared-memory tree reduction: each block sums its 256 inputs.
// PLANT: no __syncthreads between the steps of the tree (a read-after-write race).
// EXPECT PLANTED: shared-memory race
#include "conformance.h"

const char* conformance::name = "reduce_shared";

__global__ void block_sums(const int* in, int* out) {
  __shared__ int partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
#ifndef PLANT
    __syncthreads();
#endif
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

int main() {
  const int blocks = 6, threads = 256;
  const std::vector<int> in = conformance::random_ints(blocks * threads, 1000, 1);
  std::vector<int> expected(blocks, 0);
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) expected[b] += in[b * threads + t];
  int* d_in = conformance::to_device(in);
  int* d_out = conformance::to_device(std::vector<int>(blocks, -1));
  block_sums<<<blocks, threads>>>(d_in, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, blocks), expected);
}
