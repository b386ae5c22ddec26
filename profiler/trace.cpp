#include "profiler/trace.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

namespace {

using nlohmann::json;

// Device tracks live in their own "process": cuda:N is pid 100 + N, the CPU's work items 100;
// moved clear of the host's pid in the rare container where they would coincide.
int device_pid(const Profile& profile, int host_pid) {
  const std::string prefix = "cuda:";
  int pid = 100;
  if (profile.device.compare(0, prefix.size(), prefix) == 0) pid += std::atoi(profile.device.c_str() + prefix.size());
  return pid == host_pid ? pid + 1000 : pid;
}

json metadata(const char* what, int pid, int tid, const std::string& name) {
  json event = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) event["tid"] = tid;
  return event;
}

json shapes_json(const std::vector<Shape>& shapes) {
  json out = json::array();
  for (const Shape& shape : shapes) out.push_back(shape);
  return out;
}

}  // namespace

namespace {

// Process ids of one profile in a trace of several: variant 0 keeps the host's real pid and the
// device's 100 + N; variant v adds 1000·v, so each variant is its own pair of processes.
struct Pids {
  int host, device;
};
Pids pids_of(const Profile& profile, int variant) {
  const int real_host = static_cast<int>(::getpid());
  const int device = device_pid(profile, real_host) + 1000 * variant;
  int host = variant == 0 ? real_host : 1000 * variant + 10;
  if (variant > 0 && host == real_host) host += 1;  // the rare container whose pid is 1010, 2010, ...
  return {host, device == real_host && variant > 0 ? device + 2 : device};
}

// Every event of one profile, each through `emit`. Variant v's processes sort after v - 1's.
void emit_profile_events(const Profile& profile, int variant, const std::function<void(const json&)>& emit) {
  const Pids pids = pids_of(profile, variant);
  const int host_pid = pids.host, dev_pid = pids.device;
  const bool on_cpu = profile.device == "cpu";
  const std::string prefix = variant == 0 && profile.label.empty() ? "" : profile.label + ": ";

  emit(metadata("process_name", host_pid, -1, "host: " + profile.label));
  json host_sort = metadata("process_sort_index", host_pid, -1, "0");
  host_sort["args"] = {{"sort_index", 2 * variant}};
  emit(host_sort);
  emit(metadata("thread_name", host_pid, 0, "ops (CPU)"));
  emit(metadata("process_name", dev_pid, -1,
                prefix + (on_cpu ? "cpu work items" : profile.device + " (" + profile.device_name + ")")));
  json device_sort = metadata("process_sort_index", dev_pid, -1, "1");
  device_sort["args"] = {{"sort_index", 2 * variant + 1}};
  emit(device_sort);
  std::set<int> streams;
  for (const KernelEvent& kernel : profile.kernels) streams.insert(kernel.stream);
  for (int stream : streams) emit(metadata("thread_name", dev_pid, stream, on_cpu ? "work items" : "stream " + std::to_string(stream)));

  // CPU track: one complete ("X") slice per op and region; nesting follows from the times.
  // Memory: a counter track of the device's peak in use at the end of each op.
  for (const OpEvent& op : profile.ops) {
    poll_interrupted("while writing a trace");
    json args = {{"scope", op.scope}, {"step", op.step}};
    if (!op.path.empty()) args["path"] = op.path;
    if (!op.input_shapes.empty()) {
      args["input_shapes"] = shapes_json(op.input_shapes);
      args["dtype"] = dtype_name(op.dtype);
    }
    if (op.flops > 0) args["flops"] = op.flops;
    if (op.bytes > 0) args["bytes"] = op.bytes;
    if (op.bytes_allocated != 0) args["bytes_allocated"] = op.bytes_allocated;
    emit({{"ph", "X"},
          {"cat", op.is_region ? "region" : "op"},
          {"name", op.name},
          {"pid", host_pid},
          {"tid", 0},
          {"ts", op.cpu_start_us},
          {"dur", std::max(0.0, op.cpu_end_us - op.cpu_start_us)},
          {"args", args}});
    if (op.peak_bytes > 0) {
      emit({{"ph", "C"},
            {"name", "device memory peak (MiB)"},
            {"pid", host_pid},
            {"ts", op.cpu_end_us},
            {"args", {{"peak in use", static_cast<double>(op.peak_bytes) / (1024.0 * 1024.0)}}}});
    }
  }

  // Per kernel: the launch call on the CPU track (inside its op), the kernel on the device
  // track, and a flow arrow from the first to the second ("f" binds to the enclosing slice).
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    poll_interrupted("while writing a trace");
    const KernelEvent& kernel = profile.kernels[i];
    const int flow_id = 1000000 * variant + static_cast<int>(i) + 1;
    json launch_args = {{"kernel", kernel.name}};
    if (kernel.op >= 0 && static_cast<size_t>(kernel.op) < profile.ops.size()) {
      launch_args["op"] = profile.ops[kernel.op].scope;
    }
    emit({{"ph", "X"},
          {"cat", "launch"},
          {"name", on_cpu ? "run " + kernel.name : "launch " + kernel.name},
          {"pid", host_pid},
          {"tid", 0},
          {"ts", kernel.launch_start_us},
          {"dur", std::max(0.0, kernel.launch_cpu_us)},
          {"args", launch_args}});
    json kernel_args = {{"step", kernel.step}};
    if (!kernel.implementation.empty()) kernel_args["implementation"] = kernel.implementation;
    if (kernel.op >= 0 && static_cast<size_t>(kernel.op) < profile.ops.size()) {
      kernel_args["op"] = profile.ops[kernel.op].scope;
    }
    if (kernel.registers > 0 || kernel.block.x * kernel.block.y * kernel.block.z > 1) {
      kernel_args["grid"] = {kernel.grid.x, kernel.grid.y, kernel.grid.z};
      kernel_args["block"] = {kernel.block.x, kernel.block.y, kernel.block.z};
      kernel_args["registers per thread"] = kernel.registers;
      kernel_args["shared memory"] = kernel.static_smem + kernel.dynamic_smem;
      if (kernel.occupancy > 0) kernel_args["est. achieved occupancy %"] = 100.0 * kernel.occupancy;
    }
    emit({{"ph", "X"},
          {"cat", "kernel"},
          {"name", kernel.name},
          {"pid", dev_pid},
          {"tid", kernel.stream},
          {"ts", kernel.device_start_us},
          {"dur", kernel_duration_us(kernel)},
          {"args", kernel_args}});
    emit({{"ph", "s"}, {"cat", "launch"}, {"name", "launch"}, {"id", flow_id},
          {"pid", host_pid}, {"tid", 0}, {"ts", kernel.launch_start_us}});
    emit({{"ph", "f"}, {"cat", "launch"}, {"name", "launch"}, {"id", flow_id}, {"bp", "e"},
          {"pid", dev_pid}, {"tid", kernel.stream}, {"ts", kernel.device_start_us}});
  }
}

