// The scale a per-tensor recipe derives from an amax, written once for both backends (the CPU
// and the CUDA fp8_scale_update kernel run this same code, so they give the same bits):
//   scale = fp8_max / amax / 2^margin     when amax is finite and > 0 (FLT_MAX on overflow)
//   scale = previous                      otherwise (a NaN, an infinity, an all-zero history)
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/common/host_device.h"

namespace blockscope::ops::scale_rule {

BS_HOST_DEVICE inline float next_scale(float amax, float previous, float fp8_max, int margin) {
  if (!(amax > 0.0f) || !(amax <= FLT_MAX)) return previous;  // NaN, 0 and infinity fail one test
  const float scale = ldexpf(fp8_max / amax, -margin);
  return scale <= FLT_MAX ? scale : FLT_MAX;
}

// Where a cast starts clipping: the largest finite value plus half its spacing -- below, a value
// rounds to the largest as any value rounds to its nearest (e4m3: 448 + 16 = 464, a tie going to
// 448's even mantissa); above, only saturation brings it back (e5m2: 57344 + 4096 = 61440).
BS_HOST_DEVICE inline float clip_threshold(bool e5m2) { return e5m2 ? 61440.0f : 464.0f; }

// Saturation, counted where a delayed-scaling recipe updates its scale (after the step's cast):
// the step's amax times the scale its cast used -- past clip_threshold, the cast clipped values to
// ±largest. saturation f32 [3]: {updates counted, updates that saturated, the largest ratio of
// amax · scale to the largest finite value among them}. A NaN amax counts as an update, not as
// saturated. (Without the threshold, a steady input would count every step: amax · f32(max /
// amax) lands an ulp above max half the time.)
BS_HOST_DEVICE inline void count_saturation(float amax, float scale_used, float fp8_max, bool e5m2,
                                            float* saturation) {
  saturation[0] += 1.0f;
  const float scaled = amax * scale_used;
  if (scaled > clip_threshold(e5m2)) {
    const float ratio = scaled / fp8_max;
    saturation[1] += 1.0f;
    saturation[2] = ratio > saturation[2] ? ratio : saturation[2];
  }
}

// max(a, b) that keeps a NaN: a NaN in the history reaches next_scale, which keeps the scale.
BS_HOST_DEVICE inline float max_keeping_nan(float a, float b) { return (b > a || b != b) ? b : a; }

}  // namespace blockscope::ops::scale_rule
