// The simulated cuBLASLt's GEMM (see cublaslt_model.h), written from NVIDIA's cuBLASLt
// documentation.
//
// Numerics: the compute type is f32 (CUBLAS_COMPUTE_32F), and so is the sim's arithmetic, so
//   its errors have the size a GPU's have. Inputs are converted exactly to float (FAST_TF32: A
//   and B first rounded to TF32, 10 mantissa bits, round-to-nearest ties-away like
//   cvt.rna.tf32.f32, the precision a tensor core keeps); the k-sum runs as four interleaved f32
//   FMA chains added pairwise at the end (a fixed order: a GPU's order, tiles and split-k, is
//   unknowable, but its accumulation is f32 too); alpha, beta * C, the bias and the activation
//   are applied in f32; D is rounded once, to nearest even, to its type. (A double accumulator
//   would make the sim's GEMMs more accurate than any GPU's, and so make the paths built on them
//   look better in the accuracy rule than they would on a GPU.) beta == 0: C is not read (it may
//   hold NaN or be nullptr), as BLAS defines for beta == 0.
// FP8 (A and B CUDA_R_8F_E4M3/E5M2): the same f32 structure. The FP8 inputs convert exactly to
//   float; alpha * scale_a * scale_b and beta * scale_c are formed in f32 and take alpha's and
//   beta's places; after the epilogue amax is max |v| and, for an FP8 D, v is multiplied by
//   scale_d in f32 and rounded once to nearest even, saturating (satfinite), to D's format.
//   CUBLASLT_MATMUL_DESC_FAST_ACCUM changes nothing here: on Hopper it keeps the partial sums in
//   the tensor cores' own, narrower, accumulator without promoting them to f32 every so many
//   k-steps; the sim does not model that, so with it set a GPU's results can differ from the
//   sim's by more than f32 rounding.

#include "sim/cublaslt_model.h"

#include <library_types.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <vector>

#include "sim/sim.h"

namespace blockscope::sim::cublaslt {
namespace {

double f16_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double f32_to_double(float f) { return f; }

// TF32: float's 8-bit exponent, 10 explicit mantissa bits; round to nearest, ties away from zero
// (cvt.rna.tf32.f32). Infinities and NaN are kept.
float round_tf32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return f;
  bits = (bits + 0x1000u) & ~0x1fffu;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Rounds x once, to nearest even, to a binary format with `precision` significand bits, minimum
// normal exponent `emin` (gradual underflow below it) and maximum exponent `emax`; overflow gives
// infinity. The result is exactly representable in that format (and in double).
double round_to_format(double x, int precision, int emin, int emax) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  int lead = e - 1;
  if (lead < emin) lead = emin;
  const double quantum = std::ldexp(1.0, lead - (precision - 1));
  const double r = std::nearbyint(x / quantum) * quantum;  // default rounding: nearest even
  if (std::fabs(r) >= std::ldexp(1.0, emax + 1)) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

uint16_t double_to_bf16(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffc0 : 0x7fc0;
  const float f = static_cast<float>(round_to_format(x, 8, -126, 127));  // exact
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t double_to_f16(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xfe00 : 0x7e00;
  const double r = round_to_format(x, 11, -14, 15);
  const uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  const double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0.0) return sign;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal
  const int e = std::ilogb(a);
  const uint16_t mant = static_cast<uint16_t>(std::ldexp(a, 10 - e) - 1024.0);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mant;
}

// GELU. The documentation (cublasLtEpilogue_t) says only "GELU, apply GELU point-wise transform
// to the results (x:=GELU(x))" and, for GELU_BIAS, "GELU and Bias, apply Bias and then GELU
// transform": it does not say which GELU. The sim uses the tanh approximation,
//   GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// because that is what the library is observed to compute: PyTorch's decomposition of
// aten._addmm_activation (whose CUDA implementation is the cuBLASLt GELU_BIAS epilogue) uses
// gelu(approximate="tanh") on CUDA and the erf form on the CPU. A caller that needs the erf
// form must not use this epilogue; at x = -1 the two differ by ~1.5e-4, beyond f32 and f16
// rounding.
double gelu_tanh(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// One output's dot product over k: four partial sums of fused multiply-adds, summed in pairs
// (the GEMM's rounding, the same on every machine: fma rounds once wherever it runs). Built
// twice by GCC and Clang (target_clones): with the FMA instructions, where std::fma is one
// instruction, chosen at load time on CPUs that have them (x86-64 since 2013-15); without, a
// call into libm's fmaf per term -- a third of a GEMM-heavy test's time on the simulator.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("fma", "default")))
#endif
float dot_fma(const float* a, const float* b, int64_t k) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t q = 0;
  for (; q + 4 <= k; q += 4) {
    s0 = std::fma(a[q], b[q], s0);
    s1 = std::fma(a[q + 1], b[q + 1], s1);
    s2 = std::fma(a[q + 2], b[q + 2], s2);
    s3 = std::fma(a[q + 3], b[q + 3], s3);
  }
  for (; q < k; ++q) s0 = std::fma(a[q], b[q], s0);
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

double load_elem(const void* base, int64_t index, Elem e, bool tf32) {
  switch (e) {
    case Elem::F32: {
      float f;
      std::memcpy(&f, static_cast<const char*>(base) + index * 4, 4);
      return f32_to_double(tf32 ? round_tf32(f) : f);
    }
    case Elem::F16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + index * 2, 2);
      return f16_to_double(h);
    }
    case Elem::BF16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const char*>(base) + index * 2, 2);
      return bf16_to_double(b);
    }
    case Elem::E4M3:
    case Elem::E5M2: return fp8_to_double(static_cast<const uint8_t*>(base)[index], e);
  }
  return 0.0;
}

