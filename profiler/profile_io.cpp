#include "profiler/profile_io.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "profiler/summary.h"
#include "profiler/torch_trace.h"
#include "runtime/error.h"
#include "runtime/input_file.h"
#include "runtime/interrupt.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

namespace {

using nlohmann::json;

constexpr const char* kFormatName = "blockscope-profile";
// The most a saved profile may hold (20,000 steps of a tiny block are ~200 MB): a larger file is
// a mistake, refused before it is read.
constexpr uint64_t kMaxProfileBytes = uint64_t{2} << 30;
constexpr int kVersion = 1;

json dim3_json(const Dim3& d) { return json::array({d.x, d.y, d.z}); }

// Reads typed fields out of a JSON object; every error names the source and the key path
// ("profile.json: ops[3].cpu_start_us: expected a number, got string").
class Reader {
 public:
  Reader(const json& object, std::string source, std::string where)
      : object_(object), source_(std::move(source)), where_(std::move(where)) {
    if (!object_.is_object()) fail(where_, std::string("expected an object, got ") + object_.type_name());
  }

  const json& field(const std::string& key) const {
    const auto found = object_.find(key);
    if (found == object_.end()) fail(path(key), "missing");
    return *found;
  }
  std::string string(const std::string& key) const {
    const json& value = field(key);
    if (!value.is_string()) fail(path(key), std::string("expected a string, got ") + value.type_name());
    return value.get<std::string>();
  }
  double number(const std::string& key) const {
    const json& value = field(key);
    if (!value.is_number()) fail(path(key), std::string("expected a number, got ") + value.type_name());
    return value.get<double>();
  }
  int64_t integer(const std::string& key) const {
    const json& value = field(key);
    if (!value.is_number_integer()) fail(path(key), std::string("expected an integer, got ") + value.type_name());
    return value.get<int64_t>();
  }
  // An integer an int holds: narrowing 2^62 would read it as 0 (or anything else).
  int int32(const std::string& key) const {
    const int64_t value = integer(key);
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
      fail(path(key), "is " + std::to_string(value) + ", outside what a profile counts (at most " +
                          std::to_string(std::numeric_limits<int>::max()) + ")");
    return static_cast<int>(value);
  }
  bool boolean(const std::string& key) const {
    const json& value = field(key);
    if (!value.is_boolean()) fail(path(key), std::string("expected true or false, got ") + value.type_name());
    return value.get<bool>();
  }
  const json& array(const std::string& key) const {
    const json& value = field(key);
    if (!value.is_array()) fail(path(key), std::string("expected an array, got ") + value.type_name());
    return value;
  }
  Dim3 dim3(const std::string& key) const {
    const json& value = array(key);
    if (value.size() != 3) fail(path(key), "expected [x, y, z]");
    Dim3 d;
    unsigned* parts[3] = {&d.x, &d.y, &d.z};
    for (size_t i = 0; i < 3; ++i) {
      if (!value[i].is_number_unsigned()) fail(path(key) + "[" + std::to_string(i) + "]", "expected a non-negative integer");
      *parts[i] = value[i].get<unsigned>();
    }
    return d;
  }
  Reader child(const std::string& key) const { return Reader(field(key), source_, path(key)); }
  Reader element(const json& array, const std::string& key, size_t index) const {
    return Reader(array[index], source_, path(key) + "[" + std::to_string(index) + "]");
  }
  std::string path(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  [[noreturn]] void fail(const std::string& key_path, const std::string& problem) const {
    throw InputError(source_ + ": " + (key_path.empty() ? std::string("top level") : key_path) + ": " + problem);
  }

 private:
  const json& object_;
  std::string source_;
  std::string where_;
};

// profile --predict's prediction (the CLI's JSON), kept as written once every field that diff and
// the report read holds its type: a saved profile is input like any other.
json read_prediction(const Reader& top, const json& value) {
  const Reader p = top.child("prediction");
  p.string("target");
  p.string("model_version");
  p.string("bound");
  for (const char* key : {"step_us", "device_us", "busy_us", "host_us"}) p.number(key);
  p.integer("launches");
  for (const char* key : {"gpu", "note", "launch_mode"})
    if (value.contains(key)) p.string(key);
  const json& ops = p.array("ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    const Reader op = p.element(ops, "ops", i);
    for (const char* key : {"name", "path", "bound", "bytes_from"}) op.string(key);
    for (const char* key : {"calls", "kernels"}) op.integer(key);
    for (const char* key : {"predicted_us", "pct", "compute_us", "memory_us", "launch_us"}) op.number(key);
  }
  return value;
}

json op_json(const OpEvent& op) {
  json shapes = json::array();
  for (const Shape& shape : op.input_shapes) shapes.push_back(shape);
  return {{"scope", op.scope},
          {"name", op.name},
          {"path", op.path},
          {"is_region", op.is_region},
          {"input_shapes", shapes},
          {"dtype", dtype_name(op.dtype)},
          {"parent", op.parent},
          {"depth", op.depth},
          {"step", op.step},
          {"cpu_start_us", op.cpu_start_us},
          {"cpu_end_us", op.cpu_end_us},
          {"device_start_us", op.device_start_us},
          {"device_end_us", op.device_end_us},
          {"flops", op.flops},
          {"bytes", op.bytes},
          {"bytes_allocated", op.bytes_allocated},
          {"peak_bytes", op.peak_bytes},
          {"self_peak_bytes", op.self_peak_bytes},
          {"start_bytes", op.start_bytes}};
}

json kernel_json(const KernelEvent& kernel) {
  return {{"name", kernel.name},
          {"op", kernel.op},
          {"step", kernel.step},
          {"stream", kernel.stream},
          {"grid", dim3_json(kernel.grid)},
          {"block", dim3_json(kernel.block)},
          {"registers", kernel.registers},
          {"static_smem", kernel.static_smem},
          {"dynamic_smem", kernel.dynamic_smem},
          {"occupancy", kernel.occupancy},
          {"implementation", kernel.implementation},
          {"launch_start_us", kernel.launch_start_us},
          {"launch_cpu_us", kernel.launch_cpu_us},
          {"device_start_us", kernel.device_start_us},
          {"device_end_us", kernel.device_end_us}};
}

json device_properties_json(const DeviceProperties& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"total_global_mem", d.total_global_mem},
          {"compute_major", d.compute_major},
          {"compute_minor", d.compute_minor},
          {"num_sms", d.num_sms},
          {"max_threads_per_block", d.max_threads_per_block},
          {"max_threads_per_sm", d.max_threads_per_sm},
          {"regs_per_block", d.regs_per_block},
          {"regs_per_sm", d.regs_per_sm},
          {"warp_size", d.warp_size},
          {"shared_mem_per_block", d.shared_mem_per_block},
          {"shared_mem_per_sm", d.shared_mem_per_sm},
          {"shared_mem_per_block_optin", d.shared_mem_per_block_optin}};
}

