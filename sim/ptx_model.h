// Host-only model of the warp-level tensor-core instructions the simulated GPU emulates (sim/ptx.h;
// ops/common/cuda/tensor_core.cuh wraps them):
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 and
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16.
//
// Plain C++17 (no CUDA compiler, no fibers): every function takes all 32 lanes' registers at
// once, as a warp collective's combine step sees them, and computes every lane's result.
// sim/ptx.cpp calls these from its warp_collective combine functions;
// sim/test/tensor_core_test.cu checks them against plain
// matrix products with its own, independently written fragment mapping.
//
// Source of every layout fact: the PTX ISA (NVIDIA "Parallel Thread Execution ISA"), sections
//   "Matrix Fragments for mma.m16n8k16 with floating point type" (9.7.15.5.8 in PTX ISA 8.x/9.x;
//     9.7.14.5.8 in some older numberings; Figures 79, 81, 83), and
//   "Warp-level matrix load instruction: ldmatrix" (9.7.15.5.15 / 9.7.14.5.15; Figure 104).
// Both name groupID = %laneid >> 2 and threadID_in_group = %laneid % 4.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace blockscope::sim::ptx_model {

constexpr int kWarpSize = 32;

// ---- 16-bit float formats -----------------------------------------------------------------
// Bit-exact decoders (every f16 and bf16 value is exactly representable in f32) and
// round-to-nearest-even encoders (what __float2half_rn / __float2bfloat16_rn do; a NaN stays a
// quiet NaN of the same sign).
inline float bf16_bits_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16_bits_to_float(uint16_t bits) {
  const uint32_t sign = (bits >> 15) & 1u;
  const int exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal: m · 2^-24, exact
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), exponent - 25);  // 1.m · 2^(e-15)
  }
  return sign ? -magnitude : magnitude;
}

inline uint16_t float_to_bf16_bits_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // keep sign, force quiet
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);                   // ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);                     // overflow → ±inf
}

inline uint16_t float_to_f16_bits_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  const float a = std::fabs(f);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf (max 65504)
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal range (or zero): a = n · 2^-24 with n < 1024; nearbyint rounds ties to even in
    // the default rounding mode. n == 1024 carries into the smallest normal, which is correct.
    const float n = std::nearbyint(std::ldexp(a, 24));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(n));
  }
  // Normal: keep 10 of f32's 23 mantissa bits, round to nearest even on the 13 dropped bits.
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t rounded = mag + 0x0fffu + ((mag >> 13) & 1u);
  const uint32_t exponent = (rounded >> 23) - 127 + 15;  // ≥ 1 here; a carry may bump it
  const uint32_t mantissa = (rounded >> 13) & 0x3ffu;
  return static_cast<uint16_t>(sign | (exponent << 10) | mantissa);
}

// Two 16-bit elements in one 32-bit register: the lower-numbered element in the low half
// ("Elements (low to high)" in the PTX ISA's fragment tables; also what __floats2half2_rn(lo, hi)
// and __floats2bfloat162_rn(lo, hi) produce: .x is the low half).
inline uint32_t pack_b16x2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
inline uint16_t low_b16(uint32_t r) { return static_cast<uint16_t>(r & 0xffffu); }
inline uint16_t high_b16(uint32_t r) { return static_cast<uint16_t>(r >> 16); }

