// The verdicts (profiler/verdicts.h) on profiles built event by event: the roofline's
// compute / memory / latency per op, and host-bound or what bounds the busy device per step,
// with the numbers behind each worked out here by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "profiler/table.h"
#include "profiler/verdicts.h"
#include "test/profiler_synthetic.h"

namespace blockscope::profiler {
namespace {

using testing::ProfileBuilder;

// 1 TFLOP/s and 100 GB/s: the ridge is at 10 FLOP per byte; 1e6 FLOP take 1 µs, 1e5 bytes 1 µs.
const Peaks kPeaks{1.0, 100.0, "test"};

TEST(Roofline, BoundsFromBothRoofs) {
  // 1e9 FLOP and 1e6 bytes (1000 FLOP/byte): the compute roof, 1000 µs at best.
  EXPECT_DOUBLE_EQ(roofline_min_time_us(1e9, 1e6, kPeaks), 1000.0);
  EXPECT_EQ(roofline_bound(1e9, 1e6, 1200, kPeaks), Bound::compute);
  EXPECT_EQ(roofline_bound(1e9, 1e6, 2999, kPeaks), Bound::compute);
  EXPECT_EQ(roofline_bound(1e9, 1e6, 3001, kPeaks), Bound::latency);
  // 1e6 FLOP and 1e8 bytes (0.01 FLOP/byte): the bandwidth roof, 1000 µs at best.
  EXPECT_DOUBLE_EQ(roofline_min_time_us(1e6, 1e8, kPeaks), 1000.0);
  EXPECT_EQ(roofline_bound(1e6, 1e8, 1500, kPeaks), Bound::memory);
  EXPECT_EQ(roofline_bound(1e6, 1e8, 5000, kPeaks), Bound::latency);
  // A copy (no FLOPs) is memory-bound when it streams near the bandwidth.
  EXPECT_EQ(roofline_bound(0, 1e8, 1100, kPeaks), Bound::memory);
  // No verdict without peaks (the simulated GPU), work or time.
  EXPECT_EQ(roofline_bound(1e9, 1e6, 1200, Peaks{}), Bound::unknown);
  EXPECT_EQ(roofline_bound(0, 0, 1200, kPeaks), Bound::unknown);
  EXPECT_EQ(roofline_bound(1e9, 1e6, 0, kPeaks), Bound::unknown);
  EXPECT_STREQ(bound_name(Bound::latency), "latency");
  EXPECT_STREQ(bound_name(Bound::unknown), "");
}

// `steps` steps of `kernels` ops each, one kernel per op of `device_us` after a launch of
// `launch_us` of CPU time; each op does `flops` and moves `bytes`.
Profile steps_of(const std::string& device, int steps, int kernels, double device_us, double launch_us, double flops,
                 double bytes) {
  ProfileBuilder b("v", device);
  for (int s = 0; s < steps; ++s) {
    b.set_step(s);
    b.open("step " + std::to_string(s), "", true);
    for (int k = 0; k < kernels; ++k) {
      b.open("linear", "naive", false, {}, flops, bytes);
      b.kernel("gemm", device_us, launch_us);
      b.close();
    }
    b.close();
  }
  b.set_active_steps(steps);
  b.profile().peaks = kPeaks;
  return b.profile();
}

TEST(StepVerdict, SmallKernelsLaunchedOneByOneAreHostBound) {
  // The series' 64x64 lesson on a GPU: 12 kernels of 1 µs, each after a 5 µs launch. The
  // device runs 1 µs of every 5: busy 12 of ~57 µs.
  const Profile p = steps_of("cuda:0", 3, 12, 1.0, 5.0, 5e5, 1e4);
  const std::vector<StepActivity> steps = step_activity(p);
  ASSERT_EQ(steps.size(), 3u);
  for (const StepActivity& s : steps) {
    EXPECT_EQ(s.kernels, 12);
    EXPECT_DOUBLE_EQ(s.busy_us, 12.0);
    EXPECT_DOUBLE_EQ(s.launch_cpu_us, 60.0);
    EXPECT_GE(s.gaps, 11);  // between every pair of kernels (4 µs each)
    EXPECT_GE(s.largest_gap_us, 4.0 - 1e-9);
    EXPECT_LT(s.busy_fraction(), 0.25);
  }
  const StepVerdict v = step_verdict(p);
  EXPECT_EQ(v.kind, "host-bound");
  EXPECT_NE(v.line.find("12 launches at ~5.000us of CPU each"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("the device is busy 20% of the step (12.000us of 60.000us)"), std::string::npos) << v.line;
  // Said under the text op table and in its JSON.
  TableOptions options;
  EXPECT_NE(op_table(p, options, Format::table).find("Step verdict: host-bound: the device is busy"), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(op_table(p, options, Format::json));
  EXPECT_EQ(json["verdict"]["kind"], "host-bound");
  EXPECT_EQ(json["verdict"]["typical_step"]["kernels"], 12);
}

TEST(StepVerdict, BusyDeviceIsBoundByTheOpsHoldingItsTime) {
  // Kernels of 1000 µs after 5 µs launches: the device is busy. 1e9 FLOP in 1000 µs sits on the
  // compute roof; 1e6 FLOP + 1e8 bytes on the memory roof; 1e6 FLOP + 1e5 bytes is 1000x
  // below both (latency).
  EXPECT_EQ(step_verdict(steps_of("cuda:0", 3, 4, 1000, 5, 1e9, 1e6)).kind, "compute-bound");
  EXPECT_EQ(step_verdict(steps_of("cuda:0", 3, 4, 1000, 5, 1e6, 1e8)).kind, "memory-bound");
  const StepVerdict latency = step_verdict(steps_of("cuda:0", 3, 4, 1000, 5, 1e6, 1e5));
  EXPECT_EQ(latency.kind, "latency-bound");
  EXPECT_NE(latency.line.find("100% latency-bound"), std::string::npos) << latency.line;
  EXPECT_DOUBLE_EQ(latency.latency_us, 3 * 4 * 1000.0);
  // No peaks: busy, but no roofline verdict to split it by.
  Profile unknown = steps_of("cuda:0", 3, 4, 1000, 5, 1e9, 1e6);
  unknown.peaks = Peaks{};
  EXPECT_EQ(step_verdict(unknown).kind, "device-bound");
}

TEST(StepVerdict, NoneOnTheSimulatedGpuOrWithoutSteps) {
  Profile p = steps_of("cuda:0", 3, 12, 1.0, 5.0, 5e5, 1e4);
  p.simulated = true;
  const StepVerdict v = step_verdict(p);
  EXPECT_EQ(v.kind, "");
  EXPECT_NE(v.line.find("no verdict on the simulated GPU"), std::string::npos);
  EXPECT_EQ(step_verdict(Profile{}).kind, "");
}

TEST(StepActivity, OverlappingKernelsAreBusyOnce) {
  // Two streams: [0, 10] and [5, 20] overlap; [30, 40] after a 10 µs gap; the span is [0, 50].
  Profile p;
  OpEvent step;
  step.name = step.scope = "step 0";
  step.is_region = true;
  step.device_start_us = 0;
  step.device_end_us = 50;
  p.ops.push_back(step);
  for (const auto& [start, end] : {std::pair{0.0, 10.0}, std::pair{5.0, 20.0}, std::pair{30.0, 40.0}}) {
    KernelEvent k;
    k.name = "k";
    k.op = 0;
    k.device_start_us = start;
    k.device_end_us = end;
    p.kernels.push_back(k);
  }
  const std::vector<StepActivity> a = step_activity(p);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_DOUBLE_EQ(a[0].busy_us, 30.0);
  EXPECT_DOUBLE_EQ(a[0].span_us, 50.0);
  EXPECT_EQ(a[0].gaps, 2);  // [20, 30] and [40, 50]
  EXPECT_DOUBLE_EQ(a[0].largest_gap_us, 10.0);
}

TEST(OpTable, BoundColumnPerOpNoneForRegions) {
  const Profile p = steps_of("cuda:0", 2, 2, 1000, 5, 1e9, 1e6);
  TableOptions options;
  const Rows rows = op_table_rows(p, options);
  size_t bound = rows.columns.size();
  for (size_t c = 0; c < rows.columns.size(); ++c)
    if (rows.columns[c].key == "bound") bound = c;
  ASSERT_LT(bound, rows.columns.size());
  for (const Row& row : rows.rows) {
    if (row[0] == "step *") EXPECT_TRUE(row[bound].is_null());
    else EXPECT_EQ(row[bound], "compute") << row[0];
  }
  EXPECT_NE(render(rows, Format::table).find("compute"), std::string::npos);
}

}  // namespace
}  // namespace blockscope::profiler
