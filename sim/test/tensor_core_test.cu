// Tests of the tensor-core primitives (ops/common/cuda/tensor_core.cuh) on the simulated GPU (the
// simulator's PTX emulation, sim/ptx.cpp), and of the host-only layout model behind them
// (sim/ptx_model.h).
//
// The fragment mappings used here to distribute matrices into lanes and gather results are the
// test's own, written from the PTX ISA text (sections "Matrix Fragments for mma.m16n8k16 with
// floating point type" and "Warp-level matrix load instruction: ldmatrix") independently of the
// model's; the expected values are plain float64 matrix products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/common/cuda/tensor_core.cuh"
#include "sim/ptx_model.h"
#include "sim/device.h"
#include "sim/sim.h"

namespace {

namespace model = blockscope::sim::ptx_model;
namespace tc = blockscope::ops::cuda::tensor_core;

// ---- The test's own reading of the PTX ISA fragment tables ----------------------------------
// "groupID = %laneid >> 2, threadID_in_group = %laneid % 4"
int group_of(int lane) { return lane >> 2; }
int thread_in_group_of(int lane) { return lane % 4; }

// A: "row = groupID for ai where 0 <= i < 2 || 4 <= i < 6; groupID + 8 Otherwise.
//     col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4;
//           (threadID_in_group * 2) + (i & 0x1) + 8 for ai where i >= 4"
std::pair<int, int> a_position(int lane, int i) {
  int row;
  if ((0 <= i && i < 2) || (4 <= i && i < 6)) {
    row = group_of(lane);
  } else {
    row = group_of(lane) + 8;
  }
  int col;
  if (i < 4) {
    col = thread_in_group_of(lane) * 2 + (i & 0x1);
  } else {
    col = thread_in_group_of(lane) * 2 + (i & 0x1) + 8;
  }
  return {row, col};
}
// B: "row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2;
//           (threadID_in_group * 2) + (i & 0x1) + 8 for bi where i >= 2.  col = groupID"
std::pair<int, int> b_position(int lane, int i) {
  int row;
  if (i < 2) {
    row = thread_in_group_of(lane) * 2 + (i & 0x1);
  } else {
    row = thread_in_group_of(lane) * 2 + (i & 0x1) + 8;
  }
  return {row, group_of(lane)};
}
// C/D: "row = groupID for ci where i < 2; groupID + 8 for ci where i >= 2.
//       col = (threadID_in_group * 2) + (i & 0x1) for ci where i = {0,..,3}"
std::pair<int, int> c_position(int lane, int i) {
  const int row = i < 2 ? group_of(lane) : group_of(lane) + 8;
  return {row, thread_in_group_of(lane) * 2 + (i & 0x1)};
}
// "Elements (low to high)": register j of an .f16x2 fragment holds element 2j in bits 0-15 and
// element 2j+1 in bits 16-31.
uint32_t two_halves(uint16_t first, uint16_t second) { return uint32_t(first) | (uint32_t(second) << 16); }

// ---- 16-bit values ------------------------------------------------------------------------
struct Matrices {
  uint16_t A[16][16], B[16][8];  // bit patterns
  double Ad[16][16], Bd[16][8];  // their values
  float C[16][8];
};

// k/64 with |k| <= 255: exact in f16 and bf16; every product and every partial sum of 16
// products plus C (a multiple of 2^-12 below 2^12) is exact in f32, so D must equal the float64
// product exactly: any layout mistake shows as a wrong value, not as rounding noise.
Matrices exact_matrices(bool bf16, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(-255, 255);
  Matrices m;
  const auto encode = [&](double v) {
    return bf16 ? model::float_to_bf16_bits_rn(float(v)) : model::float_to_f16_bits_rn(float(v));
  };
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      m.Ad[r][c] = k(rng) / 64.0;
      m.A[r][c] = encode(m.Ad[r][c]);
    }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      m.Bd[r][c] = k(rng) / 64.0;
      m.B[r][c] = encode(m.Bd[r][c]);
      m.C[r][c] = float(k(rng) / 16.0);
    }
  return m;
}