json profile_summary(const Profile& profile) {
  return {{"label", profile.label},
          {"device", profile.device},
          {"device_name", profile.device_name},
          {"dtype", profile.dtype},
          {"active_steps", profile.active_steps}};
}

// The document's text in order: each added profile's events (the first one opening the event
// list), then the end. `events` counts what was written so far; `profiles` lists the added ones.
void append_profile(const Profile& profile, std::vector<json>& profiles, size_t& events,
                    const std::function<void(const std::string&)>& sink) {
  const int variant = static_cast<int>(profiles.size());
  profiles.push_back(profile_summary(profile));
  emit_profile_events(profile, variant, [&](const json& event) {
    sink(events == 0 ? "{\"traceEvents\":[\n" + event.dump() : ",\n" + event.dump());
    ++events;
  });
}

// otherData: the first profile's fields (what a one-profile trace always had), and every
// variant in order.
std::string document_end(const std::vector<json>& profiles, size_t events) {
  json other = profiles.empty() ? json::object() : profiles.front();
  other["producer"] = "blockscope";
  other["variants"] = profiles;
  return std::string(events == 0 ? "{\"traceEvents\":[" : "") + "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" +
         other.dump() + "}";
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path) : out_(path, "trace") {}

TraceWriter::~TraceWriter() = default;

void TraceWriter::write(const std::string& piece) {
  buffer_ += piece;
  if (buffer_.size() >= (1u << 20)) {  // about 1 MiB per write
    out_.write(buffer_);
    buffer_.clear();
  }
}

void TraceWriter::add(const Profile& profile) {
  append_profile(profile, profiles_, events_, [&](const std::string& piece) { write(piece); });
}

void TraceWriter::finish() {
  write(document_end(profiles_, events_));
  out_.write(buffer_);
  buffer_.clear();
  out_.commit();
}

std::string chrome_trace_json(const Profile& profile) {
  std::string text;
  std::vector<json> profiles;
  size_t events = 0;
  append_profile(profile, profiles, events, [&](const std::string& piece) { text += piece; });
  return text + document_end(profiles, events);
}

void write_chrome_trace(const Profile& profile, const std::string& path) {
  TraceWriter writer(path);  // a temporary renamed into place: never half a trace
  writer.add(profile);
  writer.finish();
}

}  // namespace blockscope::profiler
