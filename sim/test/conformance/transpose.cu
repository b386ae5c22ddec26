// Transpose through a padded shared tile (32x33: no bank conflicts), rows read as float4.
// PLANT: the float4 loads start one float past the row (an address not 16-byte aligned).
// EXPECT PLANTED: cudaErrorMisalignedAddress: .*misaligned 16-byte read
#include "conformance.h"

const char* conformance::name = "transpose";
constexpr int kTile = 32;

// A rows x cols matrix (cols a multiple of 4) into cols x rows; blocks of 8 x 32 threads, each
// thread of a row group loads 4 consecutive floats.
__global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  const int x0 = blockIdx.x * kTile, y0 = blockIdx.y * kTile;
  const int lx = threadIdx.x, ly = threadIdx.y;  // lx in 0..7 (a float4 each), ly in 0..31
  const int row = y0 + ly, col = x0 + lx * 4;
  if (row < rows && col < cols) {
#ifdef PLANT
    const float4 v = *reinterpret_cast<const float4*>(in + row * cols + col + 1);
#else
    const float4 v = *reinterpret_cast<const float4*>(in + row * cols + col);
#endif
    tile[ly][lx * 4 + 0] = v.x;
    tile[ly][lx * 4 + 1] = v.y;
    tile[ly][lx * 4 + 2] = v.z;
    tile[ly][lx * 4 + 3] = v.w;
  }
  __syncthreads();
  for (int i = lx; i < kTile; i += 8) {
    const int out_row = x0 + ly, out_col = y0 + i;  // element (y0 + i, x0 + ly) of the input
    if (out_row < cols && out_col < rows) out[out_row * rows + out_col] = tile[i][ly];
  }
}

int main() {
  const int rows = 70, cols = 36;
  const std::vector<float> in = conformance::random_floats(rows * cols, 5);
  std::vector<float> expected(rows * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) expected[c * rows + r] = in[r * cols + c];
  float* d_in = conformance::to_device(in);
  float* d_out = conformance::to_device(std::vector<float>(rows * cols, 0.0f));
  transpose<<<dim3((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile), dim3(8, kTile)>>>(d_in, d_out, rows, cols);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_out, rows * cols), expected);
}
