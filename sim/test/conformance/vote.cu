// Warp votes: per warp, the ballot of "value is odd", whether any / all values are positive, and
// the count of odd values from a shared per-warp tally.
// PLANT: the tally is read before it is initialised (shared memory is 0xFF garbage then).
// EXPECT PLANTED: MISMATCH vote
#include "conformance.h"

const char* conformance::name = "vote";

__global__ void votes(const int* in, unsigned* out) {
  __shared__ unsigned tally[8];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int v = in[blockIdx.x * blockDim.x + threadIdx.x];
#ifndef PLANT
  if (lane == 0) tally[warp] = 0;
  __syncwarp();
#endif
  const unsigned odd = __ballot_sync(0xffffffffu, v & 1);
  const int any_big = __any_sync(0xffffffffu, v > 90);
  const int all_small = __all_sync(0xffffffffu, v < 99);
  if (v & 1) atomicAdd(&tally[warp], 1u);
  __syncwarp();
  if (lane == 0) {
    const unsigned base = (blockIdx.x * (blockDim.x / 32) + warp) * 4;
    out[base + 0] = odd;
    out[base + 1] = static_cast<unsigned>(any_big);
    out[base + 2] = static_cast<unsigned>(all_small);
    out[base + 3] = tally[warp];
  }
}

int main() {
  const int blocks = 2, threads = 256, warps = blocks * threads / 32;
  const std::vector<int> in = conformance::random_ints(blocks * threads, 100, 8);
  std::vector<unsigned> expected(warps * 4, 0);
  for (int w = 0; w < warps; ++w) {
    unsigned odd = 0, count = 0;
    bool any_big = false, all_small = true;
    for (int l = 0; l < 32; ++l) {
      const int v = in[w * 32 + l];
      if (v & 1) odd |= 1u << l, ++count;
      any_big = any_big || v > 90;
      all_small = all_small && v < 99;
    }
    expected[w * 4 + 0] = odd;
    expected[w * 4 + 1] = any_big;
    expected[w * 4 + 2] = all_small;
    expected[w * 4 + 3] = count;
  }
  int* d_in = conformance::to_device(in);
  unsigned* d_out = conformance::to_device(std::vector<unsigned>(warps * 4, 7));
  votes<<<blocks, threads>>>(d_in, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, warps * 4), expected);
}
