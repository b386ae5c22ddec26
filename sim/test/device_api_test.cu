// Tests of the device functions the simulator supplies for ordinary CUDA (sim/device_math.h and
// sim/cuda_include/cooperative_groups.h): each is called from a kernel built by nvcc-sim and
// compared with a reference written independently on the host — the host FPU in a directed
// rounding mode, exact __float128 sums rounded by searching every value of the type, bisection
// on erfl/erfcl — over fresh random inputs and the hard cases (ties, subnormals, overflow).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sim/test/managed.h"

using blockscope::sim::test::Managed;
namespace cg = cooperative_groups;

namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Bitwise equal, or both NaN.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b); }

// A random finite float: any bit pattern but infinities and NaNs.
float random_float(std::mt19937& rng) {
  for (;;) {
    const float x = float_of(static_cast<uint32_t>(rng()));
    if (std::isfinite(x)) return x;
  }
}

std::mt19937 seeded() {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  return std::mt19937(seed);
}

// ---- Directed rounding ----------------------------------------------------------------------------
__global__ void directed_kernel(const float* x, const float* y, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float* o = out + 9 * i;  // [n][9]: add, sub, mul in rz, rd, ru
  o[0] = __fadd_rz(x[i], y[i]), o[1] = __fadd_rd(x[i], y[i]), o[2] = __fadd_ru(x[i], y[i]);
  o[3] = __fsub_rz(x[i], y[i]), o[4] = __fsub_rd(x[i], y[i]), o[5] = __fsub_ru(x[i], y[i]);
  o[6] = __fmul_rz(x[i], y[i]), o[7] = __fmul_rd(x[i], y[i]), o[8] = __fmul_ru(x[i], y[i]);
}

// The host FPU's own rounding modes: volatile keeps each operation at run time, in the mode set.
float host_rounded(int mode, char op, float x, float y) {
  volatile float a = x, b = y;
  const int saved = std::fegetround();
  std::fesetround(mode);
  volatile float r = op == '+' ? a + b : op == '-' ? a - b : a * b;
  std::fesetround(saved);
  return r;
}

