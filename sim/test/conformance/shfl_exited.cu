// Warp sums of a ragged array: n values, blocks of 64 threads, each warp adds its lanes' values
// with __shfl_down_sync and lane 0 stores the sum.
// PLANT: threads past the end return before the shuffles, which still name all 32 lanes: the lanes
// that remain read lanes that have exited (an undefined value on a GPU; reported by the simulated
// GPU's synccheck, naming both lanes).
// EXPECT PLANTED: __shfl_down_sync at .*shfl_exited\.cu.*reads the value of lane [0-9]+ \(thread .*which has exited\)
#include "conformance.h"

const char* conformance::name = "shfl_exited";

__global__ void ragged_warp_sums(const float* in, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef PLANT
  if (i >= n) return;
  float v = in[i];
#else
  float v = i < n ? in[i] : 0.0f;  // every lane takes part, the ones past the end with 0
#endif
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) out[i / 32] = v;
}

int main() {
  const int n = 150, threads = 64, blocks = 3, warps = blocks * threads / 32;
  std::vector<float> in = conformance::random_floats(n, 3);
  for (float& v : in) v = std::round(v * 64.0f) / 64.0f;  // exact sums in any order
  float* d_in = conformance::to_device(in);
  float* d_out = conformance::to_device(std::vector<float>(warps, 0.0f));
  ragged_warp_sums<<<blocks, threads>>>(d_in, n, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  std::vector<float> expected(warps, 0.0f);
  for (int i = 0; i < n; ++i) expected[i / 32] += in[i];
  return conformance::verdict(conformance::to_host(d_out, warps), expected);
}
