#include "profiler/report_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "profiler/render.h"
#include "profiler/summary.h"
#include "profiler/verdicts.h"

namespace blockscope::profiler::report {

namespace {

// One colour per variant, in order (matplotlib's first eight).
constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// The time a profile's charts use for an event: device time when the profile has any (CUDA
// kernels, CPU work items), else CPU time.
bool uses_device_time(const Profile& profile) { return total_kernel_us(profile) > 0; }

// A log10 axis over whole decades, 10^lo_exp .. 10^hi_exp, from `from` to `to` pixels. Values
// outside it (and zero or negative ones) are drawn at its ends: a point is never off the frame
// or NaN, whatever a saved profile holds.
struct LogAxis {
  int lo_exp = 0, hi_exp = 1;
  double from = 0, to = 1;
  double lo() const { return std::pow(10.0, lo_exp); }
  double hi() const { return std::pow(10.0, hi_exp); }
  double at(double value) const {
    const double exponent = value > 0 ? std::clamp(std::log10(value), double(lo_exp), double(hi_exp)) : lo_exp;
    return from + (exponent - lo_exp) / (hi_exp - lo_exp) * (to - from);
  }
};
// At least two decades and at most kMaxDecades, inside double's normal range.
constexpr int kMaxDecades = 24;
LogAxis decades(double min, double max, double from, double to) {
  const auto exponent = [](double value, bool up) {
    const double e = value > 0 && std::isfinite(value) ? std::log10(value) : 0.0;
    return static_cast<int>(std::clamp(up ? std::ceil(e) : std::floor(e), -300.0, 300.0));
  };
  LogAxis axis;
  axis.hi_exp = exponent(max, true);
  axis.lo_exp = std::clamp(exponent(min, false), axis.hi_exp - kMaxDecades, axis.hi_exp - 2);
  axis.from = from;
  axis.to = to;
  return axis;
}

}  // namespace

std::string esc(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string px(double value) { return fmt::format("{:.1f}", std::isfinite(value) ? value : 0.0); }
std::string extent(double value) { return px(std::max(0.0, value)); }
std::string datum(double value) { return std::isfinite(value) ? fmt::format("{}", value) : std::string(); }

std::string colour(size_t variant) { return kPalette[variant % (sizeof(kPalette) / sizeof(kPalette[0]))]; }
std::string swatch(size_t variant) { return "<span class=\"swatch\" style=\"background:" + colour(variant) + "\"></span>"; }

// ---- Roofline -------------------------------------------------------------------------------
namespace {


struct RoofPoint {
  size_t variant = 0;
  std::string op;       // "linear (epilogue)"
  std::string kernels;  // what it launched itself, per step: "gemm_bias ×1"
  double flops = 0, bytes = 0, time_us = 0;
  Bound bound = Bound::unknown;
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
  double flops_per_s() const { return time_us > 0 ? flops / (time_us * 1e-6) : 0; }
};

// "linear (epilogue)": an op row's name, as the diff names it.
std::string op_label(const std::string& name, const std::string& path) { return path.empty() ? name : name + " (" + path + ")"; }

// Per op row: the kernels its calls launched themselves and how many of each per step. A
// kernel has no FLOP count of its own (its op's formula covers all the op's kernels), so the
// roofline's points are ops, and each says which kernels it stands for.
std::map<std::string, std::string> kernels_by_op(const Profile& profile) {
  std::map<std::string, std::map<std::string, int>> counts;
  for (const KernelEvent& kernel : profile.kernels) {
    if (kernel.op < 0 || static_cast<size_t>(kernel.op) >= profile.ops.size()) continue;
    const OpEvent& op = profile.ops[kernel.op];
    ++counts[op_label(row_name(op), op.path)][kernel.name];
  }
  std::map<std::string, std::string> out;
  for (const auto& [op, kernels] : counts) {
    std::string text;
    for (const auto& [name, n] : kernels)
      text += fmt::format("{}{} ×{:g}", text.empty() ? "" : ", ", name, n / static_cast<double>(std::max(1, profile.active_steps)));
    out[op] = text;
  }
  return out;
}

std::vector<RoofPoint> roof_points(const std::vector<Profile>& profiles) {
  std::vector<RoofPoint> points;
  for (size_t v = 0; v < profiles.size(); ++v) {
    const std::map<std::string, std::string> kernels = kernels_by_op(profiles[v]);
    for (const OpStats& s : op_stats(profiles[v], false)) {
      const double time_us = s.device_total_us > 0 ? s.device_total_us : s.cpu_total_us;
      if (s.is_region || (s.flops <= 0 && s.bytes <= 0) || time_us <= 0) continue;
      RoofPoint p;
      p.variant = v;
      p.op = op_label(s.name, s.path);
      const auto launched = kernels.find(p.op);
      p.kernels = launched == kernels.end() ? "none of its own (its children's)" : launched->second;
      p.flops = s.flops;
      p.bytes = s.bytes;
      p.time_us = time_us;
      p.bound = roofline_bound(s.flops, s.bytes, time_us, profiles[v].peaks);
      points.push_back(p);
    }
  }
  return points;
}

}  // namespace

std::string roofline_svg(const std::vector<Profile>& profiles) {
  const std::vector<RoofPoint> points = roof_points(profiles);
  const Peaks& peaks = profiles.front().peaks;
  const bool roofs = peaks.tflops > 0 && peaks.gbps > 0;
  const double peak_flops = peaks.tflops * 1e12, peak_bytes = peaks.gbps * 1e9;
  const double W = 760, H = 430, left = 78, right = 20, top = 16, bottom = 46;

  double x_min = INFINITY, x_max = 0, y_min = INFINITY, y_max = 0;
  for (const RoofPoint& p : points) {
    if (p.intensity() <= 0 || p.flops_per_s() <= 0) continue;
    x_min = std::min(x_min, p.intensity());
    x_max = std::max(x_max, p.intensity());
    y_min = std::min(y_min, p.flops_per_s());
    y_max = std::max(y_max, p.flops_per_s());
  }
  if (roofs) {
    const double ridge = peak_flops / peak_bytes;
    x_min = std::min(x_min, ridge / 10);
    x_max = std::max(x_max, ridge * 10);
    y_max = std::max(y_max, peak_flops);
    y_min = std::min(y_min, peak_flops / 1e4);
  }
  if (!(x_max > 0)) x_min = 0.1, x_max = 100;
  if (!(y_max > 0)) y_min = 1e9, y_max = 1e12;
  const LogAxis x = decades(x_min, x_max, left, W - right);
  const LogAxis y = decades(y_min / 1.5, y_max * 1.5, H - bottom, top);  // points off the frame

  std::string svg = fmt::format("<svg id=\"roofline-chart\" width=\"{}\" height=\"{}\" role=\"img\" "
                                "aria-label=\"roofline: achieved FLOP/s against arithmetic intensity\">\n",
                                W, H);
  for (int e = x.lo_exp; e <= x.hi_exp; ++e) {
    const double d = std::pow(10.0, e);
    svg += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><text x=\"{0}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4}</text>\n",
                       px(x.at(d)), px(top), px(H - bottom), px(H - bottom + 15), fmt::format("{:g}", d));
  }
  for (int e = y.lo_exp; e <= y.hi_exp; ++e) {
    const double d = std::pow(10.0, e);
    svg += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text x=\"{3}\" y=\"{4}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       px(left), px(W - right), px(y.at(d)), px(left - 6), px(y.at(d) + 4), esc(format_si(d)));
  }
  svg += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", px(left), px(top),
                     px(W - right - left), px(H - bottom - top));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte the op must "
                     "move)</text>\n",
                     px((left + W - right) / 2), px(H - 8));
  svg += fmt::format("<text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">achieved FLOP/s</text>\n",
                     px((top + H - bottom) / 2));
  if (roofs) {
    // The roofs: min(peak FLOP/s, intensity x bandwidth), clipped to the axes; dashed, the
    // same divided by kBelowRoofs (below it an op is called latency-bound).
    for (const double divide : {1.0, kBelowRoofs}) {
      const double p = peak_flops / divide, b = peak_bytes / divide;
      const double a = std::max(x.lo(), y.lo() / b), ridge = std::clamp(p / b, x.lo(), x.hi());
      svg += fmt::format("<polyline class=\"roof{}\" points=\"{},{} {},{} {},{}\"/>\n", divide > 1 ? " below" : "",
                         px(x.at(a)), px(y.at(std::min(p, a * b))), px(x.at(ridge)), px(y.at(std::min(p, ridge * b))),
                         px(x.at(x.hi())), px(y.at(std::min(p, x.hi() * b))));
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">peak {} FLOP/s</text>\n", px(W - right - 4),
                       px(y.at(peak_flops) - 5), esc(format_si(peak_flops)));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{:.3g} GB/s</text>\n", px(x.at(x.lo()) + 6),
                       px(y.at(std::max(y.lo(), x.lo() * peak_bytes)) - 6), peaks.gbps);
  } else {
    svg += fmt::format("<text class=\"no-roofs\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       px((left + W - right) / 2), px(top + 18),
                       profiles.front().simulated ? "no roofs: the simulated GPU has no peaks, and its times are the "
                                                    "simulator's, not a GPU's"
                                                  : "no roofs: the device's peaks are unknown");
  }
  for (const RoofPoint& p : points) {
    const bool no_flops = p.intensity() <= 0 || p.flops_per_s() <= 0;
    // An op with no FLOPs (a copy) has no place on a log-log roofline: it sits hollow in the
    // lower left corner, its bandwidth in its tooltip.
    const double cx = no_flops ? x.at(x.lo()) + 5 : x.at(p.intensity());
    const double cy = no_flops ? y.at(y.lo()) - 5 : y.at(p.flops_per_s());
    const std::string tip = fmt::format(
        "{} · {}\n{:.3g} FLOP/byte · {} FLOP/s · {:.3g} GB/s · {} per step\nkernels per step: {}\nverdict: {}",
        profiles[p.variant].label, p.op, p.intensity(), format_si(p.flops_per_s()), p.bytes / (p.time_us * 1e3),
        format_time_us(p.time_us / std::max(1, profiles[p.variant].active_steps)), p.kernels,
        p.bound == Bound::unknown ? "unknown (no peaks)" : std::string(bound_name(p.bound)) + "-bound");
    svg += fmt::format("<circle class=\"point{}\" r=\"5\" cx=\"{}\" cy=\"{}\" style=\"fill:{};stroke:{}\" "
                       "data-variant=\"{}\" data-op=\"{}\" data-intensity=\"{}\" data-flops-per-s=\"{}\" data-bound=\"{}\" "
                       "data-tip=\"{}\"><title>{}</title></circle>\n",
                       no_flops ? " no-flops" : "", px(cx), px(cy), colour(p.variant), colour(p.variant), p.variant,
                       esc(p.op), datum(p.intensity()), datum(p.flops_per_s()), bound_name(p.bound), esc(tip), esc(tip));
  }
  return svg + "</svg>\n";
}

