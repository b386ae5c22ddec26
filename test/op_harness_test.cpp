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

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ops/attention/attention.h"
#include "ops/catalogue/catalogue.h"
#include "ops/common/dispatch.h"
#include "ops/common/flops.h"
#include "ops/elementwise/elementwise.h"
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
    const Tensor made = bt::random_tensor(cpu, spec.shape, spec.dtype ? spec.dtype(dtype) : dtype, seed + i, spec.lo, spec.hi);
    const Tensor on_device = ctx.device().is_cpu() ? made : ctx.copy_from(made);
    inputs.push_back(spec.view ? spec.view(on_device) : on_device);
  }
  return inputs;
}

// Runs the case once on ctx over a poisoned output (or, for an in-place op, a copy of inputs[0]),
// and expects the inputs unchanged.
CaseTensors run_case(Context& ctx, const bt::OpCase& c, DType dtype, uint64_t seed) {
  CaseTensors t{make_inputs(ctx, c, dtype, seed), Tensor()};
  t.out = c.in_place_only ? ctx.copy_from(t.inputs[0]) : bt::poisoned_tensor(ctx, c.output, c.output_dtype.value_or(dtype));
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
    Tensor out = c.in_place_only ? ctx.copy_from(inputs[0])
                                 : bt::poisoned_tensor(ctx, c.output, c.output_dtype.value_or(dtype()));
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
    // The catalogue says when a call launches nothing (its output tensor has no elements).
    EXPECT_NO_THROW(ops::check_call(spec, call)) << "a call the op runs is one the catalogue takes";
    EXPECT_EQ(ops::output_elements(spec, call) == 0, shape_numel(c.output) == 0) << "the catalogue's output tensor";
    EXPECT_EQ(bt::kernel_names(recorder), ops::launched_kernels(spec, call, device().type));
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
                                            ::testing::ValuesIn(bt::compute_dtypes())),
                         harness_name);

// The storage rule (runtime/dtype.h): an op computes in f32, f16 or bf16 and refuses an FP8
// input or output by that rule's error, before any work -- whether every tensor is FP8 or only
// the output is (then the op's check of mixed dtypes may answer first). Per op and device, on
// the op's first case; the ops whose tensors have types of their own (own_types: the FP8 casts
// and GEMM, the f32 scale step) check those in their own cases.
class OpStorageRule : public ::testing::TestWithParam<std::tuple<size_t, Device>> {};

TEST_P(OpStorageRule, RefusesFp8TensorsLeavingNoTrace) {
  const bt::OpCases& entry = bt::op_cases()[std::get<0>(GetParam())];
  const Device device = std::get<1>(GetParam());
  BS_SKIP_IF_UNAVAILABLE(device);
  Context ctx(device);
  const bt::OpCase& c = entry.cases.front();
  for (const DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    for (const bool inputs_too : {true, false}) {
      SCOPED_TRACE(entry.op + " " + c.label + " " + dtype_name(fp8) + (inputs_too ? ", every tensor" : ", the output"));
      std::vector<Tensor> inputs = make_inputs(ctx, c, inputs_too ? fp8 : DType::bf16, bt::fresh_seed());
      Tensor out = c.in_place_only ? inputs[0] : bt::poisoned_tensor(ctx, c.output, fp8);
      if (c.in_place_only && !inputs_too) continue;  // its output is its input
      profiler::Recorder recorder(ctx);
      ctx.set_recorder(&recorder);
      // Every tensor FP8: the rule's own error. Only the output: the rule's, or the op's own check
      // of mixed dtypes, naming the FP8 type.
      const std::vector<std::string> needles =
          inputs_too ? std::vector<std::string>{"is FP8, a storage type", dtype_name(fp8)}
                     : std::vector<std::string>{dtype_name(fp8)};
      bt::expect_input_error([&] { c.run(ctx, inputs, out); }, needles);
      ctx.set_recorder(nullptr);
      EXPECT_TRUE(recorder.ops().empty()) << "a refused call recorded an op";
      EXPECT_TRUE(recorder.kernels().empty()) << "a refused call launched a kernel";
    }
  }
}

std::string storage_rule_name(const ::testing::TestParamInfo<std::tuple<size_t, Device>>& info) {
  return bt::op_cases()[std::get<0>(info.param)].op + "_" + bt::device_param_name(std::get<1>(info.param));
}

std::vector<size_t> compute_only_entries() {
  std::vector<size_t> indices;
  for (size_t i : entry_indices())
    if (!bt::op_cases()[i].own_types) indices.push_back(i);
  return indices;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpStorageRule,
                         ::testing::Combine(::testing::ValuesIn(compute_only_entries()), ::testing::ValuesIn(bt::test_devices())),
                         storage_rule_name);

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

