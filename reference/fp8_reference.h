// float64 references for the FP8 casts (ops/precision/), written from the OCP 8-bit floating
// point definitions, sharing nothing with runtime/fp8.cpp's bit manipulation: the values of a
// format are listed from its exponent and mantissa fields, and rounding picks the nearest.
//   e4m3 ("fn"): bias 7, 3 mantissa bits, no infinities, largest finite 448
//   e5m2: bias 15, 2 mantissa bits, largest finite 57344
// Rounding: to the nearest value, ties to the one with an even mantissa; past the largest
// finite value (infinity too): the largest of its sign (satfinite); NaN stays NaN.
#pragma once

#include "reference/reference_tensor.h"

namespace blockscope::reference {

enum class Fp8Kind { e4m3, e5m2 };

// v rounded to the nearest value of the format, as above.
double fp8_round(double v, Fp8Kind kind);
// The largest finite value: 448 or 57344.
double fp8_largest(Fp8Kind kind);

// y = fp8_round(float(x · scale)): the product is rounded to f32 first, as the kernels compute it.
RefTensor quantize(const RefTensor& x, double scale, Fp8Kind kind);
// y = x · scale_inv, exactly (the op rounds it once to f32 and once to its output type).
RefTensor dequantize(const RefTensor& x, double scale_inv);
// Weight-only FP8 (precision.weights) of a 2-D weight w, as the runtime makes it: per output row
// (w's rows, or its columns when in_out: GPT-2's [in, out] Conv1D), scale = f32(largest /
// f32(amax)) (capped at f32's largest; 1 for a row of zeros), each code fp8_round(f32(w · scale)),
// standing for code · f32(1 / scale) -- the values returned, exactly, in w's layout.
RefTensor row_dequantized(const RefTensor& w, bool in_out, Fp8Kind kind);
// [1]: max |x| (0 for no elements; NaN if x holds one).
RefTensor amax(const RefTensor& x);

}  // namespace blockscope::reference