// ---- Breakdown by module (icicle) -----------------------------------------------------------
namespace {


struct ModuleNode {
  std::string label;  // the last part of the scope path
  std::string path;   // "block.0/attn/softmax"
  double total_us = 0, self_us = 0;  // per step
  std::vector<size_t> children;
  int depth = 0;
};

// "step 3/block.0/attn" -> "block.0/attn": the module path, the same in every step.
std::string module_path(const std::string& scope) {
  const size_t slash = scope.find('/');
  return slash == std::string::npos ? std::string() : scope.substr(slash + 1);
}

std::vector<ModuleNode> module_tree(const Profile& profile) {
  const EventTimes times = event_times(profile);
  const bool device = uses_device_time(profile);
  const double steps = std::max(1, profile.active_steps);
  std::vector<ModuleNode> nodes(1);
  nodes[0].label = "step";
  std::map<std::string, size_t> index{{"", 0}};
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const OpEvent& event = profile.ops[i];
    const double total = device ? times.device_total_us[i] : event.cpu_end_us - event.cpu_start_us;
    const double self = device ? times.self_device_us[i] : times.self_cpu_us[i];
    if (is_step_region(event)) {
      nodes[0].total_us += total / steps;
      nodes[0].self_us += self / steps;
      continue;
    }
    const std::string path = module_path(event.scope);
    auto found = index.find(path);
    if (found == index.end()) {
      const size_t slash = path.rfind('/');
      const std::string parent_path = slash == std::string::npos ? std::string() : path.substr(0, slash);
      const auto parent = index.find(parent_path);
      const size_t parent_node = parent == index.end() ? 0 : parent->second;  // outside any step: under the root
      ModuleNode node;
      node.label = slash == std::string::npos ? path : path.substr(slash + 1);
      node.path = path;
      node.depth = nodes[parent_node].depth + 1;
      found = index.emplace(path, nodes.size()).first;
      nodes[parent_node].children.push_back(nodes.size());
      nodes.push_back(node);
    }
    nodes[found->second].total_us += total / steps;
    nodes[found->second].self_us += self / steps;
  }
  return nodes;
}

