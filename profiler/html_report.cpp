#include "profiler/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "blockscope_report_assets.h"  // kReportCss, kReportJs: profiler/report/, inlined by CMake
#include "profiler/diff.h"
#include "profiler/render.h"
#include "profiler/report_charts.h"
#include "profiler/summary.h"
#include "profiler/verdicts.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

namespace {

using nlohmann::json;
using report::colour;
using report::datum;
using report::esc;
using report::extent;
using report::icicle_svg;
using report::memory_svg;
using report::px;
using report::roofline_svg;
using report::steps_svg;
using report::swatch;
using report::timeline_svg;

// ---- Diffs ----------------------------------------------------------------------------------

// Per-op and per-kernel before/after bars of `after` against `before`, each with the min-max
// band of its per-step times (the noise the status line judged against), the biggest changes
// first.
std::string diff_html(const Profile& before, const Profile& after, size_t variant) {
  const json diff = json::parse(diff_profiles(before, after, Format::json));
  std::string out = fmt::format("<h3>{}{} → {}{}</h3>\n<p class=\"diff-summary\">{}</p>\n", swatch(0), esc(before.label),
                                swatch(variant), esc(after.label), esc(diff["summary"].get<std::string>()));
  for (const json& warning : diff["warnings"]) out += "<p class=\"warning\">" + esc(warning.get<std::string>()) + "</p>\n";
  std::vector<const json*> rows;
  for (const char* kind : {"kernels", "ops"})
    for (const json& row : diff[kind]) rows.push_back(&row);
  const auto us = [](const json& side, const std::string& compared) {
    return side[compared == "device" ? "device_us_per_step" : "cpu_us_per_step"].get<double>();
  };
  const auto steps = [](const json& side, const std::string& compared) {
    return side[compared == "device" ? "device_us_steps" : "cpu_us_steps"].get<std::vector<double>>();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const json* a, const json* b) {
    const std::string ca = (*a)["compared"], cb = (*b)["compared"];
    return std::fabs(us((*a)["after"], ca) - us((*a)["before"], ca)) > std::fabs(us((*b)["after"], cb) - us((*b)["before"], cb));
  });
  if (rows.size() > 16) rows.resize(16);
  double longest = 0;
  for (const json* row : rows) {
    const std::string compared = (*row)["compared"];
    for (const char* side : {"before", "after"}) {
      longest = std::max(longest, us((*row)[side], compared));
      for (const double t : steps((*row)[side], compared)) longest = std::max(longest, t);
    }
  }
  if (rows.empty() || longest <= 0) return out;
  const double W = 620, left = 330, bar = 9;
  std::string svg = fmt::format("<svg class=\"diff\" data-variant=\"{}\" width=\"{}\" height=\"{}\">\n", variant,
                                left + W + 120, px(rows.size() * (2 * bar + 8) + 4));
  for (size_t r = 0; r < rows.size(); ++r) {
    const json& row = *rows[r];
    const std::string compared = row["compared"];
    const double y = r * (2 * bar + 8);
    const std::string status = row["status"];
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} {}{}</text>\n", px(left - 8), px(y + bar + 4),
                       row["kind"] == "kernel" ? "kernel" : "op", esc(row["name"].get<std::string>()),
                       compared == "device" ? "" : " (cpu)");
    size_t side_index = 0;
    for (const char* side : {"before", "after"}) {
      const double value = us(row[side], compared);
      const std::vector<double> samples = steps(row[side], compared);
      const double top = y + side_index * bar;
      svg += fmt::format("<rect class=\"diff-bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" style=\"fill:{}\" "
                         "data-tip=\"{}\"/>\n",
                         px(left), px(top), extent(value / longest * W), px(bar - 1), side_index == 0 ? "#999" : colour(variant),
                         esc(fmt::format("{} {}: {} per step ({} calls per step){}", side, row["name"].get<std::string>(),
                                         format_time_us(value), row[side]["calls_per_step"].get<double>(),
                                         side_index == 1 ? "; " + status : std::string())));
      if (samples.size() >= 2) {
        const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
        svg += fmt::format("<line class=\"noise\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", px(left + *lo / longest * W),
                           px(left + *hi / longest * W), px(top + bar / 2 - 0.5));
      }
      ++side_index;
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", px(left + W + 6), px(y + bar + 4), esc(status));
  }
  return out + svg + "</svg>\n";
}

// ---- Tables ---------------------------------------------------------------------------------

