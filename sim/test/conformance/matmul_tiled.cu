// Tiled matrix product C = A·B (16x16 tiles in shared memory), sizes that are not multiples of
// the tile.
// PLANT: the last tile of each row of A is loaded one column too far (an index past the end of
// the shared tile).
// EXPECT PLANTED: out-of-bounds shared-memory write
#include "conformance.h"

const char* conformance::name = "matmul_tiled";
constexpr int kTile = 16;

__global__ void matmul(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int t0 = 0; t0 < k; t0 += kTile) {
    const int ak = t0 + threadIdx.x, bk = t0 + threadIdx.y;
    int tx = threadIdx.x;
#ifdef PLANT
    if (t0 + kTile >= k) tx += 1;
#endif
    as[threadIdx.y][tx] = row < m && ak < k ? a[row * k + ak] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = bk < k && col < n ? b[bk * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < kTile; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

int main() {
  const int m = 37, n = 29, k = 45;
  const std::vector<float> a = conformance::random_floats(m * k, 3), b = conformance::random_floats(k * n, 4);
  std::vector<float> expected(m * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += static_cast<double>(a[i * k + p]) * b[p * n + j];
      expected[i * n + j] = static_cast<float>(sum);
    }
  float *d_a = conformance::to_device(a), *d_b = conformance::to_device(b);
  float* d_c = conformance::to_device(std::vector<float>(m * n, 0.0f));
  matmul<<<dim3((n + kTile - 1) / kTile, (m + kTile - 1) / kTile), dim3(kTile, kTile)>>>(d_a, d_b, d_c, m, n, k);
  CONFORMANCE_CHECK(cudaGetLastError());
  return conformance::verdict(conformance::to_host(d_c, m * n), expected, 1e-5);
}