// Whether a cell `width` pixels wide shows its label whole (about 6.2 px per character at the
// report's 10.5 px font; report.js uses the same rule when it zooms, and cuts longer ones).
bool label_fits(const std::string& label, double width) { return (width - 6) / 6.2 >= static_cast<double>(label.size()); }

}  // namespace

std::string icicle_svg(const Profile& profile, size_t variant) {
  const std::vector<ModuleNode> nodes = module_tree(profile);
  const double W = 1100, row = 22;
  int depth = 0;
  for (const ModuleNode& node : nodes) depth = std::max(depth, node.depth);
  std::string cells;
  // Each node spans [x0, x1] of the root's width; children side by side from their parent's
  // left edge, scaled down only where clock granularity makes them outgrow their parent.
  const double root = std::max(nodes[0].total_us, 1e-12);
  std::vector<std::pair<double, double>> span(nodes.size());
  span[0] = {0.0, 1.0};
  for (size_t n = 0; n < nodes.size(); ++n) {
    double children = 0;
    for (const size_t c : nodes[n].children) children += nodes[c].total_us;
    const double scale = children > nodes[n].total_us && children > 0 ? nodes[n].total_us / children : 1.0;
    double at = span[n].first;
    for (const size_t c : nodes[n].children) {
      const double width = nodes[c].total_us * scale / root;
      span[c] = {at, at + width};
      at += width;
    }
    const ModuleNode& node = nodes[n];
    const std::string label = n == 0 ? fmt::format("step ({})", format_time_us(node.total_us)) : node.label;
    const std::string tip = fmt::format("{}\ntotal {} per step ({:.1f}% of the step) · self {}",
                                        n == 0 ? "step" : node.path, format_time_us(node.total_us),
                                        100.0 * node.total_us / root, format_time_us(node.self_us));
    cells += fmt::format("<g class=\"cell\" data-depth=\"{}\" data-path=\"{}\" data-label=\"{}\" data-x0=\"{}\" "
                         "data-x1=\"{}\" data-total-us=\"{}\" data-self-us=\"{}\" data-tip=\"{}\"><rect x=\"{}\" y=\"{}\" "
                         "width=\"{}\" height=\"{}\" style=\"fill:{};fill-opacity:{:.2f}\"/><text x=\"{}\" y=\"{}\">{}"
                         "</text></g>\n",
                         node.depth, esc(node.path), esc(label), datum(span[n].first), datum(span[n].second),
                         datum(node.total_us), datum(node.self_us), esc(tip), px(span[n].first * W),
                         px(node.depth * row), extent((span[n].second - span[n].first) * W), px(row - 1), colour(variant),
                         0.85 - 0.6 * node.depth / std::max(1, depth), px(span[n].first * W + 3),
                         px(node.depth * row + 15), label_fits(label, (span[n].second - span[n].first) * W) ? esc(label) : "");
  }
  return fmt::format("<svg class=\"icicle\" data-variant=\"{}\" data-width=\"{}\" data-step-us=\"{}\" width=\"{}\" "
                     "height=\"{}\">\n{}</svg>\n",
                     variant, W, datum(nodes[0].total_us), W, px((depth + 1) * row), cells);
}

