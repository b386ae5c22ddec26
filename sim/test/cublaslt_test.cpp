// Tests of the sim's cuBLASLt subset (sim/cublaslt*.cpp), through the real <cublasLt.h>
// API as a user calls it, against an independent float64 reference written here: the
// documented semantics D = epilogue(alpha * op(A) * op(B) + beta * C + bias), column-major,
// A's layout m x k (TRANSA = N) or k x m (T), B's k x n or n x k, bias of length rows(D)
// broadcast over the columns, within the error bound of the sim's f32 arithmetic (derived at
// check() below), and exactly where the inputs make every f32 operation exact. Element
// conversions here use NVIDIA's host conversions from <cuda_fp16.h> / <cuda_bf16.h>, not the
// library's own.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "sim/sim.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ---- Element types and their rounding --------------------------------------------------------
enum class DT { F32, F16, BF16 };

cudaDataType_t cuda_type(DT t) { return t == DT::F32 ? CUDA_R_32F : t == DT::F16 ? CUDA_R_16F : CUDA_R_16BF; }
size_t size_of(DT t) { return t == DT::F32 ? 4 : 2; }
// Unit roundoff (half an ulp, relative) and half the smallest subnormal of each type.
double unit_roundoff(DT t) { return t == DT::F32 ? std::ldexp(1.0, -24) : t == DT::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }
double underflow_slack(DT t) { return t == DT::F32 ? std::ldexp(1.0, -150) : t == DT::F16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134); }

// A NaN with a payload no arithmetic produces: D is filled with it before each call, so an
// element the GEMM should write and did not, or one it should not write and did, shows.
constexpr uint32_t kPoison32 = 0x7fc0dead;
constexpr uint16_t kPoison16F = 0x7e5a;
constexpr uint16_t kPoison16BF = 0x7fda;

void encode(DT t, double v, void* dst) {
  switch (t) {
    case DT::F32: { const float f = static_cast<float>(v); std::memcpy(dst, &f, 4); break; }
    case DT::F16: { const __half h = __float2half_rn(static_cast<float>(v)); std::memcpy(dst, &h, 2); break; }
    case DT::BF16: { const __nv_bfloat16 b = __float2bfloat16_rn(static_cast<float>(v)); std::memcpy(dst, &b, 2); break; }
  }
}
double decode(DT t, const void* src) {
  switch (t) {
    case DT::F32: { float f; std::memcpy(&f, src, 4); return f; }
    case DT::F16: { __half h; std::memcpy(&h, src, 2); return __half2float(h); }
    case DT::BF16: { __nv_bfloat16 b; std::memcpy(&b, src, 2); return __bfloat162float(b); }
  }
  return 0;
}
void poison(DT t, void* dst) {
  if (t == DT::F32) std::memcpy(dst, &kPoison32, 4);
  else std::memcpy(dst, t == DT::F16 ? &kPoison16F : &kPoison16BF, 2);
}
bool is_poison(DT t, const void* src) {
  if (t == DT::F32) return std::memcmp(src, &kPoison32, 4) == 0;
  return std::memcmp(src, t == DT::F16 ? &kPoison16F : &kPoison16BF, 2) == 0;
}

// TF32 rounding written independently of the library: the significand rounded to 11 bits,
// to nearest, ties away from zero (std::round).
double to_tf32(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  const double f = std::frexp(x, &e);  // [0.5, 1)
  return std::ldexp(std::round(std::ldexp(f, 11)), e - 11);
}

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// ---- Matrices in (host) memory, 256-byte aligned as the default preference promises ----------
struct Mat {
  DT t = DT::F32;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
  size_t elems = 0;
  size_t offset_bytes = 0;  // start this many bytes into the allocation (misalignment tests)
  std::shared_ptr<unsigned char> mem;

  void* data() const { return mem.get() + offset_bytes; }
  unsigned char* at(size_t index) const { return static_cast<unsigned char*>(data()) + index * size_of(t); }
  size_t index(int b, uint64_t r, uint64_t c) const { return static_cast<size_t>(b * stride + static_cast<int64_t>(r) + static_cast<int64_t>(c) * ld); }
  double get(int b, uint64_t r, uint64_t c) const { return decode(t, at(index(b, r, c))); }
  void set(int b, uint64_t r, uint64_t c, double v) const { encode(t, v, at(index(b, r, c))); }
};

Mat make_mat(DT t, uint64_t rows, uint64_t cols, int64_t ld = -1, int32_t batch = 1, int64_t stride = -1,
             size_t offset_bytes = 0) {
  Mat m;
  m.t = t;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld < 0 ? static_cast<int64_t>(rows) : ld;
  m.batch = batch;
  m.stride = stride < 0 ? m.ld * static_cast<int64_t>(cols) : stride;
  m.elems = static_cast<size_t>(m.stride * (batch - 1) + m.ld * static_cast<int64_t>(cols)) + 1;
  m.offset_bytes = offset_bytes;
  const size_t bytes = ((m.elems * size_of(t) + offset_bytes + 255) / 256 + 1) * 256;
  m.mem.reset(static_cast<unsigned char*>(std::aligned_alloc(256, bytes)), std::free);
  for (size_t i = 0; i < m.elems; ++i) poison(t, m.at(i));
  return m;
}

void fill_random(const Mat& m, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int b = 0; b < m.batch; ++b)
    for (uint64_t c = 0; c < m.cols; ++c)
      for (uint64_t r = 0; r < m.rows; ++r) m.set(b, r, c, dist(rng));
}