// Each path's kernels per forward (what `info --format json` lists per path) against the
// series' counts, written out by hand: (with the causal mask, without it).
TEST(OpCatalogue, PathKernelsAreTheSeriesCounts) {
  const std::map<std::string, std::pair<size_t, size_t>> expected = {
      {"attention naive", {6, 4}},  {"attention inplace", {5, 4}}, {"attention fused_softmax", {3, 3}},
      {"attention flash", {1, 1}},  {"linear naive", {2, 2}},      {"linear epilogue", {1, 1}},
      {"linear addmm", {2, 2}},     {"mlp naive", {5, 5}},         {"mlp epilogue", {2, 2}},
      {"mlp fused", {3, 3}}};
  ASSERT_EQ(ops::path_table().size(), expected.size());
  for (const ops::PathInfo& row : ops::path_table()) {
    const std::string key = std::string(ops::path_op_name(row.op)) + " " + row.name;
    SCOPED_TRACE(key);
    ASSERT_EQ(expected.count(key), 1u);
    EXPECT_EQ(ops::path_kernels(row, true, DeviceType::cpu).size(), expected.at(key).first);
    EXPECT_EQ(ops::path_kernels(row, false, DeviceType::cpu).size(), expected.at(key).second);
  }
  const std::vector<std::string> flash = ops::path_kernels(ops::path_info(ops::AttentionPath::flash), true,
                                                           DeviceType::cpu);
  EXPECT_EQ(flash, std::vector<std::string>{"flash_attention_kernel"});
}

TEST(OpCatalogue, UnknownOpsAndMissingSizesAreNamed) {
  bt::expect_input_error([] { ops::op_spec("sigmoidd"); }, {"sigmoidd", "softmax"});
  const ops::OpCall call;
  bt::expect_input_error([&] { ops::op_spec("softmax").cost(call); }, {"'R'"});
}

ops::OpCall sized(std::map<std::string, int64_t> sizes, const std::string& path = "", bool causal = false) {
  ops::OpCall call;
  call.path = path;
  call.sizes = std::move(sizes);
  call.flags["causal"] = causal;
  return call;
}

// Causal attention counts the keys each query sees, bottom-right aligned as the kernels mask
// (query i of Sq sees keys 0 .. Sk - Sq + i): one query over 1024 keys sees all 1024 (before:
// half the FLOPs of the unmasked call), Sq = Sk sees Sq·(Sq + 1)/2 pairs, Sq > Sk leaves the
// first Sq - Sk queries none. Checked against a count of the mask itself.
TEST(OpCatalogue, CausalAttentionCountsTheKeysEachQuerySees) {
  const auto counted = [](int64_t sq, int64_t sk) {
    double pairs = 0;
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) pairs += j <= i + sk - sq ? 1 : 0;
    return pairs;
  };
  for (const auto& [sq, sk] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1024}, {1, 1}, {4, 4}, {3, 5}, {6, 4}, {64, 64}, {17, 300}, {300, 17}, {0, 5}, {5, 0}}) {
    SCOPED_TRACE("Sq=" + std::to_string(sq) + " Sk=" + std::to_string(sk));
    EXPECT_EQ(ops::causal_visible_pairs(sq, sk), counted(sq, sk));
    EXPECT_EQ(ops::causal_masked_elements(3, sq, sk), 3 * (static_cast<double>(sq * sk) - counted(sq, sk)));
    EXPECT_EQ(ops::attention_flops(2, 3, sq, sk, 8, true), 4.0 * 2 * 3 * 8 * counted(sq, sk));
    EXPECT_EQ(ops::attention_flops(2, 3, sq, sk, 8, false), 4.0 * 2 * 3 * 8 * static_cast<double>(sq * sk));
  }
  const ops::OpSpec& attention = ops::op_spec("attention");
  const ops::OpCall one_query = sized({{"B", 1}, {"H", 12}, {"Hkv", 12}, {"Sq", 1}, {"Sk", 1024}, {"D", 64}}, "flash", true);
  ops::OpCall unmasked = one_query;
  unmasked.flags["causal"] = false;
  EXPECT_EQ(attention.cost(one_query).flops, attention.cost(unmasked).flops) << "the one query sees every key";
  EXPECT_EQ(attention.cost(one_query).flops, 4.0 * 12 * 1024 * 64);
  // Closed form: a causal call of 2^31 - 1 queries is counted at once, not row by row.
  EXPECT_DOUBLE_EQ(ops::causal_visible_pairs(2147483647, 2147483647), 2147483647.0 * 2147483648.0 / 2);
}

