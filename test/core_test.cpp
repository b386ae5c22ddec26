// Core types: dtype conversions, tensor views, allocator statistics, the CPU GEMM.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "runtime/context.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/machine_cache.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "test/op_test_helpers.h"
#include "test/support/test_support.h"

namespace blockscope {
namespace {

namespace fs = std::filesystem;

// Exact f16 decoding written from the IEEE binary16 definition, independent of dtype.cpp.
double f16_value(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  double v;
  if (exponent == 31) v = mantissa ? std::nan("") : INFINITY;
  else if (exponent == 0) v = std::ldexp(mantissa, -24);
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -v : v;
}

TEST(DType, F16RoundTripEveryBitPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const double exact = f16_value(static_cast<uint16_t>(bits));
    const float value = f16_to_float(f16{static_cast<uint16_t>(bits)});
    if (std::isnan(exact)) {
      ASSERT_TRUE(std::isnan(value)) << bits;
      ASSERT_TRUE(std::isnan(f16_to_float(float_to_f16(value)))) << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(value), exact) << bits;
    ASSERT_EQ(float_to_f16(value).bits, bits) << bits;
  }
}

// The nearest half to v with ties to the even bit pattern, found by binary search over the
// ordered finite magnitudes 0x0000..0x7bff (independent of dtype.cpp's bit manipulation).
// Magnitudes from 65520 (max + half an ulp) up round to Inf.
uint16_t nearest_f16_bits(float v) {
  const double magnitude = std::abs(static_cast<double>(v));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (magnitude >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t lo = 0, hi = 0x7bff;  // invariant: f16_value(lo) <= magnitude
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (f16_value(static_cast<uint16_t>(mid)) <= magnitude) lo = mid; else hi = mid - 1;
  }
  uint32_t nearest = lo;
  if (lo < 0x7bff) {
    const double below = magnitude - f16_value(static_cast<uint16_t>(lo));
    const double above = f16_value(static_cast<uint16_t>(lo + 1)) - magnitude;
    if (above < below || (above == below && ((lo + 1) & 1u) == 0)) nearest = lo + 1;
  }
  return static_cast<uint16_t>(sign | nearest);
}

// float -> f16 rounding on random floats of every magnitude f16 can reach (uniform over the
// float bit patterns, so subnormals, ties and the overflow edge all get samples), and on every
// exact tie between two neighbouring halves.
TEST(DType, F16RoundsToNearestEven) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 engine(seed);
  // |v| < 2^17: exponents up to 16, past f16's overflow threshold.
  std::uniform_int_distribution<uint32_t> pattern(0, 0x47ffffffu);
  for (int i = 0; i < 300000; ++i) {
    uint32_t bits = pattern(engine) | (engine() & 1 ? 0x80000000u : 0u);
    const float v = bits_float(bits);
    ASSERT_EQ(float_to_f16(v).bits, nearest_f16_bits(v)) << "value " << v << " bits " << std::hex << bits;
  }
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // midpoints between neighbours: exact in float
    const float tie = static_cast<float>(0.5 * (f16_value(static_cast<uint16_t>(h)) + f16_value(static_cast<uint16_t>(h + 1))));
    ASSERT_EQ(float_to_f16(tie).bits, (h & 1u) ? h + 1 : h) << "tie above bits " << h;
    ASSERT_EQ(float_to_f16(-tie).bits, 0x8000u | ((h & 1u) ? h + 1 : h)) << "tie above bits " << h;
  }
}

TEST(DType, Bf16RoundingNanAndInf) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(-std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(INFINITY)), INFINITY);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-INFINITY)), -INFINITY);
  // The largest float rounds to +Inf in bf16 (it is above bf16's max + half an ulp).
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max())), INFINITY);
  EXPECT_EQ(f16_to_float(float_to_f16(65520.0f)), INFINITY);    // halfway to the next: ties to Inf
  EXPECT_EQ(f16_to_float(float_to_f16(65519.0f)), 65504.0f);
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.0f, -25))), 0.0f);  // tie to even zero
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.5f, -25))), std::ldexp(1.0f, -24));
}

TEST(Tensor, ViewsShareStorageAndIndexCorrectly) {
  Context ctx;
  Tensor t = ctx.empty({2, 3, 4}, DType::f32);
  std::vector<float> values(24);
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i);
  from_floats(t, values);

  Tensor tt = t.transpose(0, 2);  // [4, 3, 2]
  EXPECT_EQ(tt.storage(), t.storage());
  EXPECT_FALSE(tt.is_contiguous());
  std::vector<float> got = to_floats(tt);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) ASSERT_EQ(got[(a * 3 + b) * 2 + c], values[(c * 3 + b) * 4 + a]);

  Tensor p = t.permute({1, 0, 2});  // [3, 2, 4]
  got = to_floats(p);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 4; ++c) ASSERT_EQ(got[(a * 2 + b) * 4 + c], values[(b * 3 + a) * 4 + c]);

  Tensor s = t.slice(2, 1, 3);  // [2, 3, 2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  got = to_floats(s);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) ASSERT_EQ(got[(a * 3 + b) * 2 + c], values[(a * 3 + b) * 4 + c + 1]);

  Tensor r = t.reshape({6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_EQ(to_floats(r), values);
  EXPECT_THROW(tt.reshape({24}), Error);  // a strided view cannot be reshaped without a copy

  Tensor sel = t.select(1, 2);  // [2, 4]
  got = to_floats(sel);
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 4; ++c) ASSERT_EQ(got[a * 4 + c], values[(a * 3 + 2) * 4 + c]);

  // Writing through a view writes the shared storage.
  std::vector<float> ones(static_cast<size_t>(s.numel()), -1.0f);
  from_floats(s, ones);
  got = to_floats(t);
  EXPECT_EQ(got[1], -1.0f);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[3], 3.0f);
}