// ---- One GEMM through the API ----------------------------------------------------------------
struct Spec {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: leave unset
  float alpha = 1, beta = 0;
  bool use_heuristic = true;
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

class CublasLt : public ::testing::Test {
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
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof(s.ta)), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof(s.tb)), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof(s.epilogue)), CUBLAS_STATUS_SUCCESS);
    if (s.bias != nullptr) {
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)), CUBLAS_STATUS_SUCCESS);
    }
    if (s.bias_type != -1) {
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &s.bias_type, sizeof(s.bias_type)), CUBLAS_STATUS_SUCCESS);
    }
    return desc;
  }

  // The heuristic's status; the returned algorithm in *algo when it succeeds.
  cublasStatus_t heuristic(cublasLtMatmulDesc_t desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d,
                           cublasLtMatmulPreference_t pref, cublasLtMatmulHeuristicResult_t* result) {
    int count = -1;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, desc, a.l, b.l, c.l, d.l, pref, 1, result, &count);
    if (st == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(count, 1);
      EXPECT_EQ(result->state, CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(result->workspaceSize, 0u);
    }
    return st;
  }

  // Heuristic (unless !use_heuristic) then matmul, then synchronize. C may be D (in place).
  cublasStatus_t gemm(const Spec& s, const Mat& A, const Mat& B, const Mat& C, const Mat& D) {
    cublasLtMatmulDesc_t desc = make_desc(s);
    Layout la(A), lb(B), lc(C), ld(D);
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const uint64_t workspace = 0;
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (s.use_heuristic) st = heuristic(desc, la, lb, lc, ld, pref, &result);
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

// ---- The float64 reference, the f32 model's error bound, and the check -----------------------
// The reference is the exact result (to float64), computed from the inputs as the GEMM sees them (TF32-rounded for
// FAST_TF32). The sim computes in f32 (sim/cublaslt_model.cpp, "Numerics"):
//   s0..s3 = four f32 FMA chains, term q into chain q % 4, except that the k % 4 tail terms all
//            go into s0, so the longest chain has L(k) = floor(k/4) + k % 4 FMAs (for k % 4 >= 2
//            that is more than ceil(k/4): k = 7 puts 4 terms in s0);
//   S = (s0 + s1) + (s2 + s3);  v = alpha * S;  v += beta * C;  v += bias;  (all f32)
//   v = activation(v) (GELU evaluated in double, then rounded to f32);  D = round_D(v).
// Each f32 operation is exact times (1 + d), |d| <= u = 2^-24 (plus, on underflow, an absolute
// error <= 2^-150). Following each term of the exact sum through the operations it passes:
//   a_q * b_q : <= L(k) FMA roundings + 2 pairwise adds + alpha * S + beta add + bias add
//   beta * C  : product + its add + bias add = 3;    bias : its add = 1
// so every term carries at most N(k) = L(k) + 5 factors (1 + d) and, with
// gamma_N = N u / (1 - N u) (Higham's bound on a product of N such factors),
//   |v_pre_computed - v_pre_exact| <= E_pre = gamma_N(k) * M + (k + 8) * 2^-150,
//   M = |alpha| * sum_q |a_q b_q| + |beta C| + |bias|   (Ref::sumabs).
// (That is: gamma_(L + 2) on sum |a b| for the chains and the pairwise adds, then alpha, beta C
// and the bias each adding <= u of the magnitudes they touch.) The float64 reference's own
// rounding, <= 2 (k + 4) 2^-53 M, is added too (2^-29 of the rest).
// Activation: ReLU is 1-Lipschitz, E_act = E_pre. GELU(tanh form) has |GELU'| <= 1.129 (max
// over the reals; 1.13 is used), so E_act = 1.13 E_pre + 2^-50 max(1, |v|) (its float64
// evaluation) + u (|ref| + 1.13 E_pre) + 2^-150 (its rounding to f32).
// Final rounding to D's type (to nearest even, once): u_D (|ref| + E_act) + underflow_D, with u_D
// half an ulp relative (2^-24 f32, 2^-11 f16, 2^-8 bf16) and underflow_D half the smallest
// subnormal. Total: |D - ref| <= E_act + u_D (|ref| + E_act) + underflow_D.
// For k = 100 this is ~30 u of M: an element-sized bug (a dropped term, a wrong index) is
// ~2^22 times larger, and so fails.
struct Ref {
  double value;   // exact (to float64) result, after the activation
  double pre;     // the same before the activation
  double sumabs;  // M: sum of the magnitudes of the terms, for the accumulation bound
  bool gelu;
};

constexpr double kU32 = 0x1p-24;
constexpr double kMaxGeluSlope = 1.13;

// The longest FMA chain of the sim's k-sum: floor(k/4) in each chain, the k % 4 tail in s0.
uint64_t longest_chain(uint64_t k) { return k / 4 + k % 4; }
// Roundings a product term goes through: its chain, the 2 pairwise adds, alpha, beta, bias.
uint64_t f32_roundings(uint64_t k) { return longest_chain(k) + 5; }
double gamma_n(uint64_t n) { return static_cast<double>(n) * kU32 / (1 - static_cast<double>(n) * kU32); }

// The bound on |D - ref| derived above.
double f32_bound(const Ref& r, uint64_t k, DT out) {
  const double e_pre = gamma_n(f32_roundings(k)) * r.sumabs + static_cast<double>(k + 8) * 0x1p-150 +
                       2.0 * static_cast<double>(k + 4) * 0x1p-53 * r.sumabs;
  double e_act = e_pre;
  if (r.gelu) {
    e_act = kMaxGeluSlope * e_pre + 0x1p-50 * std::max(1.0, std::fabs(r.pre)) +
            kU32 * (std::fabs(r.value) + kMaxGeluSlope * e_pre) + 0x1p-150;
  }
  return e_act + unit_roundoff(out) * (std::fabs(r.value) + e_act) + underflow_slack(out);
}

// `c_before` holds C as it was before the call (C may be D).
Ref reference(const Spec& s, const Mat& A, const Mat& B, const std::vector<double>& c_before, const Mat& D,
              const std::vector<double>& bias, int b, uint64_t i, uint64_t j, bool tf32) {
  const uint64_t k = s.ta == CUBLAS_OP_N ? A.cols : A.rows;
  double acc = 0, mag = 0;
  for (uint64_t p = 0; p < k; ++p) {
    double a = s.ta == CUBLAS_OP_N ? A.get(b, i, p) : A.get(b, p, i);
    double x = s.tb == CUBLAS_OP_N ? B.get(b, p, j) : B.get(b, j, p);
    if (tf32) { a = to_tf32(a); x = to_tf32(x); }
    acc += a * x;
    mag += std::fabs(a * x);
  }
  double v = s.alpha * acc;
  mag = std::fabs(s.alpha) * mag;
  if (s.beta != 0) {
    const double c = c_before[D.index(b, i, j)];
    v += s.beta * c;
    mag += std::fabs(s.beta * c);
  }
  const bool has_bias = s.epilogue == CUBLASLT_EPILOGUE_BIAS || s.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                        s.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (has_bias) {
    v += bias[i];  // length rows(D), broadcast over the columns
    mag += std::fabs(bias[i]);
  }
  const double pre = v;
  const bool gelu = s.epilogue == CUBLASLT_EPILOGUE_GELU || s.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (s.epilogue == CUBLASLT_EPILOGUE_RELU || s.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) v = std::max(v, 0.0);
  if (gelu) v = gelu_tanh(v);
  return {v, pre, mag, gelu};
}

std::vector<double> snapshot(const Mat& m) {
  std::vector<double> v(m.elems, 0.0);
  for (int b = 0; b < m.batch; ++b)
    for (uint64_t c = 0; c < m.cols; ++c)
      for (uint64_t r = 0; r < m.rows; ++r) v[m.index(b, r, c)] = m.get(b, r, c);
  return v;
}

// Every element of D within |D - ref| <= f32_bound (above) + extra_relative * M; every element
// outside D's rows x cols still poisoned.
void check(const Spec& s, const Mat& A, const Mat& B, const std::vector<double>& c_before, const Mat& D,
           const std::vector<double>& bias = {}, bool tf32 = false, double extra_relative = 0) {
  const uint64_t k = s.ta == CUBLAS_OP_N ? A.cols : A.rows;
  std::vector<bool> inside(D.elems, false);
  int failures = 0;
  std::ostringstream first;
  for (int b = 0; b < D.batch; ++b)
    for (uint64_t j = 0; j < D.cols; ++j)
      for (uint64_t i = 0; i < D.rows; ++i) {
        inside[D.index(b, i, j)] = true;
        const Ref r = reference(s, A, B, c_before, D, bias, b, i, j, tf32);
        const double got = D.get(b, i, j);
        const double bound = f32_bound(r, k, D.t) + extra_relative * r.sumabs;
        if (!(std::fabs(got - r.value) <= bound)) {
          if (failures++ == 0)
            first << "batch " << b << " D(" << i << "," << j << ") = " << got << ", reference " << r.value << ", bound " << bound;
        }
      }
  EXPECT_EQ(failures, 0) << "first: " << first.str();
  int clobbered = 0;
  for (size_t e = 0; e < D.elems; ++e)
    if (!inside[e] && !is_poison(D.t, D.at(e))) ++clobbered;
  EXPECT_EQ(clobbered, 0) << "elements outside D's rows x cols (padding, between batches) were written";
}

// ---- Basics ------------------------------------------------------------------------------------
TEST(CublasLtStatus, NamesAndStrings) {
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_GT(std::strlen(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)), 0u);
  EXPECT_STRNE(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE));
}

