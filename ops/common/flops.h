// Cost formulas the ops hand to the profiler: FLOPs from the op's arithmetic, bytes as the
// minimum traffic (every input read once, every output written once).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "runtime/tensor.h"

namespace blockscope::ops {

// Sum of the sizes of the defined tensors (undefined ones, e.g. a missing bias, count 0).
inline double tensor_bytes(std::initializer_list<const Tensor*> tensors) {
  double total = 0;
  for (const Tensor* t : tensors)
    if (t != nullptr && t->defined()) total += static_cast<double>(t->nbytes());
  return total;
}

// One multiply and one add per term of every dot product.
inline double gemm_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

}  // namespace blockscope::ops
