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

// max(a, b) that keeps a NaN: a NaN in the history reaches next_scale, which keeps the scale.
BS_HOST_DEVICE inline float max_keeping_nan(float a, float b) { return (b > a || b != b) ? b : a; }

}  // namespace blockscope::ops::scale_rule