TEST(CublasLtAttributes, LayoutRoundTripAndRefusals) {
  cublasLtMatrixLayout_t l = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 7, 5, 9), CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, stride = 0;
  uint32_t type = 0;
  int32_t order = -1, batch = 0;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(rows));
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof(type), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 7u);
  EXPECT_EQ(cols, 5u);
  EXPECT_EQ(ld, 9);
  EXPECT_EQ(type, static_cast<uint32_t>(CUDA_R_16BF));
  EXPECT_EQ(order, CUBLASLT_ORDER_COL);
  EXPECT_EQ(batch, 1);
  EXPECT_EQ(stride, 0);
  // Size query, wrong sizes.
  written = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, nullptr, 0, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(int64_t));
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, nullptr, 0, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  int32_t small = 3;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &small, sizeof(small)), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 7u) << "a refused set must not change the layout";
  // Only column-major order.
  const int32_t row_order = CUBLASLT_ORDER_ROW;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row_order, sizeof(row_order)), CUBLAS_STATUS_NOT_SUPPORTED);
  const int32_t col_order = CUBLASLT_ORDER_COL;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &col_order, sizeof(col_order)), CUBLAS_STATUS_SUCCESS);
  const uint64_t new_rows = 11;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &new_rows, sizeof(new_rows)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 11u);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);

  // The header's inline Init on caller storage.
  cublasLtMatrixLayoutOpaque_t storage;
  ASSERT_EQ(cublasLtMatrixLayoutInit(&storage, CUDA_R_32F, 3, 4, 5), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(&storage, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(ld, 5);
}

TEST(CublasLtAttributes, DescAndPreferenceRoundTrip) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  int32_t compute = 0, scale = -1, mode = -1, ta = -1, bias_type = 0;
  uint32_t epilogue = 0;
  const void* bias = reinterpret_cast<const void*>(1);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute, sizeof(compute), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale, sizeof(scale), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(compute, CUBLAS_COMPUTE_32F_FAST_TF32);
  EXPECT_EQ(scale, CUDA_R_32F);
  EXPECT_EQ(mode, CUBLASLT_POINTER_MODE_HOST);
  EXPECT_EQ(ta, CUBLAS_OP_N);
  EXPECT_EQ(epilogue, static_cast<uint32_t>(CUBLASLT_EPILOGUE_DEFAULT));
  EXPECT_EQ(bias, nullptr);
  EXPECT_EQ(bias_type, -1);
  const cublasOperation_t t = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(ta, CUBLAS_OP_T);
  const int64_t wrong_size = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &wrong_size, sizeof(wrong_size)), CUBLAS_STATUS_INVALID_VALUE);
  const int32_t device_mode = CUBLASLT_POINTER_MODE_DEVICE;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode, sizeof(device_mode)), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  uint32_t align = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof(align), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(align, 256u) << "documented default";
  const uint32_t sixteen = 16;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &sixteen, sizeof(sixteen)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof(align), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(align, 16u);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &sixteen, sizeof(sixteen)), CUBLAS_STATUS_INVALID_VALUE)
      << "MAX_WORKSPACE_BYTES is uint64_t";
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
}

// ---- Shapes and transposes (f32, tight) --------------------------------------------------------
struct ShapeCase {
  cublasOperation_t ta, tb;
  uint64_t m, n, k;
};

class CublasLtShapes : public CublasLt, public ::testing::WithParamInterface<ShapeCase> {};

TEST_P(CublasLtShapes, MatchesReferenceWithPaddedLd) {
  const ShapeCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.m * 10007 + c.n * 101 + c.k + (c.ta << 20) + (c.tb << 21)));
  Spec s;
  s.ta = c.ta;
  s.tb = c.tb;
  s.alpha = 0.75f;
  // A's layout is m x k for N, k x m for T (and B's k x n or n x k); every ld > rows.
  const uint64_t ar = c.ta == CUBLAS_OP_N ? c.m : c.k, ac = c.ta == CUBLAS_OP_N ? c.k : c.m;
  const uint64_t br = c.tb == CUBLAS_OP_N ? c.k : c.n, bc = c.tb == CUBLAS_OP_N ? c.n : c.k;
  Mat A = make_mat(DT::F32, ar, ac, static_cast<int64_t>(ar + 3));
  Mat B = make_mat(DT::F32, br, bc, static_cast<int64_t>(br + 5));
  Mat C = make_mat(DT::F32, c.m, c.n, static_cast<int64_t>(c.m + 1));  // all NaN: beta 0 must not read it
  Mat D = make_mat(DT::F32, c.m, c.n, static_cast<int64_t>(c.m + 2));
  fill_random(A, rng);
  fill_random(B, rng);
  ASSERT_EQ(gemm(s, A, B, C, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, {}, D);
}

std::vector<ShapeCase> shape_cases() {
  std::vector<ShapeCase> cases;
  const uint64_t dims[] = {1, 7, 33, 100};
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (uint64_t m : dims)
        for (uint64_t n : dims)
          for (uint64_t k : dims) cases.push_back({ta, tb, m, n, k});
  return cases;
}

std::string shape_name(const ::testing::TestParamInfo<ShapeCase>& info) {
  const ShapeCase& c = info.param;
  std::ostringstream s;
  s << (c.ta == CUBLAS_OP_N ? 'N' : 'T') << (c.tb == CUBLAS_OP_N ? 'N' : 'T') << "_m" << c.m << "_n" << c.n << "_k" << c.k;
  return s.str();
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, CublasLtShapes, ::testing::ValuesIn(shape_cases()), shape_name);