TEST(DeviceMath, DirectedRoundingMatchesTheHostFpuInThatMode) {
  std::mt19937 rng = seeded();
  std::vector<float> xs, ys;
  // Hard cases: exact, halfway, far apart, cancelling, overflowing, underflowing to nothing.
  const float hard[][2] = {{1.0f, 0x1p-30f}, {1.0f, -0x1p-30f}, {0x1p-149f, 0.5f},  {-0x1p-149f, 0.5f},
                           {3.0f, 1.0f / 3.0f}, {FLT_MAX, FLT_MAX}, {-FLT_MAX, 2.0f}, {0x1p-100f, 0x1p-100f},
                           {-0x1p-100f, 0x1p-60f}, {1.5f, 0x1p-149f}, {0.0f, -0.0f},   {-0.0f, -0.0f},
                           {16777216.0f, 1.0f}, {16777216.0f, -1.0f}, {INFINITY, 1.0f}, {INFINITY, -INFINITY}};
  for (const auto& h : hard) xs.push_back(h[0]), ys.push_back(h[1]);
  std::uniform_int_distribution<int> shift(-30, 30);
  while (xs.size() < 20000) {
    const float x = random_float(rng);
    float y = random_float(rng);
    if (xs.size() % 2 == 0 && x != 0.0f) {  // half the pairs close in exponent: inexact sums of every kind
      const float mantissa = 1.0f + static_cast<float>(rng() & 0x7FFFFF) * 0x1p-23f;
      y = std::ldexp(rng() % 2 ? mantissa : -mantissa, std::ilogb(x) + shift(rng));
    }
    if (std::isfinite(y)) xs.push_back(x), ys.push_back(y);
  }
  const int n = static_cast<int>(xs.size());
  Managed<float> x(n), y(n), out(9 * n, NAN);
  std::copy(xs.begin(), xs.end(), x.data());
  std::copy(ys.begin(), ys.end(), y.data());
  directed_kernel<<<(n + 255) / 256, 256>>>(x.data(), y.data(), out.data(), n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const int modes[3] = {FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
  const char ops[3] = {'+', '-', '*'};
  int wrong = 0;
  for (int i = 0; i < n && wrong < 10; ++i) {
    for (int k = 0; k < 9; ++k) {
      const float want = host_rounded(modes[k % 3], ops[k / 3], xs[i], ys[i]);
      const float got = out[9 * i + k];
      if (!same(got, want)) {
        ADD_FAILURE() << xs[i] << " " << ops[k / 3] << " " << ys[i] << " in mode " << k % 3 << ": " << got
                      << " (0x" << std::hex << bits_of(got) << "), want " << want << " (0x" << bits_of(want) << ")"
                      << std::dec;
        ++wrong;
      }
    }
  }
}

// ---- Half and bfloat16 fused multiply-add ------------------------------------------------------------
template <typename T>
__global__ void fma_kernel(const T* a, const T* b, const T* c, T* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = __hfma(a[i], b[i], c[i]);
}

float widen(__half h) { return __half2float(h); }
float widen(__nv_bfloat16 h) { return __bfloat162float(h); }
uint16_t raw(__half h) { return __half_as_ushort(h); }
uint16_t raw(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
template <typename T>
T from_raw(uint16_t b) {
  if constexpr (std::is_same_v<T, __half>) {
    return __ushort_as_half(b);
  } else {
    return __ushort_as_bfloat16(b);
  }
}

// Every finite non-negative value of T, ascending, with its bits: round-to-nearest-even by search.
template <typename T>
struct Grid {
  std::vector<__float128> values;
  std::vector<uint16_t> bits;
  Grid() {
    for (uint32_t b = 0; b < 0x8000; ++b) {
      const float v = widen(from_raw<T>(static_cast<uint16_t>(b)));
      if (!std::isfinite(v)) break;  // the positive finite values come first, in order
      values.push_back(v);
      bits.push_back(static_cast<uint16_t>(b));
    }
  }
  // The bits of T nearest to s + r (r: a remainder below s's last bit, or 0), ties to even.
  uint16_t round(__float128 s, __float128 r) const {
    const bool negative = s < 0 || (s == 0 && r < 0);
    const __float128 m = negative ? -s : s, mr = negative ? -r : r;  // |s| and the remainder's sign with it
    const uint16_t sign = negative ? 0x8000 : 0;
    const size_t hi = static_cast<size_t>(std::upper_bound(values.begin(), values.end(), m) - values.begin());
    const __float128 top = values.back(), top_step = top - values[values.size() - 2];
    if (m > top || (m == top && mr > 0)) {  // rounds to infinity from max + half a step on
      const __float128 past = m - top;
      const bool to_inf = past > top_step / 2 || (past == top_step / 2 && mr >= 0);
      const uint16_t infinity = std::is_same_v<T, __half> ? 0x7C00 : 0x7F80;
      return static_cast<uint16_t>(sign | (to_inf ? infinity : bits.back()));
    }
    const size_t lo = hi - 1;  // values[lo] <= m < values[hi]
    if (values[lo] == m) return static_cast<uint16_t>(sign | bits[lo]);  // exact (a remainder is below a step)
    const __float128 below = m - values[lo], above = values[hi] - m;
    bool up = above < below;
    if (above == below) up = mr != 0 ? mr > 0 : (bits[lo] & 1) != 0;  // a tie only if nothing remains
    return static_cast<uint16_t>(sign | bits[up ? hi : lo]);
  }
};

template <typename T>
void expect_fma_rounded_once(uint16_t max_finite) {
  std::mt19937 rng = seeded();
  const Grid<T> grid;
  std::vector<uint16_t> as, bs, cs;
  auto finite = [&] {
    const auto b = static_cast<uint16_t>(rng() & 0xFFFF);
    return (b & 0x7FFF) <= max_finite ? b : static_cast<uint16_t>(b & 0x83FF);
  };
  for (int i = 0; i < 30000; ++i) as.push_back(finite()), bs.push_back(finite()), cs.push_back(finite());
  // a·b exactly halfway between two values of T, and c far below it: c's sign breaks the tie.
  // half: 1.5 · (1 + 2^-10) = 1.5 + 2^-10 + 2^-11; bfloat16: 1.5 · (1 + 2^-7).
  const bool half = std::is_same_v<T, __half>;
  const uint16_t one_and_half = half ? 0x3E00 : 0x3FC0, one_plus_ulp = half ? 0x3C01 : 0x3F81;
  const uint16_t tiny = half ? 0x0001 : 0x0080;  // smallest subnormal / normal
  for (uint16_t c : {tiny, static_cast<uint16_t>(tiny | 0x8000), uint16_t{0}}) {
    as.push_back(one_and_half), bs.push_back(one_plus_ulp), cs.push_back(c);
  }
  const int n = static_cast<int>(as.size());
  Managed<T> a(n), b(n), c(n), out(n);
  for (int i = 0; i < n; ++i) a[i] = from_raw<T>(as[i]), b[i] = from_raw<T>(bs[i]), c[i] = from_raw<T>(cs[i]);
  fma_kernel<T><<<(n + 255) / 256, 256>>>(a.data(), b.data(), c.data(), out.data(), n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int wrong = 0;
  for (int i = 0; i < n && wrong < 10; ++i) {
    const __float128 ab = static_cast<__float128>(widen(a[i])) * widen(b[i]), cc = widen(c[i]);
    // TwoSum in __float128: s + r is a·b + c exactly.
    const __float128 s = ab + cc, bb = s - ab, r = (ab - (s - bb)) + (cc - bb);
    uint16_t want = grid.round(s, r);
    if (s == 0 && r == 0) want = (raw(a[i]) ^ raw(b[i])) & raw(c[i]) & 0x8000;  // -0 only from -0 + -0
    if (raw(out[i]) != want) {
      ADD_FAILURE() << std::hex << "fma(0x" << as[i] << ", 0x" << bs[i] << ", 0x" << cs[i] << ") = 0x"
                    << raw(out[i]) << ", want 0x" << want << std::dec;
      ++wrong;
    }
  }
}

TEST(DeviceMath, HalfFmaIsRoundedOnceEvenWhenTheAddendIsFarBelow) { expect_fma_rounded_once<__half>(0x7BFF); }
TEST(DeviceMath, Bfloat16FmaIsRoundedOnceEvenWhenTheAddendIsFarBelow) {
  expect_fma_rounded_once<__nv_bfloat16>(0x7F7F);
}

// ---- Inverse error functions ----------------------------------------------------------------------------
__global__ void inverse_kernel(const float* y, const float* z, const float* p, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[3 * i] = erfinvf(y[i]), out[3 * i + 1] = erfcinvf(z[i]), out[3 * i + 2] = normcdfinvf(p[i]);
}

// The x with f(x) = target for an increasing f, by bisection in long double.
template <typename F>
long double solve(F f, long double target, long double lo, long double hi) {
  for (int i = 0; i < 200; ++i) {
    const long double mid = (lo + hi) / 2;
    (f(mid) < target ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// References: erf where it is steep (near 0), erfc in the tails, so neither loses the digits.
long double erfcinv_reference(long double z);
long double erfinv_reference(long double y) {
  if (std::fabs(y) > 0.5L) return std::copysign(erfcinv_reference(1 - std::fabs(y)), y);
  return solve([](long double x) { return std::erf(x); }, y, -1, 1);
}
long double erfcinv_reference(long double z) {
  if (z > 1.5L) return -erfcinv_reference(2 - z);
  if (z >= 0.5L) return erfinv_reference(1 - z);
  return solve([](long double x) { return -std::erfc(x); }, -z, 0, 30);
}

long double ulps(float got, long double want) {
  const float w = static_cast<float>(want);
  const long double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(static_cast<long double>(got) - want) / ulp;
}

TEST(DeviceMath, InverseErrorFunctionsWithinTheirDocumentedUlps) {
  std::mt19937 rng = seeded();
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f), exponent(-44.0f, 0.0f);
  std::vector<float> ys = {0.0f, 0.5f, -0.5f, 0.999f, -0.999999f, 1e-30f, 0.9999999f, 1.0f - 0x1p-24f};
  std::vector<float> zs = {1.0f, 0.5f, 1.5f, 1e-45f, 1e-30f, 2.0f - 0x1p-23f, 0x1p-24f};
  std::vector<float> ps = {0.5f, 1e-30f, 1e-45f, 0.975f, 1.0f - 0x1p-24f};
  while (ys.size() < 3000) ys.push_back(uniform(rng));
  while (zs.size() < 3000) {  // log-uniform over (0, 1], and mirrored into (1, 2)
    const float z = std::pow(10.0f, exponent(rng));
    zs.push_back(zs.size() % 3 == 0 && 2.0f - z < 2.0f ? 2.0f - z : z);
  }
  while (ps.size() < 3000) ps.push_back(ps.size() % 2 ? std::pow(10.0f, exponent(rng)) : (uniform(rng) + 1) / 2);
  const int n = 3000;
  Managed<float> y(n), z(n), p(n), out(3 * n, NAN);
  std::copy(ys.begin(), ys.end(), y.data());
  std::copy(zs.begin(), zs.end(), z.data());
  std::copy(ps.begin(), ps.end(), p.data());
  inverse_kernel<<<(n + 127) / 128, 128>>>(y.data(), z.data(), p.data(), out.data(), n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int wrong = 0;
  for (int i = 0; i < n && wrong < 10; ++i) {
    // CUDA's documented maximum errors: erfinvf 2 ulp, erfcinvf 4, normcdfinvf 5.
    const long double want[3] = {erfinv_reference(ys[i]), erfcinv_reference(zs[i]),
                                 -std::sqrt(2.0L) * erfcinv_reference(2.0L * ps[i])};
    const long double bound[3] = {2, 4, 5};
    const char* name[3] = {"erfinvf", "erfcinvf", "normcdfinvf"};
    const float in[3] = {ys[i], zs[i], ps[i]};
    for (int k = 0; k < 3; ++k) {
      const float got = out[3 * i + k];
      const bool infinite = std::isinf(static_cast<float>(want[k]));  // 1 - 2^-24's erfinv is finite
      if (infinite ? got != static_cast<float>(want[k]) : !(ulps(got, want[k]) <= bound[k])) {
        ADD_FAILURE() << name[k] << "(" << in[k] << ") = " << got << ", want " << static_cast<double>(want[k]);
        ++wrong;
      }
    }
  }
  EXPECT_EQ(erfinvf(1.0f), INFINITY);
  EXPECT_EQ(erfcinvf(0.0f), INFINITY);
  EXPECT_EQ(erfcinvf(2.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(erfinvf(1.5f)));
  EXPECT_TRUE(std::isnan(erfcinvf(-0.5f)));
  EXPECT_TRUE(std::signbit(erfinvf(-0.0f)));
}

// ---- Integer helpers ------------------------------------------------------------------------------------
__global__ void integer_kernel(const int* a, const int* b, const int* c, int* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  int* o = out + 7 * i;
  o[0] = __dp4a(a[i], b[i], c[i]);
  o[1] = static_cast<int>(__dp4a(static_cast<unsigned>(a[i]), static_cast<unsigned>(b[i]), static_cast<unsigned>(c[i])));
  o[2] = __dp2a_lo(a[i], b[i], c[i]);
  o[3] = __dp2a_hi(a[i], b[i], c[i]);
  o[4] = static_cast<int>(__sad(a[i], b[i], static_cast<unsigned>(c[i])));
  o[5] = __hadd(a[i], b[i]);
  o[6] = __rhadd(a[i], b[i]);
}

TEST(DeviceMath, IntegerDotProductsAndAveragesMatchWideArithmetic) {
  std::mt19937 rng = seeded();
  const int n = 4000;
  Managed<int> a(n), b(n), c(n), out(7 * n);
  for (int i = 0; i < n; ++i) a[i] = static_cast<int>(rng()), b[i] = static_cast<int>(rng()), c[i] = static_cast<int>(rng());
  a[0] = INT32_MAX, b[0] = INT32_MAX, c[0] = INT32_MAX;  // the averages must not overflow
  a[1] = INT32_MIN, b[1] = INT32_MIN, c[1] = 0;
  integer_kernel<<<(n + 127) / 128, 128>>>(a.data(), b.data(), c.data(), out.data(), n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // The i-th byte / half-word of x, signed or not, by division rather than shifts and casts.
  auto byte = [](int x, int k, bool is_signed) -> int64_t {
    const int64_t u = (static_cast<int64_t>(static_cast<uint32_t>(x)) / (int64_t{1} << (8 * k))) % 256;
    return is_signed && u >= 128 ? u - 256 : u;
  };
  auto half = [](int x, int k) -> int64_t {
    const int64_t u = (static_cast<int64_t>(static_cast<uint32_t>(x)) / (int64_t{1} << (16 * k))) % 65536;
    return u >= 32768 ? u - 65536 : u;
  };
  auto wrap = [](int64_t v) { return static_cast<int>(static_cast<uint32_t>(static_cast<uint64_t>(v))); };
  for (int i = 0; i < n; ++i) {
    int64_t signed4 = c[i], unsigned4 = static_cast<uint32_t>(c[i]);
    for (int k = 0; k < 4; ++k) {
      signed4 += byte(a[i], k, true) * byte(b[i], k, true);
      unsigned4 += byte(a[i], k, false) * byte(b[i], k, false);
    }
    int64_t lo = c[i], hi = c[i];
    for (int k = 0; k < 2; ++k) {
      lo += half(a[i], k) * byte(b[i], k, true);
      hi += half(a[i], k) * byte(b[i], k + 2, true);
    }
    const int64_t sad = std::llabs(static_cast<int64_t>(a[i]) - b[i]) + static_cast<uint32_t>(c[i]);
    const int64_t sum = static_cast<int64_t>(a[i]) + b[i];
    const int64_t want[7] = {wrap(signed4), wrap(unsigned4), wrap(lo), wrap(hi), wrap(sad),
                             static_cast<int>(sum >= 0 ? sum / 2 : -((-sum + 1) / 2)),
                             static_cast<int>(sum + 1 >= 0 ? (sum + 1) / 2 : -((-(sum + 1) + 1) / 2))};
    for (int k = 0; k < 7; ++k) ASSERT_EQ(out[7 * i + k], want[k]) << "case " << k << " of " << a[i] << ", " << b[i] << ", " << c[i];
  }
}

// ---- Cooperative groups passed as thread_group -----------------------------------------------------------
// Reduces `value` over `group` through shared memory; correct only if group.sync() is a barrier
// over exactly the group's threads (a no-op sync is a race, a wrong one a fault).
__device__ int group_sum(cg::thread_group group, int* scratch, int value) {
  const unsigned rank = static_cast<unsigned>(group.thread_rank()), size = static_cast<unsigned>(group.size());
  scratch[rank] = value;
  group.sync();
  int total = 0;
  for (unsigned r = 0; r < size; ++r) total += scratch[r];
  group.sync();
  return total;
}

// out: [blocks][threads][4]: rank and size in the block, and in tiles of 8 and of 8's halves.
__global__ void groups_kernel(int* out) {
  __shared__ int block_scratch[96];
  __shared__ int tile_scratch[96];
  cg::thread_block block = cg::this_thread_block();
  const int t = static_cast<int>(threadIdx.x);
  int* o = out + 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  o[0] = group_sum(block, block_scratch, t);  // the block's, through the base class
  cg::thread_group tile = cg::tiled_partition(block, 8);
  o[1] = group_sum(tile, tile_scratch + t / 8 * 8, t);
  cg::thread_group quarter = cg::tiled_partition(tile, 4);  // a tile of a tile
  o[2] = group_sum(quarter, tile_scratch + t / 4 * 4, 1);
  o[3] = static_cast<int>(quarter.thread_rank() * 100 + tile.size());
}

TEST(CooperativeGroups, GroupsPassedByValueAsThreadGroupKeepWhatTheyAre) {
  const int blocks = 3, threads = 96;
  Managed<int> out(blocks * threads * 4, -1);
  groups_kernel<<<blocks, threads>>>(out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int blk = 0; blk < blocks; ++blk) {
    for (int t = 0; t < threads; ++t) {
      const int* o = &out[4 * (blk * threads + t)];
      EXPECT_EQ(o[0], threads * (threads - 1) / 2);
      const int first = t / 8 * 8;
      EXPECT_EQ(o[1], 8 * first + 28);  // first + ... + first + 7
      EXPECT_EQ(o[2], 4);
      EXPECT_EQ(o[3], (t % 4) * 100 + 8);
    }
  }
}

__global__ void too_wide_tile_kernel() {
  cg::thread_group tile = cg::tiled_partition(cg::this_thread_block(), 64);
  tile.sync();
}

TEST(CooperativeGroups, RuntimeTilesWiderThanAWarpAreAnError) {
  too_wide_tile_kernel<<<1, 128>>>();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(std::string(cudaGetErrorString(cudaErrorLaunchFailure)).find("power of 2 up to 32"), std::string::npos);
  cudaGetLastError();
}


// ---- Clocks ------------------------------------------------------------------------------------------
// Spins for `cycles` of clock() as NVIDIA's simpleHyperQ does (a duration turned into cycles with
// cudaDevAttrClockRate), with 32-bit wrap-around arithmetic. clock64's interval encloses
// clock()'s (read first, and last), so it cannot be the shorter of the two.
__global__ void spin_kernel(long long cycles, long long* spent) {
  const long long start64 = clock64();
  const unsigned start = static_cast<unsigned>(clock());
  long long elapsed = 0;
  while (elapsed < cycles) elapsed = static_cast<unsigned>(clock()) - start;
  spent[0] = elapsed;
  spent[1] = clock64() - start64;
}

TEST(Clocks, KernelClocksCountCyclesAtTheReportedClockRate) {
  int khz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), cudaSuccess);
  const long long cycles = static_cast<long long>(khz) * 50;  // 50 ms
  Managed<long long> spent(2, 0);
  const auto start = std::chrono::steady_clock::now();
  spin_kernel<<<1, 1>>>(cycles, spent.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(ms, 49.0);    // at least the time those cycles take at that rate
  EXPECT_LT(ms, 5000.0);  // and not CPU-time units (seconds)
  EXPECT_GE(spent[0], cycles);
  EXPECT_GE(spent[1], spent[0]);  // clock64 counts the same cycles, without wrapping
  // On the host, clock() stays the C library's: CPU time in CLOCKS_PER_SEC units.
  const clock_t host = clock();
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + i;
  EXPECT_GT(clock(), host);
  EXPECT_LT(clock() - host, 20 * static_cast<clock_t>(CLOCKS_PER_SEC));
}

}  // namespace