DeviceProperties read_device_properties(const Reader& r) {
  DeviceProperties d;
  d.index = r.int32("index");
  d.name = r.string("name");
  d.total_global_mem = r.integer("total_global_mem");
  d.compute_major = r.int32("compute_major");
  d.compute_minor = r.int32("compute_minor");
  d.num_sms = r.int32("num_sms");
  d.max_threads_per_block = r.int32("max_threads_per_block");
  d.max_threads_per_sm = r.int32("max_threads_per_sm");
  d.regs_per_block = r.int32("regs_per_block");
  d.regs_per_sm = r.int32("regs_per_sm");
  d.warp_size = r.int32("warp_size");
  d.shared_mem_per_block = r.integer("shared_mem_per_block");
  d.shared_mem_per_sm = r.integer("shared_mem_per_sm");
  d.shared_mem_per_block_optin = r.integer("shared_mem_per_block_optin");
  return d;
}

// Everything but the ops and kernels.
json profile_head_json(const Profile& profile) {
  json document = {{"format", kFormatName},
                   {"version", kVersion},
                   {"label", profile.label},
                   {"device", profile.device},
                   {"device_name", profile.device_name},
                   {"dtype", profile.dtype},
                   {"workload", profile.workload},
                   {"simulated", profile.simulated},
                   {"peaks", {{"tflops", profile.peaks.tflops}, {"gbps", profile.peaks.gbps}, {"source", profile.peaks.source}}},
                   {"active_steps", profile.active_steps},
                   {"schedule", profile.schedule ? json{{"wait", profile.schedule->wait},
                                                        {"warmup", profile.schedule->warmup},
                                                        {"active", profile.schedule->active},
                                                        {"cold_step", profile.schedule->keep_cold_step}}
                                                 : json()}};
  if (profile.ranks > 1) document["tensor_parallel"] = {{"rank", profile.rank}, {"ranks", profile.ranks}};
  if (profile.device_properties) document["device_properties"] = device_properties_json(*profile.device_properties);
  if (!profile.prediction.is_null()) document["prediction"] = profile.prediction;
  if (!profile.notes.empty()) document["notes"] = profile.notes;
  return document;
}

}  // namespace

