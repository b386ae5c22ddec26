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

// The (query, key) pairs of one [Sq, Sk] score matrix that a causal mask keeps, bottom-right
// aligned as every path masks (query i sees keys 0 .. i + Sk - Sq): Sq·Sk − Sq·(Sq − 1)/2 when
// Sq <= Sk (Sq = 1 sees all Sk keys), Sk·(Sk + 1)/2 when Sq > Sk (the first Sq − Sk queries see
// none). Closed form in doubles: no loop over Sq, no integer product to overflow.
inline double causal_visible_pairs(int64_t sq, int64_t sk) {
  if (sq <= 0 || sk <= 0) return 0.0;
  const double q = static_cast<double>(sq), k = static_cast<double>(sk);
  return sq <= sk ? q * k - q * (q - 1.0) / 2.0 : k * (k + 1.0) / 2.0;
}

}  // namespace blockscope::ops
