// The simulated cuBLASLt's FP8 matmul: the FP8 element codes (CUDA_R_8F_E4M3, CUDA_R_8F_E5M2)
// and the contract cublasLtMatmul keeps for FP8 inputs, written from the cuBLASLt
// documentation (the cublasLtMatmul section's FP8 requirements and FP8 data-type table, the
// attribute comments of <cublasLt.h>). What is supported, row by row, is listed in
// cublaslt_matmul.cpp's header comment; the GEMM's FP8 arithmetic is cublaslt_model.cpp's.
#include "sim/cublaslt_fp8.h"

#include <library_types.h>

#include <cmath>
#include <cstdint>

namespace blockscope::sim::cublaslt {
namespace {

// The two formats: significand bits (with the implicit one), exponent bias, largest finite.
struct Fp8Format {
  int precision;
  int bias;
  double max_finite;
};
constexpr Fp8Format kE4M3{4, 7, 448.0};
constexpr Fp8Format kE5M2{3, 15, 57344.0};
const Fp8Format& fp8_format(Elem e) { return e == Elem::E4M3 ? kE4M3 : kE5M2; }

// A layout's dimension in bytes is a multiple of 16 (the documented Tensor Core usage rules
// that the FP8 kernels require).
bool multiple_of_16_bytes(int64_t elems, Elem e) {
  return (static_cast<uint64_t>(elems) * elem_size(e)) % 16 == 0;
}

}  // namespace

// ---- Element codes ---------------------------------------------------------------------------
bool is_fp8(Elem e) { return e == Elem::E4M3 || e == Elem::E5M2; }

bool lt_elem_of(uint32_t type, Elem* out) {
  switch (type) {
    case CUDA_R_8F_E4M3: *out = Elem::E4M3; return true;
    case CUDA_R_8F_E5M2: *out = Elem::E5M2; return true;
    default: return elem_of(type, out);
  }
}

double fp8_to_double(uint8_t code, Elem e) {
  const Fp8Format& f = fp8_format(e);
  const int mant_bits = f.precision - 1;
  const int exp_field = (code & 0x7f) >> mant_bits;
  const int mant = code & ((1 << mant_bits) - 1);
  const int exp_max = (1 << (7 - mant_bits)) - 1;
  double v;
  if (e == Elem::E4M3 && exp_field == exp_max && mant == (1 << mant_bits) - 1) {
    v = std::nan("");  // S.1111.111: E4M3's only NaN (no infinities)
  } else if (e == Elem::E5M2 && exp_field == exp_max) {
    v = mant != 0 ? std::nan("") : HUGE_VAL;
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - mant_bits);  // subnormal
  } else {
    v = std::ldexp(static_cast<double>(mant | (1 << mant_bits)), exp_field - f.bias - mant_bits);
  }
  return (code & 0x80) ? -v : v;
}

uint8_t double_to_fp8(double v, Elem e) {
  if (std::isnan(v)) return 0x7f;
  const Fp8Format& f = fp8_format(e);
  const int mant_bits = f.precision - 1;
  const int emin = 1 - f.bias;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  double a = std::fabs(v);
  if (a == 0.0) return sign;
  // Round to nearest even at the precision of a's binade (the subnormal quantum below emin).
  if (std::isfinite(a)) {
    int lead = std::ilogb(a);
    if (lead < emin) lead = emin;
    const double quantum = std::ldexp(1.0, lead - mant_bits);
    a = std::nearbyint(a / quantum) * quantum;  // default rounding mode: nearest even
  }
  if (a > f.max_finite) a = f.max_finite;  // satfinite, infinities included
  if (a == 0.0) return sign;
  const int lead = std::ilogb(a);
  if (lead < emin) return sign | static_cast<uint8_t>(std::ldexp(a, mant_bits - emin));  // subnormal
  const int mant = static_cast<int>(std::ldexp(a, mant_bits - lead)) - (1 << mant_bits);
  return sign | static_cast<uint8_t>(((lead + f.bias) << mant_bits) | mant);
}

// ---- The contract ----------------------------------------------------------------------------
bool fp8_attributes_set(const DescState& desc) {
  for (const void* s : desc.scale)
    if (s != nullptr) return true;
  return desc.amax_d != nullptr;
}

cublasStatus_t check_fp8_problem(const DescState& desc, const LayoutState& la, const LayoutState& lb,
                                 const LayoutState& lc, const LayoutState& ld, Elem ea, Elem eb, Elem ec, Elem ed,
                                 Problem* p) {
  // Types, the documentation's FP8 table: A and B FP8 but not both E5M2; C 16BF, 16F or 32F;
  // D C's type, or FP8 with C 16BF or 16F (E5M2 D only with an E5M2 input).
  if (!is_fp8(ea) || !is_fp8(eb) || is_fp8(ec)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ea == Elem::E5M2 && eb == Elem::E5M2) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ed != ec) {
    if (!is_fp8(ed) || ec == Elem::F32) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (ed == Elem::E5M2 && ea != Elem::E5M2 && eb != Elem::E5M2) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // "The compute type must be CUBLAS_COMPUTE_32F. The scale type must be CUDA_R_32F." (The
  // scale type and pointer mode are check_problem's.)
  if (desc.compute_type != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  // "A must be transposed and B non-transposed (The "TN" format)" on Ada and Hopper (the sim is
  // compute capability 9.0). Column-major order is check_problem's.
  if (!p->ta || p->tb) return CUBLAS_STATUS_NOT_SUPPORTED;
  // "All matrix dimensions must meet the optimal requirements listed in Tensor Core Usage (i.e.
  // pointers and matrix dimension must support 16-byte alignment)": (k * 1) % 16 for A and B in
  // TN, (m * sizeof C) % 16, each LD times its element size a multiple of 16 bytes (D's too),
  // and so each batch's start (its stride) where there are several. The pointers are
  // cublasLtMatmul's to check.
  if (!multiple_of_16_bytes(static_cast<int64_t>(p->k), ea) || !multiple_of_16_bytes(static_cast<int64_t>(p->m), ec))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const LayoutState* layouts[4] = {&la, &lb, &lc, &ld};
  const Elem elems[4] = {ea, eb, ec, ed};
  for (int i = 0; i < 4; ++i) {
    if (!multiple_of_16_bytes(layouts[i]->ld, elems[i])) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (p->batch > 1 && !multiple_of_16_bytes(layouts[i]->batch_stride, elems[i])) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // Scaling: tensor-wide f32 scalars only (the vector and block modes are refused when set).
  for (const int32_t mode : desc.scale_mode)
    if (mode != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  // The D scale converts to D's storage range, so it is there for an FP8 D only: the
  // documented formula applies scale_D to FP8 outputs, and a scale "set for an unsupported
  // matrix data, scale, and compute type combination" is CUBLAS_STATUS_INVALID_VALUE.
  if (desc.scale[3] != nullptr && !is_fp8(ed)) return CUBLAS_STATUS_INVALID_VALUE;
  // Bias (the table's last column): D's type for a 16BF or 16F D; for an FP8 D, C's type
  // (16BF or 16F); for a 32F D, 16BF.
  p->bias_elem = ec == Elem::F32 ? Elem::BF16 : ec;
  p->fp8 = true;
  p->fast_accum = desc.fast_accum != 0;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace blockscope::sim::cublaslt