json profile_to_json(const Profile& profile) {
  json document = profile_head_json(profile);
  json& ops = document["ops"] = json::array();
  for (const OpEvent& op : profile.ops) {
    poll_interrupted("while serialising a profile");
    ops.push_back(op_json(op));
  }
  json& kernels = document["kernels"] = json::array();
  for (const KernelEvent& kernel : profile.kernels) {
    poll_interrupted("while serialising a profile");
    kernels.push_back(kernel_json(kernel));
  }
  return document;
}

std::string profile_to_text(const Profile& profile) {
  // The head indented, then one event per line: built event by event, never as one document
  // (a profile of thousands of steps is hundreds of MB; a signal is answered between events).
  std::string text = profile_head_json(profile).dump(1);
  text.resize(text.size() - 2);  // the head's closing "\n}"
  const auto append_events = [&](const char* key, const auto& events, const auto& to_json) {
    text += ",\n \"";
    text += key;
    text += "\": [";
    for (size_t i = 0; i < events.size(); ++i) {
      poll_interrupted("while serialising a profile");
      text += i == 0 ? "\n  " : ",\n  ";
      text += to_json(events[i]).dump();
    }
    text += events.empty() ? "]" : "\n ]";
  };
  append_events("ops", profile.ops, op_json);
  append_events("kernels", profile.kernels, kernel_json);
  return text + "\n}\n";
}