// Arbitrary finite values of the format (random bit patterns, NaN/inf excluded, exponents
// limited so that nothing overflows): checks against the f32-accumulation error bound.
Matrices random_matrices(bool bf16, unsigned seed) {
  std::mt19937 rng(seed);
  Matrices m;
  const auto random_value = [&](uint16_t& bits, double& value) {
    for (;;) {
      bits = uint16_t(rng());
      if (bf16) {
        const int exponent = (bits >> 7) & 0xff;
        if (exponent < 100 || exponent > 150) continue;  // |x| in [2^-27, 2^24)
        value = model::bf16_bits_to_float(bits);
      } else {
        if (((bits >> 10) & 0x1f) == 0x1f) continue;  // inf/NaN
        value = model::f16_bits_to_float(bits);
      }
      return;
    }
  };
  std::uniform_real_distribution<float> cdist(-1000.0f, 1000.0f);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) random_value(m.A[r][c], m.Ad[r][c]);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      random_value(m.B[r][c], m.Bd[r][c]);
      m.C[r][c] = cdist(rng);
    }
  return m;
}

struct Fragments {
  uint32_t a[32][4];
  uint32_t b[32][2];
  float c[32][4];
};
Fragments distribute(const Matrices& m) {
  Fragments f;
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      const auto [r0, c0] = a_position(lane, 2 * j);
      const auto [r1, c1] = a_position(lane, 2 * j + 1);
      f.a[lane][j] = two_halves(m.A[r0][c0], m.A[r1][c1]);
    }
    for (int j = 0; j < 2; ++j) {
      const auto [r0, c0] = b_position(lane, 2 * j);
      const auto [r1, c1] = b_position(lane, 2 * j + 1);
      f.b[lane][j] = two_halves(m.B[r0][c0], m.B[r1][c1]);
    }
    for (int i = 0; i < 4; ++i) {
      const auto [r, c] = c_position(lane, i);
      f.c[lane][i] = m.C[r][c];
    }
  }
  return f;
}
// D from the 32 lanes' d registers.
void gather(const float d[32][4], float D[16][8]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const auto [r, c] = c_position(lane, i);
      D[r][c] = d[lane][i];
    }
}

// float64 D = A·B + C and, per element, Σ|terms| for the f32 accumulation bound.
void reference(const Matrices& m, double D[16][8], double magnitude[16][8]) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      double sum = m.C[r][c], mag = std::fabs(m.C[r][c]);
      for (int k = 0; k < 16; ++k) {
        sum += m.Ad[r][k] * m.Bd[k][c];
        mag += std::fabs(m.Ad[r][k] * m.Bd[k][c]);
      }
      D[r][c] = sum;
      magnitude[r][c] = mag;
    }
}