// ---- beta, in place, batches ---------------------------------------------------------------------
TEST_F(CublasLt, BetaOneInPlaceCEqualsD) {
  std::mt19937 rng(7);
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
    Spec s;
    s.ta = ta;
    s.tb = CUBLAS_OP_T;
    s.alpha = -0.5f;
    s.beta = 1.0f;
    const uint64_t m = 33, n = 7, k = 100;
    Mat A = ta == CUBLAS_OP_N ? make_mat(DT::F32, m, k, 40) : make_mat(DT::F32, k, m, 101);
    Mat B = make_mat(DT::F32, n, k, 9);
    Mat D = make_mat(DT::F32, m, n, 35);
    fill_random(A, rng);
    fill_random(B, rng);
    fill_random(D, rng, -4, 4);
    const std::vector<double> before = snapshot(D);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    check(s, A, B, before, D);
  }
}

TEST_F(CublasLt, FractionalBetaSeparateC) {
  std::mt19937 rng(8);
  Spec s;
  s.alpha = 2.0f;
  s.beta = 0.25f;
  Mat A = make_mat(DT::F32, 7, 33, 8), B = make_mat(DT::F32, 33, 100, 33);
  Mat C = make_mat(DT::F32, 7, 100, 11), D = make_mat(DT::F32, 7, 100, 7);
  fill_random(A, rng);
  fill_random(B, rng);
  fill_random(C, rng);
  const std::vector<double> c_values = snapshot(C);
  // The reference reads C through D's indexing: give it C's values at D's positions.
  std::vector<double> at_d(D.elems, 0.0);
  for (uint64_t j = 0; j < 100; ++j)
    for (uint64_t i = 0; i < 7; ++i) at_d[D.index(0, i, j)] = c_values[C.index(0, i, j)];
  ASSERT_EQ(gemm(s, A, B, C, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, at_d, D);
}

TEST_F(CublasLt, StridedBatches) {
  std::mt19937 rng(9);
  for (bool broadcast_b : {false, true}) {
    Spec s;
    s.ta = CUBLAS_OP_T;
    s.alpha = 1.0f;
    s.beta = 1.0f;
    const uint64_t m = 7, n = 33, k = 33;
    const int32_t batch = 3;
    Mat A = make_mat(DT::F32, k, m, 35, batch, 35 * 7 + 13);
    Mat B = make_mat(DT::F32, k, n, 34, batch, broadcast_b ? 0 : 34 * 33 + 1);  // stride 0: one B for all
    Mat D = make_mat(DT::F32, m, n, 9, batch, 9 * 33 + 4);                     // gaps between batches stay poisoned
    fill_random(A, rng);
    fill_random(B, rng);
    fill_random(D, rng);
    const std::vector<double> before = snapshot(D);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    check(s, A, B, before, D);
  }
}

// ---- Epilogues -------------------------------------------------------------------------------
TEST_F(CublasLt, BiasIsPerRowOfDBroadcastOverColumns) {
  // D is 7 x 5: a bias of length rows(D) = 7, added to every column.
  std::mt19937 rng(10);
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  s.tb = CUBLAS_OP_T;
  Mat A = make_mat(DT::F32, 7, 33), B = make_mat(DT::F32, 5, 33, 6);
  Mat D = make_mat(DT::F32, 7, 5, 8);
  fill_random(A, rng);
  fill_random(B, rng);
  std::vector<float> bias_values(7);
  std::vector<double> bias(7);
  for (int i = 0; i < 7; ++i) bias[i] = bias_values[i] = 100.0f * static_cast<float>(i + 1);
  s.bias = bias_values.data();
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, {}, D, bias);
  // The orientation, directly: D(i, j) - D(i, j') is a GEMM difference, never a bias difference.
  for (uint64_t i = 0; i < 7; ++i) EXPECT_NEAR(D.get(0, i, 0), 100.0 * (i + 1), 40.0) << "row " << i;
}

TEST_F(CublasLt, ReluAndReluBias) {
  std::mt19937 rng(11);
  for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS}) {
    Spec s;
    s.epilogue = e;
    Mat A = make_mat(DT::F32, 33, 7), B = make_mat(DT::F32, 7, 33), D = make_mat(DT::F32, 33, 33, 34);
    fill_random(A, rng);
    fill_random(B, rng);
    std::vector<float> bias_values(33);
    std::vector<double> bias(33);
    for (int i = 0; i < 33; ++i) bias[i] = bias_values[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    if (e == CUBLASLT_EPILOGUE_RELU_BIAS) s.bias = bias_values.data();
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    check(s, A, B, {}, D, bias);
    int zeros = 0;
    for (uint64_t j = 0; j < 33; ++j)
      for (uint64_t i = 0; i < 33; ++i) {
        EXPECT_GE(D.get(0, i, j), 0.0);
        zeros += D.get(0, i, j) == 0.0;
      }
    EXPECT_GT(zeros, 100) << "about half the GEMM is negative";
  }
}

// GELU at chosen points: A = x (m x 1), B = [1] (1 x 1), so D = GELU(x).
TEST_F(CublasLt, GeluIsTheTanhForm) {
  const std::vector<double> xs = {-30, -10, -5, -3, -2, -1, -0.5, -0.125, 0, 0.125, 0.5, 1, 2, 3, 5, 10, 30, 1000};
  const uint64_t m = xs.size();
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_GELU;
  Mat A = make_mat(DT::F32, m, 1), B = make_mat(DT::F32, 1, 1), D = make_mat(DT::F32, m, 1);
  for (uint64_t i = 0; i < m; ++i) A.set(0, i, 0, xs[i]);
  B.set(0, 0, 0, 1.0);
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, {}, D);
  for (uint64_t i = 0; i < m; ++i) {
    const double x = xs[i], got = D.get(0, i, 0);
    EXPECT_NEAR(got, gelu_tanh(x), 1e-6 * std::max(1.0, std::fabs(x))) << "x = " << x;
    if (x >= 10) {
      EXPECT_EQ(got, x) << "GELU(x) = x for large x";
    }
    if (x <= -10) {
      EXPECT_LE(std::fabs(got), 1e-20) << "GELU(x) = 0 for very negative x";
    }
  }
  // The check can tell the forms apart: at x = -1 tanh and erf GELU differ by ~1.5e-4.
  const double at_minus_one = D.get(0, 5, 0);
  EXPECT_GT(std::fabs(at_minus_one - gelu_erf(-1.0)), 1e-4);
  EXPECT_LT(std::fabs(at_minus_one - gelu_tanh(-1.0)), 1e-7);
}

TEST_F(CublasLt, GeluBiasAppliesBiasThenGelu) {
  std::mt19937 rng(12);
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  s.ta = CUBLAS_OP_T;
  Mat A = make_mat(DT::F32, 33, 100, 40), B = make_mat(DT::F32, 33, 7), D = make_mat(DT::F32, 100, 7, 101);
  fill_random(A, rng);
  fill_random(B, rng);
  std::vector<float> bias_values(100);
  std::vector<double> bias(100);
  for (int i = 0; i < 100; ++i) bias[i] = bias_values[i] = 0.05f * static_cast<float>(i - 50);
  s.bias = bias_values.data();
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, {}, D, bias);
}

// ---- Data types --------------------------------------------------------------------------------
struct TypeCase {
  DT in, out;
  cublasLtEpilogue_t epilogue;
};