// Someone else's memory (a NumPy array through the Python module): used in place, never freed
// by the backend nor counted in its statistics, its owner released with the last tensor.
TEST(Storage, BorrowedMemoryIsUsedInPlaceAndItsOwnerReleasedWithTheLastTensor) {
  Context ctx(Device::cpu());
  auto memory = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = memory;
  const size_t in_use = ctx.backend().memory_stats().in_use;
  {
    auto storage = std::make_shared<Storage>(ctx.backend_ptr(), memory->data(), 6 * sizeof(float), memory);
    memory.reset();
    Tensor t(storage, {2, 3}, DType::f32);
    storage.reset();
    EXPECT_EQ(t.data_as<float>(), watch.lock()->data());
    EXPECT_EQ(to_floats(t.transpose(0, 1)), (std::vector<float>{1, 4, 2, 5, 3, 6}));
    from_floats(t, {7, 8, 9, 10, 11, 12});
    EXPECT_EQ((*watch.lock())[5], 12.0f) << "written in the owner's memory";
    EXPECT_EQ(ctx.backend().memory_stats().in_use, in_use) << "borrowed memory is not the backend's";
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired()) << "the owner goes with the last tensor";
  EXPECT_THROW(Storage(ctx.backend_ptr(), nullptr, 0, nullptr), Error);
}

TEST(Tensor, ZeroSizeTensorsAreContiguous) {
  Context ctx;
  Tensor t = ctx.empty({3, 0, 2}, DType::f32);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.transpose(0, 2).is_contiguous());
  EXPECT_TRUE(to_floats(t).empty());
}

TEST(Tensor, BadViewsAreErrors) {
  Context ctx;
  Tensor t = ctx.empty({2, 3}, DType::bf16);
  EXPECT_THROW(t.transpose(0, 2), Error);
  EXPECT_THROW(t.slice(1, 2, 4), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
  EXPECT_THROW(t.reshape({4, 2}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
}

TEST(Context, AllocatorStatisticsTrackPeak) {
  Context ctx;
  ctx.backend().reset_peak_memory();
  const size_t base = ctx.backend().memory_stats().in_use;
  {
    Tensor a = ctx.empty({1000}, DType::f32);
    Tensor b = ctx.empty({500}, DType::f16);
    EXPECT_EQ(ctx.backend().memory_stats().in_use, base + 5000);
  }
  EXPECT_EQ(ctx.backend().memory_stats().in_use, base);
  EXPECT_EQ(ctx.backend().memory_stats().peak_in_use, base + 5000);
}

TEST(Context, CudaWithoutGpuIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  try {
    Context ctx(Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find("cuda:0"), std::string::npos) << error.what();
  }
}

TEST(Gemm, EveryLinkedLibraryMatchesFloat64WithTransposes) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t m = 37, n = 53, k = 301;
      std::vector<float> a = testing::random_floats(m * k, seed + 1), b = testing::random_floats(k * n, seed + 2);
      std::vector<float> c0 = testing::random_floats(m * n, seed + 3);
      std::vector<double> want(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          want[i * n + j] = 0.5 * acc + 2.0 * c0[i * n + j];
        }
      for (cpu::GemmLibrary library : cpu::linked_gemm_libraries()) {  // every linked library
        const char* name = cpu::gemm_library_name(library);
        std::vector<float> c = c0;
        cpu::sgemm_with(library, ta, tb, m, n, k, 0.5f, a.data(), ta ? m : k, b.data(), tb ? k : n, 2.0f, c.data(), n);
        EXPECT_LT(testing::max_relative_error(c, want), 1e-5) << name << " ta " << ta << " tb " << tb;
        // beta = 0 must not read C: NaN poison must not leak.
        std::vector<float> poisoned(m * n, std::nanf(""));
        cpu::sgemm_with(library, ta, tb, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f,
                        poisoned.data(), n);
        EXPECT_EQ(testing::first_nan(poisoned), -1) << name;
      }
    }
  }
}

// A long depth (attention's P·V over thousands of keys): the built-in GEMM sums each depth
// block on its own and adds the blocks, as the libraries' kernels add k panels. Over k = 16384
// positive terms, one f32 running sum measured 2.4e-6 … 3.4e-6 (20–29 ε); blocked 1.8e-7 …
// 3.0e-7, oneDNN's sgemm 1.7e-7 … 2.9e-7. The bound, 8 ε, fails the running sum every time.
TEST(Gemm, LongDepthsAreSummedInBlocks) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int64_t m = 4, n = 6, k = 16384;
  const std::vector<float> a = testing::random_floats(m * k, seed + 1, 0.0f, 1.0f);
  const std::vector<float> b = testing::random_floats(k * n, seed + 2, 0.0f, 1.0f);
  std::vector<double> want(m * n, 0.0);  // [m, n]
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) want[i * n + j] += static_cast<double>(a[i * k + p]) * b[p * n + j];
  for (int impl = 0; impl < 2; ++impl) {
    std::vector<float> c(m * n, std::nanf(""));
    auto fn = impl == 0 ? &cpu::sgemm : &cpu::sgemm_builtin;
    fn(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    const double error = testing::max_relative_error(c, want);
    testing::report_error(impl == 0 ? "gemm.long_depth.library" : "gemm.long_depth.builtin", error);
    EXPECT_LT(error, 8 * std::numeric_limits<float>::epsilon()) << (impl == 0 ? cpu::gemm_library() : "builtin");
  }
}

