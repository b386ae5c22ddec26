// profile_steps: which steps the schedule keeps, what each kept step holds, index remapping,
// the recorder detached while waiting and restored afterwards; device peaks; and the kernel
// counts per forward of each attention path seen through profile_steps + kernel_table.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "ops/attention/attention.h"
#include "profiler/diff.h"
#include "profiler/scope.h"
#include "profiler/session.h"
#include "profiler/table.h"
#include "model/config.h"
#include "runtime/error.h"
#include "model/workload.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;
using testing::ScopedEnv;

// One toy step: a region, an op inside it launching `kernels` work items.
void toy_step(Context& ctx, int kernels) {
  RegionScope region(ctx, "block.0");
  OpScope op(ctx, "toy", "naive", Family::elementwise, {}, 1e6, 1e3);
  for (int i = 0; i < kernels; ++i) {
    KernelScope kernel(ctx, i % 2 ? "toy_kernel_b" : "toy_kernel_a");
  }
}

struct ScheduleCase {
  Schedule schedule;
  std::vector<int> kept;  // step indices kept, in order
};

class ScheduleTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScheduleTest, KeepsTheScheduledStepsAndRemapsIndices) {
  const ScheduleCase& c = GetParam();
  Context ctx(Device::cpu());
  std::map<int, bool> attached;  // step -> recorder attached while it ran
  const int kernels_per_step = 3;
  const Profile profile = profile_steps(ctx, "toy", c.schedule, [&](int step) {
    attached[step] = ctx.recorder() != nullptr;
    toy_step(ctx, kernels_per_step);
  });
  EXPECT_EQ(ctx.recorder(), nullptr);  // nothing was attached before: nothing after
  EXPECT_TRUE(ctx.scope().empty());

  const int cold = c.schedule.keep_cold_step ? 1 : 0;
  const int total = cold + c.schedule.wait + c.schedule.warmup + c.schedule.active;
  ASSERT_EQ(static_cast<int>(attached.size()), total);
  for (int step = 0; step < total; ++step) {
    const bool waiting = step >= cold && step < cold + c.schedule.wait;
    EXPECT_EQ(attached[step], !waiting) << "step " << step;
  }

  EXPECT_EQ(profile.label, "toy");
  EXPECT_EQ(profile.device, "cpu");
  EXPECT_EQ(profile.active_steps, static_cast<int>(c.kept.size()));
  // Per kept step: "step N" region > block.0 region > toy op, and 3 kernels in the toy op.
  ASSERT_EQ(profile.ops.size(), 3 * c.kept.size());
  ASSERT_EQ(profile.kernels.size(), kernels_per_step * c.kept.size());
  std::vector<int> steps_seen;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const OpEvent& op = profile.ops[i];
    if (op.parent < 0) {
      ASSERT_TRUE(op.is_region);
      EXPECT_EQ(op.name, "step " + std::to_string(op.step));
      steps_seen.push_back(op.step);
      continue;
    }
    ASSERT_LT(op.parent, static_cast<int>(i));
    EXPECT_EQ(profile.ops[op.parent].step, op.step);
    EXPECT_EQ(op.depth, profile.ops[op.parent].depth + 1);
    EXPECT_LE(profile.ops[op.parent].cpu_start_us, op.cpu_start_us);
    EXPECT_GE(profile.ops[op.parent].cpu_end_us, op.cpu_end_us);
  }
  EXPECT_EQ(steps_seen, c.kept);
  for (const KernelEvent& k : profile.kernels) {
    ASSERT_GE(k.op, 0);
    EXPECT_EQ(profile.ops[k.op].name, "toy");
    EXPECT_EQ(profile.ops[k.op].step, k.step);
    EXPECT_EQ(profile.ops[k.op].scope, "step " + std::to_string(k.step) + "/block.0/toy");
    EXPECT_GE(k.device_end_us, k.device_start_us);
    EXPECT_GE(k.launch_cpu_us, 0.0);
  }
  const json kernels = json::parse(kernel_table(profile, Format::json));
  EXPECT_DOUBLE_EQ(kernels["kernels_per_step"].get<double>(), kernels_per_step);
}

INSTANTIATE_TEST_SUITE_P(Schedules, ScheduleTest,
                         ::testing::Values(ScheduleCase{{1, 1, 3, false}, {2, 3, 4}},
                                           ScheduleCase{{0, 0, 1, false}, {0}},
                                           ScheduleCase{{2, 0, 2, false}, {2, 3}},
                                           ScheduleCase{{1, 1, 2, true}, {0, 3, 4}},
                                           ScheduleCase{{0, 2, 0, true}, {0}}));

