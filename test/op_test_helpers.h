// Small helpers shared by the per-op tests (linear, activation, norm, rope, mlp, elementwise,
// softmax, attention, and the CUDA suites): parameter
// names, reference conversions, error expectations and kernel-name lists from a Recorder.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/recorder.h"
#include "runtime/error.h"
#include "reference/reference_tensor.h"
#include "test/accuracy_bounds.h"
#include "test/support/test_support.h"

namespace blockscope::testing {

inline std::string device_param_name(Device device) {
  return device.is_cpu() ? std::string("cpu") : "cuda" + std::to_string(device.index);
}

// Test-name suffix for a device parameter: "cpu", "cuda0".
inline std::string device_test_name(const ::testing::TestParamInfo<Device>& info) { return device_param_name(info.param); }

// Test-name suffix for a (device, dtype) parameter: "cpu_bf16".
inline std::string device_dtype_name(const ::testing::TestParamInfo<std::tuple<Device, DType>>& info) {
  return device_param_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

inline auto device_dtype_values() {
  return ::testing::Combine(::testing::ValuesIn(test_devices()), ::testing::ValuesIn(compute_dtypes()));
}

// A tensor's values as float64 on the host (any device, dtype or strides).
inline reference::RefTensor ref(const Tensor& t) { return reference::from_tensor(t); }

// Runs `call` and expects a blockscope input error whose message contains every `needle`.
template <typename Call>
void expect_input_error(Call call, const std::vector<std::string>& needles) {
  try {
    call();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << (needles.empty() ? "" : needles[0]);
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input) << error.what();
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
          << "message '" << error.what() << "' does not mention '" << needle << "'";
  }
}

inline std::vector<std::string> kernel_names(const profiler::Recorder& recorder) {
  std::vector<std::string> names;
  for (const profiler::KernelEvent& k : recorder.kernels()) names.push_back(k.name);
  return names;
}

}  // namespace blockscope::testing
