// Device functions the toolkit's headers declare only for nvcc's device pass, for kernels that
// nvcc-sim compiles (included by sim/kernel_prelude.h after the toolkit's headers): integer
// helpers (umin, __sad, __dp4a, __uhadd …), directed-rounding float arithmetic (__fadd_rz …),
// special functions (erfinvf, normcdff, sinpif …) and the half / bfloat16 arithmetic and math
// of cuda_fp16.h / cuda_bf16.h (__hfma, hexp, h2sqrt …).
//
// Half and bfloat16 results are computed in float or double and rounded once to the type (round
// to nearest even, as the GPU's), so the arithmetic is exact-then-rounded; the transcendental
// ones carry the C library's error before that rounding, within the GPU's documented bounds.
// Not here: the SIMD video intrinsics (__vadd2, __vabsdiffu4 …).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

// ---- Integer helpers ------------------------------------------------------------------------------------
inline unsigned umin(unsigned a, unsigned b) { return b < a ? b : a; }
inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long llmin(long long a, long long b) { return b < a ? b : a; }
inline long long llmax(long long a, long long b) { return a < b ? b : a; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return b < a ? b : a; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a < b ? b : a; }

// |x - y| + z, without overflow in the difference.
inline unsigned __sad(int x, int y, unsigned z) {
  return z + static_cast<unsigned>(x > y ? static_cast<long long>(x) - y : static_cast<long long>(y) - x);
}
inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return z + (x > y ? x - y : y - x); }
// Averages without the intermediate sum overflowing: (x + y) >> 1, and (x + y + 1) >> 1.
inline int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
inline int __rhadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1); }
inline unsigned __uhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y) >> 1);
}
inline unsigned __urhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}

// Four-way byte and two-way half-word dot products with a 32-bit accumulator (wrapping, as the
// GPU's integer adds do).
namespace blockscope::sim::device_math {
template <typename Byte, typename Acc>
inline Acc dot4(uint32_t a, uint32_t b, Acc c) {
  uint32_t sum = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) {
    const auto x = static_cast<Byte>(a >> (8 * i)), y = static_cast<Byte>(b >> (8 * i));
    sum += static_cast<uint32_t>(static_cast<int32_t>(x) * static_cast<int32_t>(y));
  }
  return static_cast<Acc>(sum);
}
// srcA's two 16-bit halves times two bytes of srcB (its low or high half-word).
template <typename Half, typename Byte, typename Acc>
inline Acc dot2(uint32_t a, uint32_t b, bool high, Acc c) {
  uint32_t sum = static_cast<uint32_t>(c);
  for (int i = 0; i < 2; ++i) {
    const auto x = static_cast<Half>(a >> (16 * i));
    const auto y = static_cast<Byte>(b >> (8 * (i + (high ? 2 : 0))));
    sum += static_cast<uint32_t>(static_cast<int32_t>(x) * static_cast<int32_t>(y));
  }
  return static_cast<Acc>(sum);
}
}  // namespace blockscope::sim::device_math
inline int __dp4a(int a, int b, int c) {
  return ::blockscope::sim::device_math::dot4<int8_t>(static_cast<uint32_t>(a), static_cast<uint32_t>(b), c);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) { return ::blockscope::sim::device_math::dot4<uint8_t>(a, b, c); }
inline int __dp2a_lo(int a, int b, int c) {
  return ::blockscope::sim::device_math::dot2<int16_t, int8_t>(static_cast<uint32_t>(a), static_cast<uint32_t>(b), false, c);
}
inline int __dp2a_hi(int a, int b, int c) {
  return ::blockscope::sim::device_math::dot2<int16_t, int8_t>(static_cast<uint32_t>(a), static_cast<uint32_t>(b), true, c);
}
inline unsigned __dp2a_lo(unsigned a, unsigned b, unsigned c) {
  return ::blockscope::sim::device_math::dot2<uint16_t, uint8_t>(a, b, false, c);
}
inline unsigned __dp2a_hi(unsigned a, unsigned b, unsigned c) {
  return ::blockscope::sim::device_math::dot2<uint16_t, uint8_t>(a, b, true, c);
}

