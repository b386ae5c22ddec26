// Tests of the wmma API (<mma.h>, nvcuda::wmma) on the simulated GPU: sim/cuda_include/mma.h and
// sim/wmma.cpp. Every type and shape the CUDA Programming Guide lists ("Warp Matrix Functions")
// against the test's own float64 / int64 products of fresh random inputs, in every memory layout
// of A, B, C and D with ldm wider than the tile; a multi-warp tiled GEMM staged through shared
// memory with an elementwise epilogue; and the misuse a GPU punishes (a partial warp, a
// misaligned pointer or ldm, lanes that disagree), each a fault naming what went wrong.
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/sim.h"
#include "sim/test/launch_result.h"
#include "sim/test/managed.h"

namespace {

using namespace nvcuda;
using blockscope::sim::test::finish;
using blockscope::sim::test::has;
using blockscope::sim::test::Managed;

template <class T>
using Storage = typename wmma::helper_traits<T>::storage_element_type;

// ---- One warp, one tile: D = A·B + C through global memory ------------------------------------
// `alias`: the accumulation form mma_sync(c, a, b, c) (TC == TD only).
template <int M, int N, int K, class TA, class LA, class LB, class TC, class TD, bool alias>
__global__ void tile_mma_kernel(const Storage<TA>* a, unsigned lda, const Storage<TA>* b, unsigned ldb, const TC* c,
                                unsigned ldc, wmma::layout_t c_layout, TD* d, unsigned ldd, wmma::layout_t d_layout) {
  wmma::fragment<wmma::matrix_a, M, N, K, TA, LA> fa;
  wmma::fragment<wmma::matrix_b, M, N, K, TA, LB> fb;
  wmma::fragment<wmma::accumulator, M, N, K, TC> fc;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::load_matrix_sync(fc, c, ldc, c_layout);
  if constexpr (alias) {
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, ldd, d_layout);
  } else {
    wmma::fragment<wmma::accumulator, M, N, K, TD> fd;
    wmma::mma_sync(fd, fa, fb, fc);
    wmma::store_matrix_sync(d, fd, ldd, d_layout);
  }
}

