// Tests of the sim's cuBLASLt FP8 matmul: what it refuses, with the documented status, and the
// FP8 attributes of the matmul descriptor (the harness: cublaslt_fp8_harness.h; what it
// computes: cublaslt_fp8_test.cpp). Every refused call must leave D as it was (poisoned).
#include "cublaslt_fp8_harness.h"

namespace {

using namespace cublaslt_fp8_test;

constexpr cublasStatus_t kNS = CUBLAS_STATUS_NOT_SUPPORTED;
constexpr cublasStatus_t kIV = CUBLAS_STATUS_INVALID_VALUE;

class Fp8Refusals : public CublasLtFp8 {
 protected:
  // The heuristic's status, then a matmul's without an algorithm; D untouched by either.
  void expect_both(cublasStatus_t heuristic_status, cublasStatus_t matmul_status, const Spec& spec, const Mat& A,
                   const Mat& B, const Mat& C, const Mat& D) {
    Spec s = spec;
    s.use_heuristic = true;
    const cublasStatus_t h = gemm(s, A, B, C, D);
    EXPECT_EQ(h, heuristic_status) << cublasLtGetStatusName(h);
    s.use_heuristic = false;
    const cublasStatus_t m = gemm(s, A, B, C, D);
    EXPECT_EQ(m, matmul_status) << cublasLtGetStatusName(m);
    for (size_t e = 0; e < D.elems; ++e) ASSERT_TRUE(D.poisoned(e)) << "a refused call wrote D";
  }
  // A (k x m), B (k x n), C and D (m x n) of the given types, 16-element dimensions.
  std::vector<Mat> mats(T a, T b, T c, T d, uint64_t m = 16, uint64_t n = 16, uint64_t k = 16) {
    std::vector<Mat> v{make_mat(a, k, m), make_mat(b, k, n), make_mat(c, m, n), make_mat(d, m, n)};
    std::mt19937 rng(1);
    fill_random(v[0], rng);
    fill_random(v[1], rng);
    return v;
  }
};

TEST_F(Fp8Refusals, TypeCombinationsOutsideTheTable) {
  Spec s;
  struct Row {
    T a, b, c, d;
    const char* why;
  };
  const Row rows[] = {
      {T::E5M2, T::E5M2, T::BF16, T::BF16, "both inputs E5M2"},
      {T::E5M2, T::E5M2, T::F16, T::E5M2, "both inputs E5M2"},
      {T::E4M3, T::E4M3, T::BF16, T::E5M2, "E5M2 D from two E4M3 inputs"},
      {T::E4M3, T::E4M3, T::F16, T::E5M2, "E5M2 D from two E4M3 inputs"},
      {T::E4M3, T::E4M3, T::F32, T::E4M3, "FP8 D with a 32F C"},
      {T::E4M3, T::E4M3, T::BF16, T::F16, "D neither C's type nor FP8"},
      {T::E4M3, T::E4M3, T::F32, T::BF16, "D neither C's type nor FP8"},
      {T::E4M3, T::E4M3, T::E4M3, T::E4M3, "FP8 C"},
      {T::F32, T::E4M3, T::F32, T::F32, "32F A with an FP8 B"},
      {T::BF16, T::E4M3, T::BF16, T::BF16, "16BF A with an FP8 B"},
      {T::E4M3, T::F16, T::F16, T::F16, "FP8 A with a 16F B"},
      {T::BF16, T::BF16, T::BF16, T::E4M3, "FP8 D from 16BF inputs"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.why);
    auto m = mats(r.a, r.b, r.c, r.d);
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
}

TEST_F(Fp8Refusals, ComputeTypeOtherThan32F) {
  auto m = mats(T::E4M3, T::E4M3, T::BF16, T::BF16);
  for (const cublasComputeType_t compute : {CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_16F}) {
    Spec s;
    s.compute = compute;
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
}

// Only "TN": A transposed (its layout k x m), B not (k x n).
TEST_F(Fp8Refusals, LayoutsOtherThanTN) {
  const uint64_t k = 16;
  Mat C = make_mat(T::BF16, 16, 16), D = make_mat(T::BF16, 16, 16);
  Mat A_n = make_mat(T::E4M3, 16, k), B_t = make_mat(T::E4M3, 16, k), A_t = make_mat(T::E4M3, k, 16), B_n = make_mat(T::E4M3, k, 16);
  Spec s;
  s.ta = CUBLAS_OP_N;
  s.tb = CUBLAS_OP_N;
  expect_both(kNS, kNS, s, A_n, B_n, C, D);  // NN
  s.tb = CUBLAS_OP_T;
  expect_both(kNS, kNS, s, A_n, B_t, C, D);  // NT
  s.ta = CUBLAS_OP_T;
  expect_both(kNS, kNS, s, A_t, B_t, C, D);  // TT
  s.tb = CUBLAS_OP_N;
  EXPECT_EQ(gemm(s, A_t, B_n, C, D), CUBLAS_STATUS_SUCCESS);  // TN
}

// "pointers and matrix dimension must support 16-byte alignment".
TEST_F(Fp8Refusals, DimensionsAndLeadingDimensionsNotMultiplesOf16Bytes) {
  Spec s;
  {
    auto m = mats(T::E4M3, T::E4M3, T::BF16, T::BF16, 16, 16, 24);  // k = 24
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(T::E4M3, T::E4M3, T::BF16, T::BF16, 12, 16, 16);  // m * 2 bytes = 24
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
  {
    auto m = mats(T::E4M3, T::E4M3, T::F32, T::F32, 20, 16, 16);  // m * 4 bytes = 80: allowed
    EXPECT_EQ(gemm(s, m[0], m[1], m[2], m[3]), CUBLAS_STATUS_SUCCESS);
  }
  Mat A = make_mat(T::E4M3, 16, 16), B = make_mat(T::E4M3, 16, 16), C = make_mat(T::BF16, 16, 16), D = make_mat(T::BF16, 16, 16);
  expect_both(kNS, kNS, s, make_mat(T::E4M3, 16, 16, 24), B, C, D);       // lda = 24 bytes
  expect_both(kNS, kNS, s, A, make_mat(T::E4M3, 16, 16, 20), C, D);       // ldb = 20 bytes
  expect_both(kNS, kNS, s, A, B, make_mat(T::BF16, 16, 16, 20), D);       // ldc = 40 bytes
  expect_both(kNS, kNS, s, A, B, C, make_mat(T::BF16, 16, 16, 20));       // ldd = 40 bytes
  expect_both(kNS, kNS, s, make_mat(T::E4M3, 16, 16, 16, 2, 264), make_mat(T::E4M3, 16, 16, 16, 2),
              make_mat(T::BF16, 16, 16, 16, 2), make_mat(T::BF16, 16, 16, 16, 2));  // A's batch stride 264 bytes
}

TEST_F(Fp8Refusals, PointersNot16ByteAligned) {
  Spec s;
  Mat B = make_mat(T::E4M3, 16, 16), C = make_mat(T::BF16, 16, 16), D = make_mat(T::BF16, 16, 16);
  for (const size_t offset : {1u, 8u}) {
    Mat A = make_mat(T::E4M3, 16, 16, -1, 1, -1, offset);
    s.use_heuristic = false;  // no algorithm: the FP8 kernels' own requirement
    EXPECT_EQ(gemm(s, A, B, C, D), kNS);
    s.use_heuristic = true;   // the heuristic's algorithm was promised 256-byte alignment
    EXPECT_EQ(gemm(s, A, B, C, D), kIV);
  }
  Mat A = make_mat(T::E4M3, 16, 16);
  s.use_heuristic = false;
  EXPECT_EQ(gemm(s, A, B, C, make_mat(T::BF16, 16, 16, -1, 1, -1, 2)), kNS);  // D 2-byte aligned
  // A preference that promises less than 16 bytes gets no algorithm.
  s.use_heuristic = true;
  s.min_alignment_a = 8;
  EXPECT_EQ(gemm(s, A, B, C, D), kNS);
  s.min_alignment_a = 16;
  EXPECT_EQ(gemm(s, A, B, C, D), CUBLAS_STATUS_SUCCESS);
  for (size_t e = 0; e < 16 * 16; ++e) ASSERT_FALSE(D.poisoned(e));
}

TEST_F(Fp8Refusals, BiasOfAnotherTypeThanTheTables) {
  struct Row {
    T c, d, wrong;
  };
  const Row rows[] = {{T::BF16, T::BF16, T::F32}, {T::F16, T::F16, T::BF16}, {T::F32, T::F32, T::F32},
                      {T::F32, T::F32, T::F16},   {T::F16, T::E4M3, T::BF16}, {T::BF16, T::E4M3, T::F16}};
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::Message() << "C " << int(r.c) << ", D " << int(r.d) << ", bias " << int(r.wrong));
    auto m = mats(T::E4M3, T::E4M3, r.c, r.d);
    Mat bias = make_mat(r.wrong, 16, 1);
    Spec s;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    s.bias = bias.data();
    s.bias_type = cuda_type(r.wrong);
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
}

TEST_F(Fp8Refusals, EpiloguesOutsideTheSubset) {
  auto m = mats(T::E4M3, T::E4M3, T::BF16, T::BF16);
  for (const cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_BGRADA}) {
    Spec s;
    s.epilogue = e;
    expect_both(kNS, kNS, s, m[0], m[1], m[2], m[3]);
  }
}

// Scales and amax "set for an unsupported matrix data, scale, and compute type combination":
// INVALID_VALUE from the matmul (the heuristic has no algorithm: NOT_SUPPORTED).
TEST_F(Fp8Refusals, ScalesWhereTheyDoNotApply) {
  DevFloat one(1.0f), amax(0.0f);
  {
    auto m = mats(T::E4M3, T::E4M3, T::BF16, T::BF16);  // a D scale with a 16BF D
    Spec s;
    s.scale[3] = one.p;
    expect_both(kNS, kIV, s, m[0], m[1], m[2], m[3]);
  }
  for (int i = 0; i < 5; ++i) {  // any of them on a bf16 GEMM
    SCOPED_TRACE(i);
    Mat A = make_mat(T::BF16, 16, 16), B = make_mat(T::BF16, 16, 16), C = make_mat(T::BF16, 16, 16), D = make_mat(T::BF16, 16, 16);
    Spec s;
    if (i < 4) s.scale[i] = one.p;
    else s.amax = amax.p;
    expect_both(kNS, kIV, s, A, B, C, D);
  }
  {
    // C == D is impossible with an FP8 D and a 16-bit C: different types, one buffer.
    auto m = mats(T::E4M3, T::E4M3, T::BF16, T::E4M3);
    Mat D = make_mat(T::E4M3, 16, 16);
    Layout la(m[0]), lb(m[1]), lc(m[2]), ld(D);
    Spec s;
    cublasLtMatmulDesc_t desc = make_desc(s);
    EXPECT_EQ(cublasLtMatmul(handle_, desc, &s.alpha, m[0].data(), la.l, m[1].data(), lb.l, &s.beta, D.data(), lc.l, D.data(),
                             ld.l, nullptr, nullptr, 0, stream_), kIV);
    cublasLtMatmulDescDestroy(desc);
  }
}

// ---- The descriptor's FP8 attributes ---------------------------------------------------------------
TEST_F(Fp8Refusals, AttributesReadBackWhatWasSet) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasLtMatmulDescAttributes_t pointers[5] = {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                      CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
                                                      CUBLASLT_MATMUL_DESC_AMAX_D_POINTER};
  float targets[5];
  for (int i = 0; i < 5; ++i) {
    void* got = &targets[0];
    size_t written = 0;
    ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, pointers[i], &got, sizeof(got), &written), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(got, nullptr) << "default of attribute " << pointers[i];
    void* p = &targets[i];
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, pointers[i], &p, sizeof(p)), CUBLAS_STATUS_SUCCESS);
  }
  for (int i = 0; i < 5; ++i) {
    void* got = nullptr;
    size_t written = 0;
    ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, pointers[i], &got, sizeof(got), &written), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(got, &targets[i]);
    EXPECT_EQ(written, sizeof(void*));
  }
  int8_t fast = 0;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(fast, 0);
  fast = 1;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1), CUBLAS_STATUS_SUCCESS);
  fast = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(fast, 1);
  EXPECT_EQ(written, 1u);
  const int32_t wide = 1;  // FAST_ACCUM is an int8_t
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &wide, sizeof(wide)), kIV);
  // Scale modes: tensor-wide f32 scalars only; the vector and block modes are refused.
  for (const cublasLtMatmulDescAttributes_t attr : {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                    CUBLASLT_MATMUL_DESC_C_SCALE_MODE, CUBLASLT_MATMUL_DESC_D_SCALE_MODE}) {
    int32_t mode = -1;
    ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, attr, &mode, sizeof(mode), &written), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mode, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
    mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &mode, sizeof(mode)), CUBLAS_STATUS_SUCCESS);
    for (const int32_t other : {int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3), int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0),
                                int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F), int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F)})
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &other, sizeof(other)), kNS) << attr << " " << other;
    ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, attr, &mode, sizeof(mode), &written), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mode, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  }
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace
