#include "profiler/torch_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>

#include "runtime/error.h"
#include "runtime/interrupt.h"

namespace blockscope::profiler {

namespace {

using nlohmann::json;

// THE aten -> blockscope table (docs/PROFILING.md, "PyTorch traces" shows it). An aten op is
// named for the blockscope op whose work it does; the aten name stays the row's path. Nested
// entries (aten::linear around aten::addmm, aten::softmax around aten::_softmax) keep their own
// rows: the trace's time nesting makes the inner one a child, counted once, as blockscope
// counts a composite op's children. An aten op not listed keeps its own name.
const std::vector<AtenOpName> kAtenOpTable = {
    {"aten::linear", "linear"},
    {"aten::addmm", "linear"},  // nn.Linear with a bias (a child of aten::linear)
    {"aten::mm", "linear"},     // ... without one
    {"aten::matmul", "batched_matmul"},
    {"aten::bmm", "batched_matmul"},
    {"aten::baddbmm", "batched_matmul"},
    {"aten::softmax", "softmax"},
    {"aten::_softmax", "softmax"},
    {"aten::masked_fill", "masked_fill"},    // out of place: a copy, then the fill
    {"aten::masked_fill_", "masked_fill_"},  // in place
    {"aten::layer_norm", "layer_norm"},
    {"aten::native_layer_norm", "layer_norm"},
    {"aten::rms_norm", "rms_norm"},
    {"aten::_fused_rms_norm", "rms_norm"},
    {"aten::scaled_dot_product_attention", "attention"},
    {"aten::_scaled_dot_product_attention_math", "attention"},
    {"aten::_scaled_dot_product_flash_attention", "attention"},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", "attention"},
    {"aten::_scaled_dot_product_efficient_attention", "attention"},
    {"aten::_scaled_dot_product_cudnn_attention", "attention"},
    {"aten::_flash_attention_forward", "attention"},
    {"aten::_efficient_attention_forward", "attention"},
    {"aten::gelu", "gelu"},  // erf or tanh: the trace's name does not say which
    {"aten::silu", "silu"},
    {"aten::relu", "relu"},
    {"aten::add", "add"},
    {"aten::add_", "add"},
    {"aten::mul", "mul"},
    {"aten::mul_", "mul"},
    {"aten::copy_", "copy"},
};

enum class Kind { op, region, step, device, launch };

// One "X" event of the trace that blockscope reads, times in µs since the trace's first.
struct TraceEvent {
  Kind kind = Kind::op;
  std::string name;
  std::string thread;  // pid/tid: ops nest only within one thread
  double start = 0, end = 0;
  size_t index = 0;  // position in the file: ties keep the order the profiler wrote
  const json* args = nullptr;
  int step = -1;  // the step it belongs to (position in the steps), -1 outside every step
};

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

constexpr const char* kStepPrefix = "ProfilerStep#";

// What an event is, from its category: Kineto's names ("cpu_op", "kernel", ...), the older
// capitalised ones ("Operator", "Kernel", "Runtime", "Memcpy"), and none at all in the legacy
// profiler's array, where everything is a CPU range (aten ops, record_function ranges).
std::optional<Kind> classify(const std::string& category, const std::string& name) {
  const std::string cat = lowercase(category);
  if (starts_with(name, kStepPrefix) && (cat.empty() || cat == "cpu_op" || cat == "operator" || cat == "user_annotation"))
    return Kind::step;
  if (cat.empty()) return starts_with(name, "aten::") ? Kind::op : Kind::region;
  if (cat == "cpu_op" || cat == "operator") return Kind::op;
  if (cat == "user_annotation") return Kind::region;
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset") return Kind::device;
  if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "runtime") return Kind::launch;
  return std::nullopt;  // python_function, gpu_user_annotation, overhead, Trace, ...
}

// Error messages name the file and the event ("trace.json: traceEvents[12].ts: expected a number").
class Fields {
 public:
  Fields(std::string source, std::string prefix) : source_(std::move(source)), prefix_(std::move(prefix)) {}
  [[noreturn]] void fail(size_t i, const std::string& key, const std::string& problem) const {
    throw InputError(fmt::format("{}: {}[{}]{}{}: {}", source_, prefix_, i, key.empty() ? "" : ".", key, problem));
  }
  std::string string(const json& event, size_t i, const char* key) const {
    const auto found = event.find(key);
    if (found == event.end()) fail(i, key, "missing");
    if (!found->is_string()) fail(i, key, std::string("expected a string, got ") + found->type_name());
    return found->get<std::string>();
  }
  double number(const json& event, size_t i, const char* key) const {
    const auto found = event.find(key);
    if (found == event.end()) fail(i, key, "missing");
    if (!found->is_number()) fail(i, key, std::string("expected a number, got ") + found->type_name());
    const double value = found->get<double>();
    if (!std::isfinite(value)) fail(i, key, "not a finite number");
    return value;
  }
  // pid and tid are numbers in Kineto's traces, strings in the legacy one ("CPU functions").
  std::string id(const json& event, size_t i, const char* key) const {
    const auto found = event.find(key);
    if (found == event.end()) return "";
    if (!found->is_number_integer() && !found->is_string())
      fail(i, key, std::string("expected an integer or a string, got ") + found->type_name());
    return found->dump();
  }