void store_elem(void* base, int64_t index, Elem e, double v) {
  char* p = static_cast<char*>(base);
  switch (e) {
    case Elem::F32: {
      const float f = static_cast<float>(v);  // one rounding, to nearest even
      std::memcpy(p + index * 4, &f, 4);
      return;
    }
    case Elem::F16: {
      const uint16_t h = double_to_f16(v);
      std::memcpy(p + index * 2, &h, 2);
      return;
    }
    case Elem::BF16: {
      const uint16_t b = double_to_bf16(v);
      std::memcpy(p + index * 2, &b, 2);
      return;
    }
    case Elem::E4M3:
    case Elem::E5M2: reinterpret_cast<uint8_t*>(p)[index] = double_to_fp8(v, e); return;
  }
}


// ---- Element types ---------------------------------------------------------------------------
bool elem_of(uint32_t type, Elem* out) {
  switch (type) {
    case CUDA_R_32F: *out = Elem::F32; return true;
    case CUDA_R_16F: *out = Elem::F16; return true;
    case CUDA_R_16BF: *out = Elem::BF16; return true;
    default: return false;
  }
}
size_t elem_size(Elem e) { return e == Elem::F32 ? 4 : is_fp8(e) ? 1 : 2; }
const char* elem_name(Elem e) {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::F16: return "f16";
    case Elem::BF16: return "bf16";
    case Elem::E4M3: return "e4m3";
    case Elem::E5M2: return "e5m2";
  }
  return "?";
}