// Stores `values` in `dtype` (bytes, for fused_matmul) and returns the stored values as doubles.
std::vector<double> store_as(DType dtype, const std::vector<float>& values, std::vector<char>* bytes) {
  bytes->assign(values.size() * dtype_size(dtype), 0);
  std::vector<double> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    void* ptr = bytes->data() + i * dtype_size(dtype);
    store_from_float(dtype, ptr, values[i]);
    stored[i] = load_as_float(dtype, ptr);
  }
  return stored;
}

double gelu_tanh_f64(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// fused_matmul against float64, on strided, transposed, batched operands with each epilogue:
// where it runs (oneDNN builds: f32 always, bf16 on CPUs with AVX512_BF16) it must be exact to
// the f32 accumulation plus one rounding into C; where it does not, it must say so (false) and
// leave C alone.
TEST(Gemm, FusedMatmulMatchesFloat64OnEveryEpilogue) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const bool onednn = std::string(cpu::gemm_library()) == "onednn";
  struct Case {
    DType in, out;
    bool ta, tb, bias, gelu;
    float alpha, beta;
  };
  const Case cases[] = {
      {DType::f32, DType::f32, false, true, true, true, 1.0f, 0.0f},   // linear, epilogue
      {DType::f32, DType::f32, true, false, false, false, 0.5f, 0.0f}, // scaled QKᵀ
      {DType::f32, DType::f32, false, false, false, false, 1.0f, 1.0f}, // addmm (beta = 1)
      {DType::bf16, DType::bf16, false, true, true, true, 1.0f, 0.0f},
      {DType::bf16, DType::bf16, false, false, true, false, 1.0f, 0.5f},
      {DType::bf16, DType::f32, true, true, false, true, 0.25f, 0.0f},
      {DType::f16, DType::f16, false, true, true, false, 1.0f, 0.0f},
  };
  const int64_t batch = 3, m = 37, n = 53, k = 301, pad = 5;
  int index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(index++) + " " + dtype_name(c.in) + "->" + dtype_name(c.out));
    // A stored [m, k] (or [k, m]) with leading dimension + pad, batches a further pad apart.
    const int64_t a_rows = c.ta ? k : m, a_cols = c.ta ? m : k, lda = a_cols + pad, a_bs = a_rows * lda + pad;
    const int64_t b_rows = c.tb ? n : k, b_cols = c.tb ? k : n, ldb = b_cols + pad, b_bs = b_rows * ldb + pad;
    const int64_t ldc = n + pad, c_bs = m * ldc + pad;
    std::vector<char> a_bytes, b_bytes, c_bytes, bias_bytes;
    const std::vector<double> a = store_as(c.in, testing::random_floats(batch * a_bs, seed + 1), &a_bytes);
    const std::vector<double> b = store_as(c.in, testing::random_floats(batch * b_bs, seed + 2), &b_bytes);
    const std::vector<double> bias = store_as(c.in, testing::random_floats(n, seed + 3), &bias_bytes);
    std::vector<float> c0_values = testing::random_floats(batch * c_bs, seed + 4);
    if (c.beta == 0.0f) std::fill(c0_values.begin(), c0_values.end(), std::nanf(""));  // must not be read
    const std::vector<double> c0 = store_as(c.out, c0_values, &c_bytes);
    const std::vector<char> c_before = c_bytes;

    cpu::Matmul mm;
    mm.batch = batch, mm.m = m, mm.n = n, mm.k = k;
    mm.a = {a_bytes.data(), c.in, lda, a_bs, c.ta};
    mm.b = {b_bytes.data(), c.in, ldb, b_bs, c.tb};
    mm.c = c_bytes.data(), mm.c_dtype = c.out, mm.ldc = ldc, mm.c_batch_stride = c_bs;
    mm.alpha = c.alpha, mm.beta = c.beta, mm.gelu_tanh = c.gelu;
    if (c.bias) mm.bias = bias_bytes.data(), mm.bias_dtype = c.in;

    const bool ran = cpu::fused_matmul(mm);
    const bool must_run = onednn && (c.in == DType::f32 || (c.in == DType::bf16 && __builtin_cpu_supports("avx512bf16")));
    if (must_run) {
      ASSERT_TRUE(ran) << "oneDNN has no kernel for this case on this CPU";
    }
    if (!onednn) {
      ASSERT_FALSE(ran) << "only oneDNN builds run fused_matmul";
    }
    if (!ran) {
      EXPECT_EQ(c_bytes, c_before) << "fused_matmul said it did nothing but wrote C";
      EXPECT_STREQ(cpu::matmul_implementation(mm), "");
      continue;
    }
    EXPECT_STRNE(cpu::matmul_implementation(mm), "");
    double worst = 0.0;
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0.0, magnitude = 0.0;
          for (int64_t p = 0; p < k; ++p) {
            const double av = a[bi * a_bs + (c.ta ? p * lda + i : i * lda + p)];
            const double bv = b[bi * b_bs + (c.tb ? j * ldb + p : p * ldb + j)];
            acc += av * bv;
            magnitude += std::abs(av * bv);
          }
          const int64_t at = bi * c_bs + i * ldc + j;
          double want = c.alpha * acc + (c.bias ? bias[j] : 0.0) + (c.beta != 0.0f ? c.beta * c0[at] : 0.0);
          if (c.gelu) want = gelu_tanh_f64(want);
          const double got = load_as_float(c.out, c_bytes.data() + at * dtype_size(c.out));
          // f32 accumulation over k terms, then one rounding into C's dtype.
          const double allowed = dtype_epsilon(c.out) * std::abs(want) + 4e-6 * (magnitude + 1.0);
          ASSERT_FALSE(std::isnan(got)) << "NaN at batch " << bi << " [" << i << ", " << j << "]";
          worst = std::max(worst, std::abs(got - want) / allowed);
        }
    EXPECT_LE(worst, 1.0) << "worst error / allowed " << worst << " (" << cpu::matmul_implementation(mm) << ")";
    // The padding between rows and batches is C's too: untouched.
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n; j < ldc && bi * c_bs + i * ldc + j < batch * c_bs; ++j) {
          const int64_t at = bi * c_bs + i * ldc + j;
          ASSERT_EQ(std::memcmp(c_bytes.data() + at * dtype_size(c.out), c_before.data() + at * dtype_size(c.out),
                                dtype_size(c.out)),
                    0)
              << "wrote padding at batch " << bi << " row " << i << " col " << j;
        }
  }
}

