#include "tools/cli/rank_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ops/catalogue/catalogue.h"
#include "profiler/summary.h"

namespace blockscope::cli {

namespace {

double per_step(double total, const profiler::Profile& p) { return p.active_steps > 0 ? total / p.active_steps : total; }

double median_of(std::vector<double> values) { return profiler::spread_of(std::move(values)).median; }

}  // namespace

bool is_collective_op(const std::string& name) {
  for (const ops::OpSpec& spec : ops::op_catalogue())
    if (spec.family == profiler::Family::collective && name == spec.name) return true;
  return false;
}

profiler::Rows rank_rows(const std::vector<profiler::Profile>& ranks) {
  profiler::Rows out;
  out.columns = {{"rank", "rank"},
                 {"step_us", "step (median)", false, "", [](const profiler::Row& r) { return profiler::format_time_us(r[1]); }},
                 {"compute_us", "compute/step", false, "", [](const profiler::Row& r) { return profiler::format_time_us(r[2]); }},
                 {"collective_us", "collectives/step", false, "",
                  [](const profiler::Row& r) { return profiler::format_time_us(r[3]); }},
                 {"collective_share", "collective %", false, "%.1f"},
                 {"collective_calls", "collective calls/step", false, "%.0f"},
                 {"bus_gbps", "bus GB/s", false, "%.3g"}};
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const profiler::Profile& p = ranks[rank];
    double device = 0, collective = 0, calls = 0, bytes = 0;
    for (const profiler::OpStats& s : profiler::op_stats(p, false)) {
      if (s.is_region) continue;
      device += s.self_device_us;
      if (is_collective_op(s.name)) {
        collective += s.device_total_us;
        calls += s.calls;
        bytes += s.bytes;
      }
    }
    const double step = median_of(profiler::step_times_us(p));
    const double collective_step = per_step(collective, p);
    out.rows.push_back({static_cast<int64_t>(rank), step, per_step(device, p) - collective_step, collective_step,
                        step > 0 ? 100.0 * collective_step / step : 0.0, per_step(calls, p),
                        collective > 0 ? bytes / (collective * 1e-6) / 1e9 : 0.0});
  }
  return out;
}

profiler::Rows merged_op_rows(const std::vector<profiler::Profile>& ranks) {
  struct Merged {
    double calls = 0;
    std::vector<double> device_us;  // per rank, per step
    int first = 0;
  };
  std::map<std::pair<std::string, std::string>, Merged> ops;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    for (const profiler::OpStats& s : profiler::op_stats(ranks[rank], false)) {
      if (s.is_region) continue;
      Merged& m = ops[{s.name, s.path}];
      if (rank == 0) {
        m.calls = per_step(s.calls, ranks[rank]);
        m.first = s.first_event;
      }
      m.device_us.resize(ranks.size(), 0.0);
      m.device_us[rank] = per_step(s.device_total_us, ranks[rank]);
    }
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Merged>> sorted(ops.begin(), ops.end());
  // The op the ranks spend longest in first.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return *std::max_element(a.second.device_us.begin(), a.second.device_us.end()) >
           *std::max_element(b.second.device_us.begin(), b.second.device_us.end());
  });
  profiler::Rows out;
  const auto time = [](size_t column) {
    return [column](const profiler::Row& r) { return profiler::format_time_us(r[column]); };
  };
  out.columns = {{"name", "Name", true},
                 {"path", "Path", true},
                 {"calls", "calls/step", false, "%.0f"},
                 {"median_us", "median across ranks", false, "", time(3)},
                 {"max_us", "max across ranks", false, "", time(4)},
                 {"slowest_rank", "slowest rank"}};
  for (const auto& [key, m] : sorted) {
    const auto slowest = std::max_element(m.device_us.begin(), m.device_us.end());
    out.rows.push_back({key.first, key.second, m.calls, median_of(m.device_us), *slowest,
                        static_cast<int64_t>(slowest - m.device_us.begin())});
  }
  return out;
}

std::string slowest_rank_line(const std::vector<profiler::Profile>& ranks) {
  std::vector<double> steps;
  for (const profiler::Profile& p : ranks) steps.push_back(median_of(profiler::step_times_us(p)));
  if (steps.empty()) return "";
  const auto slowest = std::max_element(steps.begin(), steps.end());
  const auto fastest = std::min_element(steps.begin(), steps.end());
  return fmt::format("slowest rank: {} (step median {}, {:.1f}% above the fastest, rank {})",
                     slowest - steps.begin(), profiler::format_time_us(*slowest),
                     *fastest > 0 ? 100.0 * (*slowest - *fastest) / *fastest : 0.0, fastest - steps.begin());
}

}  // namespace blockscope::cli
