// Min-reduction over a device buffer (grid-stride loop, warp shuffles, one atomicMin per warp on
// the float's ordered-int image).
// PLANT: the host copies one element fewer than the kernel reads, so the last element is memory
// nothing wrote. On a GPU the result is whatever the memory held (and with NaN poison and fminf,
// silently right); the simulated GPU's initcheck reports the read.
// EXPECT PLANTED: uninitialized global-memory read \(initcheck\).*min_uninit\.cu
#include <cstring>

#include "conformance.h"

const char* conformance::name = "min_uninit";

__device__ int float_order(float f) {
  const int i = __float_as_int(f);
  return i >= 0 ? i : i ^ 0x7fffffff;
}

__global__ void min_reduce(const float* in, int n, int* out) {
  float m = INFINITY;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) m = fminf(m, in[i]);
  for (int offset = 16; offset > 0; offset /= 2) m = fminf(m, __shfl_down_sync(0xffffffffu, m, offset));
  if (threadIdx.x % 32 == 0) atomicMin(out, float_order(m));
}

int main() {
  const int n = 5000;
  const std::vector<float> in = conformance::random_floats(n, 7);
  float* d_in = nullptr;
  CONFORMANCE_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
#ifdef PLANT
  const int copied = n - 1;
#else
  const int copied = n;
#endif
  CONFORMANCE_CHECK(cudaMemcpy(d_in, in.data(), copied * sizeof(float), cudaMemcpyHostToDevice));
  int* d_out = conformance::to_device(std::vector<int>{0x7fffffff});
  min_reduce<<<4, 128>>>(d_in, n, d_out);
  CONFORMANCE_CHECK(cudaGetLastError());
  const std::vector<int> got = conformance::to_host(d_out, 1);
  float expected = INFINITY;
  for (float v : in) expected = std::fmin(expected, v);
  int e = 0;
  std::memcpy(&e, &expected, sizeof e);
  return conformance::verdict(got, std::vector<int>{e >= 0 ? e : e ^ 0x7fffffff});
}