// ---- Steps, host vs device, memory ----------------------------------------------------------
namespace {


bool is_cold_step(const Profile& profile, int step) {
  return step == 0 && profile.schedule && profile.schedule->keep_cold_step;
}

}  // namespace

std::string steps_svg(const std::vector<Profile>& profiles) {
  const double W = 760, H = 200, left = 70, bottom = 34, top = 10, gap = 18;
  double max_us = 0;
  size_t bars = 0;
  for (const Profile& p : profiles) {
    for (const double t : step_times_us(p)) max_us = std::max(max_us, t);
    bars += kept_steps(p).size();
  }
  if (bars == 0 || max_us <= 0) return "<p class=\"note\">No steps were kept.</p>\n";
  const double bar = std::min(28.0, (W - left - gap * profiles.size()) / static_cast<double>(bars));
  const auto y = [&](double us) { return H - bottom - us / max_us * (H - bottom - top); };
  std::string svg = fmt::format("<svg id=\"steps-chart\" width=\"{}\" height=\"{}\">\n", W, H);
  for (int tick = 0; tick <= 4; ++tick) {
    const double us = max_us * tick / 4;
    svg += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text x=\"{3}\" y=\"{4}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       px(left), px(W), px(y(us)), px(left - 6), px(y(us) + 4), esc(format_time_us(us)));
  }
  double at = left + 6;
  for (size_t v = 0; v < profiles.size(); ++v) {
    const std::vector<int> steps = kept_steps(profiles[v]);
    const std::vector<double> times = step_times_us(profiles[v]);
    const double start = at;
    for (size_t s = 0; s < steps.size(); ++s) {
      const bool cold = is_cold_step(profiles[v], steps[s]);
      const std::string tip = fmt::format("{} · step {}{}: {}", profiles[v].label, steps[s], cold ? " (cold)" : "",
                                          format_time_us(times[s]));
      svg += fmt::format("<rect class=\"step-bar{}\" data-variant=\"{}\" data-step=\"{}\" data-us=\"{}\" data-tip=\"{}\" "
                         "x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" style=\"fill:{}\"/>\n",
                         cold ? " cold" : "", v, steps[s], datum(times[s]), esc(tip), px(at), px(y(times[s])),
                         extent(bar - 2), extent(H - bottom - y(times[s])), colour(v));
      if (cold) svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">cold</text>\n", px(at + bar / 2 - 1), px(y(times[s]) - 3));
      at += bar;
    }
    const Spread spread = spread_of(times);
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" style=\"stroke:#000;stroke-dasharray:3 2\"/>"
                       "<text x=\"{3}\" y=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
                       px(start), px(at - 2), px(y(spread.median)), px((start + at) / 2), px(H - bottom + 14),
                       esc(fmt::format("median {}", format_time_us(spread.median))));
    at += gap;
  }
  return svg + "</svg>\n";
}