TEST(Gemm, FusedMatmulCachesOnePrimitivePerShape) {
  std::vector<float> a(8 * 16, 0.5f), b(16 * 4, 0.25f), c(8 * 4, 0.0f);
  cpu::Matmul mm;
  mm.m = 8, mm.n = 4, mm.k = 16;
  mm.a = {a.data(), DType::f32, 16, 0, false};
  mm.b = {b.data(), DType::f32, 4, 0, false};
  mm.c = c.data(), mm.ldc = 4;
  const cpu::MatmulCacheStats before = cpu::matmul_cache_stats();
  const bool ran = cpu::fused_matmul(mm);
  const cpu::MatmulCacheStats first = cpu::matmul_cache_stats();
  ASSERT_EQ(ran, cpu::fused_matmul(mm) != nullptr);
  const cpu::MatmulCacheStats second = cpu::matmul_cache_stats();
  if (std::string(cpu::gemm_library()) != "onednn") {
    EXPECT_FALSE(ran);
    EXPECT_EQ(second.primitives + second.misses + second.hits, 0);
    return;
  }
  ASSERT_TRUE(ran);
  EXPECT_FLOAT_EQ(c[0], 16 * 0.5f * 0.25f);
  EXPECT_EQ(first.misses, before.misses + 1);
  EXPECT_EQ(first.primitives, before.primitives + 1);
  EXPECT_EQ(second.hits, first.hits + 1);  // the same shape again: no new primitive
  EXPECT_EQ(second.primitives, first.primitives);
  mm.gelu_tanh = true;  // another epilogue is another primitive
  ASSERT_TRUE(cpu::fused_matmul(mm));
  EXPECT_EQ(cpu::matmul_cache_stats().primitives, second.primitives + 1);
}

// tanh-GELU over a row, written here (the ops' vectorised one is under test elsewhere).
void gelu_row_for_tests(float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>(gelu_tanh_f64(x[j]));
}

