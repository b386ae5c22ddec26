// Warp-shuffle reduction: every warp sums 32 floats with __shfl_down_sync, lane 0 stores the sum.
// PLANT: the mask names only the lower 16 lanes while the tree reads from the upper ones (a lane
// outside the mask: undefined on a GPU, 0xFF bytes — NaN — on the simulated GPU).
// EXPECT PLANTED: MISMATCH reduce_warp
#include "conformance.h"

const char* conformance::name = "reduce_warp";

__global__ void warp_sums(const float* in, float* out) {
  const unsigned lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
#ifdef PLANT
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
#else
  const unsigned mask = 0xffffffffu;
#endif
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(mask, v, offset);
  if (lane == 0) out[warp] = v;
}

int main() {
  const int blocks = 3, threads = 128, warps = blocks * threads / 32;
  const std::vector<float> in = conformance::random_floats(blocks * threads, 2);
  std::vector<float> expected(warps, 0.0f);
  for (int w = 0; w < warps; ++w) {
    double sum = 0;
    for (int l = 0; l < 32; ++l) sum += in[w * 32 + l];
    expected[w] = static_cast<float>(sum);
  }
  float* d_in = conformance::to_device(in);
  float* d_out = conformance::to_device(std::vector<float>(warps, -1.0f));
  warp_sums<<<blocks, threads>>>(d_in, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, warps), expected, 1e-5);
}
