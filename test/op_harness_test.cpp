// The generic op harness: every case of test/op_cases.cpp on every device of the build and
// every dtype, against the op catalogue (ops/catalogue/catalogue.h) and the float64 reference:
//   - the value within the case's bound, written over a NaN-poisoned output;
//   - in place (when the op allows it) bit-identical to out of place;
//   - CUDA (the simulated GPU in SIM builds) and the CPU backend on the same inputs: bit for bit
//     where both do the same arithmetic, else both within the bound of the reference;
//   - the op event (name, path, FLOPs, bytes) and the kernels, in order, as the catalogue says;
//   - every bad call refused with an invalid_input error naming the problem, leaving no trace.
// And the catalogue against itself: every op has cases, every path-table op its kernel counts.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ops/catalogue/catalogue.h"
#include "profiler/recorder.h"
#include "test/op_cases.h"
#include "test/op_test_helpers.h"

namespace blockscope {
namespace {

namespace bt = blockscope::testing;
using reference::RefTensor;

// The tensors of one case on one device: the made inputs (views applied) and the output.
struct CaseTensors {
  std::vector<Tensor> inputs;
  Tensor out;
};

// Inputs made on the CPU from `seed` (the same values on every device), copied to ctx's device.
std::vector<Tensor> make_inputs(Context& ctx, const bt::OpCase& c, DType dtype, uint64_t seed) {
  Context cpu(Device::cpu());
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const bt::InputSpec& spec = c.inputs[i];
    if (spec.absent) {
      inputs.emplace_back();
      continue;
    }
    const Tensor made = bt::random_tensor(cpu, spec.shape, dtype, seed + i, spec.lo, spec.hi);
    const Tensor on_device = ctx.device().is_cpu() ? made : ctx.copy_from(made);
    inputs.push_back(spec.view ? spec.view(on_device) : on_device);
  }
  return inputs;
}

// Runs the case once on ctx over a poisoned output (or, for an in-place op, a copy of inputs[0]),
// and expects the inputs unchanged.
CaseTensors run_case(Context& ctx, const bt::OpCase& c, DType dtype, uint64_t seed) {
  CaseTensors t{make_inputs(ctx, c, dtype, seed), Tensor()};
  t.out = c.in_place_only ? ctx.copy_from(t.inputs[0]) : bt::poisoned_tensor(ctx, c.output, dtype);
  std::vector<std::vector<float>> before;
  for (const Tensor& input : t.inputs) before.push_back(input.defined() ? to_floats(input) : std::vector<float>{});
  c.run(ctx, t.inputs, t.out);
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    if (t.inputs[i].defined()) {
      EXPECT_EQ(to_floats(t.inputs[i]), before[i]) << "the op wrote its input " << i;
    }
  }
  return t;
}

std::vector<RefTensor> refs(const std::vector<Tensor>& inputs) {
  std::vector<RefTensor> out;
  for (const Tensor& t : inputs) out.push_back(t.defined() ? bt::ref(t) : RefTensor());
  return out;
}

bool has_nan(const RefTensor& t) {
  for (double v : t.data)
    if (v != v) return true;
  return false;
}

class OpHarness : public ::testing::TestWithParam<std::tuple<size_t, Device, DType>> {
 protected:
  const bt::OpCases& entry() const { return bt::op_cases()[std::get<0>(GetParam())]; }
  Device device() const { return std::get<1>(GetParam()); }
  DType dtype() const { return std::get<2>(GetParam()); }
};