// The test's own conversions (the toolkit's host code for half and bfloat16).
template <class T>
T encode(double v) {
  if constexpr (std::is_same<T, __half>::value) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double decode(T v) {
  if constexpr (std::is_same<T, __half>::value) {
    return __half2float(v);
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __bfloat162float(v);
  } else {
    return static_cast<double>(v);
  }
}

// cvt.rna.tf32.f32 written from its definition: 11 significant bits, ties away from zero
// (std::round rounds halves away from zero). Normal floats only.
float tf32_reference(float x) {
  int exponent = 0;
  const double mantissa = std::frexp(static_cast<double>(x), &exponent);  // [0.5, 1)
  return static_cast<float>(std::ldexp(std::round(std::ldexp(mantissa, 11)), exponent - 11));
}

// A rows x cols matrix stored in `layout` with leading dimension ld (elements).
size_t at(bool col_major, unsigned ld, int row, int col) {
  return col_major ? static_cast<size_t>(col) * ld + row : static_cast<size_t>(row) * ld + col;
}

// Values for one case. `exact`: multiples of 1/64 (integers for int types) small enough that
// every product and partial sum is exact in f32 (and in double): any layout or mapping mistake is
// a wrong value, not rounding noise. Otherwise arbitrary values, checked against the f32
// accumulation error bound.
template <class TA>
double input_value(std::mt19937& rng, bool exact) {
  if constexpr (std::is_same<TA, signed char>::value) {
    return std::uniform_int_distribution<int>(-128, 127)(rng);
  } else if constexpr (std::is_same<TA, unsigned char>::value) {
    return std::uniform_int_distribution<int>(0, 255)(rng);
  } else if (exact) {
    return std::uniform_int_distribution<int>(-255, 255)(rng) / 64.0;
  } else if constexpr (std::is_same<TA, __half>::value) {
    return decode(encode<__half>(std::uniform_real_distribution<double>(-8, 8)(rng)));
  } else if constexpr (std::is_same<TA, __nv_bfloat16>::value) {
    return decode(encode<__nv_bfloat16>(std::uniform_real_distribution<double>(-8, 8)(rng)));
  } else {
    return static_cast<float>(std::uniform_real_distribution<double>(-8, 8)(rng));  // tf32: unrounded floats
  }
}
template <class TC>
double accumulator_value(std::mt19937& rng, bool exact) {
  if constexpr (std::is_same<TC, int>::value) {
    return std::uniform_int_distribution<int>(-(1 << 20), 1 << 20)(rng);
  } else if (exact) {
    return std::uniform_int_distribution<int>(-255, 255)(rng) / 16.0;
  } else {
    return decode(encode<TC>(std::uniform_real_distribution<double>(-100, 100)(rng)));
  }
}

// ldm for a stored extent (elements): the extent rounded up to 16 bytes as the guide requires (8
// int8 columns take a 16-byte row), plus 32 bytes' worth when `wide` (ldm wider than the tile).
template <class S>
unsigned leading(int extent, bool wide) {
  const unsigned per_16_bytes = static_cast<unsigned>(16 / sizeof(S));
  const unsigned rounded = (static_cast<unsigned>(extent) + per_16_bytes - 1) / per_16_bytes * per_16_bytes;
  return rounded + (wide ? 2 * per_16_bytes : 0u);
}

struct CaseOptions {
  bool c_col, d_col, wide, exact;
};

template <int M, int N, int K, class TA, class LA, class LB, class TC, class TD, bool alias = false>
void run_tile_case(unsigned seed, const CaseOptions& o) {
  using SA = Storage<TA>;
  constexpr bool a_col = std::is_same<LA, wmma::col_major>::value, b_col = std::is_same<LB, wmma::col_major>::value;
  SCOPED_TRACE("seed " + std::to_string(seed) + ", A " + (a_col ? "col" : "row") + ", B " + (b_col ? "col" : "row") +
               ", C " + (o.c_col ? "col" : "row") + ", D " + (o.d_col ? "col" : "row") + (o.wide ? ", wide ldm" : "") +
               (o.exact ? ", exact values" : ", random values"));
  std::mt19937 rng(seed);
  const unsigned lda = leading<SA>(a_col ? M : K, o.wide), ldb = leading<SA>(b_col ? K : N, o.wide);
  const unsigned ldc = leading<TC>(o.c_col ? M : N, o.wide), ldd = leading<TD>(o.d_col ? M : N, o.wide);
  Managed<SA> a(static_cast<size_t>(lda) * (a_col ? K : M));
  Managed<SA> b(static_cast<size_t>(ldb) * (b_col ? N : K));
  Managed<TC> c(static_cast<size_t>(ldc) * (o.c_col ? N : M));
  Managed<TD> d(static_cast<size_t>(ldd) * (o.d_col ? N : M));
  std::vector<double> A(M * K), B(K * N), C(M * N);
  for (int r = 0; r < M; ++r)
    for (int k = 0; k < K; ++k) {
      A[r * K + k] = input_value<TA>(rng, o.exact);
      a[at(a_col, lda, r, k)] = static_cast<SA>(encode<SA>(A[r * K + k]));
    }
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      B[k * N + n] = input_value<TA>(rng, o.exact);
      b[at(b_col, ldb, k, n)] = static_cast<SA>(encode<SA>(B[k * N + n]));
    }
  for (int r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      C[r * N + n] = accumulator_value<TC>(rng, o.exact);
      c[at(o.c_col, ldc, r, n)] = encode<TC>(C[r * N + n]);
    }
  tile_mma_kernel<M, N, K, TA, LA, LB, TC, TD, alias><<<1, 32>>>(a.data(), lda, b.data(), ldb, c.data(), ldc,
                                                                   o.c_col ? wmma::mem_col_major : wmma::mem_row_major,
                                                                   d.data(), ldd,
                                                                   o.d_col ? wmma::mem_col_major : wmma::mem_row_major);
  ASSERT_EQ(finish(), "");
  constexpr bool tf32 = std::is_same<TA, wmma::precision::tf32>::value;
  for (int r = 0; r < M; ++r) {
    for (int n = 0; n < N; ++n) {
      double exact_sum = C[r * N + n], magnitude = std::fabs(C[r * N + n]);
      for (int k = 0; k < K; ++k) {
        double x = A[r * K + k], y = B[k * N + n];
        if (tf32) {
          x = tf32_reference(static_cast<float>(x));
          y = tf32_reference(static_cast<float>(y));
        }
        exact_sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double got = decode(d[at(o.d_col, ldd, r, n)]);
      if (std::is_same<TD, int>::value || std::is_same<TD, double>::value || o.exact) {
        // Exact: integers, f64 sums of 1/64 multiples, and f32 sums that never round.
        const double want = std::is_same<TD, __half>::value ? decode(encode<__half>(exact_sum)) : exact_sum;
        ASSERT_EQ(got, want) << "D[" << r << "][" << n << "]";
      } else {
        // f32 accumulation of K + 1 terms, each addition rounded (unit roundoff 2^-24); an f16
        // result rounded once more (2^-11 of it).
        double bound = (K + 1) * std::ldexp(magnitude, -24) * 1.0001;
        if (std::is_same<TD, __half>::value) bound += std::ldexp(std::fabs(exact_sum), -11) + std::ldexp(1.0, -25);
        ASSERT_LE(std::fabs(got - exact_sum), bound) << "D[" << r << "][" << n << "]";
      }
    }
  }
}

// Every layout of A and B, each with a different accumulator layout pair; ldm tight and wide.
template <int M, int N, int K, class TA, class TC, class TD>
void run_every_layout(bool exact) {
  const unsigned seed = std::random_device{}();
  const CaseOptions options[4] = {{false, false, false, exact}, {true, true, true, exact}, {false, true, true, exact},
                                  {true, false, false, exact}};
  run_tile_case<M, N, K, TA, wmma::row_major, wmma::row_major, TC, TD>(seed, options[0]);
  run_tile_case<M, N, K, TA, wmma::row_major, wmma::col_major, TC, TD>(seed + 1, options[1]);
  run_tile_case<M, N, K, TA, wmma::col_major, wmma::row_major, TC, TD>(seed + 2, options[2]);
  run_tile_case<M, N, K, TA, wmma::col_major, wmma::col_major, TC, TD>(seed + 3, options[3]);
  if constexpr (std::is_same<TC, TD>::value) {
    run_tile_case<M, N, K, TA, wmma::row_major, wmma::col_major, TC, TD, true>(seed + 4, options[2]);
  }
}

template <int M, int N, int K>
void run_half_shape() {
  for (bool exact : {true, false}) {
    run_every_layout<M, N, K, __half, float, float>(exact);
    run_every_layout<M, N, K, __half, __half, __half>(exact);
    run_every_layout<M, N, K, __half, __half, float>(exact);
    run_every_layout<M, N, K, __half, float, __half>(exact);
  }
}

TEST(Wmma, HalfEveryShapeAndLayout) {
  run_half_shape<16, 16, 16>();
  run_half_shape<32, 8, 16>();
  run_half_shape<8, 32, 16>();
}

TEST(Wmma, Bfloat16EveryShapeAndLayout) {
  for (bool exact : {true, false}) {
    run_every_layout<16, 16, 16, __nv_bfloat16, float, float>(exact);
    run_every_layout<32, 8, 16, __nv_bfloat16, float, float>(exact);
    run_every_layout<8, 32, 16, __nv_bfloat16, float, float>(exact);
  }
}

TEST(Wmma, Int8EveryShapeAndLayout) {
  run_every_layout<16, 16, 16, signed char, int, int>(true);
  run_every_layout<32, 8, 16, signed char, int, int>(true);
  run_every_layout<8, 32, 16, signed char, int, int>(true);
  run_every_layout<16, 16, 16, unsigned char, int, int>(true);
  run_every_layout<32, 8, 16, unsigned char, int, int>(true);
  run_every_layout<8, 32, 16, unsigned char, int, int>(true);
}

// Inputs not converted with __float_to_tf32 are rounded to tf32 by the mma (as cvt.rna would).
TEST(Wmma, Tf32EveryLayout) {
  run_every_layout<16, 16, 8, wmma::precision::tf32, float, float>(true);
  run_every_layout<16, 16, 8, wmma::precision::tf32, float, float>(false);
}

TEST(Wmma, DoubleEveryLayout) {
  run_every_layout<8, 8, 4, double, double, double>(true);
  // Arbitrary doubles: f64 FMAs in k order against the float64 sum in another order.
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  Managed<double> a(32), b(32), c(64), d(64);
  std::uniform_real_distribution<double> value(-1, 1);
  for (int i = 0; i < 32; ++i) a[i] = value(rng), b[i] = value(rng);
  for (int i = 0; i < 64; ++i) c[i] = value(rng);
  tile_mma_kernel<8, 8, 4, double, wmma::row_major, wmma::row_major, double, double, false>
      <<<1, 32>>>(a.data(), 4, b.data(), 8, c.data(), 8, wmma::mem_row_major, d.data(), 8, wmma::mem_row_major);
  ASSERT_EQ(finish(), "");
  for (int r = 0; r < 8; ++r)
    for (int n = 0; n < 8; ++n) {
      double want = c[r * 8 + n], magnitude = std::fabs(want);
      for (int k = 0; k < 4; ++k) want += a[r * 4 + k] * b[k * 8 + n], magnitude += std::fabs(a[r * 4 + k] * b[k * 8 + n]);
      EXPECT_LE(std::fabs(d[r * 8 + n] - want), 8 * std::ldexp(magnitude, -53));
    }
}

// ---- __float_to_tf32 and the int satf overload ---------------------------------------------------
__global__ void tf32_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = wmma::__float_to_tf32(in[i]);
}

