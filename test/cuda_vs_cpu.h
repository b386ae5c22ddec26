// CUDA against the CPU backend, for the "CudaOps" cases of each op's test file: every path
// and dtype on odd shapes, with fresh random inputs (the same values on both devices) and
// NaN-poisoned outputs. The CPU backend is the oracle here; the same files compare each
// device with the float64 references. Every case skips with the reason when no GPU is
// present (or CUDA is not built); on the simulated GPU they all run.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/context.h"
#include "test/support/test_support.h"

namespace blockscope {

using testing::fresh_seed;
using testing::random_tensor;

// One CPU and one CUDA context; inputs are made on the CPU and copied, so both devices see the
// same values (exact: same dtype).
struct Devices {
  Context cpu{Device::cpu()};
  Context gpu{Device::cuda(0)};

  Tensor gpu_copy(const Tensor& host) { return gpu.copy_from(host); }
  Tensor poisoned_pair(const Shape& shape, DType dtype, Tensor* on_gpu) {
    *on_gpu = testing::poisoned_tensor(gpu, shape, dtype);
    return testing::poisoned_tensor(cpu, shape, dtype);
  }
};

// Agreement between the backends, relative to the largest value: f32 differs by summation
// order only; f16/bf16 may also round a few results to the neighbouring value.
inline double cuda_tolerance(DType dtype, double ulps = 4.0) {
  return dtype == DType::f32 ? 2e-5 * ulps / 4.0 : ulps * dtype_epsilon(dtype);
}

inline void expect_cuda_matches_cpu(const Tensor& gpu_out, const Tensor& cpu_out, double tol, const std::string& what) {
  const std::vector<float> gpu_values = to_floats(gpu_out);
  const std::vector<float> cpu_values = to_floats(cpu_out);
  ASSERT_EQ(testing::first_nan(cpu_values), -1) << what << ": CPU output has an unwritten (NaN) element";
  const int64_t nan_at = testing::first_nan(gpu_values);
  ASSERT_EQ(nan_at, -1) << what << ": CUDA output element " << nan_at << " is NaN (unwritten or wrong)";
  const double error =
      testing::max_relative_error(gpu_values, std::vector<double>(cpu_values.begin(), cpu_values.end()));
  EXPECT_LE(error, tol) << what << ": CUDA vs CPU max relative error";
}

class CudaOps : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { BS_SKIP_IF_UNAVAILABLE(Device::cuda(0)); }
  DType dtype() const { return GetParam(); }
};

inline std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}  // namespace blockscope
