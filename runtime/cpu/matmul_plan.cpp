#include "runtime/cpu/matmul_plan.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "runtime/cpu/machine_cache.h"

namespace blockscope::cpu {
namespace plan {
namespace {

// A candidate over this many times the best timing so far is not timed further (cut off).
constexpr double kCutOffRatio = 4.0;
// Timed runs stop when they add up to this (a 300 ms GEMM is timed once after its warm-up).
constexpr double kTimingBudgetUs = 100e3;

std::mutex g_penalty_mutex;
std::map<std::string, double> g_penalty_us;

double penalty_us(const std::string& candidate) {
  std::lock_guard<std::mutex> lock(g_penalty_mutex);
  const auto found = g_penalty_us.find(candidate);
  return found == g_penalty_us.end() ? 0.0 : found->second;
}

double elapsed_us(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// Where plans are kept between runs (cpu::machine_cache_path): BLOCKSCOPE_PLAN_CACHE, else
// cpu-gemm-plans.json beside the peak cache. Laid out as
//   { "<machine key>": { "<shape>": {"choice": "onednn.packed",
//                                    "timings_us": {"onednn.plain": 812.4, "onednn.packed": 640.9, ...},
//                                    "cut_off": ["builtin.sgemm"], "kernel": "brg:avx512_core_amx"}, ... }, ... }
std::string cache_path() { return machine_cache_path("BLOCKSCOPE_PLAN_CACHE", "cpu-gemm-plans.json"); }

std::string this_machine() { return machine_key(omp_get_max_threads()); }

// Whether `cache` is a plan cache, as write_cached writes one: every key a machine key
// (cpu::is_machine_key: a tsconfig.json's "compilerOptions" is not; neither is a peak cache's
// "... | N threads | f32") and every machine's value an object of shapes. The entries are not
// checked here: a damaged one is timed again and replaced (parse).
bool is_plan_cache(const nlohmann::json& cache) {
  for (const auto& [machine, plans] : cache.items()) {
    if (!is_machine_key(machine) || !plans.is_object()) return false;
  }
  return true;
}

// A cached plan, or false where the entry does not hold together: a timing that is not a
// positive finite number, a candidate both timed and cut off, a choice that is not the fastest
// of its own timings, or (given `candidates`) another candidate set than this run's. Such an
// entry is damaged, hand-edited or made under another cpu.gemm: timed anew.
bool parse(const nlohmann::json& entry, const std::vector<std::string>* candidates, MatmulPlan* plan) {
  if (!entry.is_object()) return false;
  const nlohmann::json choice = entry.value("choice", nlohmann::json());
  const nlohmann::json timings = entry.value("timings_us", nlohmann::json());
  const nlohmann::json cut_off = entry.value("cut_off", nlohmann::json::array());
  if (!choice.is_string() || !timings.is_object() || timings.empty() || !cut_off.is_array()) return false;
  MatmulPlan out;
  std::vector<std::string> names;
  for (const auto& [name, us] : timings.items()) {
    if (!us.is_number() || !std::isfinite(us.get<double>()) || us.get<double>() <= 0 || us.get<double>() >= 1e9)
      return false;
    out.timings_us[name] = us.get<double>();
    names.push_back(name);
  }
  for (const nlohmann::json& name : cut_off) {
    if (!name.is_string() || out.timings_us.count(name.get<std::string>()) > 0) return false;
    out.cut_off.push_back(name.get<std::string>());
    names.push_back(name.get<std::string>());
  }
  const auto fastest = std::min_element(out.timings_us.begin(), out.timings_us.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  if (fastest->first != choice.get<std::string>()) return false;
  if (candidates != nullptr) {
    std::vector<std::string> want = *candidates;
    std::sort(want.begin(), want.end());
    std::sort(names.begin(), names.end());
    if (names != want) return false;
  }
  out.choice = fastest->first;
  *plan = out;
  return true;
}

}  // namespace

MatmulPlan time_candidates(const std::vector<Candidate>& candidates) {
  MatmulPlan plan;
  double best = std::numeric_limits<double>::infinity();
  for (const Candidate& candidate : candidates) {
    const double penalty = penalty_us(candidate.name);
    const auto too_slow = [&](double us) { return us + penalty > kCutOffRatio * best; };
    if (candidate.probe && std::isfinite(best)) {
      candidate.probe();  // its first call's setup (JIT, buffers) is not timed
      const auto start = std::chrono::steady_clock::now();
      candidate.probe();
      if (too_slow(elapsed_us(start) * candidate.probe_scale)) {
        plan.cut_off.push_back(candidate.name);
        continue;
      }
    }
    auto start = std::chrono::steady_clock::now();
    candidate.run();  // warm-up: caches, page faults, a library's first-call setup (oneDNN's JIT)
    double us = std::numeric_limits<double>::infinity();
    if (too_slow(elapsed_us(start))) {  // slow, or a first call's setup: a second run decides
      start = std::chrono::steady_clock::now();
      candidate.run();
      us = elapsed_us(start);
      if (too_slow(us)) {
        plan.cut_off.push_back(candidate.name);
        continue;
      }
    }
    // Best of 3 timed runs, or of as many as fit in kTimingBudgetUs (at least one).
    double spent = 0;
    for (int rep = 0; rep < 3 && spent < kTimingBudgetUs; ++rep) {
      start = std::chrono::steady_clock::now();
      candidate.run();
      const double t = elapsed_us(start);
      us = std::min(us, t);
      spent += t;
    }
    plan.timings_us[candidate.name] = us + penalty;
    best = std::min(best, us + penalty);
  }
  plan.choice = std::min_element(plan.timings_us.begin(), plan.timings_us.end(), [](const auto& a, const auto& b) {
                  return a.second < b.second;
                })->first;
  plan.reason = "timed";
  return plan;
}

bool read_cached(const std::string& shape, const std::vector<std::string>& candidates, MatmulPlan* plan) {
  const std::string path = cache_path(), machine = this_machine();
  const nlohmann::json cache = read_machine_cache(path);
  if (!cache.is_object() || !cache.contains(machine) || !cache[machine].is_object() || !cache[machine].contains(shape) ||
      !parse(cache[machine][shape], &candidates, plan)) {
    return false;
  }
  plan->reason = "cached";
  plan->cache_path = path;
  return true;
}

void write_cached(const std::string& shape, const std::string& kernel, MatmulPlan* plan) {
  const std::string path = cache_path(), machine = this_machine();
  if (path.empty()) return;
  const nlohmann::json saved = {
      {"choice", plan->choice}, {"timings_us", plan->timings_us}, {"cut_off", plan->cut_off}, {"kernel", kernel}};
  if (update_machine_cache(path, "GEMM plan cache", is_plan_cache, [&](nlohmann::json& all) {
        if (!all[machine].is_object()) all[machine] = nlohmann::json::object();
        all[machine][shape] = saved;
      })) {
    plan->cache_path = path;
  }
}

void set_penalty_us(const std::string& candidate, double microseconds) {
  std::lock_guard<std::mutex> lock(g_penalty_mutex);
  g_penalty_us[candidate] = microseconds;
}

}  // namespace plan

CachedPlans cached_matmul_plans() {
  CachedPlans out;
  out.path = plan::cache_path();
  out.machine = plan::this_machine();
  const nlohmann::json cache = read_machine_cache(out.path);
  if (!cache.is_object()) return out;
  for (const auto& [machine, plans] : cache.items()) {
    if (machine != out.machine) {
      ++out.other_machines;
      continue;
    }
    if (!plans.is_object()) continue;
    for (const auto& [shape, entry] : plans.items()) {
      CachedPlan row;
      row.shape = shape;
      if (!plan::parse(entry, nullptr, &row.plan)) {
        ++out.damaged;
        continue;
      }
      row.plan.reason = "cached";
      row.plan.cache_path = out.path;
      const nlohmann::json kernel = entry.value("kernel", nlohmann::json());
      if (kernel.is_string()) row.kernel = kernel.get<std::string>();
      out.plans.push_back(row);
    }
  }
  return out;
}

}  // namespace blockscope::cpu