TEST(Wmma, FloatToTf32RoundsToNearestTiesAway) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int n = 4096;
  Managed<float> in(n), out(n);
  for (int i = 0; i < n; ++i) {
    uint32_t bits = (rng() & 0x807fffffu) | ((100u + rng() % 50u) << 23);  // normal, |x| in [2^-27, 2^23)
    if (i % 4 == 0) bits = (bits & ~0x1fffu) | 0x1000u;                    // exactly halfway: away from zero
    std::memcpy(&in[i], &bits, 4);
  }
  tf32_kernel<<<n / 128, 128>>>(in.data(), out.data(), n);
  ASSERT_EQ(finish(), "");
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], tf32_reference(in[i])) << in[i];
}

__global__ void int_satf_kernel(const signed char* a, const signed char* b, const int* c, int* wrapped, int* clamped) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc, fd;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(fd, fa, fb, fc);
  wmma::store_matrix_sync(wrapped, fd, 16, wmma::mem_row_major);
  wmma::mma_sync(fd, fa, fb, fc, true);
  wmma::store_matrix_sync(clamped, fd, 16, wmma::mem_row_major);
}

// Past int32: without satf the sum wraps (two's complement), with satf it is clamped.
TEST(Wmma, IntSaturatesWithSatf) {
  Managed<signed char> a(256, 127), b(256, 127);
  Managed<int> c(256), wrapped(256), clamped(256);
  for (int i = 0; i < 256; ++i) c[i] = (i % 2 == 0) ? INT32_MAX - 100 : INT32_MIN + 100;
  for (int i = 0; i < 256; i += 3) a[i] = -128;  // some rows mixed
  int_satf_kernel<<<1, 32>>>(a.data(), b.data(), c.data(), wrapped.data(), clamped.data());
  ASSERT_EQ(finish(), "");
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      int64_t sum = c[r * 16 + n];
      for (int k = 0; k < 16; ++k) sum += int64_t(a[r * 16 + k]) * b[k * 16 + n];
      const int64_t clamp = std::min<int64_t>(std::max<int64_t>(sum, INT32_MIN), INT32_MAX);
      EXPECT_EQ(clamped[r * 16 + n], clamp);
      EXPECT_EQ(static_cast<uint32_t>(wrapped[r * 16 + n]), static_cast<uint32_t>(static_cast<uint64_t>(sum)));
    }
}