// A read-only B (a loaded weight) runs on the candidate its plan timed fastest: oneDNN on the
// stored or a packed layout, or (f32) each linked library's sgemm with the epilogue as a pass.
// Each candidate in turn is the only fast one and is chosen (a planted slow candidate is never
// chosen), reports itself, and matches float64 (bias and GELU included) over a NaN-poisoned
// output; the packed copy is made once, counted by the allocator and kept with the weight;
// BLOCKSCOPE_CPU_WEIGHTS and cpu.gemm narrow the candidates and a bad value is named; a
// read-only weight refuses writes. Builds without oneDNN have no plan.
TEST(Gemm, ReadOnlyWeightsRunOnTheFastestCandidate) {
  Context ctx(Device::cpu());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const bool onednn = std::string(cpu::gemm_library()) == "onednn";
  ::setenv("BLOCKSCOPE_PLAN_CACHE", "off", 1);  // every plan timed here (PlanCache* tests the cache)
  const int64_t m = 64, k = 256, n = 192;  // W stored [k, n] (GPT-2's Conv1D layout)
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    if (dtype == DType::bf16 && !__builtin_cpu_supports("avx512bf16")) continue;  // no native bf16 kernel
    Tensor x = testing::random_tensor(ctx, {m, k}, dtype, seed);
    Tensor w = testing::random_tensor(ctx, {k, n}, dtype, seed + 1);
    Tensor bias = testing::random_tensor(ctx, {n}, dtype, seed + 2);
    w.storage()->set_read_only();
    EXPECT_THROW(from_floats(w, std::vector<float>(static_cast<size_t>(k * n))), Error) << "a read-only weight was written";
    Tensor y = ctx.empty({m, n}, dtype);
    const std::vector<float> xs = to_floats(x), ws = to_floats(w), bs = to_floats(bias);
    cpu::Matmul mm;
    mm.m = m, mm.n = n, mm.k = k;
    mm.a = {x.data(), dtype, k, 0, false};
    mm.b = {w.data(), dtype, n, 0, false};
    mm.c = y.data(), mm.c_dtype = dtype, mm.ldc = n;
    mm.bias = bias.data(), mm.bias_dtype = dtype;
    mm.gelu_tanh = true, mm.gelu_tanh_row = gelu_row_for_tests;
    mm.b_read_only = w.storage().get();
    // y against float64: f32 accumulation over k, GELU in f32, one rounding into the dtype.
    const auto expect_product = [&] {
      const std::vector<float> got = to_floats(y);
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = bs[j], magnitude = std::abs(bs[j]);
          for (int64_t p = 0; p < k; ++p) {
            sum += double(xs[i * k + p]) * ws[p * n + j];
            magnitude += std::abs(double(xs[i * k + p]) * ws[p * n + j]);
          }
          const double want = gelu_tanh_f64(sum);
          const double allowed = dtype_epsilon(dtype) * std::abs(want) + 4e-6 * (magnitude + 1.0);
          worst = std::max(worst, std::abs(got[i * n + j] - want) / allowed);  // NaN fails below
        }
      EXPECT_LE(worst, 1.0) << "worst error / allowed";
    };
    const auto clear_penalties = [](const std::vector<std::string>& names) {
      for (const std::string& name : names) cpu::set_matmul_plan_penalty_for_tests(name, 0);
    };

    fill_nan(y);
    const char* ran = cpu::fused_matmul(mm);
    if (!onednn) {
      EXPECT_EQ(ran, nullptr);
      EXPECT_EQ(cpu::matmul_plan(mm).choice, "") << "a build without oneDNN has no plan";
      break;
    }
    ASSERT_NE(ran, nullptr);
    expect_product();
    cpu::MatmulPlan plan = cpu::matmul_plan(mm);
    EXPECT_EQ(plan.reason, "timed");
    EXPECT_EQ(plan.cache_path, "") << "BLOCKSCOPE_PLAN_CACHE=off";
    std::vector<std::string> names;
    for (const auto& [name, us] : plan.timings_us) names.push_back(name);
    names.insert(names.end(), plan.cut_off.begin(), plan.cut_off.end());
    // The packed candidate exists where oneDNN picks a blocked weight layout for this shape:
    // always with AVX-512 (its brgemm kernels block B); on an AVX2-only CPU (AMD Zen 2/3) it may
    // keep the plain layout, and then there is no packed candidate.
    const bool packs = std::count(names.begin(), names.end(), "onednn.packed") > 0;
    if (__builtin_cpu_supports("avx512f")) {
      EXPECT_TRUE(packs) << "oneDNN blocks B for this shape with AVX-512";
    }
    std::vector<std::string> want = {"onednn.plain"};
    if (packs) want.push_back("onednn.packed");
    if (dtype == DType::f32)  // the sgemm forms: f32 only
      for (cpu::GemmLibrary library : cpu::linked_gemm_libraries())
        want.push_back(std::string(cpu::gemm_library_name(library)) + ".sgemm");
    std::sort(names.begin(), names.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(names, want) << "the candidates";

    bool packed_made = plan.choice == "onednn.packed";  // by the first call
    for (const std::string& fast : names) {
      SCOPED_TRACE("the only fast candidate: " + fast);
      for (const std::string& name : names) cpu::set_matmul_plan_penalty_for_tests(name, name == fast ? 0 : 1e6);
      fill_nan(y);
      const size_t before = ctx.backend().memory_stats().in_use;
      ran = cpu::fused_matmul(mm);
      ASSERT_NE(ran, nullptr);
      plan = cpu::matmul_plan(mm);
      EXPECT_EQ(plan.choice, fast) << plan.reason;
      EXPECT_EQ(std::string(ran).find("packed weights") != std::string::npos, fast == "onednn.packed") << ran;
      EXPECT_EQ(std::string(ran).find("epilogue as a separate pass") != std::string::npos,
                fast.find(".sgemm") != std::string::npos)
          << ran;
      expect_product();
      const size_t after = ctx.backend().memory_stats().in_use;
      if (fast == "onednn.packed" && !packed_made) {
        EXPECT_GE(after, before + static_cast<size_t>(k * n) * dtype_size(dtype)) << "the packed copy, counted";
        packed_made = true;
      } else {
        EXPECT_EQ(after, before) << "no new copy";
      }
      const size_t allocations = ctx.backend().memory_stats().allocation_count;
      fill_nan(y);
      ASSERT_NE(cpu::fused_matmul(mm), nullptr);
      EXPECT_EQ(ctx.backend().memory_stats().allocation_count, allocations) << "nothing made per call";
      expect_product();
    }
    EXPECT_EQ(packed_made, packs);
    clear_penalties(names);

    // BLOCKSCOPE_CPU_WEIGHTS: one oneDNN layout, not timed; a bad value is named.
    ::setenv("BLOCKSCOPE_CPU_WEIGHTS", "plain", 1);
    clear_penalties(names);  // forgets the plans
    ASSERT_NE(cpu::fused_matmul(mm), nullptr);
    EXPECT_EQ(cpu::matmul_plan(mm).choice, "onednn.plain");
    EXPECT_EQ(cpu::matmul_plan(mm).reason, "BLOCKSCOPE_CPU_WEIGHTS=plain");
    ::setenv("BLOCKSCOPE_CPU_WEIGHTS", "fastest", 1);
    clear_penalties(names);
    testing::expect_input_error([&] { cpu::fused_matmul(mm); },
                                {"BLOCKSCOPE_CPU_WEIGHTS='fastest': expected auto, plain or packed"});
    ::unsetenv("BLOCKSCOPE_CPU_WEIGHTS");

    // cpu.gemm: oneDNN's candidates only; another library: no fused matmul, sgemm on it.
    cpu::set_gemm_choice("onednn");
    ASSERT_NE(cpu::fused_matmul(mm), nullptr);
    for (const auto& [name, us] : cpu::matmul_plan(mm).timings_us) EXPECT_EQ(name.rfind("onednn.", 0), 0u) << name;
    expect_product();
    cpu::set_gemm_choice("builtin");
    EXPECT_EQ(cpu::fused_matmul(mm), nullptr);
    EXPECT_EQ(cpu::sgemm_library(), cpu::GemmLibrary::builtin);
    EXPECT_STREQ(cpu::sgemm_implementation(), "builtin sgemm");
    testing::expect_input_error([] { cpu::set_gemm_choice("mkl"); },
                                {"cpu.gemm: 'mkl' is not a GEMM library of this build (it has auto, onednn"});
    EXPECT_EQ(cpu::gemm_choice(), "builtin") << "a refused choice changes nothing";
    cpu::set_gemm_choice("auto");
    EXPECT_EQ(cpu::sgemm_library(), cpu::linked_gemm_libraries().front());
  }
  ::unsetenv("BLOCKSCOPE_PLAN_CACHE");
}