TEST_P(OpHarness, ValueAliasingAndCrossDevice) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  for (const bt::OpCase& c : entry().cases) {
    const uint64_t seed = bt::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << entry().op << " " << c.label);
    const CaseTensors t = run_case(ctx, c, dtype(), seed);
    const std::vector<RefTensor> in = refs(t.inputs);
    const RefTensor want = c.reference(in);
    const std::vector<float> got = to_floats(t.out);
    ASSERT_EQ(got.size(), want.data.size());
    if (!has_nan(want)) {
      ASSERT_EQ(bt::first_nan(got), -1) << "an output element is NaN (unwritten or wrong)";
    }
    const bt::Measured measured{got, want, in, dtype()};
    const double error = c.accuracy.error(measured), bound = c.accuracy.bound(measured);
    bt::report_error(entry().op + "." + bt::device_param_name(device()) + "." + dtype_name(dtype()), error, bound);
    EXPECT_LE(error, bound) << c.accuracy.metric << " error against the float64 reference";

    if (c.alias_input >= 0) {  // the output is the input itself
      std::vector<Tensor> inputs = make_inputs(ctx, c, dtype(), seed);
      Tensor aliased = inputs[static_cast<size_t>(c.alias_input)];
      c.run(ctx, inputs, aliased);
      EXPECT_EQ(to_floats(aliased), got) << "in place differs from out of place";
    }

    if (device().is_cuda()) {  // the CPU backend on the same inputs
      Context cpu(Device::cpu());
      const std::vector<float> cpu_got = to_floats(run_case(cpu, c, dtype(), seed).out);
      if (c.bit_identical_across_devices) {
        EXPECT_EQ(got, cpu_got) << "CUDA and the CPU differ";
      } else {
        // Both within the bound of the same reference (so within twice it of each other); a
        // metric of the difference itself would count the storage rounding twice.
        const bt::Measured cpu_measured{cpu_got, want, in, dtype()};
        EXPECT_LE(c.accuracy.error(cpu_measured), c.accuracy.bound(cpu_measured))
            << "the CPU on the CUDA run's inputs, " << c.accuracy.metric << " error";
      }
    }
  }
}

TEST_P(OpHarness, RecordsWhatTheCatalogueSays) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  const ops::OpSpec& spec = ops::op_spec(entry().op);
  for (const bt::OpCase& c : entry().cases) {
    const uint64_t seed = bt::fresh_seed();
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " " << entry().op << " " << c.label);
    ops::OpCall call = c.call;
    call.dtype = dtype();
    std::vector<Tensor> inputs = make_inputs(ctx, c, dtype(), seed);
    Tensor out = c.in_place_only ? ctx.copy_from(inputs[0]) : bt::poisoned_tensor(ctx, c.output, dtype());
    profiler::Recorder recorder(ctx);
    ctx.set_recorder(&recorder);
    c.run(ctx, inputs, out);
    ctx.set_recorder(nullptr);

    ASSERT_FALSE(recorder.ops().empty()) << "no op event";
    const profiler::OpEvent& op = recorder.ops()[0];
    EXPECT_EQ(op.name, ops::recorded_name(spec, call));
    EXPECT_EQ(op.path, ops::recorded_path(spec, call));
    const ops::OpCost cost = spec.cost(call);
    EXPECT_DOUBLE_EQ(op.flops, cost.flops) << "FLOPs recorded vs the catalogue";
    EXPECT_DOUBLE_EQ(op.bytes, cost.bytes) << "bytes recorded vs the catalogue";
    const std::vector<std::string> expected =
        shape_numel(c.output) == 0 ? std::vector<std::string>{} : spec.kernels(call, device().type);
    EXPECT_EQ(bt::kernel_names(recorder), expected);
    for (const profiler::KernelEvent& k : recorder.kernels()) EXPECT_GE(k.op, 0) << k.name << " outside any op";
    for (size_t i = 1; i < recorder.ops().size(); ++i)
      EXPECT_EQ(recorder.ops()[i].parent, 0) << recorder.ops()[i].name << " is not inside " << op.name;
  }
}

TEST_P(OpHarness, BadCallsAreNamedErrorsThatLeaveNoTrace) {
  BS_SKIP_IF_UNAVAILABLE(device());
  Context ctx(device());
  ASSERT_FALSE(entry().bad_calls.empty()) << entry().op << " has no bad call in test/op_cases.cpp";
  for (const bt::BadCall& bad : entry().bad_calls) {
    SCOPED_TRACE(entry().op + ": " + bad.what);
    profiler::Recorder recorder(ctx);
    ctx.set_recorder(&recorder);
    std::vector<std::string> needles;
    bt::expect_input_error([&] { bad.call(ctx, dtype(), &needles); }, needles);
    ctx.set_recorder(nullptr);
    EXPECT_TRUE(recorder.ops().empty()) << "a refused call recorded an op";
    EXPECT_TRUE(recorder.kernels().empty()) << "a refused call launched a kernel";
  }
}