TEST(ProfileSteps, RestoresThePreviousRecorderWhenAStepThrows) {
  Context ctx(Device::cpu());
  Recorder outer(ctx);
  ctx.set_recorder(&outer);
  EXPECT_THROW(profile_steps(ctx, "boom", Schedule{0, 0, 2, false},
                             [&](int step) {
                               OpScope op(ctx, "toy", "", Family::elementwise, {});
                               if (step == 1) throw InputError("step 1 failed");
                             }),
               Error);
  EXPECT_EQ(ctx.recorder(), &outer);
  EXPECT_TRUE(ctx.scope().empty());
  ctx.set_recorder(nullptr);
}

// Peaks per op, total and self, with sizes known exactly: an outer region holds 1 MiB, a child
// allocates and frees 3 MiB, then the outer region allocates 0.5 MiB more. Total = what was in
// use at its highest above the start; self = the same while no child ran.
TEST(Recorder, PeakMemoryPerOpTotalAndSelf) {
  Context ctx(Device::cpu());
  Recorder recorder(ctx);
  ctx.set_recorder(&recorder);
  const int64_t mib = 1 << 20;
  const size_t base = ctx.backend().memory_stats().in_use;
  {
    RegionScope outer(ctx, "outer");
    Tensor held = ctx.empty({mib / 4}, DType::f32);  // 1 MiB
    {
      RegionScope child(ctx, "child");
      Tensor scratch = ctx.empty({3 * mib / 4}, DType::f32);  // 3 MiB, freed at the child's end
    }
    Tensor more = ctx.empty({mib / 8}, DType::f32);  // 0.5 MiB
  }
  {
    RegionScope after(ctx, "after");  // allocates nothing
  }
  ctx.set_recorder(nullptr);
  ASSERT_EQ(recorder.ops().size(), 3u);
  const OpEvent& outer = recorder.ops()[0];
  const OpEvent& child = recorder.ops()[1];
  const OpEvent& after = recorder.ops()[2];
  EXPECT_EQ(outer.start_bytes, static_cast<int64_t>(base));
  EXPECT_EQ(outer.peak_bytes - outer.start_bytes, 4 * mib) << "1 MiB held + the child's 3 MiB";
  EXPECT_EQ(outer.self_peak_bytes - outer.start_bytes, 3 * mib / 2) << "1 + 0.5 MiB, outside the child";
  EXPECT_EQ(child.peak_bytes - child.start_bytes, 3 * mib);
  EXPECT_EQ(child.self_peak_bytes - child.start_bytes, 3 * mib);
  EXPECT_EQ(child.start_bytes - outer.start_bytes, mib);
  EXPECT_EQ(after.peak_bytes, after.start_bytes);
  EXPECT_EQ(after.self_peak_bytes, after.start_bytes);
  // The backend's own peak keeps every op's folded in.
  EXPECT_GE(ctx.backend().memory_stats().peak_in_use, base + 4 * mib);
  // The op table: the outer region's Peak Mem 4 MiB, Self Peak Mem 1.5 MiB.
  Profile profile;
  profile.ops = recorder.ops();
  const Rows table = op_table_rows(profile, TableOptions{});
  bool found = false;
  for (const Row& row : table.rows) {
    if (row[0] != "outer") continue;
    found = true;
    EXPECT_EQ(row[18], 4 * mib);
    EXPECT_EQ(row[19], 3 * mib / 2);
  }
  EXPECT_TRUE(found);
}