// The plan cache on disk: a plan timed once is kept for this machine and used as it is by the
// next run (even where timing now would choose otherwise); an entry made for another CPU or
// another library version is ignored and kept; an entry that does not hold together (or names
// other candidates than this run's) is timed again and replaced; a file that is not a plan cache
// is read as none and left alone.
TEST(Gemm, PlanCacheIsPerMachineAndNeverTrustsADamagedEntry) {
  Context ctx(Device::cpu());
  const fs::path path = testing::test_scratch_dir() / "plans.json";
  fs::remove(path);
  ::setenv("BLOCKSCOPE_PLAN_CACHE", path.c_str(), 1);
  const int64_t m = 32, k = 128, n = 96;
  Tensor x = testing::random_tensor(ctx, {m, k}, DType::f32, testing::fresh_seed());
  Tensor w = testing::random_tensor(ctx, {k, n}, DType::f32, testing::fresh_seed());
  w.storage()->set_read_only();
  Tensor y = ctx.empty({m, n}, DType::f32);
  cpu::Matmul mm;
  mm.m = m, mm.n = n, mm.k = k;
  mm.a = {x.data(), DType::f32, k, 0, false};
  mm.b = {w.data(), DType::f32, n, 0, false};
  mm.c = y.data(), mm.ldc = n;
  mm.b_read_only = w.storage().get();
  std::vector<std::string> names = {"onednn.plain", "onednn.packed"};
  for (cpu::GemmLibrary library : cpu::linked_gemm_libraries())
    names.push_back(std::string(cpu::gemm_library_name(library)) + ".sgemm");
  // A plan made anew (the in-memory plans forgotten) where every candidate but `fast` is a
  // second slower per timing.
  const auto plan_favouring = [&](const std::string& fast) {
    for (const std::string& name : names) cpu::set_matmul_plan_penalty_for_tests(name, name == fast ? 0 : 1e6);
    cpu::fused_matmul(mm);
    return cpu::matmul_plan(mm);
  };
  const auto read = [&] {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  };
  const auto write = [&](const nlohmann::json& cache) { std::ofstream(path) << cache.dump(2); };
  const cpu::CachedPlans none = cpu::cached_matmul_plans();
  EXPECT_EQ(none.path, path.string());
  EXPECT_TRUE(none.plans.empty());
  EXPECT_NE(none.machine.find(cpu::gemm_library_version()), std::string::npos) << none.machine;
  EXPECT_NE(none.machine.find(" threads"), std::string::npos) << none.machine;
  if (!cpu::packs_weights()) {  // no oneDNN: no plans, nothing written
    EXPECT_EQ(plan_favouring("onednn.plain").choice, "");
    EXPECT_FALSE(fs::exists(path));
    ::unsetenv("BLOCKSCOPE_PLAN_CACHE");
    return;
  }

  // Timed and written; the next run reads it, though another candidate is now the fast one.
  cpu::MatmulPlan plan = plan_favouring("onednn.plain");
  ASSERT_EQ(plan.choice, "onednn.plain");
  // Another candidate to favour: the packed layout where oneDNN offers one for this shape (an
  // AVX2-only CPU may keep B plain: no packed candidate), else oneDNN's sgemm.
  const bool packs = plan.timings_us.count("onednn.packed") > 0 ||
                     std::count(plan.cut_off.begin(), plan.cut_off.end(), "onednn.packed") > 0;
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_TRUE(packs) << "oneDNN blocks B for this shape with AVX-512";
  }
  const std::string other = packs ? "onednn.packed" : "onednn.sgemm";
  EXPECT_EQ(plan.reason, "timed");
  EXPECT_EQ(plan.cache_path, path.string());
  cpu::CachedPlans cached = cpu::cached_matmul_plans();
  ASSERT_EQ(cached.plans.size(), 1u) << read().dump(2);
  const std::string machine = cached.machine, shape = cached.plans[0].shape;
  EXPECT_EQ(shape, "f32 32x96x128 -> f32");
  EXPECT_EQ(cached.plans[0].plan.choice, "onednn.plain");
  EXPECT_FALSE(cached.plans[0].kernel.empty());
  plan = plan_favouring(other);
  EXPECT_EQ(plan.reason, "cached");
  EXPECT_EQ(plan.choice, "onednn.plain") << "the cached plan is used, not timed again";
  const nlohmann::json good = read()[machine][shape];

  // Made on another CPU, or with another library version: ignored here, timed anew, kept.
  nlohmann::json cache = read();
  cache.erase(machine);
  std::string other_library = machine;
  other_library.replace(machine.find(cpu::gemm_library_version()), cpu::gemm_library_version().size(), "onednn 0.0.0 (x)");
  const std::string other_cpu = "Another CPU" + machine.substr(machine.find(" | "));
  cache[other_library][shape] = good;
  cache[other_cpu][shape] = good;
  write(cache);
  plan = plan_favouring(other);
  EXPECT_EQ(plan.reason, "timed");
  EXPECT_EQ(plan.choice, other);
  cache = read();
  EXPECT_EQ(cache[other_library][shape], good);
  EXPECT_EQ(cache[other_cpu][shape], good);
  EXPECT_EQ(cache[machine][shape]["choice"], other);
  cached = cpu::cached_matmul_plans();
  EXPECT_EQ(cached.other_machines, 2);
  ASSERT_EQ(cached.plans.size(), 1u);
  EXPECT_EQ(cached.plans[0].plan.choice, other);

  // Damaged entries, and one made with other candidates: timed again (favouring onednn.sgemm
  // proves it) and replaced.
  const auto changed = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json entry = good;
    change(entry);
    return entry;
  };
  struct Bad {
    nlohmann::json entry;
    bool damaged;  // does not hold together (info counts it); else made with other candidates
  };
  const std::vector<Bad> bad_entries = {
      {"onednn.plain", true},
      {nlohmann::json::array(), true},
      {{{"layout", "plain"}, {"plain_us", 5.0}, {"packed_us", 9.0}}, true},  // an older format
      {changed([](nlohmann::json& e) { e.erase("timings_us"); }), true},
      {changed([](nlohmann::json& e) { e["choice"] = "onednn.sideways"; }), true},
      {changed([](nlohmann::json& e) { e["timings_us"]["onednn.plain"] = -5.0; }), true},
      {changed([](nlohmann::json& e) { e["timings_us"]["onednn.plain"] = "5"; }), true},
      {changed([](nlohmann::json& e) { e["timings_us"]["onednn.plain"] = 0.0; }), true},
      {changed([](nlohmann::json& e) { e["timings_us"]["onednn.plain"] = 1e12; }), true},   // no run takes that
      {changed([&](nlohmann::json& e) { e["choice"] = other; }), true},  // not the fastest timed
      {changed([](nlohmann::json& e) { e["cut_off"].push_back("onednn.plain"); }), true},   // timed and cut off
      {changed([](nlohmann::json& e) {
         e["timings_us"]["mkl.sgemm"] = 0.5;
         e["choice"] = "mkl.sgemm";
       }),
       false},
      {changed([&](nlohmann::json& e) {  // a candidate missing
         e["timings_us"].erase(other);
         e["cut_off"] = nlohmann::json::array();
       }),
       false},
  };
  for (const Bad& bad : bad_entries) {
    SCOPED_TRACE(bad.entry.dump());
    cache = read();
    cache[machine][shape] = bad.entry;
    write(cache);
    EXPECT_EQ(cpu::cached_matmul_plans().damaged, bad.damaged ? 1 : 0);
    plan = plan_favouring("onednn.sgemm");
    EXPECT_EQ(plan.reason, "timed");
    EXPECT_EQ(plan.choice, "onednn.sgemm");
    EXPECT_EQ(read()[machine][shape]["choice"], "onednn.sgemm") << "replaced";
  }

  // Not a plan cache (not JSON, a list, an object of numbers): timed, the file left as it was.
  for (const std::string text : {"{\"truncated\": ", "[1, 2]", "{\"a\": 1}"}) {
    SCOPED_TRACE(text);
    std::ofstream(path) << text;
    plan = plan_favouring(other);
    EXPECT_EQ(plan.reason, "timed");
    EXPECT_EQ(plan.choice, other);
    EXPECT_EQ(plan.cache_path, "");
    std::ifstream in(path);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), text);
  }
  for (const std::string& name : names) cpu::set_matmul_plan_penalty_for_tests(name, 0);
  fs::remove(path);
  ::unsetenv("BLOCKSCOPE_PLAN_CACHE");
}

