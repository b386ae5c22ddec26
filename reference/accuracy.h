// The accuracy rule, one for `blockscope check` and the tests (after FlashAttention's tests):
// a path's error against the float64 reference is at most twice the naive path's error in
// the same dtype and device, plus a floor of a few units of the dtype's roundoff; the naive
// path itself stays under the workload's derived bound (reference/error_model.h), so a wrong
// naive path or reference cannot hide behind the rule.
#pragma once

#include <vector>

#include "runtime/dtype.h"

namespace blockscope::reference {

// max |actual - reference| over every element; NaN when the sizes differ or an element is
// NaN or infinite where the reference is not the same NaN / infinity.
double max_abs_error(const std::vector<float>& actual, const std::vector<double>& reference);
// max_abs_error / max(max |finite reference|, tiny).
double max_relative_error(const std::vector<float>& actual, const std::vector<double>& reference);
// The error of a change, where the change is small next to what it is added to (a block's
// sublayer next to the residual stream): max |(actual - actual_base) - (reference -
// reference_base)| / max |reference - reference_base|. NaN on size mismatch or non-finite.
double max_delta_error(const std::vector<float>& actual, const std::vector<float>& actual_base,
                       const std::vector<double>& reference, const std::vector<double>& reference_base);
// The worst row's max_relative_error, rows of `row_length` elements (softmax, attention: a row
// of small values is measured against its own scale, not the largest row's).
double max_row_relative_error(const std::vector<float>& actual, const std::vector<double>& reference,
                              size_t row_length);

// Four units of the storage type's roundoff: covers the final rounding of the output.
double accuracy_floor(DType dtype);
bool within_accuracy_rule(double path_error, double naive_error, DType dtype);
// The largest path error the rule allows, given the naive path's.
double accuracy_bound(double naive_error, DType dtype);
}  // namespace blockscope::reference
