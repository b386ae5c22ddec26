// float64 host tensors for the reference implementations: a flat row-major vector and a shape.
// Deliberately simple (no strides, no views) so the references share nothing with ops/.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace blockscope::reference {

struct RefTensor {
  Shape shape;
  std::vector<double> data;  // row-major

  RefTensor() = default;
  explicit RefTensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(shape_numel(shape)), 0.0) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

// From a blockscope tensor (any device, dtype or strides): values exactly as stored.
RefTensor from_tensor(const Tensor& t);
// As floats (to compare with to_floats() of an op's output).
std::vector<float> to_float_vector(const RefTensor& t);

// A reference given operands its op refuses: std::invalid_argument("reference: " + what).
void require(bool ok, const char* what);

}  // namespace blockscope::reference
