// Tests of the sim's cuBLAS v2 GEMMs (sim/cublas.cpp), through the real <cublas_v2.h> API as
// a user calls it, against a float64 reference written here from the documented semantics:
// C = alpha * op(A) * op(B) + beta * C, column-major, A lda x k (N) or lda x m (T), B ldb x n
// (N) or ldb x k (T), C ldc x n; elements of A/B/C outside the m x k / k x n / m x n corners
// (the padding of a leading dimension) are never read or written. Bounds: a k-term f32 dot
// product and its scaling, |error| <= (k + 3) * u32 * sum |terms| (+ one rounding to the output
// type); exact where the inputs are small integers. Element conversions use <cuda_fp16.h> /
// <cuda_bf16.h>'s host functions, not the sim's. A .cu (compiled by nvcc-sim like any CUDA
// program linking -lcublas), so kernels and GEMMs meet in stream order.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr float kPoison = 12345.5f;  // in C's padding: must survive every call

struct Shape {
  bool ta, tb;
  int m, n, k, lda, ldb, ldc;
};

// op(X)(r, c) of a column-major matrix with leading dimension ld, transposed or not.
double at(const std::vector<double>& x, bool t, int ld, int r, int c) { return t ? x[c + r * ld] : x[r + c * ld]; }

// The reference and its error bound, per element of C (m x n, column-major, ld = ldc).
void reference(const Shape& s, double alpha, const std::vector<double>& a, const std::vector<double>& b, double beta,
               const std::vector<double>& c, std::vector<double>* out, std::vector<double>* bound, double u_out) {
  const double u32 = std::ldexp(1.0, -24);
  out->assign(c.begin(), c.end());
  bound->assign(c.size(), 0.0);
  for (int j = 0; j < s.n; ++j)
    for (int i = 0; i < s.m; ++i) {
      double sum = 0, mag = 0;
      for (int q = 0; q < s.k; ++q) {
        const double term = at(a, s.ta, s.lda, i, q) * at(b, s.tb, s.ldb, q, j);
        sum += term;
        mag += std::fabs(term);
      }
      const double value = alpha * sum + (beta != 0 ? beta * c[i + j * s.ldc] : 0.0);
      (*out)[i + j * s.ldc] = value;
      (*bound)[i + j * s.ldc] = (s.k + 3) * u32 * (std::fabs(alpha) * mag + std::fabs(beta * c[i + j * s.ldc])) +
                               u_out * std::fabs(value) + 1e-30;
    }
}

// Random values; `integers`: small integers, so every f32 operation of the GEMM is exact.
std::vector<double> values(size_t count, std::mt19937& rng, bool integers) {
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<double> v(count);
  for (double& x : v) x = integers ? small(rng) : static_cast<float>(real(rng));
  return v;
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}
template <typename T>
std::vector<T> host_copy(const T* d, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

std::vector<float> to_f32(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

class Cublas : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS); }
  cublasHandle_t handle_ = nullptr;
};

// Sgemm over every transpose pair, odd sizes, padded leading dimensions, beta 0 (C's values
// then not read: NaN there must not show) and beta != 0.
TEST_F(Cublas, SgemmMatchesFloat64EveryTransposeAndLeadingDimension) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, -0.75}) {
        const int m = 7, n = 5, k = 13;
        const Shape s{ta, tb, m, n, k, (ta ? k : m) + 2, (tb ? n : k) + 3, m + 1};
        const std::vector<double> a = values(static_cast<size_t>(s.lda) * (ta ? m : k), rng, false);
        const std::vector<double> b = values(static_cast<size_t>(s.ldb) * (tb ? k : n), rng, false);
        std::vector<double> c = values(static_cast<size_t>(s.ldc) * n, rng, false);
        std::vector<float> c32 = to_f32(c);
        for (int j = 0; j < n; ++j) {
          c32[m + j * s.ldc] = kPoison;  // the padding row
          if (beta == 0) {
            for (int i = 0; i < m; ++i) c32[i + j * s.ldc] = NAN, c[i + j * s.ldc] = 0;
          }
        }
        std::vector<double> want, bound;
        const double alpha = 1.25;
        reference(s, alpha, a, b, beta, c, &want, &bound, 0);
        float* dA = device_copy(to_f32(a));
        float* dB = device_copy(to_f32(b));
        float* dC = device_copy(c32);
        const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
        ASSERT_EQ(cublasSgemm(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_C : CUBLAS_OP_N, m, n, k, &alpha32,
                              dA, s.lda, dB, s.ldb, &beta32, dC, s.ldc),
                  CUBLAS_STATUS_SUCCESS);
        const std::vector<float> got = host_copy(dC, c32.size());
        for (int j = 0; j < n; ++j) {
          for (int i = 0; i < m; ++i)
            ASSERT_NEAR(got[i + j * s.ldc], want[i + j * s.ldc], bound[i + j * s.ldc])
                << "ta " << ta << " tb " << tb << " beta " << beta << " at (" << i << ", " << j << ")";
          ASSERT_EQ(got[m + j * s.ldc], kPoison) << "C's padding written, column " << j;
        }
        cudaFree(dA), cudaFree(dB), cudaFree(dC);
      }
}

