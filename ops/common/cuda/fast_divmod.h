// Division by a run-time constant without a division instruction: q = (umulhi(n, m) + n) >> s
// (Granlund–Montgomery; the form PyTorch's IntDivider uses), exact for 0 <= n < 2^31 and
// 1 <= d < 2^31. Host and device; a plain header so CPU tests can check it exhaustively.
#pragma once

#include <cstdint>

#include "ops/common/host_device.h"

namespace blockscope::ops::cuda::kernels {

struct FastDivmod {
  uint32_t divisor = 1, multiplier = 1, shift = 0;

  FastDivmod() = default;
  // d in [1, 2^31): the caller checks (fits_fast_divmod).
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1;
    multiplier = static_cast<uint32_t>(magic);  // < 2^32 for d < 2^31
  }

  BS_HOST_DEVICE uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, multiplier);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return (t + n) >> shift;
  }
  // n = q·divisor + r.
  BS_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

// True when FastDivmod is exact for every dividend below `limit` and this divisor.
inline bool fits_fast_divmod(int64_t divisor, int64_t limit) {
  return divisor >= 1 && divisor < (int64_t{1} << 31) && limit <= (int64_t{1} << 31);
}

}  // namespace blockscope::ops::cuda::kernels