class CublasLtTypes : public CublasLt, public ::testing::WithParamInterface<TypeCase> {};

TEST_P(CublasLtTypes, RoundedOnceToD) {
  const TypeCase tc = GetParam();
  std::mt19937 rng(13);
  Spec s;
  s.ta = CUBLAS_OP_T;
  s.alpha = 1.25f;
  s.beta = 0.5f;
  s.epilogue = tc.epilogue;
  const uint64_t m = 33, n = 7, k = 100;
  Mat A = make_mat(tc.in, k, m, 101), B = make_mat(tc.in, k, n, 100);
  Mat D = make_mat(tc.out, m, n, 40);
  fill_random(A, rng);
  fill_random(B, rng);
  fill_random(D, rng);
  const std::vector<double> before = snapshot(D);
  Mat bias_mat = make_mat(tc.out, m, 1);
  fill_random(bias_mat, rng);
  std::vector<double> bias(m);
  for (uint64_t i = 0; i < m; ++i) bias[i] = bias_mat.get(0, i, 0);
  s.bias = bias_mat.data();
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, before, D, bias);

  // Rounded once, exactly: with entries r/64 (r an integer, |r| <= 64: exact in f16 and bf16)
  // every f32 operation of the model is exact (products are multiples of 2^-12 and every partial
  // k-sum one of magnitude <= 100, 19 bits; alpha S = 1.25 S a multiple of 2^-14 below 2^7; beta C
  // and the bias multiples of 2^-7 below 1; v a multiple of 2^-14 below 2^7, 21 bits <= 24), so
  // D must be the exact result rounded once, to nearest even, to D's type. (Not for GELU, whose
  // f32 evaluation is the library's own; the bound above covers it.)
  if (tc.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS) return;
  std::uniform_int_distribution<int> dyadic(-64, 64);
  auto fill_dyadic = [&](const Mat& x) {
    for (uint64_t c = 0; c < x.cols; ++c)
      for (uint64_t r = 0; r < x.rows; ++r) x.set(0, r, c, dyadic(rng) / 64.0);
  };
  fill_dyadic(A);
  fill_dyadic(B);
  fill_dyadic(D);
  fill_dyadic(bias_mat);
  for (uint64_t i = 0; i < m; ++i) bias[i] = bias_mat.get(0, i, 0);
  const std::vector<double> dyadic_before = snapshot(D);
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  int wrong = 0, rounded = 0;
  std::ostringstream first;
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      const double exact = reference(s, A, B, dyadic_before, D, bias, 0, i, j, false).value;
      unsigned char buf[4];
      encode(tc.out, exact, buf);  // exact is a float, so this is one rounding to nearest even
      const double want = decode(tc.out, buf), got = D.get(0, i, j);
      rounded += want != exact;
      if (got != want && wrong++ == 0) first << "D(" << i << "," << j << ") = " << got << ", want " << want << " (exact " << exact << ")";
    }
  EXPECT_EQ(wrong, 0) << "first: " << first.str();
  if (tc.out != DT::F32) {
    EXPECT_GT(rounded, 0) << "no element needed rounding: the exact check tests nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, CublasLtTypes,
    ::testing::Values(TypeCase{DT::F32, DT::F32, CUBLASLT_EPILOGUE_BIAS}, TypeCase{DT::F16, DT::F16, CUBLASLT_EPILOGUE_DEFAULT},
                      TypeCase{DT::F16, DT::F16, CUBLASLT_EPILOGUE_GELU_BIAS}, TypeCase{DT::F16, DT::F32, CUBLASLT_EPILOGUE_BIAS},
                      TypeCase{DT::BF16, DT::BF16, CUBLASLT_EPILOGUE_DEFAULT}, TypeCase{DT::BF16, DT::BF16, CUBLASLT_EPILOGUE_GELU_BIAS},
                      TypeCase{DT::BF16, DT::F32, CUBLASLT_EPILOGUE_GELU_BIAS}),
    [](const ::testing::TestParamInfo<TypeCase>& info) {
      auto name = [](DT t) { return t == DT::F32 ? std::string("f32") : t == DT::F16 ? std::string("f16") : std::string("bf16"); };
      return name(info.param.in) + "_to_" + name(info.param.out) + "_epilogue" + std::to_string(info.param.epilogue);
    });

// The bias is added before D is rounded: acc = 1 + 2^-8 (halfway between the bf16 neighbours
// 1 and 1 + 2^-7) and bias 2^-8 give 1 + 2^-7 exactly; rounding acc first (to even: 1) and
// then adding the bias (halfway again: 1) would give 1. (Every f32 operation here is exact: the
// values need at most 9 significant bits.)
TEST_F(CublasLt, Bf16BiasAddedBeforeTheRounding) {
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  Mat A = make_mat(DT::BF16, 1, 2), B = make_mat(DT::BF16, 2, 1), D = make_mat(DT::BF16, 1, 1);
  A.set(0, 0, 0, 1.0);
  A.set(0, 0, 1, std::ldexp(1.0, -8));
  B.set(0, 0, 0, 1.0);
  B.set(0, 1, 0, 1.0);
  Mat bias = make_mat(DT::BF16, 1, 1);
  bias.set(0, 0, 0, std::ldexp(1.0, -8));
  s.bias = bias.data();
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(D.get(0, 0, 0), 1.0 + std::ldexp(1.0, -7));
}