// ---- Conversions ------------------------------------------------------------------------------------------
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }  // the host's mode: nearest even
inline float __ull2float_rn(unsigned long long x) { return static_cast<float>(x); }
inline double __ll2double_rn(long long x) { return static_cast<double>(x); }
inline double __hiloint2double(int hi, int lo) {
  const uint64_t bits = (static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32) | static_cast<uint32_t>(lo);
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
inline int __double2hiint(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return static_cast<int>(bits >> 32);
}
inline int __double2loint(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return static_cast<int>(static_cast<uint32_t>(bits));
}

// ---- Float arithmetic in the directed rounding modes ------------------------------------------------------
// From the round-to-nearest result and the side its error lies on (TwoSum for sums, the exact
// double product for products): one step of nextafter towards the mode's direction when the
// error points that way.
namespace blockscope::sim::device_math {
enum class Mode { zero, down, up };
inline float directed(float nearest, float error, float x, float y, Mode mode) {
  if (std::isnan(nearest)) return nearest;
  if (std::isinf(nearest)) {  // overflow from finite operands: the modes that round away from it stop at FLT_MAX
    if (std::isinf(x) || std::isinf(y)) return nearest;
    const bool positive = nearest > 0;
    const bool keep = (mode == Mode::up && positive) || (mode == Mode::down && !positive);
    return keep ? nearest : (positive ? FLT_MAX : -FLT_MAX);
  }
  if (error == 0.0f) return nearest;
  const bool towards_zero = (error > 0) != (nearest > 0);
  switch (mode) {
    case Mode::zero: return towards_zero ? std::nextafter(nearest, 0.0f) : nearest;
    case Mode::down: return error < 0 ? std::nextafter(nearest, -INFINITY) : nearest;
    case Mode::up: return error > 0 ? std::nextafter(nearest, INFINITY) : nearest;
  }
  return nearest;
}
inline float add(float x, float y, Mode mode) {
  const float s = x + y;
  // An exact zero from operands of opposite signs (x - x) is -0 when rounding down, +0 otherwise.
  if (s == 0.0f && mode == Mode::down && !(x == 0.0f && y == 0.0f && std::signbit(x) == std::signbit(y))) {
    return -0.0f;
  }
  const float yy = s - x;
  const float error = (x - (s - yy)) + (y - yy);
  return directed(s, error, x, y, mode);
}
inline float mul(float x, float y, Mode mode) {
  const float p = x * y;
  // The product of two floats is exact in double, tiny ones included (an fma's remainder
  // would underflow to 0 below the smallest subnormal): only its side of p matters.
  const double exact = static_cast<double>(x) * y;
  const float side = !std::isfinite(p) ? 0.0f : exact > p ? 1.0f : exact < p ? -1.0f : 0.0f;
  return directed(p, side, x, y, mode);
}
}  // namespace blockscope::sim::device_math
#define BLOCKSCOPE_SIM_DIRECTED(suffix, mode)                                                                         \
  inline float __fadd_##suffix(float x, float y) {                                                                    \
    return ::blockscope::sim::device_math::add(x, y, ::blockscope::sim::device_math::Mode::mode);                      \
  }                                                                                                                   \
  inline float __fsub_##suffix(float x, float y) {                                                                    \
    return ::blockscope::sim::device_math::add(x, -y, ::blockscope::sim::device_math::Mode::mode);                     \
  }                                                                                                                   \
  inline float __fmul_##suffix(float x, float y) {                                                                    \
    return ::blockscope::sim::device_math::mul(x, y, ::blockscope::sim::device_math::Mode::mode);                      \
  }
BLOCKSCOPE_SIM_DIRECTED(rz, zero)
BLOCKSCOPE_SIM_DIRECTED(rd, down)
BLOCKSCOPE_SIM_DIRECTED(ru, up)
#undef BLOCKSCOPE_SIM_DIRECTED