// `with bs.profile():` (python/): one step recorded around code that is not a step function
// holds what profile_steps keeps of one active step, and the recorder before it comes back.
TEST(StepRecording, HoldsWhatOneActiveStepOfProfileStepsHolds) {
  Context ctx(Device::cpu());
  const Profile scheduled = profile_steps(ctx, "toy", Schedule{0, 0, 1, false}, [&](int) { toy_step(ctx, 3); });
  Recorder outer(ctx);
  ctx.set_recorder(&outer);
  Profile recorded;
  {
    StepRecording recording(ctx, "toy");
    EXPECT_NE(ctx.recorder(), &outer);
    toy_step(ctx, 3);
    recorded = recording.finish();
    EXPECT_EQ(ctx.recorder(), &outer) << "finish puts the earlier recorder back";
  }
  EXPECT_EQ(ctx.recorder(), &outer);
  ctx.set_recorder(nullptr);
  EXPECT_EQ(recorded.label, "toy");
  EXPECT_EQ(recorded.active_steps, 1);
  EXPECT_EQ(recorded.dtype, scheduled.dtype);
  ASSERT_EQ(recorded.ops.size(), scheduled.ops.size());
  for (size_t i = 0; i < recorded.ops.size(); ++i) {
    EXPECT_EQ(recorded.ops[i].name, scheduled.ops[i].name);
    EXPECT_EQ(recorded.ops[i].parent, scheduled.ops[i].parent);
  }
  ASSERT_EQ(recorded.kernels.size(), 3u);
  for (size_t i = 0; i < recorded.kernels.size(); ++i) EXPECT_EQ(recorded.kernels[i].op, scheduled.kernels[i].op);
  EXPECT_TRUE(outer.ops().empty()) << "the earlier recorder saw nothing of the recorded step";

  // Left unfinished (an exception in the block): nothing more recorded, the recorder restored.
  {
    StepRecording abandoned(ctx, "toy");
    toy_step(ctx, 1);
  }
  EXPECT_EQ(ctx.recorder(), nullptr);
}

TEST(ProfileSteps, RejectsSchedulesThatKeepNothing) {
  Context ctx(Device::cpu());
  const auto nothing = [](int) {};
  EXPECT_THROW(profile_steps(ctx, "x", Schedule{1, 1, 0, false}, nothing), Error);
  try {
    profile_steps(ctx, "x", Schedule{-1, 1, 1, false}, nothing);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_input);
    EXPECT_NE(std::string(error.what()).find("wait=-1"), std::string::npos) << error.what();
  }
}


TEST(DevicePeaks, CpuFiguresAreMeasuredOrOverridden) {
  Context ctx(Device::cpu());
  {
    ScopedEnv tflops("BLOCKSCOPE_CPU_PEAK_TFLOPS", "1.25");
    ScopedEnv gbps("BLOCKSCOPE_CPU_PEAK_GBPS", "40");
    const Peaks peaks = device_peaks(ctx, DType::f32);
    EXPECT_DOUBLE_EQ(peaks.tflops, 1.25);
    EXPECT_DOUBLE_EQ(peaks.gbps, 40.0);
  }
  {
    ScopedEnv tflops("BLOCKSCOPE_CPU_PEAK_TFLOPS", "fast");
    try {
      device_peaks(ctx, DType::f32);
      FAIL() << "expected an error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("BLOCKSCOPE_CPU_PEAK_TFLOPS"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("'fast'"), std::string::npos) << error.what();
    }
  }
  unsetenv("BLOCKSCOPE_CPU_PEAK_TFLOPS");
  unsetenv("BLOCKSCOPE_CPU_PEAK_GBPS");
  const Peaks measured = device_peaks(ctx, DType::bf16);
  // Any CPU this runs on does between 1 GFLOP/s and 100 TFLOP/s, 0.1 and 10000 GB/s.
  EXPECT_GT(measured.tflops, 1e-3);
  EXPECT_LT(measured.tflops, 100.0);
  EXPECT_GT(measured.gbps, 0.1);
  EXPECT_LT(measured.gbps, 1e4);
}

// The series' Part 3 on CPU: kernels (work items) per forward for each attention path.
struct AttentionCase {
  ops::AttentionPath path;
  int kernels_per_forward;
};

