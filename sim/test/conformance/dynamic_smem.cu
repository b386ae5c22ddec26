// Dynamic shared memory sized at the launch (extern __shared__), more than the 48 KiB default with
// the opt-in attribute: each block reverses its slice of the input through it.
// PLANT: the reversal reads one element past the end of the dynamic shared memory.
// EXPECT PLANTED: out-of-bounds shared-memory read
#include "conformance.h"

const char* conformance::name = "dynamic_smem";

__global__ void reverse_slices(const float* in, float* out, int per_block) {
  extern __shared__ float slice[];
  const float* src = in + blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) slice[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) {
#ifdef PLANT
    out[blockIdx.x * per_block + i] = slice[per_block - i];
#else
    out[blockIdx.x * per_block + i] = slice[per_block - 1 - i];
#endif
  }
}

int main() {
  const int blocks = 3, per_block = 16000;  // 64000 bytes a block
  const size_t bytes = per_block * sizeof(float);
  const std::vector<float> in = conformance::random_floats(blocks * per_block, 11);
  std::vector<float> expected(in.size());
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < per_block; ++i) expected[b * per_block + i] = in[b * per_block + per_block - 1 - i];
  float* d_in = conformance::to_device(in);
  float* d_out = conformance::to_device(std::vector<float>(in.size(), 0.0f));
  // Without the opt-in the launch must fail, as on a GPU.
  reverse_slices<<<blocks, 256, bytes>>>(d_in, d_out, per_block);
  if (cudaGetLastError() != cudaErrorInvalidValue) {
    std::printf("MISMATCH %s: a launch with %zu bytes of dynamic shared memory and no opt-in was accepted\n",
                conformance::name, bytes);
    return 1;
  }
  CONFORMANCE_CHECK(cudaFuncSetAttribute(reverse_slices, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  reverse_slices<<<blocks, 256, bytes>>>(d_in, d_out, per_block);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, in.size()), expected);
}
