// The harness of the tests of the sim's cuBLASLt FP8 matmul (sim/cublaslt_fp8.cpp and the FP8
// paths of sim/cublaslt_matmul.cpp and sim/cublaslt_model.cpp; cublaslt_fp8_test.cpp: the
// numerics, cublaslt_fp8_refusals_test.cpp: the refusals and the attributes): GEMMs through the
// real <cublasLt.h> API, checked against a float64 reference written here from the documented contract:
//   T = epilogue(alpha * scale_A * scale_B * op(A) op(B) + beta * scale_C * C [+ bias])
//   amax_D = max |T|;  D = scale_D * T for an FP8 D (else T), rounded to nearest even and, for
//   FP8, saturated to the largest finite value.
// A is k x m with TRANSA = T, B k x n with TRANSB = N (the "TN" rule), column-major. FP8 codes
// are decoded and encoded here from the formats' definitions (E4M3: bias 7, 3 mantissa bits, no
// infinities, S.1111.111 NaN, max 448; E5M2: bias 15, 2 mantissa bits, IEEE-like, max 57344),
// not with the sim's functions; 16-bit elements with NVIDIA's <cuda_fp16.h>/<cuda_bf16.h>.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "sim/sim.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace cublaslt_fp8_test {

// ---- Element types ---------------------------------------------------------------------------
enum class T { F32, F16, BF16, E4M3, E5M2 };

inline bool fp8(T t) { return t == T::E4M3 || t == T::E5M2; }
inline cudaDataType_t cuda_type(T t) {
  switch (t) {
    case T::F32: return CUDA_R_32F;
    case T::F16: return CUDA_R_16F;
    case T::BF16: return CUDA_R_16BF;
    case T::E4M3: return CUDA_R_8F_E4M3;
    case T::E5M2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}
inline size_t size_of(T t) { return t == T::F32 ? 4 : fp8(t) ? 1 : 2; }

// FP8 decoding, from the format definitions.
inline double decode_fp8(uint8_t c, T t) {
  const bool e4m3 = t == T::E4M3;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
  double v;
  if (e4m3 && e == 15 && m == 7) v = NAN;
  else if (!e4m3 && e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = m * std::pow(2.0, 1 - bias - mbits);
  else v = (1.0 + m / double(1 << mbits)) * std::pow(2.0, e - bias);
  return (c & 0x80) ? -v : v;
}
inline double max_finite(T t) { return t == T::E4M3 ? 448.0 : 57344.0; }
// Nearest finite code (ties: the even code, i.e. even mantissa), by search over all 256 codes;
// beyond the range that is the largest finite value (satfinite). NaN: 0x7F.
inline uint8_t encode_fp8(double x, T t) {
  if (std::isnan(x)) return 0x7f;
  if (std::isinf(x)) x = std::copysign(max_finite(t), x);
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double d = decode_fp8(static_cast<uint8_t>(c), t);
    if (!std::isfinite(d)) continue;
    const double err = std::fabs(d - x);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_err = err;
    }
  }
  if (decode_fp8(static_cast<uint8_t>(best), t) == 0.0) return std::signbit(x) ? 0x80 : 0x00;
  return static_cast<uint8_t>(best);
}

// Sentinels no GEMM of these tests writes: NaN payloads (FP8: NaN codes with the sign set; the
// sim writes 0x7F for NaN, and no output here is NaN).
constexpr uint32_t kPoison32 = 0x7fc0dead;
constexpr uint16_t kPoison16F = 0x7e5a, kPoison16BF = 0x7fda;
constexpr uint8_t kPoisonE4M3 = 0xff, kPoisonE5M2 = 0xfd;

// ---- Matrices in host memory, 256-byte aligned ------------------------------------------------
struct Mat {
  T t = T::F32;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, stride = 0;
  int32_t batch = 1;
  size_t elems = 0, offset = 0;
  std::shared_ptr<unsigned char> mem;

