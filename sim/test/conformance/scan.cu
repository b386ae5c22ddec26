// Inclusive scan of each block's 128 values (Hillis-Steele, double-buffered in shared memory).
// PLANT: one buffer updated in place: a thread writes s[t] while another reads it in the same step
// (a write-after-read race).
// EXPECT PLANTED: shared-memory race
#include "conformance.h"

const char* conformance::name = "scan";

__global__ void block_scan(const int* in, int* out) {
  __shared__ int buffer[2][128];
  const int t = threadIdx.x;
  int from = 0;
  buffer[from][t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int d = 1; d < blockDim.x; d *= 2) {
#ifdef PLANT
    if (t >= d) buffer[from][t] += buffer[from][t - d];
#else
    buffer[1 - from][t] = t >= d ? buffer[from][t] + buffer[from][t - d] : buffer[from][t];
    from = 1 - from;
#endif
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + t] = buffer[from][t];
}

int main() {
  const int blocks = 4, threads = 128;
  const std::vector<int> in = conformance::random_ints(blocks * threads, 100, 6);
  std::vector<int> expected(in.size());
  for (int b = 0; b < blocks; ++b) {
    int sum = 0;
    for (int t = 0; t < threads; ++t) expected[b * threads + t] = sum += in[b * threads + t];
  }
  int* d_in = conformance::to_device(in);
  int* d_out = conformance::to_device(std::vector<int>(in.size(), -1));
  block_scan<<<blocks, threads>>>(d_in, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, in.size()), expected);
}
