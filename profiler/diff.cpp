#include "profiler/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"

namespace blockscope::profiler {

namespace {

// A change smaller than both of these is "same". A larger one is called faster or slower only
// when the two sides' per-step times do not overlap (every step of one side is faster than
// every step of the other); otherwise it is "within noise". The rule needs no model of the
// noise: for the same work measured twice, n steps a side overlap except with odds
// 2 / C(2n, n) — 0.8% per row at 5 steps, 1e-5 at 10 (profile.active).
constexpr double kRelativeThreshold = 0.05;  // 5 %
constexpr double kAbsoluteThresholdUs = 1.0;  // per step

// Fewer steps than this on a side and no change is called faster or slower: two identical
// decode runs of 2 active steps a side diffed as "decode_step faster 0.72x" (issue 43) — with
// 2 steps a side, the same work fails to overlap one time in three.
constexpr int kMinStepsForVerdict = 3;

// True when every sample of one side is below every sample of the other, and the medians are
// further apart than the noise threshold the samples themselves give: the two sides' ranges
// (max − min) added, so a change no larger than the steps' own spread is never called. For
// identical work jittering ±20 % (uniform), 5 steps a side, that leaves a verdict in 4.9e-4 of
// rows (the larger range alone: once in 200); reliability_test holds it to that rate.
bool outside_noise(const std::vector<double>& a, const std::vector<double>& b) {
  const Spread sa = spread_of(a), sb = spread_of(b);
  if (sa.samples < kMinStepsForVerdict || sb.samples < kMinStepsForVerdict) return false;  // no spread to trust
  const double noise = (sa.max - sa.min) + (sb.max - sb.min);
  return (sa.max < sb.min || sb.max < sa.min) && std::fabs(sa.median - sb.median) > noise;
}

// Per-step figures of one op (name + path, scope-less) or one kernel name in one profile.
struct Side {
  double calls_per_step = 0;
  double cpu_us_per_step = 0;
  double device_us_per_step = 0;
  std::vector<double> cpu_steps, device_steps;  // the time in each kept step
};

// Position of each kept step number in kept_steps().
std::map<int, size_t> step_positions(const Profile& profile) {
  std::map<int, size_t> positions;
  for (int step : kept_steps(profile)) positions.emplace(step, positions.size());
  return positions;
}

struct DiffRow {
  std::string kind;  // "kernel" or "op"
  std::string name;  // kernel name, or "softmax" / "linear (epilogue)"
  Side before, after;
  bool use_device = true;  // compare device time (else CPU time: ops with no kernels)
  std::string status;      // added, removed, count changed, faster, slower, same
  double before_us() const { return use_device ? before.device_us_per_step : before.cpu_us_per_step; }
  double after_us() const { return use_device ? after.device_us_per_step : after.cpu_us_per_step; }
  const std::vector<double>& before_steps() const { return use_device ? before.device_steps : before.cpu_steps; }
  const std::vector<double>& after_steps() const { return use_device ? after.device_steps : after.cpu_steps; }
  // Only where the op or kernel ran on both sides: added and removed rows have no ratio.
  double ratio() const {
    return before.calls_per_step > 0 && after.calls_per_step > 0 && before_us() > 0 ? after_us() / before_us() : NAN;
  }
};

// "softmax", or "linear (epilogue)" when the op has a path.
std::string op_key(const std::string& name, const std::string& path) { return path.empty() ? name : name + " (" + path + ")"; }
std::string op_key(const OpStats& stats) { return op_key(stats.name, stats.path); }

double steps_of(const Profile& profile) { return std::max(1, profile.active_steps); }

void classify(DiffRow* row) {
  if (row->before.calls_per_step == 0) row->status = "added";
  else if (row->after.calls_per_step == 0) row->status = "removed";
  else if (std::fabs(row->before.calls_per_step - row->after.calls_per_step) > 1e-9) row->status = "count changed";
  else {
    const double delta = row->after_us() - row->before_us();
    const bool significant = std::fabs(delta) > kAbsoluteThresholdUs &&
                             std::fabs(delta) > kRelativeThreshold * std::max(row->before_us(), row->after_us());
    const bool noise = !outside_noise(row->before_steps(), row->after_steps());
    row->status = !significant ? "same" : noise ? "within noise" : delta < 0 ? "faster" : "slower";
  }
}

// Rows ordered by what matters most: structural changes first, then the largest time change.
int status_rank(const std::string& status) {
  if (status == "removed") return 0;
  if (status == "added") return 1;
  if (status == "count changed") return 2;
  if (status == "slower") return 3;
  if (status == "faster") return 4;
  if (status == "within noise") return 5;
  return 6;
}

void sort_rows(std::vector<DiffRow>* rows) {
  std::stable_sort(rows->begin(), rows->end(), [](const DiffRow& a, const DiffRow& b) {
    if (status_rank(a.status) != status_rank(b.status)) return status_rank(a.status) < status_rank(b.status);
    return std::fabs(a.after_us() - a.before_us()) > std::fabs(b.after_us() - b.before_us());
  });
}

// A PyTorch CPU trace has no device timeline (Profile::host_ops_only): against it, kernels are not
// compared (every work item would read "removed") and ops and steps compare on CPU time.
bool device_comparable(const Profile& before, const Profile& after) { return !before.host_ops_only && !after.host_ops_only; }

std::vector<DiffRow> kernel_rows(const Profile& before, const Profile& after) {
  if (!device_comparable(before, after)) return {};
  std::map<std::string, DiffRow> rows;
  std::vector<std::string> order;
  const auto add = [&](const Profile& profile, bool is_after) {
    const std::map<int, size_t> positions = step_positions(profile);
    for (const KernelStats& k : kernel_stats(profile)) {
      auto [it, inserted] = rows.try_emplace(k.name);
      if (inserted) order.push_back(k.name);
      it->second.kind = "kernel";
      it->second.name = k.name;
      Side& side = is_after ? it->second.after : it->second.before;
      side.calls_per_step = k.calls / steps_of(profile);
      side.device_us_per_step = k.total_us / steps_of(profile);
      side.device_steps.assign(positions.size(), 0.0);
    }
    for (const KernelEvent& kernel : profile.kernels) {
      const auto position = positions.find(kernel.step);
      if (position == positions.end()) continue;
      Side& side = is_after ? rows[kernel.name].after : rows[kernel.name].before;
      side.device_steps[position->second] += kernel_duration_us(kernel);
    }
  };
  add(before, false);
  add(after, true);
  std::vector<DiffRow> out;
  for (const std::string& name : order) {
    classify(&rows[name]);
    out.push_back(rows[name]);
  }
  sort_rows(&out);
  return out;
}

std::vector<DiffRow> op_rows(const Profile& before, const Profile& after) {
  std::map<std::string, DiffRow> rows;
  std::vector<std::string> order;
  const auto add = [&](const Profile& profile, bool is_after) {
    const std::map<int, size_t> positions = step_positions(profile);
    for (const OpStats& s : op_stats(profile, false)) {
      const std::string key = op_key(s);
      auto [it, inserted] = rows.try_emplace(key);
      if (inserted) order.push_back(key);
      it->second.kind = s.is_region ? "region" : "op";
      it->second.name = key;
      Side& side = is_after ? it->second.after : it->second.before;
      side.calls_per_step = s.calls / steps_of(profile);
      side.cpu_us_per_step = s.cpu_total_us / steps_of(profile);
      side.device_us_per_step = s.device_total_us / steps_of(profile);
      side.cpu_steps.assign(positions.size(), 0.0);
      side.device_steps.assign(positions.size(), 0.0);
    }
    // Per-step times, summed over the calls in each step the same way op_stats sums them.
    const EventTimes times = event_times(profile);
    for (size_t i = 0; i < profile.ops.size(); ++i) {
      const OpEvent& event = profile.ops[i];
      const auto position = positions.find(event.step);
      if (position == positions.end()) continue;
      DiffRow& row = rows[op_key(row_name(event), event.path)];
      Side& side = is_after ? row.after : row.before;
      side.cpu_steps[position->second] += event.cpu_end_us - event.cpu_start_us;
      side.device_steps[position->second] += times.device_total_us[i];
    }
  };
  add(before, false);
  add(after, true);
  std::vector<DiffRow> out;
  for (const std::string& key : order) {
    DiffRow& row = rows[key];
    // Device time where both sides launched work, CPU time otherwise (regions with no kernels).
    row.use_device = device_comparable(before, after) && (row.before.device_us_per_step > 0 || row.after.device_us_per_step > 0);
    classify(&row);
    out.push_back(row);
  }
  sort_rows(&out);
  return out;
}

std::string count_str(double count) { return fmt::format("{:g}", count); }

std::string ratio_str(double ratio) { return std::isfinite(ratio) ? fmt::format("{:.2f}x", ratio) : std::string("-"); }

// "kernels per step 6 → 5; removed: copy_kernel ×1; device time per step 1.955ms → 1.650ms (0.84x)"
// Each kept step's CPU time: its "step N" region's span on the host.
std::vector<double> step_cpu_times_us(const Profile& profile) {
  std::vector<double> out;
  for (const OpEvent& event : profile.ops)
    if (is_step_region(event)) out.push_back(event.cpu_end_us - event.cpu_start_us);
  return out;
}

// "kernels per step 6 → none recorded ('PyTorch trace t.json' records host ops only); CPU time per
// step 1.955ms → 1.650ms (0.84x)": against a PyTorch CPU trace the steps' host time is what compares.
std::string host_summary_line(const Profile& before, const Profile& after) {
  const auto kernels = [](const Profile& p) {
    return p.host_ops_only ? std::string("none recorded") : count_str(p.kernels.size() / steps_of(p));
  };
  const Profile& host_only = before.host_ops_only ? before : after;
  const std::vector<double> was = step_cpu_times_us(before), now = step_cpu_times_us(after);
  const double before_time = spread_of(was).mean, after_time = spread_of(now).mean;
  std::string line = fmt::format("kernels per step {} → {} ('{}' records host ops only); CPU time per step {} → {}",
                                 kernels(before), kernels(after), host_only.label, format_time_us(before_time),
                                 format_time_us(after_time));
  if (before_time > 0) line += fmt::format(" ({}{})", ratio_str(after_time / before_time), outside_noise(was, now) ? "" : ", within noise");
  return line;
}

std::string summary_line(const Profile& before, const Profile& after, const std::vector<DiffRow>& kernels) {
  if (!device_comparable(before, after)) return host_summary_line(before, after);
  const double before_count = before.kernels.size() / steps_of(before);
  const double after_count = after.kernels.size() / steps_of(after);
  std::string line = fmt::format("kernels per step {} → {}", count_str(before_count), count_str(after_count));
  std::vector<std::string> removed, added, changed;
  for (const DiffRow& row : kernels) {
    if (row.status == "removed") removed.push_back(fmt::format("{} ×{}", row.name, count_str(row.before.calls_per_step)));
    if (row.status == "added") added.push_back(fmt::format("{} ×{}", row.name, count_str(row.after.calls_per_step)));
    if (row.status == "count changed") {
      changed.push_back(fmt::format("{} ×{} → ×{}", row.name, count_str(row.before.calls_per_step),
                                    count_str(row.after.calls_per_step)));
    }
  }
  const auto list = [](const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
    return out;
  };
  if (!removed.empty()) line += "; removed: " + list(removed);
  if (!added.empty()) line += "; added: " + list(added);
  if (!changed.empty()) line += "; count changed: " + list(changed);
  const double before_time = total_kernel_us(before) / steps_of(before);
  const double after_time = total_kernel_us(after) / steps_of(after);
  line += fmt::format("; device time per step {} → {}", format_time_us(before_time), format_time_us(after_time));
  const bool noise = !outside_noise(step_times_us(before), step_times_us(after));
  if (before_time > 0) line += fmt::format(" ({}{})", ratio_str(after_time / before_time), noise ? ", within noise" : "");
  return line;
}

// "noisy: ..." for each profile whose steps vary by more than kNoisyCv, "too few steps: ..."
// for one with fewer than kMinStepsForVerdict.
std::vector<std::string> noise_warnings(const Profile& before, const Profile& after) {
  std::vector<std::string> lines;
  for (const Profile* p : {&before, &after}) {
    const Spread s = spread_of(step_times_us(*p));
    if (s.samples < kMinStepsForVerdict) {
      lines.push_back(fmt::format("too few steps: '{}' kept {} active step{}; with fewer than {} a side no change is "
                                  "called faster or slower (raise profile.schedule.active; 5 or more)",
                                  p->label, s.samples, s.samples == 1 ? "" : "s", kMinStepsForVerdict));
    }
    if (s.cv() > kNoisyCv) {
      lines.push_back(fmt::format("noisy: '{}' varies by CV {:.0f}% between steps (min {}, max {}): changes inside "
                                  "that spread are called within noise",
                                  p->label, 100.0 * s.cv(), format_time_us(s.min), format_time_us(s.max)));
    }
  }
  return lines;
}

nlohmann::json row_json(const DiffRow& row) {
  const auto side = [&](const Side& s) {
    return nlohmann::json{{"calls_per_step", s.calls_per_step},
                          {"cpu_us_per_step", s.cpu_us_per_step},
                          {"device_us_per_step", s.device_us_per_step},
                          {"cpu_us_steps", s.cpu_steps},
                          {"device_us_steps", s.device_steps}};
  };
  const double ratio = row.ratio();
  return {{"kind", row.kind},
          {"name", row.name},
          {"status", row.status},
          {"compared", row.use_device ? "device" : "cpu"},
          {"before", side(row.before)},
          {"after", side(row.after)},
          {"ratio", std::isfinite(ratio) ? nlohmann::json(ratio) : nlohmann::json()}};
}

// Kernels and ops in one table; `kind` says which. The text view shows one kind per table
// (the title names it), calls "6 → 5" when they changed and the ratio with "(cpu)" when the
// CPU time was compared.
Rows diff_table(const std::vector<DiffRow>& kernels, const std::vector<DiffRow>& ops) {
  using nlohmann::json;
  Rows table;
  table.columns = {
      {"kind", "", false, "", nullptr, false},
      {"name", "Name", true},
      {"status", "Status", true},
      {"compared", "", false, "", nullptr, false},
      {"calls_per_step_before", "", false, "", nullptr, false},
      {"calls_per_step_after", "Calls/step", false, "",
       [](const Row& r) {
         const double before = r[4].get<double>(), after = r[5].get<double>();
         return before == after ? count_str(after) : count_str(before) + " → " + count_str(after);
       }},
      {"us_per_step_before", "Time/step before", false, "",
       [](const Row& r) { return r[4].get<double>() > 0 ? format_time_us(r[6].get<double>()) : std::string("-"); }},
      {"us_per_step_after", "Time/step after", false, "",
       [](const Row& r) { return r[5].get<double>() > 0 ? format_time_us(r[7].get<double>()) : std::string("-"); }},
      {"ratio", "Ratio", false, "",
       [](const Row& r) {
         return ratio_str(r[8].is_null() ? NAN : r[8].get<double>()) + (r[3] == "device" ? "" : " (cpu)");
       }},
  };
  for (const auto* rows : {&kernels, &ops}) {
    for (const DiffRow& row : *rows) {
      const double ratio = row.ratio();
      table.rows.push_back({row.kind, row.name, row.status, row.use_device ? "device" : "cpu",
                            row.before.calls_per_step, row.after.calls_per_step, row.before_us(), row.after_us(),
                            std::isfinite(ratio) ? json(ratio) : json()});
    }
  }
  return table;
}

// The kernel rows, or the op and region rows, titled for the text view.
std::string render_part(const Rows& all, bool kernels, const std::string& title, const TextLayout& layout) {
  Rows part;
  part.columns = all.columns;
  part.columns[1].title = title;
  for (const Row& row : all.rows)
    if ((row[0] == "kernel") == kernels) part.rows.push_back(row);
  return render(part, Format::table, layout);
}

}  // namespace

std::vector<std::string> profile_mismatches(const Profile& before, const Profile& after) {
  std::vector<std::string> lines;
  const auto compare = [&](const std::string& a, const std::string& b, const char* what) {
    if (!a.empty() && !b.empty() && a != b) {
      lines.push_back(std::string("the profiles measured different ") + what + ": '" + a + "' and '" + b + "'");
    }
  };
  compare(before.workload, after.workload, "workloads");
  compare(before.device, after.device, "devices");
  compare(before.dtype, after.dtype, "dtypes");
  if (before.simulated != after.simulated) {
    lines.push_back("one profile was measured on the simulated GPU, the other was not: their times do not compare");
  }
  if (before.ranks != after.ranks) {  // TP = 1 against TP = N: said, not refused (that is the point)
    const auto split = [](const Profile& p) {
      return p.ranks > 1 ? "rank " + std::to_string(p.rank) + " of " + std::to_string(p.ranks) + " (tensor parallel)"
                         : std::string("unsplit");
    };
    lines.push_back("the profiles split the workload differently: before " + split(before) + ", after " + split(after) +
                    " — a rank computes its share of every op and adds the all-reduces");
  }
  return lines;
}

Rows diff_table_rows(const Profile& before, const Profile& after) {
  return diff_table(kernel_rows(before, after), op_rows(before, after));
}

namespace {

// "predicted on h100-sxm (gpu-model 1): step 51.4us → 14.4us (0.28x), kernels 6 → 1" when both
// profiles carry a prediction for the same GPU (profile --predict); "" otherwise.
std::string predicted_line(const Profile& before, const Profile& after) {
  const nlohmann::json& b = before.prediction;
  const nlohmann::json& a = after.prediction;
  if (!b.is_object() || !a.is_object() || b.value("target", "") != a.value("target", "")) return "";
  const double was = b.value("step_us", 0.0), now = a.value("step_us", 0.0);
  return fmt::format("predicted on {} ({}): step {} → {} ({:.2f}x), kernels {} → {}; predicted, not measured",
                     a.value("target", ""), a.value("model_version", ""), format_time_us(was), format_time_us(now),
                     was > 0 ? now / was : 0.0, b.value("launches", 0), a.value("launches", 0));
}

}  // namespace

std::string diff_profiles(const Profile& before, const Profile& after, Format format, const TextLayout& layout) {
  const std::vector<std::string> mismatches = profile_mismatches(before, after);
  const std::vector<DiffRow> kernels = kernel_rows(before, after);
  const std::vector<DiffRow> ops = op_rows(before, after);
  const std::string summary = summary_line(before, after, kernels);

  if (format == Format::json) {
    nlohmann::json out = {{"before", before.label}, {"after", after.label}, {"summary", summary},
                          {"simulated", before.simulated || after.simulated}, {"warnings", mismatches},
                          {"notes", {{"before", before.notes}, {"after", after.notes}}}};
    if (const std::string predicted = predicted_line(before, after); !predicted.empty()) {
      out["predicted"] = {{"line", predicted}, {"before_step_us", before.prediction["step_us"]},
                          {"after_step_us", after.prediction["step_us"]}, {"target", after.prediction["target"]}};
    }
    out["kernels"] = nlohmann::json::array();
    for (const DiffRow& row : kernels) out["kernels"].push_back(row_json(row));
    out["ops"] = nlohmann::json::array();
    for (const DiffRow& row : ops) out["ops"].push_back(row_json(row));
    return out.dump(2) + "\n";
  }
  const Rows table = diff_table(kernels, ops);
  if (format == Format::csv) return render(table, format);
  // The lines above the tables, wrapped to the tables' width.
  std::string head = fmt::format("diff: {} → {}\n{}\n", before.label.empty() ? "before" : before.label,
                                 after.label.empty() ? "after" : after.label, summary);
  if (const std::string predicted = predicted_line(before, after); !predicted.empty()) head += predicted + "\n";
  std::string notes;
  for (const std::string& line : mismatches) notes += "warning: " + line + "\n";
  for (const std::string& line : noise_warnings(before, after)) notes += line + "\n";
  for (const Profile* p : {&before, &after})
    for (const std::string& line : p->notes) notes += "note ('" + p->label + "'): " + line + "\n";
  if (before.simulated || after.simulated) {
    notes += "SIMULATED GPU: kernel counts and names are what a GPU launches; times, faster and slower are the "
             "simulator's, not a GPU's\n";
  }
  std::string out = wrap_text(head, layout.max_width) + "\n";
  if (!notes.empty()) out += wrap_text(notes, layout.max_width) + "\n";
  if (device_comparable(before, after)) out += render_part(table, true, "Kernel", layout) + "\n";
  out += render_part(table, false, "Op / region", layout);
  return out;
}

}  // namespace blockscope::profiler
