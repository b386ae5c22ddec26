// Profile diff on synthetic profiles with known changes: added, removed, count changed,
// faster, slower and unchanged kernels and ops; the summary line; CSV and JSON forms.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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
                                        3, seed + 1, 0.01);
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
  EXPECT_DOUBLE_EQ(kernels["gemm_pv"]["after"]["calls_per_step"].get<double>(), 2.0);   // per step, 3 steps
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
  // Three steps a side: the fewest the diff calls a change from (reliability_test: Diff.*).
  const Profile a = forward_profile("a", {{"linear", "gemm", 100}, {"add", "add_kernel", 20}}, 3, seed, 0.01);
  const Profile b = forward_profile("b", {{"linear", "gemm", 150}, {"add", "add_kernel", 20}}, 3, seed + 7, 0.01);
  auto kernels = by_name(json::parse(diff_profiles(a, b, Format::json))["kernels"]);
  EXPECT_EQ(kernels["gemm"]["status"], "slower");
  EXPECT_NEAR(kernels["gemm"]["ratio"].get<double>(), 1.5, 0.05);
  EXPECT_EQ(kernels["add_kernel"]["status"], "same");

  const json same = json::parse(diff_profiles(a, a, Format::json));
  for (const json& row : same["kernels"]) EXPECT_EQ(row["status"], "same") << row.dump();
  for (const json& row : same["ops"]) EXPECT_EQ(row["status"], "same") << row.dump();
  EXPECT_EQ(same["summary"].get<std::string>().rfind("kernels per step 2 → 2; device time per step", 0), 0u);
}

// Noise: whenever the two sides' per-step times overlap, a change (even one above 5%) is
// "within noise", never faster or slower; profiles of the same work on a noisy machine (±40%
// per step) show it.
TEST(Diff, AChangeWithinTheNoiseIsNeverFasterOrSlower) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  int within = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const Profile a = forward_profile("same", {{"linear", "gemm", 100}, {"add", "add_kernel", 40}}, 5, seed + trial, 0.4);
    const Profile b = forward_profile("same", {{"linear", "gemm", 100}, {"add", "add_kernel", 40}}, 5, seed + 100 + trial, 0.4);
    const json diff = json::parse(diff_profiles(a, b, Format::json));
    for (const char* part : {"kernels", "ops"}) {
      for (const json& row : diff[part]) {
        const std::string status = row["status"];
        const std::string measure = row["compared"] == "device" ? "device_us_steps" : "cpu_us_steps";
        const std::vector<double> before = row["before"][measure], after = row["after"][measure];
        ASSERT_EQ(before.size(), 5u) << row.dump();
        ASSERT_EQ(after.size(), 5u) << row.dump();
        const bool overlap = *std::min_element(before.begin(), before.end()) <= *std::max_element(after.begin(), after.end()) &&
                             *std::min_element(after.begin(), after.end()) <= *std::max_element(before.begin(), before.end());
        if (overlap) {
          EXPECT_TRUE(status == "same" || status == "within noise") << row.dump();
        }
        within += status == "within noise";
      }
    }
  }
  EXPECT_GT(within, 0) << "±40% steps should differ by more than 5% somewhere in 20 trials";
  // Steady steps (±1%): a 30% change clears the spread.
  const Profile a = forward_profile("same", {{"linear", "gemm", 100}}, 5, seed, 0.01);
  const Profile b = forward_profile("same", {{"linear", "gemm", 130}}, 5, seed + 1, 0.01);
  EXPECT_EQ(by_name(json::parse(diff_profiles(a, b, Format::json))["kernels"])["gemm"]["status"], "slower");
  // +20% on steps that vary from 60 to 170 us: 4 standard errors are 88 us, so within noise,
  // and the text diff says the profiles are noisy.
  const auto steps_profile = [](const std::vector<double>& times) {
    testing::ProfileBuilder builder("same");
    for (size_t step = 0; step < times.size(); ++step) {
      builder.set_step(static_cast<int>(step));
      builder.open("step " + std::to_string(step), "", true);
      builder.open("linear");
      builder.kernel("gemm", times[step]);
      builder.close();
      builder.close();
    }
    builder.set_active_steps(static_cast<int>(times.size()));
    return builder.profile();
  };
  const Profile noisy_a = steps_profile({60, 140, 100, 70, 130}), noisy_b = steps_profile({80, 170, 120, 90, 140});
  const json diff = json::parse(diff_profiles(noisy_a, noisy_b, Format::json));
  EXPECT_EQ(by_name(diff["kernels"])["gemm"]["status"], "within noise");
  EXPECT_NE(diff["summary"].get<std::string>().find("within noise"), std::string::npos);
  const std::string text = diff_profiles(noisy_a, noisy_b, Format::table);
  EXPECT_NE(text.find("noisy: 'same' varies by CV"), std::string::npos) << text;
  // The same +20% on steady steps is slower.
  EXPECT_EQ(by_name(json::parse(diff_profiles(steps_profile({100, 101, 99, 100, 100}),
                                              steps_profile({120, 121, 119, 120, 120}), Format::json))["kernels"])["gemm"]
                ["status"],
            "slower");
}

}  // namespace
}  // namespace blockscope::profiler