 private:
  std::string source_, prefix_;
};

const json* args_of(const json& event) {
  const auto found = event.find("args");
  return found != event.end() && found->is_object() ? &*found : nullptr;
}

std::optional<int64_t> integer_arg(const TraceEvent& event, const char* key) {
  if (!event.args) return std::nullopt;
  const auto found = event.args->find(key);
  if (found == event.args->end() || !found->is_number_integer()) return std::nullopt;
  return found->get<int64_t>();
}

// record_shapes' "Input Dims": one entry per argument; the tensors' are arrays of integers
// (empty ones are scalars and non-tensor arguments, nested ones tensor lists: both left out).
std::vector<Shape> input_shapes(const TraceEvent& event) {
  std::vector<Shape> shapes;
  if (!event.args) return shapes;
  const auto dims = event.args->find("Input Dims");
  if (dims == event.args->end() || !dims->is_array()) return shapes;
  for (const json& entry : *dims) {
    if (!entry.is_array() || entry.empty()) continue;
    Shape shape;
    for (const json& d : entry) {
      if (!d.is_number_integer()) {
        shape.clear();
        break;
      }
      shape.push_back(d.get<int64_t>());
    }
    if (!shape.empty()) shapes.push_back(shape);
  }
  return shapes;
}

// The first tensor argument's "Input type" as a blockscope dtype.
std::optional<DType> input_dtype(const TraceEvent& event) {
  if (!event.args) return std::nullopt;
  const auto types = event.args->find("Input type");
  if (types == event.args->end() || !types->is_array()) return std::nullopt;
  for (const json& type : *types) {
    if (!type.is_string() || type.get<std::string>().empty()) continue;
    const std::string t = type.get<std::string>();
    if (t == "float") return DType::f32;
    if (t == "c10::Half") return DType::f16;
    if (t == "c10::BFloat16") return DType::bf16;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string base_name(const std::string& source) {
  if (source == "-" || source.empty()) return "standard input";
  const size_t slash = source.find_last_of('/');
  return slash == std::string::npos ? source : source.substr(slash + 1);
}

std::string top_level_string(const json& document, const char* key) {
  if (!document.is_object()) return "";
  const auto found = document.find(key);
  return found != document.end() && found->is_string() ? found->get<std::string>() : "";
}

// Ops and regions nest by time on their thread, as blockscope's scopes do: the parent of an
// event is the innermost earlier-starting one that contains it, within the same step. Returns
// the parent's position in `events` (-1: the top of its step) for each event.
std::vector<int> nest_by_time(const std::vector<TraceEvent>& events) {
  std::vector<int> parent(events.size(), -1);
  std::map<std::string, std::vector<size_t>> threads;
  for (size_t i = 0; i < events.size(); ++i) threads[events[i].thread].push_back(i);
  for (auto& [thread, list] : threads) {
    // Parents first: the earlier start, then the longer span, then the file's order.
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      const TraceEvent &x = events[a], &y = events[b];
      return std::make_tuple(x.start, -x.end, x.index) < std::make_tuple(y.start, -y.end, y.index);
    });
    std::vector<size_t> open;
    for (size_t i : list) {
      poll_interrupted("while reading a PyTorch trace");
      const TraceEvent& e = events[i];
      while (!open.empty()) {
        const TraceEvent& top = events[open.back()];
        if (e.start >= top.start && e.end <= top.end && top.step == e.step) break;
        open.pop_back();
      }
      if (!open.empty()) parent[i] = static_cast<int>(open.back());
      open.push_back(i);
    }
  }
  return parent;
}

struct Step {
  int number = 0;
  double start = 0, end = 0;
};

// The step whose range holds time t (ranges do not overlap: one step after another), or -1.
int step_at(const std::vector<Step>& steps, double t) {
  const auto after = std::upper_bound(steps.begin(), steps.end(), t, [](double v, const Step& s) { return v < s.start; });
  if (after == steps.begin()) return -1;
  const auto candidate = std::prev(after);
  return t <= candidate->end ? static_cast<int>(candidate - steps.begin()) : -1;
}

std::string plural(size_t n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); }

}  // namespace