// ---- mma.m16n8k16 fragment layouts ----------------------------------------------------------
// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type":
//   A (16x16, row-major operand, .f16/.bf16): four .f16x2 registers hold a0..a7 (low to high),
//     so register j holds a(2j) in its low half and a(2j+1) in its high half;
//     row = groupID      for ai where 0 <= i < 2 || 4 <= i < 6,   groupID + 8 otherwise
//     col = threadID_in_group*2 + (i & 1)      for i < 4
//           threadID_in_group*2 + (i & 1) + 8  for i >= 4                        (Figure 79)
//   B (16x8 = KxN, .col operand, .f16/.bf16): two .f16x2 registers hold b0..b3;
//     row = threadID_in_group*2 + (i & 1)      for bi where i < 2
//           threadID_in_group*2 + (i & 1) + 8  for i >= 2
//     col = groupID                                                              (Figure 81)
//   C/D (16x8, .f32): four .f32 registers c0..c3;
//     row = groupID for ci where i < 2, groupID + 8 for i >= 2
//     col = threadID_in_group*2 + (i & 1)                                        (Figure 83)
struct RowCol {
  int row, col;
};
inline RowCol mma_a_element(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  const bool low_rows = (i < 2) || (i >= 4 && i < 6);
  return {low_rows ? group : group + 8, tig * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
inline RowCol mma_b_element(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
}
inline RowCol mma_c_element(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {i < 2 ? group : group + 8, tig * 2 + (i & 1)};
}

// D = A·B + C for the whole warp. a[l], b[l], c[l] are lane l's registers; d[l] receives lane
// l's result. bf16 selects .bf16 inputs, else .f16.
//
// Numerics: every product of two f16 (11-bit significands) or two bf16 (8-bit) values is exact
// in f32 (22 or 16 significant bits; f16 products stay far inside f32's exponent range; bf16
// products can only overflow/underflow f32 where the values themselves are near f32's limits).
// Each D element is accumulated in f32, round-to-nearest-even after every addition, starting
// from C and adding the 16 products in k order. The hardware's internal accumulation order,
// intermediate precision and rounding (which NVIDIA does not document, and which differ from
// IEEE sequential f32 sums) are NOT modelled: results can differ from a GPU in the last bits,
// within the f32-accumulation error bound of |C| + Σ|a·b|. Subnormals are kept (not flushed).
inline void mma_m16n8k16(const uint32_t a[kWarpSize][4], const uint32_t b[kWarpSize][2],
                         const float c[kWarpSize][4], float d[kWarpSize][4], bool bf16) {
  const auto decode = [bf16](uint16_t bits) { return bf16 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits); };
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const uint32_t reg = a[lane][i / 2];
      const RowCol at = mma_a_element(lane, i);
      A[at.row][at.col] = decode(i % 2 == 0 ? low_b16(reg) : high_b16(reg));
    }
    for (int i = 0; i < 4; ++i) {
      const uint32_t reg = b[lane][i / 2];
      const RowCol at = mma_b_element(lane, i);
      B[at.row][at.col] = decode(i % 2 == 0 ? low_b16(reg) : high_b16(reg));
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol at = mma_c_element(lane, i);
      C[at.row][at.col] = c[lane][i];
    }
  }
  float D[16][8];
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      float acc = C[m][n];
      for (int k = 0; k < 16; ++k) acc += A[m][k] * B[k][n];  // exact product, one rounding per add
      D[m][n] = acc;
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol at = mma_c_element(lane, i);
      d[lane][i] = D[at.row][at.col];
    }
  }
}

// ---- ldmatrix.m8n8 (.b16) ---------------------------------------------------------------------
// PTX ISA, "Warp-level matrix load instruction: ldmatrix":
//   * Each matrix is 8x8 16-bit elements; each of its 8 rows is 16 contiguous bytes at an address
//     supplied by one thread ("Each address corresponds to the start of a matrix row"), rows need
//     not be contiguous. addr0–addr7 are the rows of the first matrix, addr8–addr15 of the
//     second, …; threads 0–7 supply addr0–7 (.x1), threads 0–15 supply addr0–15 (.x2), all 32
//     threads supply addr0–31 (.x4). (On sm_80+ the other threads' addresses are ignored.)
//   * "A group of four threads loads an entire row": lane l's register for matrix m holds row
//     l/4 (groupID), columns 2·(l%4) and 2·(l%4)+1 (low half, high half)           (Figure 104).
//     Register m of each lane holds its fragment of matrix m (.x2/.x4).
//   * .trans: "the matrix is loaded in column-major format": lane l receives element
//     (row l/4, col 2·(l%4)+j) of the TRANSPOSED matrix, i.e. stored row 2·(l%4)+j, column l/4.
// rows[t] = the row address supplied by thread t (only the first 8·num are read; each must point
// at 16 readable bytes). r[l][m] receives lane l's register m (m < num; the rest untouched).
inline void ldmatrix_m8n8_b16(const void* const rows[kWarpSize], int num, bool trans, uint32_t r[kWarpSize][4]) {
  for (int m = 0; m < num; ++m) {
    uint16_t M[8][8];  // matrix m as stored: M[row][col]
    for (int row = 0; row < 8; ++row) std::memcpy(M[row], rows[8 * m + row], 16);
    for (int lane = 0; lane < kWarpSize; ++lane) {
      const int group = lane >> 2, tig = lane % 4;
      const uint16_t lo = trans ? M[2 * tig][group] : M[group][2 * tig];
      const uint16_t hi = trans ? M[2 * tig + 1][group] : M[group][2 * tig + 1];
      r[lane][m] = pack_b16x2(lo, hi);
    }
  }
}

}  // namespace blockscope::sim::ptx_model
