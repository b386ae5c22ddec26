// The op cases: for every op of the catalogue (ops/catalogue/catalogue.h), the calls the
// generic harness (test/op_harness_test.cpp) runs on every device of the build and every dtype
// — shapes including odd and empty ones, the call, its float64 reference, its error bound,
// whether the output may alias an input — and the bad calls it must refuse. One entry per op
// in test/op_cases.cpp; the harness fails when the catalogue and the entries disagree.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ops/catalogue/catalogue.h"
#include "reference/reference_tensor.h"
#include "runtime/context.h"

namespace blockscope::testing {

// One input: made on the CPU with fresh random values in [lo, hi) and copied to the device
// under test; `view` (when set) turns the made tensor into the one the op receives (a column
// slice, a permute). `absent`: an undefined tensor (a missing bias).
struct InputSpec {
  Shape shape;
  float lo = -1.0f, hi = 1.0f;
  std::function<Tensor(const Tensor&)> view;
  bool absent = false;
  // Its type from the harness's (null: the harness's): a scale is f32 whatever it is, an FP8
  // GEMM's bias bf16 unless the output is f16.
  std::function<DType(DType)> dtype;
};

// What the harness hands a case's accuracy check.
struct Measured {
  const std::vector<float>& got;
  const reference::RefTensor& want;
  const std::vector<reference::RefTensor>& inputs;  // as the op received them (views applied)
  DType dtype;
};

struct Accuracy {
  const char* metric;  // how `error` measures: "max relative", "row relative", "abs", "f32 ulps"
  std::function<double(const Measured&)> error;
  std::function<double(const Measured&)> bound;
};

struct OpCase {
  std::string label;   // sizes and options, for the failure message: "R=7 N=37 silu"
  ops::OpCall call;    // what the catalogue's cost and kernels are asked (the dtype is set by the harness)
  std::vector<InputSpec> inputs;
  Shape output;
  // Runs the op on `inputs` into `out` (an op that works in place only writes inputs[0], and
  // `out` is that tensor).
  std::function<void(Context&, const std::vector<Tensor>& inputs, Tensor& out)> run;
  std::function<reference::RefTensor(const std::vector<reference::RefTensor>& inputs)> reference;
  Accuracy accuracy;
  int alias_input = -1;     // the output may be this input: the harness runs it in place too
  bool in_place_only = false;  // the op writes inputs[0] (masked_fill_)
  // CUDA against the CPU backend on the same inputs: bit for bit where both do the same
  // arithmetic; else both within the bound of the reference.
  bool bit_identical_across_devices = false;
  std::optional<DType> output_dtype = std::nullopt;  // this type whatever the harness's (quantize: FP8)
};

// A call the op must refuse with an invalid_input error whose message holds every needle, and
// leave no trace (no op event, no kernel).
struct BadCall {
  std::string what;
  std::function<void(Context&, DType, std::vector<std::string>* needles)> call;
};

struct OpCases {
  std::string op;  // the catalogue's key
  std::vector<OpCase> cases;
  std::vector<BadCall> bad_calls;
  // Its tensors' types are its own, not the harness's (FP8 operands, f32 scales): the storage
  // rule's generic test skips it; its cases and bad calls check those types.
  bool own_types = false;
};

// Every op's entry, in catalogue order.
const std::vector<OpCases>& op_cases();

}  // namespace blockscope::testing