// Device pointer mode: alpha and beta are read when the GEMM runs, in stream order: a copy
// queued after the GEMM that changes alpha does not reach it; one queued before does.
TEST_F(Cublas, DevicePointerModeReadsTheScalarsInStreamOrder) {
  const int m = 2, n = 2, k = 2;
  const std::vector<float> a = {1, 2, 3, 4}, b = {1, 0, 0, 1}, c = {0, 0, 0, 0};
  float* dA = device_copy(a);
  float* dB = device_copy(b);
  float* dC = device_copy(c);
  float* scalars = device_copy(std::vector<float>{5.0f, 0.0f});  // alpha, beta
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  const float three = 3.0f, seven = 7.0f;
  ASSERT_EQ(cudaMemcpyAsync(scalars, &three, sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, scalars, dA, m, dB, k, scalars + 1, dC, m),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaMemcpyAsync(scalars, &seven, sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(host_copy(dC, 4), (std::vector<float>{3, 6, 9, 12}));  // 3 * A * I
  cublasPointerMode_t mode;
  ASSERT_EQ(cublasGetPointerMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_POINTER_MODE_DEVICE);
  cudaStream_t got_stream = nullptr;
  ASSERT_EQ(cublasGetStream(handle_, &got_stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got_stream, stream);
  cudaStreamDestroy(stream);
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(scalars);
}

__global__ void fill_kernel(float* x, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

// A kernel writes A and the pointer array on the handle's stream, the GEMM reads them, a kernel
// overwrites C after: each sees the other's work in stream order, as on a GPU.
TEST_F(Cublas, KernelsAndGemmsMeetInStreamOrder) {
  const int n = 33;
  float *a, *b, *c;
  ASSERT_EQ(cudaMalloc(&a, n * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, n * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, n * n * sizeof(float)), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  fill_kernel<<<(n * n + 127) / 128, 128, 0, stream>>>(a, n * n, 1.0f);
  fill_kernel<<<(n * n + 127) / 128, 128, 0, stream>>>(b, n * n, 0.5f);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, a, n, b, n, &zero, c, n), CUBLAS_STATUS_SUCCESS);
  std::vector<float> got(static_cast<size_t>(n * n));
  ASSERT_EQ(cudaMemcpyAsync(got.data(), c, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  fill_kernel<<<(n * n + 127) / 128, 128, 0, stream>>>(c, n * n, -1.0f);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (float v : got) ASSERT_EQ(v, 0.5f * n);
  EXPECT_EQ(host_copy(c, 1)[0], -1.0f);
  cudaStreamDestroy(stream);
  cudaFree(a), cudaFree(b), cudaFree(c);
}

// Strided and pointer-array batches: each batch its own product, exact on small integers.
TEST_F(Cublas, BatchedFormsComputeEachBatch) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const int m = 3, n = 4, k = 5, batches = 3;
  const Shape s{true, false, m, n, k, k, k, m};
  const long long sa = s.lda * m + 1, sb = s.ldb * n + 2, sc = s.ldc * n;
  const std::vector<double> a = values(static_cast<size_t>(sa * batches), rng, true);
  const std::vector<double> b = values(static_cast<size_t>(sb * batches), rng, true);
  const std::vector<double> c = values(static_cast<size_t>(sc * batches), rng, true);
  std::vector<double> want(c.size());
  for (int i = 0; i < batches; ++i) {
    std::vector<double> out, bound;
    reference(s, 2.0, std::vector<double>(a.begin() + i * sa, a.begin() + (i + 1) * sa), std::vector<double>(b.begin() + i * sb, b.begin() + (i + 1) * sb),
              -1.0, std::vector<double>(c.begin() + i * sc, c.begin() + (i + 1) * sc), &out, &bound, 0);
    std::copy(out.begin(), out.end(), want.begin() + i * sc);
  }
  const float alpha = 2.0f, beta = -1.0f;
  float* dA = device_copy(to_f32(a));
  float* dB = device_copy(to_f32(b));
  float* dC = device_copy(to_f32(c));
  ASSERT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA, s.lda, sa, dB, s.ldb, sb,
                                      &beta, dC, s.ldc, sc, batches),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC, c.size()), to_f32(want));

  // The same through pointer arrays (in device memory), batches in reverse order.
  float* dC2 = device_copy(to_f32(c));
  std::vector<const float*> pa, pb;
  std::vector<float*> pc;
  for (int i = batches - 1; i >= 0; --i) pa.push_back(dA + i * sa), pb.push_back(dB + i * sb), pc.push_back(dC2 + i * sc);
  const float** dpa = device_copy(pa);
  const float** dpb = device_copy(pb);
  float** dpc = device_copy(pc);
  ASSERT_EQ(cublasSgemmBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dpa, s.lda, dpb, s.ldb, &beta, dpc,
                               s.ldc, batches),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC2, c.size()), to_f32(want));
  // No batch, no work: success, C untouched.
  ASSERT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA, s.lda, sa, dB, s.ldb, sb,
                                      &beta, dC2, s.ldc, sc, 0),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC2, c.size()), to_f32(want));
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dC2), cudaFree(dpa), cudaFree(dpb), cudaFree(dpc);
}