// An op record's bytes, worked by hand: by default every input read once and every output
// written once (an undefined tensor, a missing bias, counts 0; one tensor both read and written
// counts twice); an op that states its bytes gets exactly those.
TEST(OpRecord, BytesAreTheTensorsSizesUnlessStated) {
  Context ctx(Device::cpu());
  const Tensor x = ctx.empty({3, 5}, DType::f32);   // 60 bytes
  const Tensor w = ctx.empty({7, 5}, DType::f16);   // 70 bytes
  const Tensor bias;                                // undefined: 0
  const Tensor y = ctx.empty({3, 7}, DType::f32);   // 84 bytes
  const Tensor t = ctx.empty({4}, DType::bf16);     // 8 bytes
  const ops::OpRecord linear{"linear", "", profiler::Family::linear, {&x, &w, &bias}, {&y}, 0.0};
  EXPECT_EQ(linear.bytes(), 60 + 70 + 84);
  const ops::OpRecord in_place{"scale", "", profiler::Family::elementwise, {&t}, {&t}, 0.0};
  EXPECT_EQ(in_place.bytes(), 16);
  ops::OpRecord stated{"all_reduce", "", profiler::Family::collective, {&t}, {&t}, 0.0};
  stated.with_bytes(12.5);
  EXPECT_EQ(stated.bytes(), 12.5);
  const ops::OpRecord none{"decode_step_reset", "", profiler::Family::copy, {}, {}};
  EXPECT_EQ(none.bytes(), 0);
}

// Calls no op could run are refused naming the size and its value; sizes of 0 are calls with
// no work, and a call whose output has no elements launches no kernel.
TEST(OpCatalogue, ImpossibleCallsAreRefusedAndEmptyOnesLaunchNothing) {
  const auto refused = [](const char* op, std::map<std::string, int64_t> sizes, std::vector<std::string> needles) {
    SCOPED_TRACE(op);
    bt::expect_input_error([&] { ops::check_call(ops::op_spec(op), sized(sizes)); }, needles);
  };
  const std::map<std::string, int64_t> attention{{"B", 1}, {"H", 12}, {"Hkv", 4}, {"Sq", 8}, {"Sk", 8}, {"D", 64}};
  EXPECT_NO_THROW(ops::check_call(ops::op_spec("attention"), sized(attention)));
  auto with = [](std::map<std::string, int64_t> sizes, const std::string& name, int64_t value) {
    sizes[name] = value;
    return sizes;
  };
  refused("attention", with(attention, "B", int64_t{1} << 32), {"size 'B' = 4294967296", "2147483647"});
  refused("attention", with(attention, "Hkv", 5), {"'Hkv' = 5", "divide H = 12"});
  refused("attention", with(attention, "Hkv", 0), {"'Hkv' = 0", "at least 1"});
  refused("attention", with(with(with(attention, "B", 1 << 30), "Sq", 1 << 30), "H", 1 << 24),
          {"impossible size", "B x H x Sq x D", "2^50"});
  refused("softmax", {{"R", 1 << 30}, {"N", 1 << 30}}, {"impossible size", "R x N"});
  refused("all_reduce", {{"N", 8}, {"ranks", 0}}, {"'ranks' = 0", "at least 1"});
  refused("reduce_scatter", {{"N", 7}, {"ranks", 2}}, {"'N' = 7", "multiple of ranks = 2"});
  refused("batched_matmul", {{"batch", 4}, {"G", 3}, {"M", 1}, {"K", 1}, {"N", 1}}, {"'G' = 3", "divide batch = 4"});
  refused("decode_attention", {{"B", 4}, {"H", 2}, {"Hkv", 2}, {"D", 8}, {"L", 3}}, {"'L' = 3", "at least B = 4"});
  refused("kv_cache_write", {{"B", 2}, {"Hkv", 2}, {"S", 3}, {"D", 8}, {"W", 7}}, {"'W' = 7", "B x S = 6"});
  refused("rope", {{"B", -1}, {"H", 1}, {"S", 1}, {"D", 2}}, {"'B' = -1", "negative"});

  // Empty calls: valid, no kernel on any device; a GEMM with K = 0 still writes its output.
  for (DeviceType device : {DeviceType::cpu, DeviceType::cuda}) {
    EXPECT_TRUE(ops::launched_kernels(ops::op_spec("softmax"), sized({{"R", 0}, {"N", 8}}), device).empty());
    EXPECT_TRUE(ops::launched_kernels(ops::op_spec("attention"), sized(with(attention, "Sq", 0), "naive", true), device)
                    .empty());
    ops::OpCall empty_sum = sized({{"M", 3}, {"K", 0}, {"N", 5}}, "epilogue");
    EXPECT_EQ(ops::launched_kernels(ops::op_spec("linear"), empty_sum, device).size(), 1u);
  }
  EXPECT_NO_THROW(ops::check_call(ops::op_spec("attention"), sized(with(attention, "B", 0))));
}

}  // namespace
}  // namespace blockscope