// One row per kept step: the step's device span, its kernels where they ran, and the idle
// stretches between them (what a host-bound step looks like).
std::string timeline_svg(const Profile& profile, size_t variant) {
  const std::vector<StepActivity> steps = step_activity(profile);  // start and end on the device clock
  if (steps.empty()) return "";
  std::map<int, size_t> position;  // step number -> row, the first row of a step as step_activity
  for (size_t r = 0; r < steps.size(); ++r) position.emplace(steps[r].step, r);
  double longest = 0;
  for (const StepActivity& a : steps) longest = std::max(longest, a.end_us - a.start_us);
  if (longest <= 0) return "";
  const double W = 1000, left = 150, height = 16;
  std::string svg = fmt::format("<svg class=\"timeline\" data-variant=\"{}\" width=\"{}\" height=\"{}\">\n", variant,
                                left + W, px(steps.size() * (height + 4) + 16));
  for (size_t r = 0; r < steps.size(); ++r) {
    const double y = r * (height + 4);
    const StepActivity& a = steps[r];
    svg += fmt::format("<text x=\"0\" y=\"{}\">step {}: busy {:.0f}%</text><rect class=\"busy-span\" x=\"{}\" y=\"{}\" "
                       "width=\"{}\" height=\"{}\" data-tip=\"{}\"/>\n",
                       px(y + 12), a.step, 100.0 * a.busy_fraction(), px(left), px(y),
                       extent((a.end_us - a.start_us) / longest * W), px(height),
                       esc(fmt::format("step {}: {} kernels busy {} of {}; {} gaps, the longest {}", a.step, a.kernels,
                                       format_time_us(a.busy_us), format_time_us(a.span_us), a.gaps,
                                       format_time_us(a.largest_gap_us))));
  }
  for (const KernelEvent& kernel : profile.kernels) {
    const auto found = position.find(kernel.step);
    if (found == position.end()) continue;
    const double y = found->second * (height + 4);
    const double x0 = (kernel.device_start_us - steps[found->second].start_us) / longest * W;
    const double w = kernel_duration_us(kernel) / longest * W;
    const std::string op = kernel.op >= 0 && static_cast<size_t>(kernel.op) < profile.ops.size()
                               ? profile.ops[kernel.op].scope
                               : std::string("-");
    svg += fmt::format("<rect class=\"kernel\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" style=\"fill:{}\" "
                       "data-tip=\"{}\"/>\n",
                       px(left + x0), px(y), fmt::format("{:.2f}", std::max(0.5, w)), px(height), colour(variant),
                       esc(fmt::format("{} ({})\n{}; launch {} of CPU", kernel.name, op, format_time_us(kernel_duration_us(kernel)),
                                       format_time_us(kernel.launch_cpu_us))));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(left),
                     px(steps.size() * (height + 4) + 12), px(left + W), px(steps.size() * (height + 4) + 12),
                     esc(format_time_us(longest)));
  return svg + "</svg>\n";
}