TEST_F(CublasLt, Bf16OutputIsCorrectlyRounded) {
  // 1 + 3 * 2^-9 lies between the bf16 neighbours 1 and 1 + 2^-7, nearer the latter; and a
  // halfway case, 1 + 2^-8, rounds to even (1). The f32 k-sums of these dyadic values are exact
  // (at most 10 significant bits), so the ties reach D's rounding as exact ties.
  Spec s;
  Mat A = make_mat(DT::BF16, 1, 3), B = make_mat(DT::BF16, 3, 1), D = make_mat(DT::BF16, 1, 1);
  A.set(0, 0, 0, 1.0);
  A.set(0, 0, 1, std::ldexp(1.0, -8));
  A.set(0, 0, 2, std::ldexp(1.0, -9));
  for (int p = 0; p < 3; ++p) B.set(0, p, 0, 1.0);
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(D.get(0, 0, 0), 1.0 + std::ldexp(1.0, -7));
  A.set(0, 0, 2, 0.0);
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(D.get(0, 0, 0), 1.0);
  // Halfway in f16: 1 + 2^-11 -> 1, 1 + 3 * 2^-11 -> 1 + 2^-9 (even).
  Mat H = make_mat(DT::F16, 1, 2), HB = make_mat(DT::F16, 2, 1), HD = make_mat(DT::F16, 1, 1);
  H.set(0, 0, 0, 1.0);
  H.set(0, 0, 1, std::ldexp(1.0, -11));
  HB.set(0, 0, 0, 1.0);
  HB.set(0, 1, 0, 1.0);
  ASSERT_EQ(gemm(s, H, HB, HD, HD), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(HD.get(0, 0, 0), 1.0);
  H.set(0, 0, 0, 1.0 + std::ldexp(1.0, -10));
  ASSERT_EQ(gemm(s, H, HB, HD, HD), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(HD.get(0, 0, 0), 1.0 + std::ldexp(1.0, -9));
}

TEST_F(CublasLt, FastTf32RoundsTheInputs) {
  std::mt19937 rng(14);
  Spec s;
  s.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  s.tb = CUBLAS_OP_T;
  const uint64_t m = 33, n = 100, k = 100;
  Mat A = make_mat(DT::F32, m, k, 35), B = make_mat(DT::F32, n, k, 101), D = make_mat(DT::F32, m, n, 33);
  fill_random(A, rng);
  fill_random(B, rng);
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  // Tight against the reference with TF32-rounded inputs: past the input rounding FAST_TF32 is
  // the same f32 arithmetic, so the f32 bound holds…
  check(s, A, B, {}, D, {}, /*tf32=*/true);
  // …within the TF32 bound of the full-precision reference: each input within 2^-11 relative
  // (ties-away rounding to 11 significant bits), so each product within 2^-10 + 2^-22 of M's
  // terms; 2^-21 in place of 2^-22 also covers the f32 bound being taken on the full-precision M
  // (the TF32 one is at most (1 + 2^-10 + 2^-22) M)…
  check(s, A, B, {}, D, {}, /*tf32=*/false, /*extra_relative=*/std::ldexp(1.0, -10) + std::ldexp(1.0, -21));
  // …and visibly not f32: the same GEMM in CUBLAS_COMPUTE_32F is within the f32 bound of the
  // full-precision reference, and FAST_TF32's errors against it are many f32 bounds wide.
  Spec s32 = s;
  s32.compute = CUBLAS_COMPUTE_32F;
  Mat D32 = make_mat(DT::F32, m, n, 33);
  ASSERT_EQ(gemm(s32, A, B, D32, D32), CUBLAS_STATUS_SUCCESS);
  check(s32, A, B, {}, D32);
  double worst = 0, worst32 = 0;  // largest |D - reference| / f32 bound
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      const Ref r = reference(s, A, B, {}, D, {}, 0, i, j, false);
      const double bound = f32_bound(r, k, DT::F32);
      worst = std::max(worst, std::fabs(D.get(0, i, j) - r.value) / bound);
      worst32 = std::max(worst32, std::fabs(D32.get(0, i, j) - r.value) / bound);
    }
  EXPECT_LE(worst32, 1.0);
  EXPECT_GT(worst, 16.0) << "FAST_TF32 results as precise as f32: inputs were not rounded";
}

// ---- k = 0, empty problems, the queue ------------------------------------------------------------
TEST_F(CublasLt, KZeroGivesBetaCPlusBias) {
  std::mt19937 rng(15);
  Spec s;
  s.beta = 1.0f;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  Mat A = make_mat(DT::F32, 7, 0), B = make_mat(DT::F32, 0, 5), D = make_mat(DT::F32, 7, 5, 9);
  fill_random(D, rng);
  const std::vector<double> before = snapshot(D);
  std::vector<float> bias_values(7, 2.0f);
  s.bias = bias_values.data();
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, before, D, std::vector<double>(7, 2.0));
}

TEST_F(CublasLt, EmptyProblemWritesNothing) {
  Spec s;
  Mat A = make_mat(DT::F32, 0, 4), B = make_mat(DT::F32, 4, 3), D = make_mat(DT::F32, 0, 3);
  EXPECT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(is_poison(DT::F32, D.at(0)));
}

