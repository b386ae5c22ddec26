#include "reference/reference_tensor.h"

namespace blockscope::reference {

RefTensor from_tensor(const Tensor& t) {
  RefTensor out(t.shape());
  std::vector<float> values = to_floats(t);
  for (size_t i = 0; i < values.size(); ++i) out.data[i] = values[i];
  return out;
}

std::vector<float> to_float_vector(const RefTensor& t) { return std::vector<float>(t.data.begin(), t.data.end()); }

}  // namespace blockscope::reference
