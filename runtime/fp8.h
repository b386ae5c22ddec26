// OCP 8-bit floating point (the "OFP8" formats Hopper's tensor cores and cuBLASLt take), as
// storage codes and their conversions to and from float:
//   e4m3  1 sign, 4 exponent (bias 7), 3 mantissa bits; "fn": no infinities, S.1111.111 is NaN,
//         largest finite 448 (0x7E), smallest normal 2^-6, smallest subnormal 2^-9
//   e5m2  1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like: S.11111.00 is infinity,
//         S.11111.xx (xx != 0) NaN, largest finite 57344 (0x7B), smallest subnormal 2^-16
// float -> FP8 rounds to nearest, ties to even, and saturates ("satfinite", what cuBLASLt's FP8
// outputs and PTX's cvt.rn.satfinite do): a magnitude past the largest finite value, infinity
// included, becomes the largest finite value of its sign; exactly half the smallest subnormal
// and less become a zero of the input's sign. Every NaN becomes the canonical NaN code 0x7F (no
// sign), in both formats. These are the codes of the CUDA toolkit's __nv_cvt_float_to_fp8(x,
// __NV_SATFINITE, ...), with which these agree bit for bit (test/fp8_test.cpp compares them where
// the toolkit's headers are present). FP8 -> float is exact (every code is a float); NaN codes
// give a quiet NaN.
#pragma once

#include <cstdint>

namespace blockscope {

enum class Fp8Format { e4m3, e5m2 };

uint8_t float_to_fp8(float value, Fp8Format format);
float fp8_to_float(uint8_t code, Fp8Format format);

// The largest finite value of the format (448, 57344) and its code without sign (0x7E, 0x7B).
float fp8_max_finite(Fp8Format format);
uint8_t fp8_max_finite_code(Fp8Format format);

}  // namespace blockscope