class AttentionKernelCounts : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionKernelCounts, SeenThroughProfileStepsAndKernelTable) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  Context ctx(Device::cpu());
  const Shape shape{1, 2, 7, 16};  // odd sequence length
  const Tensor q = testing::random_tensor(ctx, shape, DType::f32, seed);
  const Tensor k = testing::random_tensor(ctx, shape, DType::f32, seed + 1);
  const Tensor v = testing::random_tensor(ctx, shape, DType::f32, seed + 2);
  Tensor out = testing::poisoned_tensor(ctx, shape, DType::f32);
  const AttentionCase& c = GetParam();
  const Profile profile = profile_steps(ctx, ops::path_name(c.path), Schedule{1, 1, 2, false}, [&](int) {
    ops::attention(ctx, q, k, v, out, c.path, /*causal=*/true, 0.25f);
  });
  EXPECT_EQ(testing::first_nan(to_floats(out)), -1);
  const json table = json::parse(kernel_table(profile, Format::json));
  EXPECT_DOUBLE_EQ(table["kernels_per_step"].get<double>(), c.kernels_per_forward) << kernel_table(profile, Format::table);
  // One attention op per step, on the requested path, holding every kernel of the step.
  const json ops_table = json::parse(op_table(profile, TableOptions{"name", 0, false, {}}, Format::json));
  for (const json& row : ops_table["rows"]) {
    if (row["name"] == "attention") {
      EXPECT_EQ(row["calls"], 2);
      EXPECT_EQ(row["path"], ops::path_name(c.path));
      EXPECT_NEAR(row["device_total_us"].get<double>(), ops_table["self_device_time_total_us"].get<double>(), 1e-6);
      EXPECT_GT(row["flops"].get<double>(), 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, AttentionKernelCounts,
                         ::testing::Values(AttentionCase{ops::AttentionPath::naive, 6},
                                           AttentionCase{ops::AttentionPath::inplace, 5},
                                           AttentionCase{ops::AttentionPath::fused_softmax, 3},
                                           AttentionCase{ops::AttentionPath::flash, 1}),
                         [](const auto& info) { return std::string(ops::path_name(info.param.path)); });

// naive -> inplace: the diff names the one kernel that disappears (the out-of-place copy).
TEST(AttentionDiff, InplaceRemovesOneKernelPerForward) {
  Context ctx(Device::cpu());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Shape shape{1, 2, 9, 16};
  const Tensor q = testing::random_tensor(ctx, shape, DType::f32, seed);
  Tensor out = testing::poisoned_tensor(ctx, shape, DType::f32);
  std::map<std::string, Profile> profiles;
  for (const auto path : {ops::AttentionPath::naive, ops::AttentionPath::inplace}) {
    profiles[ops::path_name(path)] = profile_steps(ctx, ops::path_name(path), Schedule{0, 1, 2, false}, [&](int) {
      ops::attention(ctx, q, q, q, out, path, true, 0.25f);
    });
  }
  const json diff = json::parse(diff_profiles(profiles["naive"], profiles["inplace"], Format::json));
  const std::string summary = diff["summary"];
  EXPECT_EQ(summary.rfind("kernels per step 6 → 5; removed: ", 0), 0u) << summary;
  int removed = 0;
  for (const json& row : diff["kernels"]) removed += row["status"] == "removed";
  EXPECT_EQ(removed, 1) << diff.dump(1);
}

// A whole block: every kept step records the same ops in the same order, nested as
// step N / block.0 / attn|mlp / op, and the tables count them per step.
TEST(ProfileSteps, BlockOpOrderAndCountsAreTheSameEveryStep) {
  const WorkloadConfig config =
      load_default_config({"device=cpu", "input.batch=1", "input.seq_len=7", "paths.attention=inplace"});
  Context ctx(Device::cpu());
  Workload workload(ctx, config, {config.paths});
  const Profile profile = profile_steps(ctx, "block", Schedule{1, 1, 2, false}, [&](int) { workload.forward(); });
  ASSERT_EQ(profile.active_steps, 2);
  std::map<int, std::vector<std::string>> scopes;  // step -> scope paths without the step prefix
  for (const OpEvent& op : profile.ops) {
    const std::string prefix = "step " + std::to_string(op.step);
    ASSERT_EQ(op.scope.rfind(prefix, 0), 0u) << op.scope;
    scopes[op.step].push_back(op.scope.substr(prefix.size()));
  }
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[2], scopes[3]);
  const std::vector<std::string>& order = scopes[2];
  const auto position = [&](const std::string& scope) {
    return std::find(order.begin(), order.end(), scope) - order.begin();
  };
  ASSERT_LT(position("/block.0"), static_cast<long>(order.size()));
  EXPECT_LT(position("/block.0/attn"), position("/block.0/attn/attention"));
  EXPECT_LT(position("/block.0/attn/attention"), position("/block.0/mlp"));
  ASSERT_LT(position("/block.0/mlp"), static_cast<long>(order.size()));
  // Whole work items per step, the attention's 5 (inplace) among them.
  const json kernels = json::parse(kernel_table(profile, Format::json));
  const double per_step = kernels["kernels_per_step"].get<double>();
  EXPECT_EQ(per_step, std::floor(per_step));
  EXPECT_GT(per_step, 5.0);
  const json ops_table = json::parse(op_table(profile, TableOptions{"name", 0, false, {}}, Format::json));
  for (const json& row : ops_table["rows"]) {
    if (row["name"] == "attention" || row["name"] == "block.0") {
      EXPECT_EQ(row["calls"], 2) << row["name"];
    }
  }
}

}  // namespace
}  // namespace blockscope::profiler