Profile profile_from_json(const json& document, const std::string& source) {
  const Reader top(document, source, "");
  if (top.string("format") != kFormatName) {
    top.fail("format", "expected \"" + std::string(kFormatName) + "\" (is this a blockscope profile?)");
  }
  const int64_t version = top.integer("version");
  if (version != kVersion) {
    top.fail("version", "unsupported version " + std::to_string(version) + " (this blockscope reads version " +
                            std::to_string(kVersion) + ")");
  }
  Profile profile;
  profile.label = top.string("label");
  profile.device = top.string("device");
  profile.device_name = top.string("device_name");
  profile.dtype = top.string("dtype");
  profile.simulated = document.contains("simulated") && top.boolean("simulated");
  profile.workload = document.contains("workload") ? top.string("workload") : "";
  if (document.contains("prediction")) profile.prediction = read_prediction(top, document["prediction"]);
  // Optional: a GPU's profile has them (and not one saved before they were kept).
  if (document.contains("device_properties")) profile.device_properties = read_device_properties(top.child("device_properties"));
  if (document.contains("notes")) {
    const json& notes = top.array("notes");
    for (size_t i = 0; i < notes.size(); ++i) {
      if (!notes[i].is_string()) top.fail("notes[" + std::to_string(i) + "]", std::string("expected a string, got ") + notes[i].type_name());
      profile.notes.push_back(notes[i].get<std::string>());
    }
  }
  const Reader peaks = top.child("peaks");
  profile.peaks.tflops = peaks.number("tflops");
  profile.peaks.gbps = peaks.number("gbps");
  profile.peaks.source = document["peaks"].is_object() && document["peaks"].contains("source") ? peaks.string("source") : "";
  profile.active_steps = top.int32("active_steps");  // checked before narrowing: 2^62 was read as 0 steps
  if (profile.active_steps < 0) top.fail("active_steps", "must not be negative");
  // Optional: only a tensor-parallel rank's profile has it.
  if (document.contains("tensor_parallel")) {
    const Reader tp = top.child("tensor_parallel");
    const int64_t rank = tp.integer("rank"), ranks = tp.integer("ranks");
    if (ranks < 1 || ranks > (1 << 20) || rank < 0 || rank >= ranks)
      top.fail("tensor_parallel", "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                                      " ranks: needs 0 <= rank < ranks <= 2^20");
    profile.rank = static_cast<int>(rank);
    profile.ranks = static_cast<int>(ranks);
  }
  // Optional: profiles saved before the schedule was kept have none (null or missing).
  if (document.contains("schedule") && !document["schedule"].is_null()) {
    const Reader schedule = top.child("schedule");
    Schedule s;
    s.wait = schedule.int32("wait");
    s.warmup = schedule.int32("warmup");
    s.active = schedule.int32("active");
    s.keep_cold_step = schedule.boolean("cold_step");
    if (s.wait < 0 || s.warmup < 0 || s.active < 0) top.fail("schedule", "step counts must not be negative");
    profile.schedule = s;
  }

  const json& ops = top.array("ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    if (interrupt_signal() != 0) check_interrupted(("while reading " + source).c_str());
    const Reader r = top.element(ops, "ops", i);
    OpEvent op;
    op.scope = r.string("scope");
    op.name = r.string("name");
    op.path = r.string("path");
    op.is_region = r.boolean("is_region");
    const json& shapes = r.array("input_shapes");
    for (size_t s = 0; s < shapes.size(); ++s) {
      if (!shapes[s].is_array()) r.fail(r.path("input_shapes") + "[" + std::to_string(s) + "]", "expected an array of integers");
      Shape shape;
      for (const json& dim : shapes[s]) {
        if (!dim.is_number_integer()) r.fail(r.path("input_shapes") + "[" + std::to_string(s) + "]", "expected an array of integers");
        shape.push_back(dim.get<int64_t>());
      }
      op.input_shapes.push_back(shape);
    }
    const std::string dtype = r.string("dtype");
    if (!parse_dtype(dtype, &op.dtype)) r.fail(r.path("dtype"), "unknown dtype '" + dtype + "' (f32, f16, bf16, fp8_e4m3, fp8_e5m2)");
    op.parent = r.int32("parent");
    if (op.parent < -1 || op.parent >= static_cast<int>(i)) {
      r.fail(r.path("parent"), "must be -1 or the index of an earlier op, got " + std::to_string(op.parent));
    }
    op.depth = r.int32("depth");
    op.step = r.int32("step");
    op.cpu_start_us = r.number("cpu_start_us");
    op.cpu_end_us = r.number("cpu_end_us");
    op.device_start_us = r.number("device_start_us");
    op.device_end_us = r.number("device_end_us");
    op.flops = r.number("flops");
    op.bytes = r.number("bytes");
    op.bytes_allocated = r.integer("bytes_allocated");
    op.peak_bytes = r.integer("peak_bytes");
    op.start_bytes = ops[i].contains("start_bytes") ? r.integer("start_bytes") : op.peak_bytes;
    // Profiles saved before self peaks were recorded: none (the column shows "-").
    op.self_peak_bytes = ops[i].contains("self_peak_bytes") ? r.integer("self_peak_bytes") : op.start_bytes;
    profile.ops.push_back(std::move(op));
  }

  const json& kernels = top.array("kernels");
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (interrupt_signal() != 0) check_interrupted(("while reading " + source).c_str());
    const Reader r = top.element(kernels, "kernels", i);
    KernelEvent kernel;
    kernel.name = r.string("name");
    kernel.op = r.int32("op");
    if (kernel.op < -1 || kernel.op >= static_cast<int>(profile.ops.size())) {
      r.fail(r.path("op"), "must be -1 or the index of an op, got " + std::to_string(kernel.op));
    }
    kernel.step = r.int32("step");
    kernel.stream = r.int32("stream");
    kernel.grid = r.dim3("grid");
    kernel.block = r.dim3("block");
    kernel.registers = r.int32("registers");
    kernel.static_smem = r.integer("static_smem");
    kernel.dynamic_smem = r.integer("dynamic_smem");
    kernel.occupancy = r.number("occupancy");
    // Absent in profiles saved before it was recorded.
    kernel.implementation = kernels[i].contains("implementation") ? r.string("implementation") : "";
    kernel.launch_start_us = r.number("launch_start_us");
    kernel.launch_cpu_us = r.number("launch_cpu_us");
    kernel.device_start_us = r.number("device_start_us");
    kernel.device_end_us = r.number("device_end_us");
    profile.kernels.push_back(std::move(kernel));
  }
  // Every per-step figure divides by active_steps: it must be the number of steps the profile
  // holds (a 0 would print totals as per-step times, a 1 for five steps five times too much).
  const size_t steps = kept_steps(profile).size();
  if (steps > 0 && static_cast<size_t>(profile.active_steps) != steps) {
    top.fail("active_steps", "is " + std::to_string(profile.active_steps) + ", but the profile holds " +
                                 std::to_string(steps) + " steps ('step N' regions)");
  }
  return profile;
}