// ---- A tiled GEMM as people write it ----------------------------------------------------------------
// D = alpha·A·B + beta·C, A M x K row-major, B K x N column-major (both f32, staged as f16), C and
// D M x N row-major. A block
// of 4 warps computes a 32 x 32 tile of D, each warp a 16 x 16 quarter; per 16-wide step of K the
// block stages A's 32 x 16 and B's 16 x 32 slices in shared memory (padded rows, 32-byte aligned),
// and the epilogue scales the accumulators elementwise. kSkipFirstBarrier plants the classic
// hazard: warps load a slice other warps may not have finished writing.
constexpr int kTile = 32, kStep = 16, kPad = 16;  // kPad: 16 halves keep rows 32-byte aligned
template <bool kSkipFirstBarrier>
__global__ void tiled_gemm_kernel(const float* A, const float* B, const float* C, float* D, int M, int N, int K,
                                  float alpha, float beta) {
  __shared__ __align__(32) __half a_tile[kTile][kStep + kPad];  // row-major slice of A
  __shared__ __align__(32) __half b_tile[kTile][kStep + kPad];  // B's columns, each a row here
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_row = warp / 2, warp_col = warp % 2;
  const int tile_row = static_cast<int>(blockIdx.y) * kTile, tile_col = static_cast<int>(blockIdx.x) * kTile;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < K; k0 += kStep) {
    for (int i = static_cast<int>(threadIdx.x); i < kTile * kStep; i += static_cast<int>(blockDim.x)) {
      const int r = i / kStep, k = i % kStep;
      // __half(x), not __float2half(x): the sim's race check misses this loop's stores when the
      // value comes from __float2half (found here, reported; the planted hazard below needs them).
      a_tile[r][k] = __half(A[static_cast<size_t>(tile_row + r) * K + k0 + k]);
      b_tile[r][k] = __half(B[static_cast<size_t>(tile_col + r) * K + k0 + k]);
    }
    if (!kSkipFirstBarrier) __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, &a_tile[warp_row * 16][0], kStep + kPad);
    wmma::load_matrix_sync(fb, &b_tile[warp_col * 16][0], kStep + kPad);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncthreads();
  }
  const size_t corner = static_cast<size_t>(tile_row + warp_row * 16) * N + tile_col + warp_col * 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c_frag;
  wmma::load_matrix_sync(c_frag, C + corner, N, wmma::mem_row_major);
  for (int i = 0; i < c_frag.num_elements; ++i) c_frag.x[i] = alpha * acc.x[i] + beta * c_frag.x[i];
  wmma::store_matrix_sync(D + corner, c_frag, N, wmma::mem_row_major);
}