  void* data() const { return mem.get() + offset; }
  unsigned char* at(size_t i) const { return static_cast<unsigned char*>(data()) + i * size_of(t); }
  size_t index(int b, uint64_t r, uint64_t c) const { return static_cast<size_t>(b * stride + int64_t(r) + int64_t(c) * ld); }
  double get(int b, uint64_t r, uint64_t c) const {
    const unsigned char* p = at(index(b, r, c));
    switch (t) {
      case T::F32: { float f; std::memcpy(&f, p, 4); return f; }
      case T::F16: { __half h; std::memcpy(&h, p, 2); return __half2float(h); }
      case T::BF16: { __nv_bfloat16 h; std::memcpy(&h, p, 2); return __bfloat162float(h); }
      default: return decode_fp8(*p, t);
    }
  }
  void set(int b, uint64_t r, uint64_t c, double v) const {
    unsigned char* p = at(index(b, r, c));
    switch (t) {
      case T::F32: { const float f = float(v); std::memcpy(p, &f, 4); break; }
      case T::F16: { const __half h = __float2half_rn(float(v)); std::memcpy(p, &h, 2); break; }
      case T::BF16: { const __nv_bfloat16 h = __float2bfloat16_rn(float(v)); std::memcpy(p, &h, 2); break; }
      default: *p = encode_fp8(v, t);
    }
  }
  uint8_t code(int b, uint64_t r, uint64_t c) const { return *at(index(b, r, c)); }
  void poison(size_t i) const {
    switch (t) {
      case T::F32: std::memcpy(at(i), &kPoison32, 4); break;
      case T::F16: std::memcpy(at(i), &kPoison16F, 2); break;
      case T::BF16: std::memcpy(at(i), &kPoison16BF, 2); break;
      case T::E4M3: *at(i) = kPoisonE4M3; break;
      case T::E5M2: *at(i) = kPoisonE5M2; break;
    }
  }
  bool poisoned(size_t i) const {
    switch (t) {
      case T::F32: return std::memcmp(at(i), &kPoison32, 4) == 0;
      case T::F16: return std::memcmp(at(i), &kPoison16F, 2) == 0;
      case T::BF16: return std::memcmp(at(i), &kPoison16BF, 2) == 0;
      case T::E4M3: return *at(i) == kPoisonE4M3;
      case T::E5M2: return *at(i) == kPoisonE5M2;
    }
    return false;
  }
};

inline Mat make_mat(T t, uint64_t rows, uint64_t cols, int64_t ld = -1, int32_t batch = 1, int64_t stride = -1, size_t offset = 0) {
  Mat m;
  m.t = t;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld < 0 ? int64_t(rows) : ld;
  m.batch = batch;
  m.stride = stride < 0 ? m.ld * int64_t(cols) : stride;
  m.elems = size_t(m.stride * (batch - 1) + m.ld * int64_t(cols)) + 16;
  m.offset = offset;
  const size_t bytes = ((m.elems * size_of(t) + offset + 255) / 256 + 1) * 256;
  m.mem.reset(static_cast<unsigned char*>(std::aligned_alloc(256, bytes)), std::free);
  for (size_t i = 0; i < m.elems; ++i) m.poison(i);
  return m;
}

inline void fill_random(const Mat& m, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int b = 0; b < m.batch; ++b)
    for (uint64_t c = 0; c < m.cols; ++c)
      for (uint64_t r = 0; r < m.rows; ++r) m.set(b, r, c, dist(rng));
}

// One device float (sim device memory is host memory).
struct DevFloat {
  float* p = nullptr;
  explicit DevFloat(float v) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(float)), cudaSuccess);
    *p = v;
  }
  ~DevFloat() { cudaFree(p); }
  DevFloat(const DevFloat&) = delete;
  DevFloat& operator=(const DevFloat&) = delete;
};

// ---- One FP8 GEMM through the API --------------------------------------------------------------
struct Spec {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: unset
  float alpha = 1, beta = 0;
  const float* scale[4] = {nullptr, nullptr, nullptr, nullptr};  // A, B, C, D: device floats
  float* amax = nullptr;
  int8_t fast_accum = -1;  // -1: unset
  bool use_heuristic = true;
  uint32_t min_alignment_a = 0;  // 0: the preference's default
};

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  explicit Layout(const Mat& m) {
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, cuda_type(m.t), m.rows, m.cols, m.ld), CUBLAS_STATUS_SUCCESS);
    if (m.batch != 1) {
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &m.batch, sizeof(m.batch)), CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride, sizeof(m.stride)), CUBLAS_STATUS_SUCCESS);
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

template <typename V>
inline void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& v) {
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)), CUBLAS_STATUS_SUCCESS) << attr;
}