// GemmEx: f16 and bf16 inputs to f32 and to their own type, within the bound plus one rounding
// of the output; the same problem through the sim's cuBLASLt gives the same bits.
TEST_F(Cublas, GemmExHalfAndBfloatInputsAgreeWithCublasLt) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const int m = 9, n = 6, k = 11;
  const Shape s{false, true, m, n, k, m, n, m};
  for (cudaDataType in : {CUDA_R_16F, CUDA_R_16BF})
    for (bool out_f32 : {true, false}) {
      const cudaDataType out = out_f32 ? CUDA_R_32F : in;
      std::vector<double> a = values(static_cast<size_t>(m * k), rng, false);
      std::vector<double> b = values(static_cast<size_t>(n * k), rng, false);
      // The 16-bit inputs, and the values they hold (the reference multiplies those).
      const auto narrow = [in](std::vector<double>& v) {
        std::vector<uint16_t> bits(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          if (in == CUDA_R_16F) {
            const __half h = __float2half_rn(static_cast<float>(v[i]));
            std::memcpy(&bits[i], &h, 2);
            v[i] = __half2float(h);
          } else {
            const __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v[i]));
            std::memcpy(&bits[i], &h, 2);
            v[i] = __bfloat162float(h);
          }
        }
        return bits;
      };
      const std::vector<uint16_t> a16 = narrow(a), b16 = narrow(b);
      std::vector<double> want, bound;
      const double u_out = out_f32 ? 0 : in == CUDA_R_16F ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
      reference(s, 1.0, a, b, 0.0, std::vector<double>(static_cast<size_t>(m * n), 0.0), &want, &bound, u_out);
      uint16_t* dA = device_copy(a16);
      uint16_t* dB = device_copy(b16);
      const size_t out_bytes = static_cast<size_t>(m * n) * (out_f32 ? 4 : 2);
      void* dC = nullptr;
      void* dD = nullptr;
      ASSERT_EQ(cudaMalloc(&dC, out_bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dD, out_bytes), cudaSuccess);
      const float one = 1.0f, zero = 0.0f;
      ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, dA, in, s.lda, dB, in, s.ldb, &zero, dC,
                             out, s.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP),
                CUBLAS_STATUS_SUCCESS);
      std::vector<char> got(out_bytes);
      ASSERT_EQ(cudaMemcpy(got.data(), dC, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int i = 0; i < m * n; ++i) {
        double v;
        if (out_f32) {
          float f;
          std::memcpy(&f, got.data() + 4 * i, 4);
          v = f;
        } else if (in == CUDA_R_16F) {
          __half h;
          std::memcpy(&h, got.data() + 2 * i, 2);
          v = __half2float(h);
        } else {
          __nv_bfloat16 h;
          std::memcpy(&h, got.data() + 2 * i, 2);
          v = __bfloat162float(h);
        }
        ASSERT_NEAR(v, want[i], bound[i]) << "element " << i;
      }
      // cuBLASLt, the same problem: the same bits.
      cublasLtHandle_t lt;
      ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
      cublasLtMatmulDesc_t desc;
      ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
      const cublasOperation_t tb = CUBLAS_OP_T;
      ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), CUBLAS_STATUS_SUCCESS);
      cublasLtMatrixLayout_t la, lb, lc;
      ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, in, m, k, m), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, in, n, k, n), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cublasLtMatrixLayoutCreate(&lc, out, m, n, m), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cublasLtMatmul(lt, desc, &one, dA, la, dB, lb, &zero, dD, lc, dD, lc, nullptr, nullptr, 0, nullptr),
                CUBLAS_STATUS_SUCCESS);
      std::vector<char> lt_got(out_bytes);
      ASSERT_EQ(cudaMemcpy(lt_got.data(), dD, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(lt_got, got);
      cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
      cublasLtDestroy(lt);
      cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
    }
}

