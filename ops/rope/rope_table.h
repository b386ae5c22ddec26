// The cos/sin table both RoPE backends use, so they rotate by the very same floats: Hugging
// Face's float32 angles (inv_freq[d] = float(theta^(-2d/D)) evaluated in double and rounded
// once, angle = float(pos) · inv_freq[d] as a float product), cos and sin of that float angle
// in double, rounded once. Row p of the table is [cos(a_0..a_{h-1}) | sin(a_0..a_{h-1})].
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace blockscope::ops {

inline std::vector<float> rope_inv_freq(float theta, int64_t dim) {
  const int64_t half = dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t d = 0; d < half; ++d)
    inv_freq[d] = static_cast<float>(1.0 / std::pow(static_cast<double>(theta), 2.0 * d / static_cast<double>(dim)));
  return inv_freq;
}

// out[0, 2·half): cos then sin of position `pos`'s angles.
inline void rope_table_row(const std::vector<float>& inv_freq, int64_t pos, float* out) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  const float p = static_cast<float>(pos);
  for (int64_t d = 0; d < half; ++d) {
    const double angle = static_cast<double>(p * inv_freq[d]);  // float product, then exact widening
    out[d] = static_cast<float>(std::cos(angle));
    out[half + d] = static_cast<float>(std::sin(angle));
  }
}

}  // namespace blockscope::ops