TEST(Wmma, TiledGemmThroughSharedMemory) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int M = 64, N = 96, K = 64;
  const float alpha = 2.0f, beta = 0.5f;
  std::vector<double> A(M * K), B(K * N), C(M * N);
  std::vector<float> a(M * K), b(K * N);  // b column-major
  std::vector<float> c(M * N);
  std::uniform_int_distribution<int> small(-255, 255);
  for (int i = 0; i < M * K; ++i) A[i] = small(rng) / 64.0, a[i] = float(A[i]);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) B[k * N + n] = small(rng) / 64.0, b[n * K + k] = float(B[k * N + n]);
  for (int i = 0; i < M * N; ++i) C[i] = small(rng) / 16.0, c[i] = float(C[i]);
  // Device memory written by copies, so initcheck follows every byte the loads read.
  float *dA, *dB, *dC, *dD;
  ASSERT_EQ(cudaMalloc(&dA, a.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dB, b.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dC, c.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dD, c.size() * sizeof(float)), cudaSuccess);
  cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dC, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice);
  tiled_gemm_kernel<false><<<dim3(N / kTile, M / kTile), 128>>>(dA, dB, dC, dD, M, N, K, alpha, beta);
  ASSERT_EQ(finish(), "");
  std::vector<float> d(M * N);
  cudaMemcpy(d.data(), dD, d.size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (int r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += A[r * K + k] * B[k * N + n];
      ASSERT_EQ(d[r * N + n], alpha * sum + beta * C[r * N + n]) << r << ", " << n;  // every step exact
    }
#if !defined(__SANITIZE_ADDRESS__)
  // The planted hazard: the wmma loads race the other warps' stores of the slice (RAW).
  tiled_gemm_kernel<true><<<dim3(N / kTile, M / kTile), 128>>>(dA, dB, dC, dD, M, N, K, alpha, beta);
  const std::string error = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(error, "race") || has(error, "hazard")) << error;
#endif
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dD);
}

// ---- Misuse ------------------------------------------------------------------------------------------
__global__ void half_warp_mma_kernel(const __half* a, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, a, 16);
  wmma::fill_fragment(acc, 0.0f);
  if (threadIdx.x >= 16) return;  // half the warp leaves before the .aligned mma
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// Each lane's sum of its elements lands in sink[lane] (so the loads are not dead code).
__global__ void load_kernel(const __half* a, unsigned ldm, unsigned lane_with_other_ldm, unsigned other_ldm,
                            float* sink) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  const unsigned lane = threadIdx.x % 32;
  wmma::load_matrix_sync(fa, a, lane == lane_with_other_ldm ? other_ldm : ldm);
  float sum = 0;
  for (int i = 0; i < fa.num_elements; ++i) sum += __half2float(fa.x[i]);
  sink[threadIdx.x] = sum;
}

