// Grid-wide sum: every block reduces its part in shared memory, then thread 0 adds the block's sum
// to one global total with atomicAdd.
// PLANT: the total is updated with a plain `+=`: a read-modify-write of one global value by every
// block, which nothing orders (lost updates on a GPU when blocks overlap; the simulated GPU, one
// or two blocks at a time, gets the right sum and reports the race between blocks).
// EXPECT PLANTED: global-memory race between blocks \((read after write|write after write|write after read)\).*block_total\.cu
#include "conformance.h"

const char* conformance::name = "block_total";

__global__ void total_of(const int* in, int n, int* total) {
  __shared__ int partial[128];
  int v = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += in[i];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
#ifdef PLANT
    *total += partial[0];
#else
    atomicAdd(total, partial[0]);
#endif
  }
}

int main() {
  const int n = 3000;
  const std::vector<int> in = conformance::random_ints(n, 100, 4);
  int* d_in = conformance::to_device(in);
  int* d_total = conformance::to_device(std::vector<int>{0});
  total_of<<<6, 128>>>(d_in, n, d_total);
  CONFORMANCE_CHECK(cudaGetLastError());
  int expected = 0;
  for (int v : in) expected += v;
  return conformance::verdict(conformance::to_host(d_total, 1), std::vector<int>{expected});
}