std::vector<size_t> entry_indices() {
  std::vector<size_t> indices;
  for (size_t i = 0; i < bt::op_cases().size(); ++i) indices.push_back(i);
  return indices;
}

std::string harness_name(const ::testing::TestParamInfo<std::tuple<size_t, Device, DType>>& info) {
  return bt::op_cases()[std::get<0>(info.param)].op + "_" + bt::device_param_name(std::get<1>(info.param)) + "_" +
         dtype_name(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Ops, OpHarness,
                         ::testing::Combine(::testing::ValuesIn(entry_indices()), ::testing::ValuesIn(bt::test_devices()),
                                            ::testing::ValuesIn(bt::all_dtypes())),
                         harness_name);

// ---- the catalogue against the cases and the path table -------------------------------------

TEST(OpCatalogue, EveryOpHasCasesAndEveryCaseAnOp) {
  std::set<std::string> with_cases;
  for (const bt::OpCases& entry : bt::op_cases()) {
    EXPECT_NO_THROW(ops::op_spec(entry.op)) << entry.op << " has cases but no catalogue entry";
    EXPECT_FALSE(entry.cases.empty()) << entry.op;
    EXPECT_TRUE(with_cases.insert(entry.op).second) << entry.op << " has two entries";
  }
  for (const std::string& name : ops::op_names())
    EXPECT_TRUE(with_cases.count(name)) << name << " is in the catalogue but test/op_cases.cpp has no entry";
}

// Every case gives the sizes its op's formulas read, and cases cover every path of the op.
TEST(OpCatalogue, CasesGiveTheSizesAndCoverThePaths) {
  for (const bt::OpCases& entry : bt::op_cases()) {
    const ops::OpSpec& spec = ops::op_spec(entry.op);
    std::set<std::string> paths;
    for (const bt::OpCase& c : entry.cases) {
      for (const std::string& size : spec.sizes) {
        EXPECT_TRUE(c.call.sizes.count(size)) << entry.op << " " << c.label << " lacks " << size;
      }
      paths.insert(c.call.path);
    }
    for (const std::string& path : ops::op_paths(spec)) {
      EXPECT_TRUE(paths.count(path)) << entry.op << " has no case on path " << path;
    }
  }
}

// The path table's kernel counts (configs, `check`, bench_gate.py) are the catalogue's lists.
TEST(OpCatalogue, PathTableKernelCountsAreTheCatalogueKernels) {
  for (const ops::PathInfo& row : ops::path_table()) {
    SCOPED_TRACE(std::string(ops::path_op_name(row.op)) + " " + row.name);
    ops::OpCall call;
    call.path = row.name;
    call.activation = "gelu_tanh";
    call.flags = {{"bias", true}, {"causal", true}, {"gated", !row.plain_mlp}};
    const ops::OpSpec& spec = ops::op_spec(ops::path_op_name(row.op));
    EXPECT_EQ(spec.kernels(call, DeviceType::cpu).size(), static_cast<size_t>(row.kernels));
    call.flags["causal"] = false;
    EXPECT_EQ(spec.kernels(call, DeviceType::cpu).size(), static_cast<size_t>(row.kernels_without_mask));
  }
}

TEST(OpCatalogue, UnknownOpsAndMissingSizesAreNamed) {
  bt::expect_input_error([] { ops::op_spec("sigmoidd"); }, {"sigmoidd", "softmax"});
  const ops::OpCall call;
  bt::expect_input_error([&] { ops::op_spec("softmax").cost(call); }, {"'R'"});
}

}  // namespace
}  // namespace blockscope