// Device memory over one step (the first kept step that is not the cold one): per op, in
// order, what was in use when it began and its peak; the step's highest peak labelled.
std::string memory_svg(const Profile& profile, size_t variant) {
  int step = -1;
  for (const int s : kept_steps(profile)) {
    if (!is_cold_step(profile, s)) {
      step = s;
      break;
    }
  }
  std::vector<const OpEvent*> ops;
  int64_t highest = 0;
  for (const OpEvent& event : profile.ops) {
    if (event.step != step || event.is_region) continue;
    ops.push_back(&event);
    highest = std::max(highest, event.peak_bytes);
  }
  if (ops.empty() || highest <= 0) return "<p class=\"note\">No memory figures for this profile.</p>\n";
  const double W = 1000, H = 170, left = 80, bottom = 8;
  const double bar = std::max(1.0, std::min(24.0, W / ops.size()));
  const auto y = [&](double bytes) { return H - bottom - bytes / highest * (H - bottom - 16); };
  std::string svg = fmt::format("<svg class=\"memory\" data-variant=\"{}\" data-step=\"{}\" width=\"{}\" height=\"{}\">\n",
                                variant, step, px(left + ops.size() * bar + 10), H);
  for (const double fraction : {0.0, 0.5, 1.0}) {
    svg += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text x=\"{3}\" y=\"{4}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       px(left), px(left + ops.size() * bar), px(y(highest * fraction)), px(left - 6),
                       px(y(highest * fraction) + 4), esc(format_bytes(highest * fraction)));
  }
  bool labelled = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpEvent& op = *ops[i];
    const double x = left + i * bar;
    const std::string tip = fmt::format("{}{}\nin use at its start {} · its peak {} (+{})", op.scope,
                                        op.path.empty() ? "" : " (" + op.path + ")", format_bytes(op.start_bytes),
                                        format_bytes(op.peak_bytes), format_bytes(op.peak_bytes - op.start_bytes));
    svg += fmt::format("<g data-tip=\"{}\"><rect class=\"mem-peak\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>"
                       "<rect class=\"mem-start\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></g>\n",
                       esc(tip), px(x), px(y(op.peak_bytes)), px(std::max(0.5, bar - 1)),
                       extent(H - bottom - y(op.peak_bytes)), px(x), px(y(op.start_bytes)), px(std::max(0.5, bar - 1)),
                       extent(H - bottom - y(op.start_bytes)));
    if (!labelled && op.peak_bytes == highest) {
      labelled = true;
      svg += fmt::format("<text x=\"{}\" y=\"12\">peak {} in {}</text>\n", px(x), esc(format_bytes(highest)), esc(op.scope));
    }
  }
  return svg + "</svg>\n";
}

}  // namespace blockscope::profiler::report