const std::vector<AtenOpName>& aten_op_table() { return kAtenOpTable; }

std::string blockscope_op_name(const std::string& aten) {
  for (const AtenOpName& entry : kAtenOpTable)
    if (aten == entry.aten) return entry.blockscope;
  return aten;
}

bool is_chrome_trace(const json& document) {
  if (document.is_array()) return true;
  if (!document.is_object()) return false;
  const auto events = document.find("traceEvents");
  return events != document.end() && events->is_array();
}

Profile profile_from_torch_trace(const json& document, const std::string& source) {
  if (!is_chrome_trace(document)) throw InputError(source + ": not a Chrome trace (no \"traceEvents\" array)");
  if (document.is_object() && document.contains("otherData") && document["otherData"].is_object() &&
      document["otherData"].value("producer", "") == "blockscope") {
    throw InputError(source + ": a Chrome trace blockscope wrote (profile --trace), not a PyTorch one: diff and report "
                              "read the profiles `blockscope profile --save` writes, or torch.profiler's traces");
  }
  const json& list = document.is_array() ? document : document["traceEvents"];
  const Fields fields(source, document.is_array() ? "" : "traceEvents");

  // 1. The events blockscope reads; everything else (metadata, flows, counters, Python frames) is left.
  std::vector<TraceEvent> nestable, device, steps_found;
  std::map<int64_t, TraceEvent> launches;  // by correlation id
  double origin = INFINITY;
  for (size_t i = 0; i < list.size(); ++i) {
    poll_interrupted("while reading a PyTorch trace");
    const json& raw = list[i];
    if (!raw.is_object()) fields.fail(i, "", std::string("expected an event object, got ") + raw.type_name());
    const auto ph = raw.find("ph");
    if (ph == raw.end() || *ph != "X") continue;
    TraceEvent event;
    event.name = fields.string(raw, i, "name");
    const auto cat = raw.find("cat");
    if (cat != raw.end() && !cat->is_string()) fields.fail(i, "cat", std::string("expected a string, got ") + cat->type_name());
    const std::optional<Kind> kind = classify(cat != raw.end() ? cat->get<std::string>() : "", event.name);
    if (!kind) continue;
    event.kind = *kind;
    event.start = fields.number(raw, i, "ts");
    const double dur = fields.number(raw, i, "dur");
    if (dur < 0) fields.fail(i, "dur", fmt::format("negative ({})", dur));
    event.end = event.start + dur;
    event.thread = fields.id(raw, i, "pid") + "/" + fields.id(raw, i, "tid");
    event.index = i;
    event.args = args_of(raw);
    origin = std::min(origin, event.start);
    switch (event.kind) {
      case Kind::step: steps_found.push_back(event); break;
      case Kind::device: device.push_back(event); break;
      case Kind::launch:
        if (const auto correlation = integer_arg(event, "correlation")) launches.emplace(*correlation, event);
        break;
      default: nestable.push_back(event); break;
    }
  }
  const bool any_op = std::any_of(nestable.begin(), nestable.end(), [](const TraceEvent& e) { return e.kind == Kind::op; });
  if (!any_op) {
    throw InputError(fmt::format(
        "{}: a trace with no PyTorch ops: none of its {} is a CPU op (cat \"cpu_op\", or an aten:: range of the "
        "legacy profiler); record the module with torch.profiler.profile(activities=[ProfilerActivity.CPU, ...])",
        source, plural(list.size(), "event", "events")));
  }

  // 2. The steps: ProfilerStep#N ranges, else the whole trace as one.
  Profile profile;
  std::vector<Step> steps;
  for (const TraceEvent& e : steps_found) {
    const std::string digits = e.name.substr(std::string(kStepPrefix).size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      fields.fail(e.index, "name", "'" + e.name + "': expected ProfilerStep#<step number>");
    const int number = std::stoi(digits);
    for (const Step& s : steps)
      if (s.number == number) fields.fail(e.index, "name", "'" + e.name + "' a second time");
    steps.push_back({number, e.start, e.end});
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.start < b.start; });
  for (size_t s = 1; s < steps.size(); ++s)
    if (steps[s].start < steps[s - 1].end)
      throw InputError(fmt::format("{}: ProfilerStep#{} and ProfilerStep#{} overlap", source, steps[s - 1].number, steps[s].number));
  if (steps.empty()) {
    Step whole{0, INFINITY, -INFINITY};
    for (const TraceEvent& e : nestable) {
      whole.start = std::min(whole.start, e.start);
      whole.end = std::max(whole.end, e.end);
    }
    steps.push_back(whole);
    profile.notes.push_back("no ProfilerStep# ranges in the trace (no torch.profiler schedule, or no prof.step() "
                            "calls): the whole trace is one step, step 0");
  }

  // 3. Ops and regions: each in the step where it starts, nested by time within it.
  std::vector<TraceEvent> inside;
  size_t outside = 0;
  for (TraceEvent& e : nestable) {
    e.step = step_at(steps, e.start);
    if (e.step < 0) ++outside;
    else inside.push_back(e);
  }
  if (!std::any_of(inside.begin(), inside.end(), [](const TraceEvent& e) { return e.kind == Kind::op; })) {
    throw InputError(fmt::format("{}: none of its {} lies inside its ProfilerStep# ranges", source,
                                 plural(nestable.size(), "op", "ops")));
  }
  if (outside > 0) {
    profile.notes.push_back(fmt::format("{} outside the ProfilerStep# ranges left out (before the first step or "
                                        "between steps)", plural(outside, "op or range", "ops and ranges")));
  }
  const std::vector<int> parent = nest_by_time(inside);

  // 4. The profile's events: each step's region, then its events parents first.
  std::vector<size_t> order(inside.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TraceEvent &x = inside[a], &y = inside[b];
    return std::make_tuple(x.step, x.start, -x.end, x.index) < std::make_tuple(y.step, y.start, -y.end, y.index);
  });
  std::vector<int> step_event(steps.size(), -1);
  std::vector<int> out_index(inside.size(), -1);
  std::map<DType, int> dtype_counts;
  const auto add_step_region = [&](size_t s) {
    OpEvent region;
    region.name = region.scope = "step " + std::to_string(steps[s].number);
    region.is_region = true;
    region.step = steps[s].number;
    region.cpu_start_us = steps[s].start - origin;
    region.cpu_end_us = steps[s].end - origin;
    step_event[s] = static_cast<int>(profile.ops.size());
    profile.ops.push_back(region);
  };
  for (size_t i : order) {
    poll_interrupted("while reading a PyTorch trace");
    const TraceEvent& e = inside[i];
    if (step_event[static_cast<size_t>(e.step)] < 0) add_step_region(static_cast<size_t>(e.step));
    OpEvent op;
    op.is_region = e.kind == Kind::region;
    op.name = op.is_region ? e.name : blockscope_op_name(e.name);
    op.path = op.is_region || op.name == e.name ? "" : e.name;  // the aten name, where the table renamed it
    op.parent = parent[i] >= 0 ? out_index[static_cast<size_t>(parent[i])] : step_event[static_cast<size_t>(e.step)];
    const OpEvent& up = profile.ops[static_cast<size_t>(op.parent)];
    op.scope = up.scope + "/" + op.name;
    op.depth = up.depth + 1;
    op.step = steps[static_cast<size_t>(e.step)].number;
    op.cpu_start_us = e.start - origin;
    op.cpu_end_us = e.end - origin;
    op.input_shapes = input_shapes(e);
    if (const auto dtype = input_dtype(e)) {
      op.dtype = *dtype;
      dtype_counts[*dtype] += 1;
    }
    if (e.args && e.args->contains("flops") && (*e.args)["flops"].is_number()) op.flops = (*e.args)["flops"].get<double>();
    out_index[i] = static_cast<int>(profile.ops.size());
    profile.ops.push_back(std::move(op));
  }
  for (size_t s = 0; s < steps.size(); ++s)
    if (step_event[s] < 0) add_step_region(s);  // a step with no op in it is still a step
  profile.active_steps = static_cast<int>(steps.size());

  // 5. Kernels, memcpys and memsets: each to the op around its launch (same thread, the launch
  // inside the op's time), found through the launch's correlation id.
  std::map<std::string, std::vector<int>> ops_by_thread;  // profile op indices, in start order
  for (size_t i : order) ops_by_thread[inside[i].thread].push_back(out_index[i]);
  const auto launching_op = [&](const TraceEvent& launch) -> int {
    const auto found = ops_by_thread.find(launch.thread);
    if (found == ops_by_thread.end()) return -1;
    const double t = launch.start - origin;
    const std::vector<int>& list = found->second;
    // The last op starting at or before the launch, then up its parents to one that holds it.
    auto it = std::upper_bound(list.begin(), list.end(), t,
                               [&](double v, int op) { return v < profile.ops[static_cast<size_t>(op)].cpu_start_us; });
    if (it == list.begin()) return -1;
    for (int op = *std::prev(it); op >= 0; op = profile.ops[static_cast<size_t>(op)].parent) {
      const OpEvent& candidate = profile.ops[static_cast<size_t>(op)];
      if (candidate.cpu_start_us <= t && t <= candidate.cpu_end_us) return op;
    }
    return -1;
  };
  size_t unplaced = 0;
  std::map<int64_t, int> devices_seen;
  for (const TraceEvent& e : device) {
    poll_interrupted("while reading a PyTorch trace");
    KernelEvent kernel;
    kernel.name = e.name;
    kernel.device_start_us = e.start - origin;
    kernel.device_end_us = e.end - origin;
    // The op around its launch; where the trace holds no launch for it (or the launch is in no
    // op), the step its launch or else the kernel itself falls in, as that step's own work.
    int position = -1;  // of the step, in `steps`
    if (const auto correlation = integer_arg(e, "correlation")) {
      const auto launch = launches.find(*correlation);
      if (launch != launches.end()) {
        kernel.launch_start_us = launch->second.start - origin;
        kernel.launch_cpu_us = launch->second.end - launch->second.start;
        kernel.op = launching_op(launch->second);
        position = step_at(steps, launch->second.start);
      }
    }
    if (position < 0) position = step_at(steps, e.start);
    if (position < 0) {
      ++unplaced;
      continue;
    }
    if (kernel.op < 0) kernel.op = step_event[static_cast<size_t>(position)];
    kernel.step = profile.ops[static_cast<size_t>(kernel.op)].step;
    kernel.stream = static_cast<int>(integer_arg(e, "stream").value_or(0));
    if (const auto id = integer_arg(e, "device")) devices_seen[*id] += 1;
    const auto dim3 = [&](const char* key) {
      Dim3 d;
      if (!e.args || !e.args->contains(key) || !(*e.args)[key].is_array() || (*e.args)[key].size() != 3) return d;
      unsigned* parts[3] = {&d.x, &d.y, &d.z};
      for (size_t k = 0; k < 3; ++k)
        if ((*e.args)[key][k].is_number_unsigned()) *parts[k] = (*e.args)[key][k].get<unsigned>();
      return d;
    };
    kernel.grid = dim3("grid");
    kernel.block = dim3("block");
    kernel.registers = static_cast<int>(integer_arg(e, "registers per thread").value_or(0));
    kernel.static_smem = integer_arg(e, "shared memory").value_or(0);  // Kineto's: static + dynamic
    profile.kernels.push_back(std::move(kernel));
  }
  if (unplaced > 0)
    profile.notes.push_back(plural(unplaced, "kernel outside every step left out", "kernels outside every step left out"));

  // 6. Device marks, where there are kernels: an op spans its subtree's kernels, a step from its
  // start on the CPU (the clocks are one in Kineto's traces) to its last kernel's end.
  profile.host_ops_only = profile.kernels.empty();
  if (!profile.host_ops_only) {
    std::vector<double> first(profile.ops.size(), INFINITY), last(profile.ops.size(), -INFINITY);
    for (const KernelEvent& k : profile.kernels) {
      first[static_cast<size_t>(k.op)] = std::min(first[static_cast<size_t>(k.op)], k.device_start_us);
      last[static_cast<size_t>(k.op)] = std::max(last[static_cast<size_t>(k.op)], k.device_end_us);
    }
    for (size_t i = profile.ops.size(); i-- > 0;) {
      const int up = profile.ops[i].parent;
      if (up < 0) continue;
      first[static_cast<size_t>(up)] = std::min(first[static_cast<size_t>(up)], first[i]);
      last[static_cast<size_t>(up)] = std::max(last[static_cast<size_t>(up)], last[i]);
    }
    for (size_t i = 0; i < profile.ops.size(); ++i) {
      OpEvent& op = profile.ops[i];
      if (op.parent < 0) {
        op.device_start_us = op.cpu_start_us;
        op.device_end_us = std::max(op.cpu_end_us, last[i]);
      } else if (std::isfinite(first[i])) {
        op.device_start_us = first[i];
        op.device_end_us = last[i];
      }
    }
  }

  // 7. What it was.
  const std::string version = top_level_string(document, "torch_version");
  profile.label = fmt::format("PyTorch {}trace {}", version.empty() ? "" : version + " ", base_name(source));
  profile.workload = top_level_string(document, "blockscope_workload");
  int device_id = -1, most = 0;
  for (const auto& [id, count] : devices_seen)
    if (count > most) device_id = static_cast<int>(id), most = count;
  if (profile.host_ops_only) {
    profile.device = "cpu";
    profile.device_name = "cpu (a PyTorch profiler trace: host ops only)";
    profile.notes.push_back("a PyTorch CPU trace: it records host ops only, no kernels or work items, so its "
                            "device columns are empty and diffs compare CPU time");
  } else {
    profile.device = device_id >= 0 ? "cuda:" + std::to_string(device_id) : "cuda";
    profile.device_name = profile.device;
    if (document.is_object() && document.contains("deviceProperties") && document["deviceProperties"].is_array()) {
      for (const json& p : document["deviceProperties"])
        if (p.is_object() && p.value("id", -2) == device_id && p.contains("name") && p["name"].is_string())
          profile.device_name = p["name"].get<std::string>();
    }
  }
  if (!dtype_counts.empty()) {
    const auto common = std::max_element(dtype_counts.begin(), dtype_counts.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
    profile.dtype = dtype_name(common->first);
  }
  profile.peaks.source = "none: a PyTorch trace carries no peaks";
  return profile;
}

}  // namespace blockscope::profiler
