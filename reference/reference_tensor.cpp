#include "reference/reference_tensor.h"

#include <stdexcept>
#include <string>

namespace blockscope::reference {

RefTensor from_tensor(const Tensor& t) {
  RefTensor out(t.shape());
  std::vector<float> values = to_floats(t);
  for (size_t i = 0; i < values.size(); ++i) out.data[i] = values[i];
  return out;
}

std::vector<float> to_float_vector(const RefTensor& t) { return std::vector<float>(t.data.begin(), t.data.end()); }

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("reference: ") + what);
}

}  // namespace blockscope::reference
