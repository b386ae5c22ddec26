// Profile diff on synthetic profiles with known changes: added, removed, count changed,
// faster, slower and unchanged kernels and ops; the summary line; CSV and JSON forms.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <random>

#include "profiler/diff.h"
#include "test/profiler_synthetic.h"
#include "test/support/test_support.h"

namespace blockscope::profiler {
namespace {

using nlohmann::json;

// One attention forward per step, as a list of (op, kernel, device us) launches; `jitter`
// perturbs times by less than the diff's noise threshold.
Profile forward_profile(const std::string& label, const std::vector<std::tuple<std::string, std::string, double>>& launches,
                        int steps, uint64_t seed, double jitter) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(1.0 - jitter, 1.0 + jitter);
  testing::ProfileBuilder b(label);
  for (int step = 0; step < steps; ++step) {
    b.set_step(step);
    b.open("step " + std::to_string(step), "", true);
    b.open("attention", label);
    for (const auto& [op, kernel, us] : launches) {
      b.open(op);
      b.spend(5);
      b.kernel(kernel, us * noise(rng));
      b.close();
    }
    b.close();
    b.close();
  }
  b.set_active_steps(steps);
  return b.profile();
}

std::map<std::string, json> by_name(const json& rows) {
  std::map<std::string, json> out;
  for (const json& row : rows) out[row["name"].get<std::string>()] = row;
  return out;
}

TEST(Diff, NaiveToInplaceStory) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile before = forward_profile("naive",
                                         {{"batched_matmul", "gemm_qk", 300},
                                          {"scale", "scale_kernel", 100},
                                          {"masked_fill", "Memcpy DtoD", 80},
                                          {"masked_fill", "masked_fill_kernel", 90},
                                          {"softmax", "softmax_kernel", 400},
                                          {"batched_matmul", "gemm_pv", 300}},
                                         3, seed, 0.01);
  const Profile after = forward_profile("inplace",
                                        {{"batched_matmul", "gemm_qk", 300},
                                         {"scale", "scale_kernel", 100},
                                         {"masked_fill_", "masked_fill_kernel", 90},
                                         {"softmax", "softmax_kernel", 200},   // faster
                                         {"batched_matmul", "gemm_pv", 600},   // slower
                                         {"batched_matmul", "gemm_pv", 600},   // and twice
                                         {"rope", "rope_kernel", 10}},         // added
                                        2, seed + 1, 0.01);
  const json diff = json::parse(diff_profiles(before, after, Format::json));
  EXPECT_EQ(diff["before"], "naive");
  EXPECT_EQ(diff["after"], "inplace");
  auto kernels = by_name(diff["kernels"]);
  EXPECT_EQ(kernels["Memcpy DtoD"]["status"], "removed");
  EXPECT_EQ(kernels["rope_kernel"]["status"], "added");
  EXPECT_EQ(kernels["gemm_pv"]["status"], "count changed");
  EXPECT_EQ(kernels["softmax_kernel"]["status"], "faster");
  EXPECT_EQ(kernels["gemm_qk"]["status"], "same");
  EXPECT_EQ(kernels["scale_kernel"]["status"], "same");
  EXPECT_NEAR(kernels["softmax_kernel"]["ratio"].get<double>(), 0.5, 0.03);
  EXPECT_DOUBLE_EQ(kernels["gemm_pv"]["before"]["calls_per_step"].get<double>(), 1.0);  // per step, 3 steps
  EXPECT_DOUBLE_EQ(kernels["gemm_pv"]["after"]["calls_per_step"].get<double>(), 2.0);   // per step, 2 steps
  EXPECT_TRUE(kernels["Memcpy DtoD"]["ratio"].is_null());
  auto ops = by_name(diff["ops"]);
  EXPECT_EQ(ops["masked_fill"]["status"], "removed");
  EXPECT_EQ(ops["masked_fill_"]["status"], "added");
  EXPECT_EQ(ops["attention (naive)"]["status"], "removed");
  EXPECT_EQ(ops["attention (inplace)"]["status"], "added");
  EXPECT_EQ(ops["softmax"]["status"], "faster");
  EXPECT_EQ(ops["step *"]["status"], "slower");  // 1270 us -> 1990 us per step

  const std::string summary = diff["summary"];
  EXPECT_EQ(summary.rfind("kernels per step 6 → 7; removed: Memcpy DtoD ×1; added: rope_kernel ×1; "
                          "count changed: gemm_pv ×1 → ×2; device time per step ",
                          0),
            0u)
      << summary;

  const std::string text = diff_profiles(before, after, Format::table);
  EXPECT_NE(text.find(summary), std::string::npos) << text;
  EXPECT_NE(text.find("diff: naive → inplace"), std::string::npos) << text;
  const std::string csv = diff_profiles(before, after, Format::csv);
  EXPECT_NE(csv.find("kernel,Memcpy DtoD,removed,device,1,0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("kernel,softmax_kernel,faster,device,1,1,"), std::string::npos) << csv;
}

TEST(Diff, SlowerKernelAndIdenticalProfiles) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const Profile a = forward_profile("a", {{"linear", "gemm", 100}, {"add", "add_kernel", 20}}, 2, seed, 0.01);
  const Profile b = forward_profile("b", {{"linear", "gemm", 150}, {"add", "add_kernel", 20}}, 2, seed + 7, 0.01);
  auto kernels = by_name(json::parse(diff_profiles(a, b, Format::json))["kernels"]);
  EXPECT_EQ(kernels["gemm"]["status"], "slower");
  EXPECT_NEAR(kernels["gemm"]["ratio"].get<double>(), 1.5, 0.05);
  EXPECT_EQ(kernels["add_kernel"]["status"], "same");

  const json same = json::parse(diff_profiles(a, a, Format::json));
  for (const json& row : same["kernels"]) EXPECT_EQ(row["status"], "same") << row.dump();
  for (const json& row : same["ops"]) EXPECT_EQ(row["status"], "same") << row.dump();
  EXPECT_EQ(same["summary"].get<std::string>().rfind("kernels per step 2 → 2; device time per step", 0), 0u);
}

}  // namespace
}  // namespace blockscope::profiler