// ---- Model tests (no fibers) ----------------------------------------------------------------
TEST(TensorCoreModel, SixteenBitConversions) {
  EXPECT_EQ(model::f16_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(model::f16_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(model::f16_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(model::f16_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(model::f16_bits_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(model::f16_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(model::f16_bits_to_float(0x7e00)));
  EXPECT_EQ(model::bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(model::bf16_bits_to_float(0xc040), -3.0f);
  // Round to nearest even, subnormals, overflow.
  EXPECT_EQ(model::float_to_f16_bits_rn(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie → even
  EXPECT_EQ(model::float_to_f16_bits_rn(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie → even (up)
  EXPECT_EQ(model::float_to_f16_bits_rn(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(model::float_to_f16_bits_rn(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(model::float_to_f16_bits_rn(65519.0f), 0x7bff);
  EXPECT_EQ(model::float_to_f16_bits_rn(65520.0f), 0x7c00);
  EXPECT_EQ(model::float_to_f16_bits_rn(-0.0f), 0x8000);
  EXPECT_EQ(model::float_to_bf16_bits_rn(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie → even
  EXPECT_EQ(model::float_to_bf16_bits_rn(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Every finite f16 round-trips through f32.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if (((bits >> 10) & 0x1f) == 0x1f) continue;
    ASSERT_EQ(model::float_to_f16_bits_rn(model::f16_bits_to_float(uint16_t(bits))), bits) << std::hex << bits;
  }
}

TEST(TensorCoreModel, MmaFragmentSpotChecksFromTheFigures) {
  // Figure 79 (A): lane 0 holds (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9);
  // lane 5 (groupID 1, threadID_in_group 1) holds (1,2) (1,3) (9,2) (9,3) (1,10) (1,11) (9,10) (9,11).
  const std::pair<int, int> lane0[8] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
  const std::pair<int, int> lane5[8] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a_position(0, i), lane0[i]);
    EXPECT_EQ(a_position(5, i), lane5[i]);
    EXPECT_EQ(model::mma_a_element(0, i).row, lane0[i].first);
    EXPECT_EQ(model::mma_a_element(0, i).col, lane0[i].second);
    EXPECT_EQ(model::mma_a_element(5, i).row, lane5[i].first);
    EXPECT_EQ(model::mma_a_element(5, i).col, lane5[i].second);
  }
  // Figure 81 (B, k x n): lane 31 (groupID 7, threadID_in_group 3) holds (6,7) (7,7) (14,7) (15,7).
  const std::pair<int, int> b31[4] = {{6, 7}, {7, 7}, {14, 7}, {15, 7}};
  // Figure 83 (C/D): lane 30 (groupID 7, threadID_in_group 2) holds (7,4) (7,5) (15,4) (15,5).
  const std::pair<int, int> c30[4] = {{7, 4}, {7, 5}, {15, 4}, {15, 5}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b_position(31, i), b31[i]);
    EXPECT_EQ(c_position(30, i), c30[i]);
    EXPECT_EQ(model::mma_b_element(31, i).row, b31[i].first);
    EXPECT_EQ(model::mma_b_element(31, i).col, b31[i].second);
    EXPECT_EQ(model::mma_c_element(30, i).row, c30[i].first);
    EXPECT_EQ(model::mma_c_element(30, i).col, c30[i].second);
  }
  // Each mapping covers its matrix exactly once.
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) a.insert(a_position(lane, i));
    for (int i = 0; i < 4; ++i) b.insert(b_position(lane, i));
    for (int i = 0; i < 4; ++i) c.insert(c_position(lane, i));
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
}

void expect_exact_mma(bool bf16, unsigned seed) {
  const Matrices m = exact_matrices(bf16, seed);
  const Fragments f = distribute(m);
  float d[32][4], D[16][8];
  model::mma_m16n8k16(f.a, f.b, f.c, d, bf16);
  gather(d, D);
  double ref[16][8], mag[16][8];
  reference(m, ref, mag);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) ASSERT_EQ(double(D[r][c]), ref[r][c]) << "D(" << r << "," << c << ")";
}
TEST(TensorCoreModel, MmaF16ExactValues) {
  for (unsigned seed = 1; seed <= 20; ++seed) expect_exact_mma(false, seed);
}
TEST(TensorCoreModel, MmaBf16ExactValues) {
  for (unsigned seed = 1; seed <= 20; ++seed) expect_exact_mma(true, seed);
}

void expect_bounded_mma(bool bf16, unsigned seed) {
  const Matrices m = random_matrices(bf16, seed);
  const Fragments f = distribute(m);
  float d[32][4], D[16][8];
  model::mma_m16n8k16(f.a, f.b, f.c, d, bf16);
  gather(d, D);
  double ref[16][8], mag[16][8];
  reference(m, ref, mag);
  // 16 f32 additions of exact products: |error| <= 16·u·Σ|terms| (u = 2^-24), first order.
  const double gamma = 16 * std::ldexp(1.0, -24) * 1.001;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c)
      ASSERT_LE(std::fabs(D[r][c] - ref[r][c]), gamma * mag[r][c]) << "D(" << r << "," << c << ")";
}
TEST(TensorCoreModel, MmaF16RandomValuesWithinF32AccumulationBound) {
  for (unsigned seed = 1; seed <= 50; ++seed) expect_bounded_mma(false, seed);
}
TEST(TensorCoreModel, MmaBf16RandomValuesWithinF32AccumulationBound) {
  for (unsigned seed = 1; seed <= 50; ++seed) expect_bounded_mma(true, seed);
}

// ---- ldmatrix against a plain shared-memory matrix -----------------------------------------
// Four 8x8 b16 matrices in a padded "shared" buffer (row stride 24 elements = 48 bytes, 16-byte
// aligned rows); matrix q starts at row 8q (rows are reached in a permuted order to show that
// rows need not be contiguous). Element value = q·4096 + row·64 + col: unique.
struct LdmatrixSetup {
  alignas(16) uint16_t buffer[32 * 24];
  const void* rows[32];  // the row address each lane supplies
  uint16_t element(int q, int row, int col) const { return uint16_t(q * 4096 + row * 64 + col); }
  LdmatrixSetup() {
    std::fill(std::begin(buffer), std::end(buffer), uint16_t(0xdead));
    const int row_slot[8] = {3, 0, 7, 1, 6, 2, 5, 4};  // matrix row r lives in buffer row 8q + slot
    for (int q = 0; q < 4; ++q)
      for (int r = 0; r < 8; ++r) {
        for (int c = 0; c < 8; ++c) buffer[(8 * q + row_slot[r]) * 24 + c] = element(q, r, c);
        // "addr0–addr7 correspond to the rows of the first matrix, addr8–addr15 … the second"
        rows[8 * q + r] = &buffer[(8 * q + row_slot[r]) * 24];
      }
  }
  // What lane `lane` must receive for matrix q ("a group of four threads loads an entire row":
  // lane l gets row l/4, columns 2(l%4), 2(l%4)+1; .trans: the same of the transposed matrix).
  uint32_t expected(int q, int lane, bool trans) const {
    const int r = lane / 4, c = 2 * (lane % 4);
    if (!trans) return two_halves(element(q, r, c), element(q, r, c + 1));
    return two_halves(element(q, c, r), element(q, c + 1, r));
  }
};

TEST(TensorCoreModel, LdmatrixAllShapes) {
  const LdmatrixSetup s;
  for (int num : {1, 2, 4})
    for (bool trans : {false, true}) {
      const void* rows[32];
      for (int t = 0; t < 32; ++t) rows[t] = t < 8 * num ? s.rows[t] : nullptr;  // unused lanes: ignored
      uint32_t r[32][4];
      for (auto& lane : r) std::fill(std::begin(lane), std::end(lane), 0x12345678u);
      model::ldmatrix_m8n8_b16(rows, num, trans, r);
      for (int lane = 0; lane < 32; ++lane)
        for (int q = 0; q < 4; ++q) {
          const uint32_t want = q < num ? s.expected(q, lane, trans) : 0x12345678u;
          ASSERT_EQ(r[lane][q], want) << "x" << num << (trans ? ".trans" : "") << " lane " << lane << " reg " << q;
        }
    }
}

// ldmatrix.x4 of a 16x16 row-major tile, with lane l pointing at row l%16, column 8·(l/16),
// gives exactly the mma A fragment (matrices: rows 0-7/k 0-7 → a0a1, rows 8-15/k 0-7 → a2a3,
// rows 0-7/k 8-15 → a4a5, rows 8-15/k 8-15 → a6a7), and .x4.trans of a 16x16 K x N row-major
// tile with the same addressing gives the B fragments of n 0-7 (regs 0,1) and n 8-15 (regs 2,3).
TEST(TensorCoreModel, LdmatrixProducesMmaFragments) {
  alignas(16) uint16_t tile[16][16];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) tile[r][c] = uint16_t(r * 16 + c);
  const void* rows[32];
  for (int t = 0; t < 32; ++t) rows[t] = &tile[t % 16][8 * (t / 16)];
  uint32_t plain[32][4], trans[32][4];
  model::ldmatrix_m8n8_b16(rows, 4, false, plain);
  model::ldmatrix_m8n8_b16(rows, 4, true, trans);
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      const auto [r0, c0] = a_position(lane, 2 * j);
      const auto [r1, c1] = a_position(lane, 2 * j + 1);
      EXPECT_EQ(plain[lane][j], two_halves(tile[r0][c0], tile[r1][c1])) << "A lane " << lane << " reg " << j;
    }
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < 2; ++j) {
        const auto [k0, n0] = b_position(lane, 2 * j);
        const auto [k1, n1] = b_position(lane, 2 * j + 1);
        EXPECT_EQ(trans[lane][2 * half + j], two_halves(tile[k0][8 * half + n0], tile[k1][8 * half + n1]))
            << "B lane " << lane << " n-half " << half << " reg " << j;
      }
  }
}

// ---- Through kernels on the simulated GPU ---------------------------------------------------
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)), cudaSuccess);
  }
  DeviceBuffer(const T* host, size_t n) : DeviceBuffer(n) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const T* host) { EXPECT_EQ(cudaMemcpy(ptr, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> download() const {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

unsigned char* dynamic_smem() { return static_cast<unsigned char*>(blockscope::sim::dynamic_shared_memory()); }

// Synchronises and returns "" on success, else the fault's message.
std::string synchronize() {
  const cudaError_t status = cudaDeviceSynchronize();
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

// Each lane loads its own fragments from global memory, one mma, stores d.
template <bool kBf16>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const unsigned lane = threadIdx.x;
  const uint32_t fa[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  const uint32_t fb[2] = {b[lane * 2], b[lane * 2 + 1]};
  float acc[4] = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
  if constexpr (kBf16) {
    tc::mma_m16n8k16_bf16(acc, fa, fb, acc);  // d aliasing c, as accumulation loops do
  } else {
    tc::mma_m16n8k16_f16(acc, fa, fb, acc);
  }
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}

template <bool kBf16>
void expect_kernel_mma(unsigned seed) {
  const Matrices m = exact_matrices(kBf16, seed);
  const Fragments f = distribute(m);
  DeviceBuffer<uint32_t> a(&f.a[0][0], 32 * 4), b(&f.b[0][0], 32 * 2);
  DeviceBuffer<float> c(&f.c[0][0], 32 * 4), d(32 * 4);
  mma_kernel<kBf16><<<dim3(1), dim3(32), 0>>>(a.ptr, b.ptr, c.ptr, d.ptr);
  ASSERT_EQ(synchronize(), "");
  const std::vector<float> out = d.download();
  float dl[32][4], D[16][8];
  std::memcpy(dl, out.data(), sizeof dl);
  gather(dl, D);
  double ref[16][8], mag[16][8];
  reference(m, ref, mag);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 8; ++col) ASSERT_EQ(double(D[r][col]), ref[r][col]) << "D(" << r << "," << col << ")";
}
TEST(TensorCoreSim, MmaF16InKernel) { expect_kernel_mma<false>(7); }
TEST(TensorCoreSim, MmaBf16InKernel) { expect_kernel_mma<true>(8); }

// Shared matrix written with plain stores, then every ldmatrix variant.
__global__ void ldmatrix_kernel(const uint16_t* matrix /* 32 x 24 */, const int* row_of_lane, uint32_t* out /* 6 x 32 x 4 */) {
  const unsigned lane = threadIdx.x;
  auto* s = reinterpret_cast<uint16_t*>(dynamic_smem());
  for (int i = int(lane); i < 32 * 24; i += 32) s[i] = matrix[i];
  __syncthreads();
  const void* p = &s[row_of_lane[lane] * 24];
  uint32_t r1[1], r2[2], r4[4];
  uint32_t* o = out + lane * 4;
  tc::ldmatrix_x1(r1, p);
  o[0 * 128] = r1[0];
  tc::ldmatrix_x2(r2, p);
  o[1 * 128] = r2[0], o[1 * 128 + 1] = r2[1];
  tc::ldmatrix_x4(r4, p);
  for (int q = 0; q < 4; ++q) o[2 * 128 + q] = r4[q];
  tc::ldmatrix_x1_trans(r1, p);
  o[3 * 128] = r1[0];
  tc::ldmatrix_x2_trans(r2, p);
  o[4 * 128] = r2[0], o[4 * 128 + 1] = r2[1];
  tc::ldmatrix_x4_trans(r4, p);
  for (int q = 0; q < 4; ++q) o[5 * 128 + q] = r4[q];
}

TEST(TensorCoreSim, LdmatrixInKernel) {
  const LdmatrixSetup s;
  int row_of_lane[32];
  for (int t = 0; t < 32; ++t) row_of_lane[t] = int((static_cast<const uint16_t*>(s.rows[t]) - s.buffer) / 24);
  DeviceBuffer<uint16_t> matrix(s.buffer, 32 * 24);
  DeviceBuffer<int> rows(row_of_lane, 32);
  std::vector<uint32_t> init(6 * 32 * 4, 0u);
  DeviceBuffer<uint32_t> out(init.data(), init.size());
  ldmatrix_kernel<<<dim3(1), dim3(32), 32 * 24 * sizeof(uint16_t)>>>(matrix.ptr, rows.ptr, out.ptr);
  ASSERT_EQ(synchronize(), "");
  const std::vector<uint32_t> got = out.download();
  const int nums[6] = {1, 2, 4, 1, 2, 4};
  for (int v = 0; v < 6; ++v)
    for (int lane = 0; lane < 32; ++lane)
      for (int q = 0; q < nums[v]; ++q)
        ASSERT_EQ(got[v * 128 + lane * 4 + q], s.expected(q, lane, v >= 3))
            << "x" << nums[v] << (v >= 3 ? ".trans" : "") << " lane " << lane << " reg " << q;
}

// The full tile pipeline: A (16x16, row-major) and B (16x16 = K x N, row-major) global → shared
// with cp.async (rows >= valid_rows of A zero-filled, the last B row a 4-byte tail), wait,
// barrier, ldmatrix.x4 (A) and ldmatrix.x4.trans (B), two mma.m16n8k16 (n 0-7, n 8-15),
// store the 16x16 f32 D.
template <bool kBf16>
__global__ void tile_kernel(const uint16_t* a, const uint16_t* b, float* d, int valid_rows) {
  const int lane = int(threadIdx.x);
  auto* sa = reinterpret_cast<uint16_t*>(dynamic_smem());
  uint16_t* sb = sa + 256;
  const int row = lane / 2, half = lane % 2;  // one 16-byte chunk of each matrix per lane
  tc::cp_async_16(&sa[row * 16 + half * 8], &a[row * 16 + half * 8], row < valid_rows);
  if (row == 15 && half == 1) {
    tc::cp_async_16_zfill(&sb[row * 16 + half * 8], &b[row * 16 + half * 8], 4);  // elements 8, 9 only
  } else {
    tc::cp_async_16(&sb[row * 16 + half * 8], &b[row * 16 + half * 8]);
  }
  tc::cp_async_commit();
  tc::cp_async_wait<0>();
  __syncthreads();
  uint32_t af[4], bf[4];
  tc::ldmatrix_x4(af, &sa[(lane % 16) * 16 + (lane / 16) * 8]);
  tc::ldmatrix_x4_trans(bf, &sb[(lane % 16) * 16 + (lane / 16) * 8]);
  float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
  const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
  if constexpr (kBf16) {
    tc::mma_m16n8k16_bf16(acc0, af, b0, acc0);
    tc::mma_m16n8k16_bf16(acc1, af, b1, acc1);
  } else {
    tc::mma_m16n8k16_f16(acc0, af, b0, acc0);
    tc::mma_m16n8k16_f16(acc1, af, b1, acc1);
  }
  const int g = lane >> 2, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), c = t * 2 + (i & 1);
    d[r * 16 + c] = acc0[i];
    d[r * 16 + 8 + c] = acc1[i];
  }
}

template <bool kBf16>
void expect_tile(int valid_rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(-255, 255);
  std::vector<uint16_t> a(256), b(256);
  std::vector<double> ad(256), bd(256);
  const auto encode = [](double v) {
    return kBf16 ? model::float_to_bf16_bits_rn(float(v)) : model::float_to_f16_bits_rn(float(v));
  };
  for (int i = 0; i < 256; ++i) {
    ad[i] = k(rng) / 64.0, a[i] = encode(ad[i]);
    bd[i] = k(rng) / 64.0, b[i] = encode(bd[i]);
  }
  DeviceBuffer<uint16_t> ga(a.data(), 256), gb(b.data(), 256);
  DeviceBuffer<float> gd(256);
  tile_kernel<kBf16><<<dim3(1), dim3(32), 2 * 256 * sizeof(uint16_t)>>>(ga.ptr, gb.ptr, gd.ptr, valid_rows);
  ASSERT_EQ(synchronize(), "");
  const std::vector<float> d = gd.download();
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      double want = 0;
      for (int kk = 0; kk < 16; ++kk) {
        const double av = r < valid_rows ? ad[r * 16 + kk] : 0.0;             // zero-filled rows
        const double bv = (kk == 15 && n >= 10) ? 0.0 : bd[kk * 16 + n];      // 4-byte tail
        want += av * bv;
      }
      ASSERT_EQ(double(d[r * 16 + n]), want) << "D(" << r << "," << n << ")";
    }
}
TEST(TensorCoreSim, TilePipelineF16) { expect_tile<false>(16, 11); }
TEST(TensorCoreSim, TilePipelineBf16) { expect_tile<true>(16, 12); }
TEST(TensorCoreSim, TilePipelineZeroFillsInvalidRows) {
  expect_tile<true>(5, 13);
  expect_tile<false>(0, 14);
}

// Reading shared memory before the covering wait sees the block-start poison (0xFF bytes); the
// wait makes the data visible. With two groups, wait<1> completes the older one only.
__global__ void poison_kernel(const uint32_t* g, uint32_t* out /* 32 x 4 */) {
  const unsigned lane = threadIdx.x;
  auto* s = reinterpret_cast<uint32_t*>(dynamic_smem());  // 2 x 32 x 16 bytes
  tc::cp_async_16(&s[lane * 4], &g[lane * 4]);
  tc::cp_async_commit();
  tc::cp_async_16(&s[128 + lane * 4], &g[128 + lane * 4]);
  tc::cp_async_commit();
  __syncthreads();  // a barrier does not complete cp.async
  out[lane * 4 + 0] = s[lane * 4];        // group 1 pending: poison
  tc::cp_async_wait<1>();
  out[lane * 4 + 1] = s[lane * 4];        // group 1 complete: data
  out[lane * 4 + 2] = s[128 + lane * 4];  // group 2 pending: poison
  tc::cp_async_wait<0>();
  out[lane * 4 + 3] = s[128 + lane * 4];  // data
}

TEST(TensorCoreSim, ReadingBeforeTheWaitSeesPoison) {
  std::vector<uint32_t> g(256);
  for (int i = 0; i < 256; ++i) g[i] = 0x01000000u + uint32_t(i);
  DeviceBuffer<uint32_t> gg(g.data(), 256), out(32 * 4);
  poison_kernel<<<dim3(1), dim3(32), 2 * 32 * 16>>>(gg.ptr, out.ptr);
  ASSERT_EQ(synchronize(), "");
  const std::vector<uint32_t> o = out.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(o[lane * 4 + 0], 0xffffffffu) << lane;
    EXPECT_EQ(o[lane * 4 + 1], g[lane * 4]) << lane;
    EXPECT_EQ(o[lane * 4 + 2], 0xffffffffu) << lane;
    EXPECT_EQ(o[lane * 4 + 3], g[128 + lane * 4]) << lane;
  }
}

// wait_all also closes the open (uncommitted) group.
__global__ void wait_all_kernel(const uint32_t* g, uint32_t* out) {
  const unsigned lane = threadIdx.x;
  auto* s = reinterpret_cast<uint32_t*>(dynamic_smem());
  tc::cp_async_16(&s[lane * 4], &g[lane * 4]);  // never committed explicitly
  out[lane * 2] = s[lane * 4];
  tc::cp_async_wait_all();
  out[lane * 2 + 1] = s[lane * 4];
}
TEST(TensorCoreSim, WaitAllCompletesUncommittedCopies) {
  std::vector<uint32_t> g(128);
  for (int i = 0; i < 128; ++i) g[i] = 0x02000000u + uint32_t(i);
  DeviceBuffer<uint32_t> gg(g.data(), 128), out(64);
  wait_all_kernel<<<dim3(1), dim3(32), 32 * 16>>>(gg.ptr, out.ptr);
  ASSERT_EQ(synchronize(), "");
  const std::vector<uint32_t> o = out.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(o[lane * 2], 0xffffffffu) << lane;
    EXPECT_EQ(o[lane * 2 + 1], g[lane * 4]) << lane;
  }
}

// A thread that exits without waiting: its copies are dropped (documented choice), so another
// thread that reads the data after a barrier sees the poison; and a second launch of the same
// kernel is not disturbed by the leftovers.
__global__ void no_wait_kernel(const uint32_t* g, uint32_t* out, int waiting_lane) {
  const unsigned lane = threadIdx.x;
  auto* s = reinterpret_cast<uint32_t*>(dynamic_smem());
  if (int(lane) == 0) {
    tc::cp_async_16(&s[0], &g[0]);
    tc::cp_async_commit();
    if (waiting_lane == 0) tc::cp_async_wait<0>();
  }
  __syncthreads();
  if (lane == 1) out[0] = s[0];
}
TEST(TensorCoreSim, CopiesNeverWaitedForAreDropped) {
  std::vector<uint32_t> g(4, 0x03000000u);
  DeviceBuffer<uint32_t> gg(g.data(), 4), out(1);
  no_wait_kernel<<<dim3(1), dim3(32), 16>>>(gg.ptr, out.ptr, -1);
  ASSERT_EQ(synchronize(), "");
  EXPECT_EQ(out.download()[0], 0xffffffffu);
  no_wait_kernel<<<dim3(1), dim3(32), 16>>>(gg.ptr, out.ptr, 0);
  ASSERT_EQ(synchronize(), "");
  EXPECT_EQ(out.download()[0], 0x03000000u);
}

// The race check is not compiled into ASan builds (nvcc-sim leaves its instrumentation out
// there, as for sim/test/checks_test.cu): this test runs in the plain sim preset.
#if !defined(__SANITIZE_ADDRESS__)
// A copy may land at any moment between its issue and the wait, so issuing it into a tile another
// warp still reads is a race even where the data would only move at the wait: the simulator counts
// the destination as written at the issue (and again at the wait). A barrier between makes it right.
__global__ void overwrite_read_tile_kernel(const uint32_t* g, uint32_t* out, bool barrier_before_copy) {
  auto* s = reinterpret_cast<uint32_t*>(dynamic_smem());  // one 16-byte tile
  if (threadIdx.x < 4) s[threadIdx.x] = 10u + threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 32) out[0] = s[0];  // warp 1 reads the tile
  if (barrier_before_copy) __syncthreads();
  if (threadIdx.x == 0) {  // warp 0 refills it, waiting only after the next barrier
    tc::cp_async_16(s, g);
    tc::cp_async_commit();
  }
  __syncthreads();
  if (threadIdx.x == 0) tc::cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x == 33) out[1] = s[0];
}
TEST(TensorCoreSim, CopyIntoATileAnotherWarpReadsIsARace) {
  namespace sim = blockscope::sim;
  for (const char* schedule : {"inorder", "reverse", "random:3"}) {
    std::string error;
    sim::Schedule chosen;
    ASSERT_TRUE(sim::parse_schedule(schedule, &chosen, &error)) << error;
    sim::set_schedule(chosen);
    sim::set_checks(sim::Checks{});
    std::vector<uint32_t> g = {0x04000000u, 1, 2, 3};
    DeviceBuffer<uint32_t> gg(g.data(), 4), out(2);
    overwrite_read_tile_kernel<<<dim3(1), dim3(64), 16>>>(gg.ptr, out.ptr, false);
    const std::string race = synchronize();
    EXPECT_NE(race.find("shared-memory race"), std::string::npos) << schedule << ": " << race;
    overwrite_read_tile_kernel<<<dim3(1), dim3(64), 16>>>(gg.ptr, out.ptr, true);
    ASSERT_EQ(synchronize(), "") << schedule;
    EXPECT_EQ(out.download(), (std::vector<uint32_t>{10u, 0x04000000u})) << schedule;
  }
  blockscope::sim::set_schedule(blockscope::sim::Schedule{});
}
#endif  // !__SANITIZE_ADDRESS__