// ---- Special functions --------------------------------------------------------------------------------------
namespace blockscope::sim::device_math {
// Giles' single-precision approximation of erfinv(y) (the sign is applied by the caller), from
// w = -log((1 - y)(1 + y)): the starting point for the Newton steps below.
inline double erfinv_start(double w) {
  double x;
  if (w < 5.0) {
    const double t = w - 2.5;
    x = ((((2.81022636e-08 * t + 3.43273939e-07) * t - 3.5233877e-06) * t - 4.39150654e-06) * t + 0.00021858087) * t;
    x = (((x - 0.00125372503) * t - 0.00417768164) * t + 0.246640727) * t + 1.50140941;
  } else {
    const double t = std::sqrt(w) - 3.0;
    x = ((((-0.000200214257 * t + 0.000100950558) * t + 0.00134934322) * t - 0.00367342844) * t + 0.00573950773) * t;
    x = (((x - 0.0076224613) * t + 0.00943887047) * t + 1.00167406) * t + 2.83297682;
  }
  return x;
}
constexpr double kTwoOverSqrtPi = 1.1283791670955126, kSqrtPi = 1.7724538509055160;
inline double erfinv(double y);
// erfcinv(z) for z in (0, 2). Near 1 it is erfinv(1 - z) (an exact subtraction there); below,
// Newton steps on erfc itself, so a tiny z keeps its precision. erfc is convex and decreasing
// there, so the steps close in from one side once they have passed the root.
inline double erfcinv(double z) {
  if (std::isnan(z) || z < 0.0 || z > 2.0) return NAN;
  if (z == 0.0) return INFINITY;
  if (z == 2.0) return -INFINITY;
  if (z > 1.5) return -erfcinv(2.0 - z);
  if (z >= 0.5) return erfinv(1.0 - z);
  const double w = -std::log(z * (2.0 - z));
  double x;
  if (w < 16.0) {  // Giles' approximation covers this (every z a float can hold above 2^-24)
    x = erfinv_start(w) * (1.0 - z);
  } else {  // the tail's asymptote, erfc(x) ~ exp(-x^2) / (x sqrt(pi)): a start just past the root
    const double t = std::sqrt(-std::log(z));
    x = std::sqrt(-std::log(z) - std::log(t * kSqrtPi));
  }
  for (int i = 0; i < 12; ++i) {
    const double slope = kTwoOverSqrtPi * std::exp(-x * x);
    if (slope == 0.0) break;
    const double step = (std::erfc(x) - z) / slope;
    x += step;
    if (std::fabs(step) <= 1e-17 * x) break;
  }
  return x;
}
// erfinv(y) for y in [-1, 1]: Newton steps on erf from Giles' start up to |y| = 1/2, erfcinv of
// 1 - |y| (exact) beyond, where erf flattens.
inline double erfinv(double y) {
  if (std::isnan(y) || y < -1.0 || y > 1.0) return NAN;
  if (std::fabs(y) > 0.5) return std::copysign(erfcinv(1.0 - std::fabs(y)), y);
  if (y == 0.0) return y;  // keeps the sign of -0
  double x = erfinv_start(-std::log((1.0 - y) * (1.0 + y))) * y;
  for (int i = 0; i < 3; ++i) x -= (std::erf(x) - y) / (kTwoOverSqrtPi * std::exp(-x * x));
  return x;
}
}  // namespace blockscope::sim::device_math
inline double erfinv(double y) { return ::blockscope::sim::device_math::erfinv(y); }
inline float erfinvf(float y) { return static_cast<float>(::blockscope::sim::device_math::erfinv(y)); }
inline double erfcinv(double z) { return ::blockscope::sim::device_math::erfcinv(z); }
inline float erfcinvf(float z) { return static_cast<float>(::blockscope::sim::device_math::erfcinv(z)); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
inline float normcdff(float x) { return static_cast<float>(normcdf(x)); }
inline double normcdfinv(double p) { return -std::sqrt(2.0) * ::blockscope::sim::device_math::erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return static_cast<float>(normcdfinv(p)); }
// sin(πx) and cos(πx), exact at integers and half-integers as the GPU's are.
inline double sinpi(double x) {
  const double r = std::remainder(x, 2.0);  // in [-1, 1]
  if (r == 0.0 || std::fabs(r) == 1.0) return std::copysign(0.0, x);
  return std::sin(M_PI * r);
}
inline double cospi(double x) {
  const double r = std::fabs(std::remainder(x, 2.0));
  if (r == 0.5) return 0.0;
  if (r == 0.0) return 1.0;
  if (r == 1.0) return -1.0;
  return std::cos(M_PI * r);
}
inline float sinpif(float x) { return static_cast<float>(sinpi(x)); }
inline float cospif(float x) { return static_cast<float>(cospi(x)); }
inline void sincospi(double x, double* s, double* c) { *s = sinpi(x), *c = cospi(x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x), *c = cospif(x); }
inline float rcbrtf(float x) { return static_cast<float>(1.0 / std::cbrt(static_cast<double>(x))); }
inline double rcbrt(double x) { return 1.0 / std::cbrt(x); }

// ---- Half and bfloat16 ------------------------------------------------------------------------------------
namespace blockscope::sim::device_math {
inline float wide(__half x) { return __half2float(x); }
inline float wide(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
T narrow(double x);
template <>
inline __half narrow<__half>(double x) { return __double2half(x); }
template <>
inline __nv_bfloat16 narrow<__nv_bfloat16>(double x) { return __double2bfloat16(x); }
inline __half2 pair(__half lo, __half hi) { return __halves2half2(lo, hi); }
inline __nv_bfloat162 pair(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __halves2bfloat162(lo, hi); }
inline __half low(__half2 x) { return __low2half(x); }
inline __half high(__half2 x) { return __high2half(x); }
inline __nv_bfloat16 low(__nv_bfloat162 x) { return __low2bfloat16(x); }
inline __nv_bfloat16 high(__nv_bfloat162 x) { return __high2bfloat16(x); }
// a·b + c rounded once to T. The product of two 16-bit values is exact in double; the sum is
// not when their exponents are far apart (bfloat16's range is float's), and rounding that
// double to T again could break a tie the wrong way. So the sum is rounded to odd (its last bit
// set when inexact, from TwoSum's remainder): with 53 bits against T's 11 or 8 the second
// rounding is then the correct one.
template <typename T>
inline T fma(T a, T b, T c) {
  const double ab = static_cast<double>(wide(a)) * wide(b), cc = wide(c);
  double sum = ab + cc;
  if (std::isfinite(sum)) {
    const double bb = sum - ab, remainder = (ab - (sum - bb)) + (cc - bb);
    if (remainder != 0.0) {
      if ((remainder > 0) != (sum > 0)) sum = std::nextafter(sum, 0.0);  // truncate towards zero
      uint64_t bits;
      std::memcpy(&bits, &sum, sizeof bits);
      bits |= 1u;
      std::memcpy(&sum, &bits, sizeof bits);
    }
  }
  return narrow<T>(sum);
}
template <typename T>
inline T negate(T x) {
  return narrow<T>(-static_cast<double>(wide(x)));  // exact: a sign flip (NaN stays NaN)
}
template <typename T>
inline T relu(T x) {
  return std::isnan(wide(x)) || wide(x) >= 0.0f ? x : narrow<T>(0.0);
}
template <typename T>
inline T saturate(T x) {
  const float v = wide(x);
  return std::isnan(v) ? narrow<T>(0.0) : narrow<T>(v < 0.0f ? 0.0 : v > 1.0f ? 1.0 : v);
}
}  // namespace blockscope::sim::device_math

// Every function for __half and __nv_bfloat16, and its 2-wide form lane by lane.
#define BLOCKSCOPE_SIM_HALF_BOTH(T, T2)                                                                                \
  inline T __hfma(T a, T b, T c) { return ::blockscope::sim::device_math::fma(a, b, c); }                              \
  inline T __hfma_relu(T a, T b, T c) { return ::blockscope::sim::device_math::relu(__hfma(a, b, c)); }                \
  inline T __hfma_sat(T a, T b, T c) { return ::blockscope::sim::device_math::saturate(__hfma(a, b, c)); }             \
  inline T2 __hfma2(T2 a, T2 b, T2 c) {                                                                                \
    namespace m = ::blockscope::sim::device_math;                                                                      \
    return m::pair(__hfma(m::low(a), m::low(b), m::low(c)), __hfma(m::high(a), m::high(b), m::high(c)));               \
  }                                                                                                                    \
  inline T2 __hfma2_relu(T2 a, T2 b, T2 c) {                                                                           \
    namespace m = ::blockscope::sim::device_math;                                                                      \
    return m::pair(__hfma_relu(m::low(a), m::low(b), m::low(c)), __hfma_relu(m::high(a), m::high(b), m::high(c)));     \
  }                                                                                                                    \
  inline T2 __hfma2_sat(T2 a, T2 b, T2 c) {                                                                            \
    namespace m = ::blockscope::sim::device_math;                                                                      \
    return m::pair(__hfma_sat(m::low(a), m::low(b), m::low(c)), __hfma_sat(m::high(a), m::high(b), m::high(c)));       \
  }                                                                                                                    \
  /* Complex multiply-add as the GPU does it, two fused steps per part, each rounded to T: */           \
  /* re = (c.x + a.x·b.x) − a.y·b.y, im = (c.y + a.x·b.y) + a.y·b.x. */                                        \
  inline T2 __hcmadd(T2 a, T2 b, T2 c) {                                                                               \
    namespace m = ::blockscope::sim::device_math;                                                                      \
    const T re = __hfma(m::low(a), m::low(b), m::low(c)), im = __hfma(m::low(a), m::high(b), m::high(c));              \
    return m::pair(__hfma(m::negate(m::high(a)), m::high(b), re), __hfma(m::high(a), m::low(b), im));                  \
  }
BLOCKSCOPE_SIM_HALF_BOTH(__half, __half2)
BLOCKSCOPE_SIM_HALF_BOTH(__nv_bfloat16, __nv_bfloat162)
#undef BLOCKSCOPE_SIM_HALF_BOTH

#define BLOCKSCOPE_SIM_HALF_UNARY(name, name2, expr)                                                                    \
  inline __half name(__half h) {                                                                                        \
    const double x = ::blockscope::sim::device_math::wide(h);                                                           \
    return ::blockscope::sim::device_math::narrow<__half>(expr);                                                        \
  }                                                                                                                     \
  inline __nv_bfloat16 name(__nv_bfloat16 h) {                                                                          \
    const double x = ::blockscope::sim::device_math::wide(h);                                                           \
    return ::blockscope::sim::device_math::narrow<__nv_bfloat16>(expr);                                                 \
  }                                                                                                                     \
  inline __half2 name2(__half2 h) {                                                                                     \
    return ::blockscope::sim::device_math::pair(name(__low2half(h)), name(__high2half(h)));                             \
  }                                                                                                                     \
  inline __nv_bfloat162 name2(__nv_bfloat162 h) {                                                                       \
    return ::blockscope::sim::device_math::pair(name(__low2bfloat16(h)), name(__high2bfloat16(h)));                     \
  }
BLOCKSCOPE_SIM_HALF_UNARY(hexp, h2exp, std::exp(x))
BLOCKSCOPE_SIM_HALF_UNARY(hexp2, h2exp2, std::exp2(x))
BLOCKSCOPE_SIM_HALF_UNARY(hexp10, h2exp10, std::pow(10.0, x))
BLOCKSCOPE_SIM_HALF_UNARY(hlog, h2log, std::log(x))
BLOCKSCOPE_SIM_HALF_UNARY(hlog2, h2log2, std::log2(x))
BLOCKSCOPE_SIM_HALF_UNARY(hlog10, h2log10, std::log10(x))
BLOCKSCOPE_SIM_HALF_UNARY(hsqrt, h2sqrt, std::sqrt(x))
BLOCKSCOPE_SIM_HALF_UNARY(hrsqrt, h2rsqrt, 1.0 / std::sqrt(x))
BLOCKSCOPE_SIM_HALF_UNARY(hrcp, h2rcp, 1.0 / x)
BLOCKSCOPE_SIM_HALF_UNARY(hsin, h2sin, std::sin(x))
BLOCKSCOPE_SIM_HALF_UNARY(hcos, h2cos, std::cos(x))
BLOCKSCOPE_SIM_HALF_UNARY(htanh, h2tanh, std::tanh(x))
BLOCKSCOPE_SIM_HALF_UNARY(hceil, h2ceil, std::ceil(x))
BLOCKSCOPE_SIM_HALF_UNARY(hfloor, h2floor, std::floor(x))
BLOCKSCOPE_SIM_HALF_UNARY(htrunc, h2trunc, std::trunc(x))
BLOCKSCOPE_SIM_HALF_UNARY(hrint, h2rint, std::nearbyint(x))
#undef BLOCKSCOPE_SIM_HALF_UNARY