// The rows with the text tables' cells; each cell's data-v holds its value for sorting.
std::string html_table(const Rows& rows, const std::string& css_class, size_t variant) {
  std::vector<size_t> shown;
  for (size_t c = 0; c < rows.columns.size(); ++c)
    if (rows.columns[c].in_text) shown.push_back(c);
  std::string out = fmt::format("<div class=\"scroll\"><table class=\"sortable {}\" data-variant=\"{}\"><thead><tr>", css_class, variant);
  for (const size_t c : shown) out += "<th data-key=\"" + esc(rows.columns[c].key) + "\">" + esc(rows.columns[c].title) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const Row& row : rows.rows) {
    out += "<tr>";
    for (const size_t c : shown) {
      const json& cell = row[c];
      const std::string value = cell.is_number() ? datum(cell.get<double>()) : cell.is_string() ? cell.get<std::string>() : "";
      out += fmt::format("<td{} data-key=\"{}\" data-v=\"{}\">{}</td>", cell.is_number() ? " class=\"num\"" : "",
                         esc(rows.columns[c].key), esc(value), esc(text_cell(row, c, rows.columns[c])));
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

// profile --predict: each variant's predicted step beside what it measured, and its predicted
// ops (Profile::prediction, the CLI's JSON). Measured on a GPU of the predicted kind, the ratio
// is the model's error; on the CPU or the simulator the two are different machines.
std::string prediction_html(const std::vector<Profile>& profiles) {
  std::string rows, ops;
  for (size_t v = 0; v < profiles.size(); ++v) {
    const json& p = profiles[v].prediction;
    if (!p.is_object()) continue;
    const std::vector<double> steps = step_times_us(profiles[v]);
    const double measured = steps.empty() ? 0.0 : spread_of(steps).median;
    const bool comparable = !profiles[v].simulated && profiles[v].device.rfind("cuda", 0) == 0;
    rows += fmt::format("<tr><td>{}{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td class=\"num\">{}</td><td>{}-bound</td><td>{}</td></tr>\n",
                        swatch(v), esc(profiles[v].label), esc(format_time_us(p.value("step_us", 0.0))),
                        esc(format_time_us(p.value("device_us", 0.0))), esc(format_time_us(p.value("host_us", 0.0))),
                        esc(format_time_us(measured)), esc(p.value("bound", "")),
                        comparable && measured > 0 ? fmt::format("{:.2f}x", measured / p.value("step_us", 1.0))
                                                   : std::string("measured on ") + esc(profiles[v].device_name));
    ops += "<h3>" + swatch(v) + esc(profiles[v].label) + ": predicted ops</h3>\n<div class=\"scroll\"><table class=\"prediction\">"
           "<thead><tr><th>Op</th><th>Path</th><th>Calls</th><th>Kernels</th><th>Predicted</th><th>Compute</th>"
           "<th>Memory</th><th>Launch</th><th>Bound</th></tr></thead><tbody>\n";
    for (const json& op : p.value("ops", json::array())) {
      ops += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                         esc(op.value("name", "")), esc(op.value("path", "")), op.value("calls", 0), op.value("kernels", 0),
                         esc(format_time_us(op.value("predicted_us", 0.0))), esc(format_time_us(op.value("compute_us", 0.0))),
                         esc(format_time_us(op.value("memory_us", 0.0))), esc(format_time_us(op.value("launch_us", 0.0))),
                         esc(op.value("bound", "")));
    }
    ops += "</tbody></table></div>\n";
  }
  if (rows.empty()) return "";
  const json& first = std::find_if(profiles.begin(), profiles.end(), [](const Profile& p) { return p.prediction.is_object(); })->prediction;
  return "<h2>Predicted GPU time</h2>\n<section id=\"prediction\">\n<p class=\"note\">Predicted, not measured: " +
         esc(first.value("gpu", first.value("target", ""))) + " by " + esc(first.value("model_version", "")) +
         " (docs/PREDICTION.md). Each step as the model prices the CUDA kernels its ops launch; the host issues each "
         "launch.</p>\n<div class=\"scroll\"><table class=\"prediction\"><thead><tr><th>Variant</th><th>Predicted step</th>"
         "<th>Device</th><th>Host</th><th>Measured step</th><th>Bound</th><th>Measured / predicted</th></tr></thead><tbody>\n" +
         rows + "</tbody></table></div>\n" + ops + "</section>\n";
}

// JSON inside <script>: "</script" would end the element, "<!--" change how it is parsed; no
// "<" at all (written as the JSON escape \u003c) rules out both.
std::string script_json(const json& value) {
  std::string out;
  for (const char ch : value.dump(-1, ' ', false, json::error_handler_t::replace)) {
    if (ch == '<') out += "\\u003c";
    else out += ch;
  }
  return out;
}

std::string schedule_text(const Profile& profile) {
  if (!profile.schedule) return "not saved with this profile";
  const Schedule& s = *profile.schedule;
  return fmt::format("wait {}, warmup {}, active {}{}", s.wait, s.warmup, s.active, s.keep_cold_step ? " (+ the cold step)" : "");
}

// The page's head: what was measured, on what, how, and the warnings that qualify it.
std::string header_html(const std::vector<Profile>& profiles, const std::string& title) {
  const Profile& base = profiles.front();
  std::string body;
  body += "<h1>" + esc(title) + "</h1>\n<dl class=\"header\" id=\"header\">\n";
  const auto item = [&](const std::string& key, const std::string& value) {
    body += "<dt>" + esc(key) + "</dt><dd>" + esc(value) + "</dd>\n";
  };
  item("Device", base.device_name.empty() ? base.device : base.device_name);
  item("Dtype", base.dtype);
  item("Schedule", schedule_text(base));
  item("Peaks", base.peaks.tflops > 0 ? fmt::format("{:.3g} TFLOP/s, {:.3g} GB/s ({})", base.peaks.tflops, base.peaks.gbps,
                                                    base.peaks.source.empty() ? "source not saved" : base.peaks.source)
                                      : base.simulated ? "none: the simulated GPU has no peaks"
                                                       : "unknown");
  item("Simulated", base.simulated ? "yes: device times are the simulator's (kernels run as fibers on the CPU), not a GPU's"
                                   : "no");
  body += "<dt>Variants</dt><dd>";
  for (size_t v = 0; v < profiles.size(); ++v) {
    body += (v ? "<br>" : "") + swatch(v) + esc(profiles[v].label);
    if (profiles[v].workload != base.workload && !profiles[v].workload.empty()) body += " — " + esc(profiles[v].workload);
  }
  body += "</dd>\n</dl>\n";
  for (size_t v = 1; v < profiles.size(); ++v)
    for (const std::string& line : profile_mismatches(base, profiles[v]))
      body += "<p class=\"warning\">" + esc(profiles[v].label + ": " + line) + "</p>\n";
  if (std::any_of(profiles.begin(), profiles.end(), [](const Profile& p) { return p.simulated; })) {
    body += "<p class=\"warning\">SIMULATED GPU: kernel counts, names and launch configurations are what a GPU "
            "launches; times are the simulator's, not a GPU's.</p>\n";
  }
  return body;
}

// One line per variant: its step verdict, and how the verdicts are drawn.
std::string verdicts_html(const std::vector<Profile>& profiles, const std::vector<StepVerdict>& verdicts) {
  std::string body;
  body += "<h2>Verdicts</h2>\n<section id=\"verdicts\">\n";
  for (size_t v = 0; v < profiles.size(); ++v) {
    const StepVerdict& verdict = verdicts[v];
    body += fmt::format("<p class=\"verdict\" data-variant=\"{}\" data-kind=\"{}\">{}{}: <b class=\"{}\">{}</b> {}</p>\n", v,
                        esc(verdict.kind), swatch(v), esc(profiles[v].label), esc(verdict.kind),
                        esc(verdict.kind.empty() ? "no verdict" : verdict.kind), esc(verdict.line));
  }
  body += fmt::format("<p class=\"note\">A step is host-bound when its device is busy less than {:.0f}% of it. An op is "
                      "compute- or memory-bound by the roof that limits it, and latency-bound when it runs over {:g}x "
                      "slower than both roofs allow (launch and per-call costs, too little work to fill the device).</p>\n",
                      100.0 * kHostBoundBusy, kBelowRoofs);
  body += "</section>\n";
  return body;
}

}  // namespace