// Misuse is a Fault naming what went wrong.
__global__ void misaligned_cp_async_kernel(const uint32_t* g) {
  tc::cp_async_16(dynamic_smem() + 8, g);
  tc::cp_async_wait_all();
}
__global__ void misaligned_ldmatrix_kernel() {
  uint32_t r[1];
  tc::ldmatrix_x1(r, dynamic_smem() + 4 * threadIdx.x + 2);
}
__global__ void ldmatrix_past_the_end_kernel() {
  uint32_t r[4];
  tc::ldmatrix_x4(r, dynamic_smem() + 16 * threadIdx.x);  // lane 15's row ends at 256 > 248
}
// .sync.aligned: an mma that only half the warp executes is a Fault, not a silent result.
__global__ void half_warp_mma_kernel(float* d) {
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float acc[4] = {0, 0, 0, 0};
  if (threadIdx.x < 16) tc::mma_m16n8k16_bf16(acc, a, b, acc);
  d[threadIdx.x] = acc[0];
}

TEST(TensorCoreSim, MisuseFaults) {
  {
    DeviceBuffer<float> d(32);
    half_warp_mma_kernel<<<dim3(1), dim3(32), 0>>>(d.ptr);
    const std::string error = synchronize();
    EXPECT_NE(error.find("mma.sync"), std::string::npos) << error;
  }
  DeviceBuffer<uint32_t> g(8);
  misaligned_cp_async_kernel<<<dim3(1), dim3(32), 64>>>(g.ptr);
  EXPECT_NE(synchronize().find("not 16-byte aligned"), std::string::npos);
  misaligned_ldmatrix_kernel<<<dim3(1), dim3(32), 256>>>();
  EXPECT_NE(synchronize().find("ldmatrix"), std::string::npos);
  ldmatrix_past_the_end_kernel<<<dim3(1), dim3(32), 248>>>();
  EXPECT_NE(synchronize().find("past the end"), std::string::npos);
}

}  // namespace