// ---- the machine caches (runtime/cpu/machine_cache.h), issue 43 ---------------------------------

bool any_cache(const nlohmann::json&) { return true; }

// Several processes adding entries to one cache at once: each read-modify-write runs under the
// directory's flock, so every entry is kept (before: 48 entries written, 39 kept).
TEST(MachineCache, ConcurrentWritersKeepEveryEntry) {
  const fs::path path = testing::test_scratch_dir() / "concurrent" / "cache.json";
  fs::remove_all(path.parent_path());
  constexpr int kProcesses = 6, kEntries = 12;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = true;
      for (int e = 0; e < kEntries; ++e) {
        ok = cpu::update_machine_cache(path.string(), "test cache", any_cache, [&](nlohmann::json& cache) {
          // Widen the window between the read and the rename, as a slow disk would.
          ::usleep(2000);
          cache["p" + std::to_string(p) + "e" + std::to_string(e)] = {{"value", e}};
        }) && ok;
      }
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  std::ifstream in(path);
  const nlohmann::json cache = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(cache.is_object());
  EXPECT_EQ(cache.size(), static_cast<size_t>(kProcesses * kEntries)) << cache.dump();
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(path.parent_path())) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"cache.json"}) << "no lock file or temporary left";
  fs::remove_all(path.parent_path());
}