class CublasLtFp8 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
  }

  cublasLtMatmulDesc_t make_desc(const Spec& s) {
    cublasLtMatmulDesc_t desc = nullptr;
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, s.compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, s.ta);
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, s.tb);
    set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, s.epilogue);
    if (s.bias != nullptr) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, s.bias);
    if (s.bias_type != -1) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, s.bias_type);
    const cublasLtMatmulDescAttributes_t scale_attrs[4] = {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                           CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER};
    for (int i = 0; i < 4; ++i)
      if (s.scale[i] != nullptr) set_attr(desc, scale_attrs[i], s.scale[i]);
    if (s.amax != nullptr) set_attr(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, s.amax);
    if (s.fast_accum != -1) set_attr(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, s.fast_accum);
    return desc;
  }

  // Heuristic (unless !use_heuristic), matmul, synchronize: the first status that is not SUCCESS.
  cublasStatus_t gemm(const Spec& s, const Mat& A, const Mat& B, const Mat& C, const Mat& D) {
    cublasLtMatmulDesc_t desc = make_desc(s);
    Layout la(A), lb(B), lc(C), ld(D);
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    if (s.min_alignment_a != 0) {
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &s.min_alignment_a,
                                                     sizeof(s.min_alignment_a)), CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulHeuristicResult_t result{};
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (s.use_heuristic) {
      int count = -1;
      st = cublasLtMatmulAlgoGetHeuristic(handle_, desc, la.l, lb.l, lc.l, ld.l, pref, 1, &result, &count);
      if (st == CUBLAS_STATUS_SUCCESS) {
        EXPECT_EQ(count, 1);
      }
    }
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmul(handle_, desc, &s.alpha, A.data(), la.l, B.data(), lb.l, &s.beta, C.data(), lc.l, D.data(), ld.l,
                          s.use_heuristic ? &result.algo : nullptr, nullptr, 0, stream_);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return st;
  }

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// ---- The float64 reference and the check -----------------------------------------------------
// The sim sums in f32 (sim/cublaslt_model.cpp): four FMA chains (the longest floor(k/4) + k % 4
// long) added pairwise, alpha * scale_A * scale_B and beta * scale_C formed in f32 (two and one
// roundings), then the product by the sum, the C term and its add, the bias add: every term of
// the exact sum passes through at most N(k) = floor(k/4) + k % 4 + 8 roundings of relative size
// <= u = 2^-24, so |pre - exact| <= gamma_N * M (+ underflow), M the sum of the magnitudes of the
// terms. GELU (tanh form) has slope <= 1.13 and is evaluated in double then rounded to f32;
// scale_D adds one f32 rounding; the conversion to D's type rounds once (16/32-bit: half an ulp
// relative; FP8: the code is exact when the whole error interval lies inside one code's
// rounding interval, and is otherwise one of the codes at the interval's ends).
constexpr double kU = 0x1p-24;

struct Ref {
  double value;  // T, after the epilogue, before scale_D
  double bound;  // on |T_sim - T|
};

inline bool has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS;
}
inline bool is_gelu(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS; }
inline bool is_relu(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS; }
inline double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }

// The scale values a Spec's device floats hold (1 where null).
struct Scales {
  double a = 1, b = 1, c = 1, d = 1;
};
inline Scales scales_of(const Spec& s) {
  Scales v;
  double* out[4] = {&v.a, &v.b, &v.c, &v.d};
  for (int i = 0; i < 4; ++i)
    if (s.scale[i] != nullptr) *out[i] = *s.scale[i];
  return v;
}