void save_profile(const Profile& profile, const std::string& path) {
  OutputFile out(path, "profile");
  out.write(profile_to_text(profile));
  out.commit();
}

Profile load_profile(const std::string& path) {
  // A regular file, or standard input (`... | blockscope diff - after.json`), of at most
  // kMaxProfileBytes: /dev/zero is refused, not read until memory runs out.
  return profile_from_text(read_input_file(path, "profile", kMaxProfileBytes), path);
}

namespace {

// The JSON of a profile or trace file. A signal is answered between values: a profile of
// thousands of steps is hundreds of MB of JSON, seconds of parsing (the callback keeps every value).
json parse_json_text(const std::string& text, const std::string& source) {
  const json::parser_callback_t poll = [&](int, json::parse_event_t, json&) {
    if (interrupt_signal() != 0) check_interrupted(("while reading " + source).c_str());
    return true;
  };
  try {
    return json::parse(text, poll);
  } catch (const json::parse_error& error) {
    // An error at the last byte: the text stopped mid-document (a copy cut short, a disk that filled).
    const bool cut_short = !text.empty() && error.byte >= text.size();
    throw InputError(source + ": not valid JSON" + (cut_short ? " (it ends mid-document: a truncated file?)" : "") +
                     ": " + error.what());
  } catch (const json::exception& error) {  // out_of_range 406: a number like 1e400 no double holds
    throw InputError(source + ": not a profile: " + error.what());
  }
}

}  // namespace

Profile profile_from_text(const std::string& text, const std::string& source) {
  return profile_from_json(parse_json_text(text, source), source);
}

Profile load_profile_or_torch_trace(const std::string& path) {
  const json document = parse_json_text(read_input_file(path, "profile", kMaxProfileBytes), path);
  // A saved profile says what it is ("format"); a Chrome trace is an array of events or holds
  // "traceEvents". Anything else is named as neither.
  if (document.is_object() && document.contains("format")) return profile_from_json(document, path);
  if (is_chrome_trace(document)) return profile_from_torch_trace(document, path);
  throw InputError(path + ": neither a blockscope profile (no \"format\": \"" + std::string(kFormatName) +
                   "\") nor a PyTorch profiler trace (no \"traceEvents\" array): diff and report read what `blockscope "
                   "profile --save` and torch.profiler's export_chrome_trace write");
}

}  // namespace blockscope::profiler
