#include "reference/fp8_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace blockscope::reference {

namespace {

struct Format {
  int exponent_bits, mantissa_bits, bias;
  bool ieee_top;  // e5m2: the top exponent field is infinity and NaN; e4m3 uses it but for S.1111.111
};

Format format_of(Fp8Kind kind) { return kind == Fp8Kind::e4m3 ? Format{4, 3, 7, false} : Format{5, 2, 15, true}; }

// The non-negative finite values in increasing order; index parity = the mantissa's last bit.
const std::vector<double>& values(Fp8Kind kind) {
  static const std::vector<double> tables[2] = {
      [] {
        std::vector<double> v;
        const Format f = format_of(Fp8Kind::e4m3);
        for (int e = 0; e < (1 << f.exponent_bits); ++e)
          for (int m = 0; m < (1 << f.mantissa_bits); ++m) {
            if (e == (1 << f.exponent_bits) - 1 && m == (1 << f.mantissa_bits) - 1) continue;  // NaN
            const double fraction = static_cast<double>(m) / (1 << f.mantissa_bits);
            v.push_back(e == 0 ? std::ldexp(fraction, 1 - f.bias) : std::ldexp(1.0 + fraction, e - f.bias));
          }
        return v;
      }(),
      [] {
        std::vector<double> v;
        const Format f = format_of(Fp8Kind::e5m2);
        for (int e = 0; e < (1 << f.exponent_bits) - 1; ++e)  // the top exponent: infinity and NaN
          for (int m = 0; m < (1 << f.mantissa_bits); ++m) {
            const double fraction = static_cast<double>(m) / (1 << f.mantissa_bits);
            v.push_back(e == 0 ? std::ldexp(fraction, 1 - f.bias) : std::ldexp(1.0 + fraction, e - f.bias));
          }
        return v;
      }()};
  return tables[kind == Fp8Kind::e4m3 ? 0 : 1];
}

}  // namespace

double fp8_largest(Fp8Kind kind) { return values(kind).back(); }

double fp8_round(double v, Fp8Kind kind) {
  if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
  const std::vector<double>& table = values(kind);
  const double magnitude = std::fabs(v);
  double result = table.back();  // saturation
  // The first value at or above the magnitude, table[i + 1], and the one below it.
  const auto upper = std::lower_bound(table.begin() + 1, table.end(), magnitude);
  if (upper != table.end()) {
    const size_t i = static_cast<size_t>(upper - table.begin()) - 1;
    const double below = magnitude - table[i], above = table[i + 1] - magnitude;
    result = below < above ? table[i] : above < below ? table[i + 1] : (i % 2 == 0 ? table[i] : table[i + 1]);
  }
  return std::signbit(v) ? -result : result;
}

RefTensor quantize(const RefTensor& x, double scale, Fp8Kind kind) {
  RefTensor y(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i)
    y.data[i] = fp8_round(static_cast<double>(static_cast<float>(x.data[i] * scale)), kind);
  return y;
}

RefTensor dequantize(const RefTensor& x, double scale_inv) {
  RefTensor y(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = x.data[i] * scale_inv;
  return y;
}

RefTensor row_dequantized(const RefTensor& w, bool in_out, Fp8Kind kind) {
  const int64_t rows = w.shape.at(0), cols = w.shape.at(1);
  const int64_t outs = in_out ? cols : rows, ins = in_out ? rows : cols;
  const auto index = [&](int64_t out, int64_t in) { return static_cast<size_t>(in_out ? in * cols + out : out * cols + in); };
  RefTensor y(w.shape);
  const float largest = static_cast<float>(fp8_largest(kind));
  for (int64_t o = 0; o < outs; ++o) {
    double amax = 0.0;
    for (int64_t i = 0; i < ins; ++i) amax = std::max(amax, std::fabs(w.data[index(o, i)]));
    // In f32, as the scale is made: largest / amax, capped at f32's largest; 1 for a row of zeros.
    float scale = 1.0f;
    if (amax > 0.0) {
      const double quotient = static_cast<double>(largest / static_cast<float>(amax));
      scale = quotient > std::numeric_limits<float>::max() ? std::numeric_limits<float>::max()
                                                           : static_cast<float>(quotient);
    }
    const double factor = static_cast<double>(1.0f / scale);
    for (int64_t i = 0; i < ins; ++i) {
      const size_t at = index(o, i);
      y.data[at] = fp8_round(static_cast<double>(static_cast<float>(w.data[at] * static_cast<double>(scale))), kind) *
                   factor;
    }
  }
  return y;
}

RefTensor amax(const RefTensor& x) {
  RefTensor out(Shape{1});
  for (double v : x.data) {
    if (std::isnan(v)) {
      out.data[0] = v;
      break;
    }
    out.data[0] = std::max(out.data[0], std::fabs(v));
  }
  return out;
}

}  // namespace blockscope::reference