// CUBLAS_TF32_TENSOR_OP_MATH: f32 inputs rounded to TF32 (10 mantissa bits) before the product.
// 1 + 2^-12 is exact in f32 and rounds to 1 in TF32: the default math keeps it, TF32 loses it.
TEST_F(Cublas, Tf32MathModeRoundsTheInputs) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  float* dA = device_copy(std::vector<float>{x});
  float* dB = device_copy(std::vector<float>{1.0f});
  float* dC = device_copy(std::vector<float>{0.0f});
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC, 1)[0], x);
  ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC, 1)[0], 1.0f);
  // GemmEx's pedantic compute type stays exact under the TF32 mode.
  ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, CUDA_R_32F, 1, dB, CUDA_R_32F, 1, &zero,
                         dC, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host_copy(dC, 1)[0], x);
  // The deprecated CUBLAS_TENSOR_OP_MATH means FAST_16F for f32: not modelled, said so.
  ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

// Hgemm: f16 in and out, f16 scalars.
TEST_F(Cublas, HgemmComputesInHalf) {
  const std::vector<__half> a = {__float2half(1.5f), __float2half(-2.0f)}, b = {__float2half(4.0f), __float2half(0.25f)};
  __half* dA = device_copy(a);
  __half* dB = device_copy(b);
  __half* dC = device_copy(std::vector<__half>{__float2half(1.0f)});
  const __half alpha = __float2half(2.0f), beta = __float2half(0.5f);
  // 1 x 1 = (1 x 2) * (2 x 1): 2 * (1.5 * 4 - 2 * 0.25) + 0.5 * 1 = 11.5
  ASSERT_EQ(cublasHgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &alpha, dA, 1, dB, 2, &beta, dC, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(__half2float(host_copy(dC, 1)[0]), 11.5f);
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

// The errors the documentation lists, each with its status; nothing queued for any of them.
TEST_F(Cublas, BadArgumentsGetTheDocumentedStatus) {
  float* d = device_copy(std::vector<float>(64, 0.0f));
  const float one = 1.0f;
  const auto sgemm = [&](cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                         const float* alpha) {
    return cublasSgemm(h, ta, CUBLAS_OP_N, m, n, k, alpha, d, lda, d, ldb, &one, d, ldc);
  };
  EXPECT_EQ(sgemm(nullptr, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, &one), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, -1, 2, 2, 2, 2, 2, &one), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, -3, 2, 2, 2, &one), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 4, 2, 2, 3, 2, 4, &one), CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_T, 4, 2, 6, 4, 6, 4, &one), CUBLAS_STATUS_INVALID_VALUE);  // lda < k (T)
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, 5, 2, 4, 2, &one), CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 3, 2, 2, 3, 2, 2, &one), CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  // Out-of-set values within each enum's range (beyond it a C++ caller's cast is undefined
  // behaviour, which UBSan stops): CUBLAS_OP_CONJG (a placeholder), math mode 5, algo 50.
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_CONJG, 2, 2, 2, 2, 2, 2, &one), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, 4, d, 2, 4, &one, d, 2, 4, -1),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(5)), CUBLAS_STATUS_INVALID_VALUE);
  // Types and compute types outside the subset: not supported, said so.
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_16F, 2, d, CUDA_R_16BF, 2, &one, d,
                         CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_16F, 2, d, CUDA_R_16F, 2, &one, d,
                         CUDA_R_16F, 2, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F, 2, d, CUDA_R_32F, 2, &one, d,
                         CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, static_cast<cublasGemmAlgo_t>(50)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_NE(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), "");
  // A destroyed handle is not a handle.
  cublasHandle_t gone;
  ASSERT_EQ(cublasCreate(&gone), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(gone), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(sgemm(gone, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, &one), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(gone), CUBLAS_STATUS_NOT_INITIALIZED);
  int version = 0;
  ASSERT_EQ(cublasGetVersion(handle_, &version), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(version, CUBLAS_VERSION);
  cudaFree(d);
}

}  // namespace