// An empty file (created, never written; truncated) is an empty cache: read as one and written
// over (before: "it holds something else than a cache", for good).
TEST(MachineCache, AnEmptyFileIsAnEmptyCache) {
  const fs::path path = testing::test_scratch_dir() / "empty-cache.json";
  for (const char* text : {"", "\n  \n"}) {
    std::ofstream(path) << text;
    const nlohmann::json read = cpu::read_machine_cache(path.string());
    EXPECT_TRUE(read.is_object() && read.empty()) << read.dump();
    EXPECT_TRUE(cpu::update_machine_cache(path.string(), "test cache", any_cache,
                                          [](nlohmann::json& cache) { cache["k"] = {{"v", 1}}; }));
    std::ifstream in(path);
    EXPECT_EQ(nlohmann::json::parse(in, nullptr, false), (nlohmann::json{{"k", {{"v", 1}}}}));
  }
  fs::remove(path);
}

// Where a cache is kept: "off" in any case is none (before: OFF made a file named OFF), an empty
// value is unset, and a relative XDG_CACHE_HOME is ignored as the XDG spec says (before: the
// cache went wherever the command ran).
TEST(MachineCache, PathsFromTheEnvironmentAreReadStrictly) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* name : {"BLOCKSCOPE_TEST_CACHE", "XDG_CACHE_HOME", "HOME"}) {
    const char* value = std::getenv(name);
    saved.push_back({name, value ? std::optional<std::string>(value) : std::nullopt});
  }
  ::setenv("HOME", "/home/someone", 1);
  ::setenv("XDG_CACHE_HOME", "/var/cache/x", 1);
  for (const char* off : {"off", "OFF", "Off"}) {
    ::setenv("BLOCKSCOPE_TEST_CACHE", off, 1);
    EXPECT_EQ(cpu::machine_cache_path("BLOCKSCOPE_TEST_CACHE", "c.json"), "") << off;
  }
  ::setenv("BLOCKSCOPE_TEST_CACHE", "my.json", 1);
  EXPECT_EQ(cpu::machine_cache_path("BLOCKSCOPE_TEST_CACHE", "c.json"), "my.json");
  ::setenv("BLOCKSCOPE_TEST_CACHE", "", 1);
  EXPECT_EQ(cpu::machine_cache_path("BLOCKSCOPE_TEST_CACHE", "c.json"), "/var/cache/x/blockscope/c.json");
  ::unsetenv("BLOCKSCOPE_TEST_CACHE");
  EXPECT_EQ(cpu::machine_cache_path("BLOCKSCOPE_TEST_CACHE", "c.json"), "/var/cache/x/blockscope/c.json");
  for (const char* relative : {"cache", "./cache", "~/cache"}) {
    ::setenv("XDG_CACHE_HOME", relative, 1);
    EXPECT_EQ(cpu::machine_cache_path("BLOCKSCOPE_TEST_CACHE", "c.json"), "/home/someone/.cache/blockscope/c.json")
        << relative;
  }
  for (const Saved& s : saved) {
    if (s.value) {
      ::setenv(s.name, s.value->c_str(), 1);
    } else {
      ::unsetenv(s.name);
    }
  }
}

// The device description says how this run's GEMMs run (planned, one library, or cpu.gemm's),
// and a scoped choice (what the peak measurement takes: the default library) is put back.
TEST(Gemm, TheDeviceNamesHowGemmsRun) {
  ::setenv("BLOCKSCOPE_CPU_PEAK_TFLOPS", "1", 1);  // no peak measurement here
  ::setenv("BLOCKSCOPE_CPU_PEAK_GBPS", "10", 1);
  Context ctx(Device::cpu());
  cpu::set_gemm_choice("builtin");
  {
    const cpu::ScopedGemmChoice peaks("auto");
    EXPECT_EQ(cpu::gemm_choice(), "auto");
    EXPECT_EQ(cpu::sgemm_library(), cpu::linked_gemm_libraries().front());
  }
  EXPECT_EQ(cpu::gemm_choice(), "builtin") << "the run's choice put back";
  std::string description = ctx.backend().info(DType::f32).description;
  EXPECT_NE(description.find("builtin gemm (cpu.gemm)"), std::string::npos) << description;
  cpu::set_gemm_choice("auto");
  description = ctx.backend().info(DType::f32).description;
  const bool planned = cpu::packs_weights() && cpu::linked_gemm_libraries().size() > 1;
  EXPECT_NE(description.find(planned ? std::string("gemm planned: ") + cpu::gemm_library()
                                     : std::string(cpu::gemm_library()) + " gemm"),
            std::string::npos)
      << description;
  ::unsetenv("BLOCKSCOPE_CPU_PEAK_TFLOPS");
  ::unsetenv("BLOCKSCOPE_CPU_PEAK_GBPS");
}

TEST(Gemm, FusedMatmulRefusesAScaledBias) {
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f), bias(2, 1.0f);
  cpu::Matmul mm;
  mm.m = 2, mm.n = 2, mm.k = 2;
  mm.a = {a.data(), DType::f32, 2, 0, false};
  mm.b = {b.data(), DType::f32, 2, 0, false};
  mm.c = c.data(), mm.ldc = 2, mm.alpha = 0.5f, mm.bias = bias.data();
  if (std::string(cpu::gemm_library()) != "onednn") {
    EXPECT_FALSE(cpu::fused_matmul(mm));
    return;
  }
  try {
    cpu::fused_matmul(mm);
    FAIL() << "alpha with a bias was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("alpha"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace blockscope