const char* intern_name(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

std::string gemm_name(const Problem& p) {
  std::string name = "sim_gemm_";
  name += p.tf32 ? "tf32" : elem_name(p.a.elem);
  if (p.b.elem != p.a.elem) {  // FP8 with mixed inputs: A's, B's and D's types, always
    name += "_";
    name += elem_name(p.b.elem);
    name += "_";
    name += elem_name(p.d.elem);
  } else if (p.d.elem != p.a.elem) {
    name += "_";
    name += elem_name(p.d.elem);
  }
  name += "_";
  name += p.ta ? 't' : 'n';
  name += p.tb ? 't' : 'n';
  if (p.batch > 1) name += "_batched";
  if (p.has_bias) name += "_bias";
  if (p.relu) name += "_relu";
  if (p.gelu) name += "_gelu";
  return name;
}

// ---- The GEMM --------------------------------------------------------------------------------
// An operand that runs past the end of the sim allocation it starts in is what a GPU reports
// as an illegal address: a Fault, checked when the GEMM runs (the memory may be freed or
// reallocated between the call and then). Pointers the sim did not allocate (host memory) are
// not checked.
void Gemm::check_extent(const char* what, const void* ptr, uint64_t rows, uint64_t cols, int64_t ld, int64_t stride,
                  int32_t batch, Elem e) const {
  if (ptr == nullptr || rows == 0 || cols == 0) return;
  blockscope::sim::AllocationInfo info;
  if (!blockscope::sim::find_allocation(ptr, &info)) return;
  const uint64_t elems = static_cast<uint64_t>(batch - 1) * static_cast<uint64_t>(stride) +
                         (cols - 1) * static_cast<uint64_t>(ld) + rows;
  const uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + elems * elem_size(e);
  if (end > reinterpret_cast<uintptr_t>(info.base) + info.size) {
    const std::string message = std::string(name) + ": " + what + " (" + std::to_string(elems * elem_size(e)) +
                                " bytes from " + std::to_string(reinterpret_cast<uintptr_t>(ptr) -
                                                                 reinterpret_cast<uintptr_t>(info.base)) +
                                " bytes into its allocation) runs past the end of the " + std::to_string(info.size) +
                                "-byte allocation";
    throw blockscope::sim::Fault(message);
  }
}

void Gemm::operator()() const {
  const int64_t m = static_cast<int64_t>(p.m), n = static_cast<int64_t>(p.n), k = static_cast<int64_t>(p.k);
  if (m == 0 || n == 0) return;
  check_extent("A", A, p.ta ? p.k : p.m, p.ta ? p.m : p.k, p.a.ld, p.a.stride, p.batch, p.a.elem);
  check_extent("B", B, p.tb ? p.n : p.k, p.tb ? p.k : p.n, p.b.ld, p.b.stride, p.batch, p.b.elem);
  if (beta != 0.0) check_extent("C", C, p.m, p.n, p.c.ld, p.c.stride, p.batch, p.c.elem);
  check_extent("D", D, p.m, p.n, p.d.ld, p.d.stride, p.batch, p.d.elem);
  if (p.has_bias) check_extent("bias", bias, p.m, 1, static_cast<int64_t>(p.m), p.bias_batch_stride, p.batch, p.bias_elem);
  // FP8: the scale factors (one device float each, read now, in stream order; null: 1) and
  // the amax output.
  const float* scales[4] = {scale_a, scale_b, scale_c, scale_d};
  const char* scale_names[4] = {"scale_a", "scale_b", "scale_c", "scale_d"};
  float scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int i = 0; i < 4; ++i) {
    if (!p.fp8 || scales[i] == nullptr) continue;
    check_extent(scale_names[i], scales[i], 1, 1, 1, 0, 1, Elem::F32);
    note_op_access(scales[i], sizeof(float), false);
    scale[i] = *scales[i];
  }
  if (p.fp8 && amax_d != nullptr) check_extent("amax_d", amax_d, 1, 1, 1, 0, 1, Elem::F32);
  // For the sim's checks: what the GEMM reads (bounding ranges) and writes (D's columns).
  const auto span = [this](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride, Elem e) {
    return static_cast<size_t>((static_cast<int64_t>(p.batch) - 1) * stride + (static_cast<int64_t>(cols) - 1) * ld +
                               static_cast<int64_t>(rows)) * elem_size(e);
  };
  if (k > 0) {
    note_op_access(A, span(p.ta ? p.k : p.m, p.ta ? p.m : p.k, p.a.ld, p.a.stride, p.a.elem), false);
    note_op_access(B, span(p.tb ? p.n : p.k, p.tb ? p.k : p.n, p.b.ld, p.b.stride, p.b.elem), false);
  }
  if (beta != 0.0) note_op_access(C, span(p.m, p.n, p.c.ld, p.c.stride, p.c.elem), false);
  for (int32_t batch = 0; batch < p.batch; ++batch) {
    for (int64_t j = 0; j < n; ++j) {
      char* column = static_cast<char*>(D) + static_cast<size_t>(batch * p.d.stride + j * p.d.ld) * elem_size(p.d.elem);
      note_op_access(column, static_cast<size_t>(m) * elem_size(p.d.elem), true);
      note_written(column, static_cast<size_t>(m) * elem_size(p.d.elem));
    }
  }
  // alpha * scale_a * scale_b and beta * scale_c, in f32 (all 1 but alpha's and beta's when
  // not FP8, so those GEMMs are unchanged); scale_d for an FP8 D.
  const float alpha_f = static_cast<float>(alpha) * scale[0] * scale[1];
  const float beta_f = static_cast<float>(beta) * scale[2];
  const bool scale_out = p.fp8 && is_fp8(p.d.elem);
  float amax = 0.0f;
  std::vector<float> a_rows(static_cast<size_t>(m * k));  // op(A) row i at [i * k]
  std::vector<float> b_cols(static_cast<size_t>(n * k));  // op(B) column j at [j * k]
  for (int32_t batch = 0; batch < p.batch; ++batch) {
    const int64_t a_off = batch * p.a.stride, b_off = batch * p.b.stride;
    const int64_t c_off = batch * p.c.stride, d_off = batch * p.d.stride;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < k; ++q) {
        const int64_t idx = p.ta ? q + i * p.a.ld : i + q * p.a.ld;
        a_rows[static_cast<size_t>(i * k + q)] = static_cast<float>(load_elem(A, a_off + idx, p.a.elem, p.tf32));
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) {
        const int64_t idx = p.tb ? j + q * p.b.ld : q + j * p.b.ld;
        b_cols[static_cast<size_t>(j * k + q)] = static_cast<float>(load_elem(B, b_off + idx, p.b.elem, p.tf32));
      }
    for (int64_t j = 0; j < n; ++j) {
      const float* bj = b_cols.data() + j * k;
      for (int64_t i = 0; i < m; ++i) {
        float v = alpha_f * dot_fma(a_rows.data() + i * k, bj, k);
        if (beta != 0.0) v += beta_f * static_cast<float>(load_elem(C, c_off + i + j * p.c.ld, p.c.elem, false));
        if (p.has_bias) v += static_cast<float>(load_elem(bias, batch * p.bias_batch_stride + i, p.bias_elem, false));
        // "ReLu, apply ReLu point-wise transform to the results (x:=max(x, 0))"; fmax, so a
        // NaN becomes 0, as the library is reported to do.
        if (p.relu) v = std::fmax(v, 0.0);
        if (p.gelu) v = gelu_tanh(v);
        // amax: of the result before scale_d and the conversion to D's type (fmax: a NaN
        // element does not make it NaN).
        amax = std::fmax(amax, std::fabs(v));
        if (scale_out) v *= scale[3];
        store_elem(D, d_off + i + j * p.d.ld, p.d.elem, v);
      }
    }
  }
  if (p.fp8 && amax_d != nullptr) {
    note_op_access(amax_d, sizeof(float), true);
    note_written(amax_d, sizeof(float));
    *amax_d = amax;
  }
}

}  // namespace blockscope::sim::cublaslt