std::string html_report(const std::vector<Profile>& profiles, const ReportOptions& options) {
  if (profiles.empty()) throw InputError("html report: no profiles to report");
  const Profile& base = profiles.front();
  const std::string title = !options.title.empty() ? options.title : !base.workload.empty() ? base.workload : base.label;
  TableOptions table = options.table;
  table.row_limit = 0;  // the page shows every row; sorting is the reader's
  table.layout = TextLayout{};

  std::vector<StepVerdict> verdicts;  // one per variant: the verdicts section, host vs device, the data
  for (const Profile& profile : profiles) verdicts.push_back(step_verdict(profile));
  std::string body = header_html(profiles, title) + verdicts_html(profiles, verdicts);
  body += "<h2>Roofline</h2>\n<section id=\"roofline\">\n" + roofline_svg(profiles);
  body += "<p class=\"note\">One point per op of each variant (its calls together): FLOPs and bytes from the op's own "
          "formula, achieved FLOP/s from its time. ";
  body += base.peaks.tflops > 0 && base.peaks.gbps > 0
              ? fmt::format("Solid: the roofs ({}); dashed: {:g}x below them, where latency-bound begins. ",
                            esc(base.peaks.source.empty() ? std::string("source not saved") : base.peaks.source), kBelowRoofs)
              : std::string("No roofs: the device's peaks are unknown, so no op gets a verdict. ");
  body += "Hollow points in the lower left corner are ops without FLOPs (copies): their bandwidth is in the "
          "tooltip.</p>\n</section>\n";

  body += "<h2>Breakdown by module</h2>\n<section id=\"breakdown\">\n<p class=\"note\">Time per step by scope path "
          "(block.0/attn/softmax): width = total time, its calls together. Click a cell to zoom, the top row to zoom "
          "out.</p>\n";
  for (size_t v = 0; v < profiles.size(); ++v) body += "<h3>" + swatch(v) + esc(profiles[v].label) + "</h3>\n" + icicle_svg(profiles[v], v);
  body += "</section>\n";

  body += "<h2>Steps</h2>\n<section id=\"steps\">\n" + steps_svg(profiles) +
          "<p class=\"note\">Each kept step's time (device time, or CPU time when the step launched no device work); "
          "the dashed line is the median the tables report.</p>\n</section>\n";

  body += "<h2>Host vs device</h2>\n<section id=\"host-device\">\n<p class=\"note\">Each step's span on the device "
          "clock (grey) and its kernels where they ran: what is grey between them the device spent idle, waiting for "
          "the host.</p>\n";
  for (size_t v = 0; v < profiles.size(); ++v) {
    body += "<h3>" + swatch(v) + esc(profiles[v].label) + "</h3>\n<p class=\"verdict-line\">" + esc(verdicts[v].line) +
            "</p>\n" + timeline_svg(profiles[v], v);
  }
  body += "</section>\n";

  body += "<h2>Memory</h2>\n<section id=\"memory\">\n<p class=\"note\">Device memory over one step, op by op: light, "
          "in use when the op began; dark, its peak.</p>\n";
  for (size_t v = 0; v < profiles.size(); ++v) body += "<h3>" + swatch(v) + esc(profiles[v].label) + "</h3>\n" + memory_svg(profiles[v], v);
  body += "</section>\n";

  if (profiles.size() > 1) {
    body += "<h2>Diffs</h2>\n<section id=\"diffs\">\n<p class=\"note\">Time per step before (grey) and after, the "
            "largest changes first; the black line across a bar is the min–max band of its steps (a change inside "
            "it is within noise).</p>\n";
    for (size_t v = 1; v < profiles.size(); ++v) body += diff_html(base, profiles[v], v);
    body += "</section>\n";
  }

  body += prediction_html(profiles);

  body += "<h2>Tables</h2>\n<section id=\"tables\">\n";
  json data = {{"format", "blockscope-report"}, {"version", 1}, {"title", title}};
  for (size_t v = 0; v < profiles.size(); ++v) {
    const Rows ops = op_table_rows(profiles[v], table);
    const Rows kernels = kernel_table_rows(profiles[v]);
    body += "<h3>" + swatch(v) + esc(profiles[v].label) + ": ops</h3>\n" + html_table(ops, "ops", v);
    body += "<h3>" + swatch(v) + esc(profiles[v].label) + ": kernels</h3>\n" + html_table(kernels, "kernels", v);
    data["variants"].push_back({{"label", profiles[v].label},
                                {"simulated", profiles[v].simulated},
                                {"step_times_us", step_times_us(profiles[v])},
                                {"verdict", step_verdict_json(verdicts[v])},
                                {"ops", rows_json(ops)},
                                {"kernels", rows_json(kernels)},
                                {"prediction", profiles[v].prediction}});
  }
  body += "</section>\n";

  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + esc(title) +
         " — blockscope report</title>\n<style>\n" + kReportCss + "</style>\n</head>\n<body>\n" + body +
         "<div id=\"tooltip\"></div>\n<script type=\"application/json\" id=\"report-data\">" + script_json(data) +
         "</script>\n<script>\n" + kReportJs + "</script>\n</body>\n</html>\n";
}

void write_html_report(const std::vector<Profile>& profiles, const ReportOptions& options, const std::string& path) {
  const std::string html = html_report(profiles, options);
  OutputFile file(path, "report");
  file.write(html);
  file.commit();
}

}  // namespace blockscope::profiler
