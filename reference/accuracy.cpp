#include "reference/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace blockscope::reference {

double max_abs_error(const std::vector<float>& actual, const std::vector<double>& reference) {
  if (actual.size() != reference.size()) return std::numeric_limits<double>::quiet_NaN();
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(reference[i]) && std::isnan(actual[i])) continue;
    if (std::isinf(reference[i]) && actual[i] == reference[i]) continue;
    if (!std::isfinite(actual[i])) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, std::abs(static_cast<double>(actual[i]) - reference[i]));
  }
  return worst;
}

double max_relative_error(const std::vector<float>& actual, const std::vector<double>& reference) {
  double scale = 1e-30;
  for (double r : reference)
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
  return max_abs_error(actual, reference) / scale;
}

double max_delta_error(const std::vector<float>& actual, const std::vector<float>& actual_base,
                       const std::vector<double>& reference, const std::vector<double>& reference_base) {
  const size_t n = reference.size();
  if (actual.size() != n || actual_base.size() != n || reference_base.size() != n)
    return std::numeric_limits<double>::quiet_NaN();
  double worst = 0.0, scale = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    const double got = static_cast<double>(actual[i]) - static_cast<double>(actual_base[i]);
    const double want = reference[i] - reference_base[i];
    if (!std::isfinite(got) || !std::isfinite(want)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, std::abs(got - want));
    scale = std::max(scale, std::abs(want));
  }
  return worst / scale;
}

double max_row_relative_error(const std::vector<float>& actual, const std::vector<double>& reference,
                              size_t row_length) {
  if (actual.size() != reference.size() || row_length == 0 || reference.size() % row_length != 0)
    return std::numeric_limits<double>::quiet_NaN();
  double worst = 0.0;
  for (size_t r = 0; r < reference.size(); r += row_length) {
    const std::vector<float> a(actual.begin() + r, actual.begin() + r + row_length);
    const std::vector<double> e(reference.begin() + r, reference.begin() + r + row_length);
    const double error = max_relative_error(a, e);
    if (std::isnan(error)) return error;
    worst = std::max(worst, error);
  }
  return worst;
}

double accuracy_floor(DType dtype) { return 4.0 * dtype_epsilon(dtype); }

double accuracy_bound(double naive_error, DType dtype) { return 2.0 * naive_error + accuracy_floor(dtype); }

bool within_accuracy_rule(double path_error, double naive_error, DType dtype) {
  return std::isfinite(path_error) && path_error <= accuracy_bound(naive_error, dtype);
}

}  // namespace blockscope::reference
