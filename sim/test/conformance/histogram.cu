// Histogram of 64 bins: per-block counts in shared memory with atomicAdd, then added to the global
// histogram with atomicAdd.
// PLANT: the shared count is incremented with a plain += (a read-modify-write race).
// EXPECT PLANTED: shared-memory race
#include "conformance.h"

const char* conformance::name = "histogram";
constexpr int kBins = 64;

__global__ void histogram(const int* values, int n, unsigned* bins) {
  __shared__ unsigned counts[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) counts[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
#ifdef PLANT
    counts[values[i]] += 1;
#else
    atomicAdd(&counts[values[i]], 1u);
#endif
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) atomicAdd(&bins[b], counts[b]);
}

int main() {
  const int n = 5000;
  const std::vector<int> values = conformance::random_ints(n, kBins, 7);
  std::vector<unsigned> expected(kBins, 0);
  for (int v : values) ++expected[v];
  int* d_values = conformance::to_device(values);
  unsigned* d_bins = conformance::to_device(std::vector<unsigned>(kBins, 0));
  histogram<<<4, 128>>>(d_values, n, d_bins);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_bins, kBins), expected);
}