TEST_F(CublasLt, ArgumentsAreCapturedAtTheCall) {
  // Descriptors destroyed and alpha changed after the call, before the queue runs: the GEMM
  // still uses what the call saw.
  std::mt19937 rng(16);
  Mat A = make_mat(DT::F32, 7, 7), B = make_mat(DT::F32, 7, 7), D = make_mat(DT::F32, 7, 7);
  fill_random(A, rng);
  fill_random(B, rng);
  Spec s;
  s.alpha = 3.0f;
  float alpha = s.alpha, beta = 0.0f;
  cublasLtMatmulDesc_t desc = make_desc(s);
  auto* la = new Layout(A);
  auto* lb = new Layout(B);
  auto* ld = new Layout(D);
  ASSERT_EQ(cublasLtMatmul(handle_, desc, &alpha, A.data(), la->l, B.data(), lb->l, &beta, D.data(), ld->l, D.data(),
                           ld->l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_SUCCESS);
  alpha = 100.0f;
  cublasLtMatmulDescDestroy(desc);
  delete la;
  delete lb;
  delete ld;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  check(s, A, B, {}, D);
}

TEST_F(CublasLt, KernelNameDescribesTheGemm) {
  std::mt19937 rng(17);
  {
    Spec s;
    s.ta = CUBLAS_OP_T;
    s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
    Mat A = make_mat(DT::BF16, 7, 7), B = make_mat(DT::BF16, 7, 7), D = make_mat(DT::BF16, 7, 7);
    Mat bias = make_mat(DT::BF16, 7, 1);
    fill_random(A, rng);
    fill_random(B, rng);
    fill_random(bias, rng);
    s.bias = bias.data();
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(blockscope::sim::last_kernel_name(), "sim_gemm_bf16_tn_bias_gelu");
  }
  {
    Spec s;
    s.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    Mat A = make_mat(DT::F32, 7, 7, 7, 2), B = make_mat(DT::F32, 7, 7, 7, 2), D = make_mat(DT::F32, 7, 7, 7, 2);
    fill_random(A, rng);
    fill_random(B, rng);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(blockscope::sim::last_kernel_name(), "sim_gemm_tf32_nn_batched");
  }
  {
    Spec s;
    s.tb = CUBLAS_OP_T;
    Mat A = make_mat(DT::F16, 7, 7), B = make_mat(DT::F16, 7, 7), D = make_mat(DT::F32, 7, 7);
    fill_random(A, rng);
    fill_random(B, rng);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(blockscope::sim::last_kernel_name(), "sim_gemm_f16_f32_nt");
  }
}

// ---- NOT_SUPPORTED (the heuristic and the matmul) -------------------------------------------------
class CublasLtRefusals : public CublasLt {
 protected:
  // Status of the heuristic and of a matmul without an algorithm, for the same configuration;
  // D must stay untouched when either refuses.
  void expect_both(cublasStatus_t heuristic_status, cublasStatus_t matmul_status, const Spec& spec, const Mat& A,
                   const Mat& B, const Mat& C, const Mat& D) {
    Spec s = spec;
    s.use_heuristic = true;
    EXPECT_EQ(gemm(s, A, B, C, D), heuristic_status) << cublasLtGetStatusName(gemm(s, A, B, C, D));
    s.use_heuristic = false;
    EXPECT_EQ(gemm(s, A, B, C, D), matmul_status);
    for (size_t e = 0; e < D.elems; ++e) ASSERT_TRUE(is_poison(D.t, D.at(e))) << "a refused call wrote D";
  }
};

TEST_F(CublasLtRefusals, UnsupportedTypeCombinations) {
  Spec s;
  auto mats = [](DT a, DT b, DT c, DT d) {
    return std::vector<Mat>{make_mat(a, 8, 8), make_mat(b, 8, 8), make_mat(c, 8, 8), make_mat(d, 8, 8)};
  };
  const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED;
  {
    auto m = mats(DT::F16, DT::BF16, DT::F32, DT::F32);  // mixed A/B
    expect_both(NS, NS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(DT::F32, DT::F16, DT::F32, DT::F32);  // mixed A/B
    expect_both(NS, NS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(DT::BF16, DT::BF16, DT::F32, DT::BF16);  // C and D types differ
    expect_both(NS, NS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(DT::F32, DT::F32, DT::BF16, DT::BF16);  // f32 inputs, bf16 output
    expect_both(NS, NS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(DT::F16, DT::F16, DT::BF16, DT::BF16);  // f16 inputs, bf16 output
    expect_both(NS, NS, s, m[0], m[1], m[2], m[3]);
  }
  {
    Spec t = s;
    t.compute = CUBLAS_COMPUTE_32F_FAST_TF32;  // documented for 32F A/B/C only
    auto m = mats(DT::BF16, DT::BF16, DT::BF16, DT::BF16);
    expect_both(NS, NS, t, m[0], m[1], m[2], m[3]);
  }
  {
    Spec t = s;
    t.compute = CUBLAS_COMPUTE_16F;  // not in the sim
    auto m = mats(DT::F16, DT::F16, DT::F16, DT::F16);
    expect_both(NS, NS, t, m[0], m[1], m[2], m[3]);
  }
}

TEST_F(CublasLtRefusals, UnsupportedEpiloguesAndBiasTypes) {
  const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<float> bias32(8, 0.0f);
  for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_RELU_AUX, CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_BGRADA}) {
    Spec s;
    s.epilogue = e;
    s.bias = bias32.data();
    Mat A = make_mat(DT::F32, 8, 8), B = make_mat(DT::F32, 8, 8), D = make_mat(DT::F32, 8, 8);
    expect_both(NS, NS, s, A, B, D, D);
  }
  {
    // bf16 D with an f32 bias: bias elements are D's type.
    Spec s;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    s.bias = bias32.data();
    s.bias_type = CUDA_R_32F;
    Mat A = make_mat(DT::BF16, 8, 8), B = make_mat(DT::BF16, 8, 8), D = make_mat(DT::BF16, 8, 8);
    expect_both(NS, NS, s, A, B, D, D);
  }
  {
    // Explicitly D's type is fine.
    Spec s;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    Mat bias = make_mat(DT::BF16, 8, 1);
    for (uint64_t i = 0; i < 8; ++i) bias.set(0, i, 0, 0.5);
    s.bias = bias.data();
    s.bias_type = CUDA_R_16BF;
    Mat A = make_mat(DT::BF16, 8, 8), B = make_mat(DT::BF16, 8, 8), D = make_mat(DT::BF16, 8, 8);
    std::mt19937 rng(18);
    fill_random(A, rng);
    fill_random(B, rng);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    check(s, A, B, {}, D, std::vector<double>(8, 0.5));
  }
}

TEST_F(CublasLtRefusals, AlignmentPreferences) {
  Spec spec;
  Mat A = make_mat(DT::F32, 8, 8), B = make_mat(DT::F32, 8, 8), D = make_mat(DT::F32, 8, 8);
  cublasLtMatmulDesc_t desc = make_desc(spec);
  Layout la(A), lb(B), ld(D);
  auto with_alignment = [&](cublasLtMatmulPreferenceAttributes_t attr, uint32_t bytes) {
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    const cublasStatus_t st = heuristic(desc, la, lb, ld, ld, pref, &result);
    cublasLtMatmulPreferenceDestroy(pref);
    return st;
  };
  // f32 operands need 4-byte alignment.
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 2), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 1), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 2), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 0), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 16), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(with_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 256), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDescDestroy(desc);

  // A misaligned bias pointer (the heuristic reads its value for the alignment).
  std::vector<float> bias(16, 0.0f);
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  s.bias = reinterpret_cast<const char*>(bias.data()) + 2;
  expect_both(CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_INVALID_VALUE, s, A, B, D, D);
}

TEST_F(CublasLtRefusals, HeuristicArguments) {
  Spec s;
  Mat A = make_mat(DT::F32, 8, 8);
  cublasLtMatmulDesc_t desc = make_desc(s);
  Layout l(A);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int count = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, desc, l.l, l.l, l.l, l.l, pref, 0, &result, &count), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle_, desc, l.l, l.l, l.l, l.l, pref, 1, &result, &count), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(result.workspaceSize, 0u);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, l.l, l.l, l.l, l.l, pref, 1, &result, &count), CUBLAS_STATUS_NOT_INITIALIZED);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatmulDescDestroy(desc);
}

// ---- INVALID_VALUE (conflicts and impossible configurations) --------------------------------------
TEST_F(CublasLtRefusals, ShapesThatDoNotAgree) {
  const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED, IV = CUBLAS_STATUS_INVALID_VALUE;
  {
    // k disagrees: A is 7 x 5, B is 6 x 9.
    Spec s;
    Mat A = make_mat(DT::F32, 7, 5), B = make_mat(DT::F32, 6, 9), D = make_mat(DT::F32, 7, 9);
    expect_both(NS, IV, s, A, B, D, D);
  }
  {
    // TRANSA = N but A laid out k x m (the transposed shape).
    Spec s;
    Mat A = make_mat(DT::F32, 5, 7), B = make_mat(DT::F32, 5, 9), D = make_mat(DT::F32, 7, 9);
    expect_both(NS, IV, s, A, B, D, D);
    s.ta = CUBLAS_OP_T;  // now it agrees
    std::mt19937 rng(19);
    fill_random(A, rng);
    fill_random(B, rng);
    ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
    check(s, A, B, {}, D);
  }
  {
    // TRANSB = T but B laid out k x n.
    Spec s;
    s.tb = CUBLAS_OP_T;
    Mat A = make_mat(DT::F32, 7, 5), B = make_mat(DT::F32, 5, 9), D = make_mat(DT::F32, 7, 9);
    expect_both(NS, IV, s, A, B, D, D);
  }
  {
    // C's shape is not D's.
    Spec s;
    Mat A = make_mat(DT::F32, 7, 5), B = make_mat(DT::F32, 5, 9), C = make_mat(DT::F32, 9, 7), D = make_mat(DT::F32, 7, 9);
    expect_both(NS, IV, s, A, B, C, D);
  }
  {
    // ld < rows.
    Spec s;
    Mat A = make_mat(DT::F32, 7, 5, 6), B = make_mat(DT::F32, 5, 9), D = make_mat(DT::F32, 7, 9);
    expect_both(NS, IV, s, A, B, D, D);
  }
  {
    // Batch counts that differ.
    Spec s;
    Mat A = make_mat(DT::F32, 7, 5, 7, 2), B = make_mat(DT::F32, 5, 9, 5, 3), D = make_mat(DT::F32, 7, 9, 7, 2);
    expect_both(NS, IV, s, A, B, D, D);
  }
  {
    // Batches of D that overlap.
    Spec s;
    Mat A = make_mat(DT::F32, 7, 5, 7, 2), B = make_mat(DT::F32, 5, 9, 5, 2), D = make_mat(DT::F32, 7, 9, 7, 2, 7 * 9 - 1);
    expect_both(NS, IV, s, A, B, D, D);
  }
}