inline Ref reference(const Spec& s, const Mat& A, const Mat& B, const Mat& C, const std::vector<double>& bias, int b, uint64_t i,
              uint64_t j) {
  const Scales sc = scales_of(s);
  const uint64_t k = A.rows;  // A is k x m (TRANSA = T)
  double acc = 0, mag = 0;
  for (uint64_t q = 0; q < k; ++q) {
    const double t = A.get(b, q, i) * B.get(b, q, j);
    acc += t;
    mag += std::fabs(t);
  }
  const double alpha = s.alpha * sc.a * sc.b;
  double v = alpha * acc;
  mag *= std::fabs(alpha);
  if (s.beta != 0) {
    const double c = s.beta * sc.c * C.get(b, i, j);
    v += c;
    mag += std::fabs(c);
  }
  if (has_bias(s.epilogue)) {
    v += bias[i];
    mag += std::fabs(bias[i]);
  }
  const double n = double(k / 4 + k % 4 + 8);
  double e = n * kU / (1 - n * kU) * mag + double(k + 8) * 0x1p-150 + 2.0 * double(k + 4) * 0x1p-53 * mag;
  const double pre = v;
  if (is_relu(s.epilogue)) v = std::max(v, 0.0);
  if (is_gelu(s.epilogue)) {
    v = gelu_tanh(v);
    e = 1.13 * e + 0x1p-50 * std::max(1.0, std::fabs(pre)) + kU * (std::fabs(v) + 1.13 * e) + 0x1p-150;
  }
  return {v, e};
}

inline double unit_roundoff(T t) { return t == T::F32 ? 0x1p-24 : t == T::F16 ? 0x1p-11 : 0x1p-8; }
inline double underflow_slack(T t) { return t == T::F32 ? 0x1p-150 : t == T::F16 ? 0x1p-25 : 0x1p-134; }

struct CheckResult {
  size_t elements = 0, exact_codes = 0;  // FP8 D: elements whose code the reference fixes
  double amax_ref = 0, amax_bound = 0;
};

// Every element of D against the reference; everything outside D's rows x cols still poisoned.
inline CheckResult check(const Spec& s, const Mat& A, const Mat& B, const Mat& C, const Mat& D, const std::vector<double>& bias = {}) {
  CheckResult out;
  const double sd = scales_of(s).d;
  std::vector<bool> inside(D.elems, false);
  int failures = 0;
  std::ostringstream first;
  for (int b = 0; b < D.batch; ++b)
    for (uint64_t j = 0; j < D.cols; ++j)
      for (uint64_t i = 0; i < D.rows; ++i) {
        inside[D.index(b, i, j)] = true;
        ++out.elements;
        const Ref r = reference(s, A, B, C, bias, b, i, j);
        out.amax_ref = std::max(out.amax_ref, std::fabs(r.value));
        out.amax_bound = std::max(out.amax_bound, r.bound);
        bool ok;
        std::ostringstream what;
        if (fp8(D.t)) {
          const double x = r.value * sd;
          const double e = std::fabs(sd) * r.bound + kU * (std::fabs(x) + std::fabs(sd) * r.bound);
          const uint8_t lo = encode_fp8(x - e, D.t), hi = encode_fp8(x + e, D.t), got = D.code(b, i, j);
          const double dlo = decode_fp8(lo, D.t), dhi = decode_fp8(hi, D.t), dgot = decode_fp8(got, D.t);
          if (lo == hi) {
            ++out.exact_codes;
            ok = got == lo;
          } else {
            ok = dgot >= dlo && dgot <= dhi;
          }
          what << "code 0x" << std::hex << int(got) << " (" << dgot << "), expected 0x" << int(lo) << "..0x" << int(hi)
               << std::dec << " for " << x;
        } else {
          const double got = D.get(b, i, j);
          const double bound = r.bound + unit_roundoff(D.t) * (std::fabs(r.value) + r.bound) + underflow_slack(D.t);
          ok = std::fabs(got - r.value) <= bound;
          what << got << ", reference " << r.value << ", bound " << bound;
        }
        if (!ok && failures++ == 0) first << "batch " << b << " D(" << i << "," << j << ") = " << what.str();
      }
  EXPECT_EQ(failures, 0) << "first: " << first.str();
  int clobbered = 0;
  for (size_t e = 0; e < D.elems; ++e)
    if (!inside[e] && !D.poisoned(e)) ++clobbered;
  EXPECT_EQ(clobbered, 0) << "elements outside D's rows x cols were written";
  return out;
}

// A bias vector of `t` (length m), random, and its values as the GEMM reads them.
struct Bias {
  Mat mat;
  std::vector<double> values;
};
inline Bias make_bias(T t, uint64_t m, std::mt19937& rng) {
  Bias b{make_mat(t, m, 1), {}};
  fill_random(b.mat, rng, -1, 1);
  for (uint64_t i = 0; i < m; ++i) b.values.push_back(b.mat.get(0, i, 0));
  return b;
}

}  // namespace cublaslt_fp8_test