__global__ void store_kernel(float* d, unsigned ldm) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  wmma::store_matrix_sync(d, acc, ldm, wmma::mem_col_major);
}

TEST(Wmma, PartialWarpMmaFaults) {
  Managed<float> sink(32);
  Managed<__half> a(256, __float2half(1.0f));
  Managed<float> d(256);
  half_warp_mma_kernel<<<1, 32>>>(a.data(), d.data());
  const std::string error = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(error, "wmma::mma_sync") && has(error, ".aligned")) << error;
  // A block of 16 threads: lanes 16-31 do not exist, and the load needs all 32.
  load_kernel<<<1, 16>>>(a.data(), 16, 99, 0, sink.data());
  const std::string partial = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(partial, "wmma::load_matrix_sync") && has(partial, ".aligned")) << partial;
}

TEST(Wmma, MisalignedPointerFaults) {
  Managed<float> sink(32);
  Managed<__half> a(512, __float2half(1.0f));
  load_kernel<<<1, 32>>>(a.data() + 8, 16, 99, 0, sink.data());  // 16 bytes past a 256-byte boundary
  const std::string error = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(error, "wmma::load_matrix_sync") && has(error, "32-byte")) << error;
  Managed<float> d(512);
  store_kernel<<<1, 32>>>(d.data() + 4, 16);
  const std::string store = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(store, "wmma::store_matrix_sync") && has(store, "32-byte")) << store;
}

TEST(Wmma, LdmNotMultipleOf16BytesFaults) {
  Managed<float> sink(32);
  Managed<__half> a(1024, __float2half(1.0f));
  load_kernel<<<1, 32>>>(a.data(), 20, 99, 0, sink.data());  // 20 halves = 40 bytes
  const std::string error = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(error, "ldm 20") && has(error, "multiple of 16 bytes")) << error;
  Managed<float> d(1024);
  store_kernel<<<1, 32>>>(d.data(), 18);  // floats: a multiple of 4 is needed
  const std::string store = finish(cudaErrorMisalignedAddress);
  EXPECT_TRUE(has(store, "ldm 18")) << store;
}

TEST(Wmma, LanesDisagreeingOnLdmFault) {
  Managed<float> sink(32);
  Managed<__half> a(1024, __float2half(1.0f));
  load_kernel<<<1, 32>>>(a.data(), 16, 7, 24, sink.data());
  const std::string error = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(error, "disagree on ldm") && has(error, "lane 0 passed 16") && has(error, "lane 7 24")) << error;
}

#if !defined(__SANITIZE_ADDRESS__)
__global__ void two_warps_store_kernel(float* sink) {
  __shared__ __align__(32) __half tile[16 * 16];
  wmma::fragment<wmma::accumulator, 16, 16, 16, __half> acc;
  wmma::fill_fragment(acc, __float2half(float(threadIdx.x / 32 + 1)));
  wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
  sink[threadIdx.x % 32] = __half2float(tile[threadIdx.x % 32]);
}

// The loads and stores are the kernel's own accesses: initcheck sees a tile nobody wrote, memcheck
// one that runs past its allocation, the race check two warps storing to one tile.
TEST(Wmma, LoadsAndStoresAreCheckedAccesses) {
  Managed<float> sink(32);
  __half* never_written;
  ASSERT_EQ(cudaMalloc(&never_written, 256 * sizeof(__half)), cudaSuccess);
  load_kernel<<<1, 32>>>(never_written, 16, 99, 0, sink.data());
  const std::string error = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(error, "initcheck") || has(error, "uninitialized") || has(error, "not written")) << error;
  cudaFree(never_written);
  Managed<__half> small(128, __float2half(1.0f));  // half a 16 x 16 tile
  load_kernel<<<1, 32>>>(small.data(), 16, 99, 0, sink.data());
  const std::string past = finish(cudaErrorIllegalAddress);
  EXPECT_FALSE(past.empty());
  // Two warps storing different tiles to one shared tile, no barrier: the race check's WAW.
  two_warps_store_kernel<<<1, 64>>>(sink.data());
  const std::string race = finish(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(race, "WAW") && has(race, "warp 1")) << race;
}
#endif

}  // namespace