TEST_F(CublasLtRefusals, MatmulArguments) {
  std::mt19937 rng(20);
  Spec s;
  s.beta = 1.0f;
  Mat A = make_mat(DT::F32, 8, 8), B = make_mat(DT::F32, 8, 8), C = make_mat(DT::F32, 8, 8, 9), D = make_mat(DT::F32, 8, 8);
  fill_random(A, rng);
  fill_random(B, rng);
  cublasLtMatmulDesc_t desc = make_desc(s);
  Layout la(A), lb(B), lc(C), ld(D);
  const float one = 1.0f;
  EXPECT_EQ(cublasLtMatmul(nullptr, desc, &one, A.data(), la.l, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtMatmul(handle_, nullptr, &one, A.data(), la.l, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmul(handle_, desc, &one, A.data(), nullptr, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmul(handle_, desc, nullptr, A.data(), la.l, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmul(handle_, desc, &one, nullptr, la.l, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // beta != 0 with no C.
  EXPECT_EQ(cublasLtMatmul(handle_, desc, &one, A.data(), la.l, B.data(), lb.l, &one, nullptr, ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // In place with C's layout not D's (ld 9 vs 8).
  EXPECT_EQ(cublasLtMatmul(handle_, desc, &one, A.data(), la.l, B.data(), lb.l, &one, D.data(), lc.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  // Bias epilogue without a bias pointer.
  Spec b = s;
  b.epilogue = CUBLASLT_EPILOGUE_BIAS;
  cublasLtMatmulDesc_t bias_desc = make_desc(b);
  EXPECT_EQ(cublasLtMatmul(handle_, bias_desc, &one, A.data(), la.l, B.data(), lb.l, &one, D.data(), ld.l, D.data(), ld.l, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(bias_desc);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  for (size_t e = 0; e < D.elems; ++e) ASSERT_TRUE(is_poison(D.t, D.at(e))) << "a refused call wrote D";
  cublasLtMatmulDescDestroy(desc);
}

TEST_F(CublasLtRefusals, PointersLessAlignedThanThePreferencePromised) {
  std::mt19937 rng(21);
  Spec s;
  // A starts 4 bytes into a 256-byte-aligned allocation: aligned for f32, not to the default
  // 256-byte preference the heuristic's algorithm was chosen under.
  Mat A = make_mat(DT::F32, 8, 8, 8, 1, -1, 4), B = make_mat(DT::F32, 8, 8), D = make_mat(DT::F32, 8, 8);
  fill_random(A, rng);
  fill_random(B, rng);
  EXPECT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_INVALID_VALUE);
  for (size_t e = 0; e < D.elems; ++e) ASSERT_TRUE(is_poison(D.t, D.at(e)));
  // Without an algorithm (or with a preference of 4 bytes) it runs.
  s.use_heuristic = false;
  ASSERT_EQ(gemm(s, A, B, D, D), CUBLAS_STATUS_SUCCESS);
  check(s, A, B, {}, D);
  // Not even element-aligned: refused either way.
  Mat A2 = make_mat(DT::F32, 8, 8, 8, 1, -1, 2);
  EXPECT_EQ(gemm(s, A2, B, D, D), CUBLAS_STATUS_INVALID_VALUE);
}

// ---- Operands in the sim's device memory -----------------------------------------------------
// Exactly sized cudaMalloc buffers (extent = (cols - 1) * ld + rows elements): the GEMM runs.
TEST_F(CublasLt, ExactlySizedDeviceAllocations) {
  const uint64_t m = 7, n = 5, k = 3;
  const int64_t lda = 9, ldb = 4, ldd = 8;
  const size_t a_bytes = ((k - 1) * lda + m) * 4, b_bytes = ((n - 1) * ldb + k) * 4, d_bytes = ((n - 1) * ldd + m) * 4;
  float *A = nullptr, *B = nullptr, *D = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&A), a_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&B), b_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&D), d_bytes), cudaSuccess);
  // Small integers and halves: the f32 k-sum (|terms| <= 6, k = 3) is exact, so D is exact.
  for (size_t i = 0; i < a_bytes / 4; ++i) A[i] = static_cast<float>(i % 7) - 3.0f;  // sim device memory is host memory
  for (size_t i = 0; i < b_bytes / 4; ++i) B[i] = static_cast<float>(i % 5) * 0.5f;
  cublasLtMatrixLayout_t la, lb, ld;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, lda), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, ldb), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd), CUBLAS_STATUS_SUCCESS);
  Spec s;
  cublasLtMatmulDesc_t desc = make_desc(s);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(handle_, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, nullptr, nullptr, 0, stream_), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      double ref = 0;
      for (uint64_t p = 0; p < k; ++p) ref += static_cast<double>(A[i + p * lda]) * B[p + j * ldb];
      EXPECT_EQ(D[i + j * ldd], static_cast<float>(ref)) << i << "," << j;
    }
  cublasLtMatmulDescDestroy(desc);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cudaFree(A);
  cudaFree(B);
  cudaFree(D);
}

// D's layout one column bigger than its allocation: what a GPU reports as an illegal address,
// the sim reports as a fault of the GEMM at the next synchronising call. (A death test: the
// error is sticky, so it runs in a child process.)
[[noreturn]] void gemm_past_allocation_child() {
  cublasLtHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS || cudaStreamCreate(&stream) != cudaSuccess) std::_Exit(2);
  float *A = nullptr, *B = nullptr, *D = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&A), 8 * 8 * 4);
  cudaMalloc(reinterpret_cast<void**>(&B), 8 * 8 * 4);
  cudaMalloc(reinterpret_cast<void**>(&D), 8 * 7 * 4);  // 8 x 7, but D's layout is 8 x 8
  for (int i = 0; i < 64; ++i) A[i] = B[i] = 1.0f;
  cublasLtMatrixLayout_t l;
  cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 8, 8);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const float alpha = 1.0f, beta = 0.0f;
  if (cublasLtMatmul(handle, desc, &alpha, A, l, B, l, &beta, D, l, D, l, nullptr, nullptr, 0, stream) != CUBLAS_STATUS_SUCCESS)
    std::_Exit(3);  // the call itself succeeds: the fault is the GEMM's, when it runs
  std::_Exit(cudaStreamSynchronize(stream) == cudaErrorLaunchFailure ? 0 : 4);
}

TEST(CublasLtDeathTest, OperandPastItsAllocationFaultsAtSynchronize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(gemm_past_allocation_child(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
