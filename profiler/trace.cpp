#include "profiler/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"
#include "runtime/output_file.h"

namespace blockscope::profiler {

namespace {

using nlohmann::json;

// N of cuda:N; -1 on the CPU.
int device_index(const Profile& profile) {
  const std::string prefix = "cuda:";
  return profile.device.compare(0, prefix.size(), prefix) == 0 ? std::atoi(profile.device.c_str() + prefix.size()) : -1;
}

// Device tracks live in their own "process": cuda:N is pid 100 + N, the CPU's work items 100;
// moved clear of the host's pid in the rare container where they would coincide.
int device_pid(const Profile& profile, int host_pid) {
  const int pid = 100 + std::max(0, device_index(profile));
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

namespace detail {

// What one file's profiles share: its rank, its device, where the last profile ended, and the
// ids given so far (correlation and External id are unique within a file, as HTA joins on them).
struct TraceState {
  TraceRank rank;
  json device_properties = json::array();
  std::vector<json> profiles;  // each added profile's summary
  size_t events = 0;
  double end_us = 0;
  int64_t correlations = 0, external_ids = 0;
};

}  // namespace detail

namespace {

using detail::TraceState;

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

// A GPU stream's number in the trace: the recorder's stream index + 1, because HTA (like CUPTI,
// which never reports a stream 0) reads a stream of 0 or less as no GPU stream.
int trace_stream(const KernelEvent& kernel) { return kernel.stream + 1; }

// Kineto's names for a device activity and its host call: copies and fills (named as Nsight
// and torch.profiler name them: "Memcpy DtoD", "Memset") are not kernels to HTA.
struct GpuActivity {
  const char* category;
  const char* launch_call;
};
GpuActivity gpu_activity(const std::string& kernel_name) {
  if (kernel_name.rfind("Memcpy", 0) == 0) return {"gpu_memcpy", "cudaMemcpyAsync"};
  if (kernel_name.rfind("Memset", 0) == 0) return {"gpu_memset", "cudaMemsetAsync"};
  return {"kernel", "cudaLaunchKernel"};
}

// The earliest start and latest end of a profile's events (CPU and device alike).
struct Span {
  double start = std::numeric_limits<double>::infinity(), end = -std::numeric_limits<double>::infinity();
  bool empty() const { return start > end; }
};
Span span_of(const Profile& profile) {
  Span span;
  for (const OpEvent& op : profile.ops) {
    span.start = std::min(span.start, op.cpu_start_us);
    span.end = std::max(span.end, op.cpu_end_us);
  }
  for (const KernelEvent& kernel : profile.kernels) {
    span.start = std::min({span.start, kernel.launch_start_us, kernel.device_start_us});
    span.end = std::max({span.end, kernel.launch_start_us + kernel.launch_cpu_us, kernel.device_end_us});
  }
  return span;
}

json kineto_device_properties(const DeviceProperties& d) {
  return {{"id", d.index},
          {"name", d.name},
          {"totalGlobalMem", d.total_global_mem},
          {"computeMajor", d.compute_major},
          {"computeMinor", d.compute_minor},
          {"maxThreadsPerBlock", d.max_threads_per_block},
          {"maxThreadsPerMultiprocessor", d.max_threads_per_sm},
          {"regsPerBlock", d.regs_per_block},
          {"regsPerMultiprocessor", d.regs_per_sm},
          {"warpSize", d.warp_size},
          {"sharedMemPerBlock", d.shared_mem_per_block},
          {"sharedMemPerMultiprocessor", d.shared_mem_per_sm},
          {"numSms", d.num_sms},
          {"sharedMemPerBlockOptin", d.shared_mem_per_block_optin}};
}

// Every event of one profile, each through `emit`. Variant v's processes sort after v - 1's,
// and its times begin where v - 1's ended (each profile's clock starts at its own first step).
void emit_profile_events(const Profile& profile, int variant, TraceState& state,
                         const std::function<void(const json&)>& emit) {
  const Pids pids = pids_of(profile, variant);
  const int host_pid = pids.host, dev_pid = pids.device;
  const bool on_cpu = profile.device == "cpu";
  const std::string prefix = variant == 0 && profile.label.empty() ? "" : profile.label + ": ";
  const Span span = span_of(profile);
  const double shift = variant == 0 || span.empty() ? 0.0 : state.end_us - span.start;
  if (!span.empty()) state.end_us = span.end + shift;
  const int64_t first_correlation = state.correlations, first_external_id = state.external_ids;
  state.correlations += static_cast<int64_t>(profile.kernels.size());
  state.external_ids += static_cast<int64_t>(profile.ops.size());
  // Kineto's "External id": the op (record_function) an event belongs to, on the op itself, its
  // launches and their kernels.
  const auto external_id = [&](int op) { return first_external_id + op + 1; };
  const auto has_op = [&](const KernelEvent& kernel) {
    return kernel.op >= 0 && static_cast<size_t>(kernel.op) < profile.ops.size();
  };

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
  std::set<int> tids;
  for (const KernelEvent& kernel : profile.kernels) tids.insert(on_cpu ? kernel.stream : trace_stream(kernel));
  for (int tid : tids) emit(metadata("thread_name", dev_pid, tid, on_cpu ? "work items" : "stream " + std::to_string(tid)));

  // CPU track: one complete ("X") slice per op (Kineto's "cpu_op") and region (a
  // record_function: "user_annotation"); nesting follows from the times. Memory: a counter track
  // of the device's peak in use at the end of each op.
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    poll_interrupted("while writing a trace");
    const OpEvent& op = profile.ops[i];
    json args = {{"External id", external_id(static_cast<int>(i))},
                 {"blockscope category", op.is_region ? "region" : "op"},
                 {"scope", op.scope},
                 {"step", op.step}};
    if (!op.path.empty()) args["path"] = op.path;
    if (!op.input_shapes.empty()) {
      args["input_shapes"] = shapes_json(op.input_shapes);
      args["dtype"] = dtype_name(op.dtype);
    }
    if (op.flops > 0) args["flops"] = op.flops;
    if (op.bytes > 0) args["bytes"] = op.bytes;
    if (op.bytes_allocated != 0) args["bytes_allocated"] = op.bytes_allocated;
    emit({{"ph", "X"},
          {"cat", op.is_region ? "user_annotation" : "cpu_op"},
          {"name", op.name},
          {"pid", host_pid},
          {"tid", 0},
          {"ts", op.cpu_start_us + shift},
          {"dur", std::max(0.0, op.cpu_end_us - op.cpu_start_us)},
          {"args", args}});
    if (op.peak_bytes > 0) {
      emit({{"ph", "C"},
            {"name", "device memory peak (MiB)"},
            {"pid", host_pid},
            {"ts", op.cpu_end_us + shift},
            {"args", {{"peak in use", static_cast<double>(op.peak_bytes) / (1024.0 * 1024.0)}}}});
    }
  }

  // Per kernel: the launch call on the CPU track (inside its op), the kernel on the device
  // track, and a flow arrow from the first to the second ("f" binds to the enclosing slice).
  // On a GPU the launch is Kineto's "cuda_runtime" call and the kernel carries its stream, device
  // and correlation id, which is what makes HTA read it as a GPU kernel. On the CPU a work item
  // is CPU work: no stream, no correlation, and categories HTA never takes for a GPU's.
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    poll_interrupted("while writing a trace");
    const KernelEvent& kernel = profile.kernels[i];
    const int64_t link = first_correlation + static_cast<int64_t>(i) + 1;  // correlation id and flow id
    const GpuActivity activity = gpu_activity(kernel.name);
    json launch_args = {{"blockscope category", "launch"}, {"kernel", kernel.name}};
    if (!on_cpu) launch_args["correlation"] = link;
    if (has_op(kernel)) {
      launch_args["op"] = profile.ops[kernel.op].scope;
      launch_args["External id"] = external_id(kernel.op);
    }
    emit({{"ph", "X"},
          {"cat", on_cpu ? "cpu_op" : "cuda_runtime"},
          {"name", on_cpu ? "run " + kernel.name : std::string(activity.launch_call)},
          {"pid", host_pid},
          {"tid", 0},
          {"ts", kernel.launch_start_us + shift},
          {"dur", std::max(0.0, kernel.launch_cpu_us)},
          {"args", launch_args}});
    json kernel_args = {{"blockscope category", on_cpu ? "work item" : "kernel"}, {"step", kernel.step}};
    if (!on_cpu) {
      kernel_args["correlation"] = link;
      kernel_args["stream"] = trace_stream(kernel);
      kernel_args["device"] = device_index(profile);
    }
    if (!kernel.implementation.empty()) kernel_args["implementation"] = kernel.implementation;
    if (has_op(kernel)) {
      kernel_args["op"] = profile.ops[kernel.op].scope;
      kernel_args["External id"] = external_id(kernel.op);
    }
    if (kernel.registers > 0 || kernel.block.x * kernel.block.y * kernel.block.z > 1) {
      kernel_args["grid"] = {kernel.grid.x, kernel.grid.y, kernel.grid.z};
      kernel_args["block"] = {kernel.block.x, kernel.block.y, kernel.block.z};
      kernel_args["registers per thread"] = kernel.registers;
      kernel_args["shared memory"] = kernel.static_smem + kernel.dynamic_smem;
      if (kernel.occupancy > 0) kernel_args["est. achieved occupancy %"] = 100.0 * kernel.occupancy;
    }
    const int device_tid = on_cpu ? kernel.stream : trace_stream(kernel);
    emit({{"ph", "X"},
          {"cat", on_cpu ? "cpu_work_item" : activity.category},
          {"name", kernel.name},
          {"pid", dev_pid},
          {"tid", device_tid},
          {"ts", kernel.device_start_us + shift},
          {"dur", kernel_duration_us(kernel)},
          {"args", kernel_args}});
    // Kineto's launch arrows: category "ac2g", the correlation id as the flow id.
    emit({{"ph", "s"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", link},
          {"pid", host_pid}, {"tid", 0}, {"ts", kernel.launch_start_us + shift}});
    emit({{"ph", "f"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", link}, {"bp", "e"},
          {"pid", dev_pid}, {"tid", device_tid}, {"ts", kernel.device_start_us + shift}});
  }
}

json profile_summary(const Profile& profile) {
  return {{"label", profile.label},
          {"device", profile.device},
          {"device_name", profile.device_name},
          {"dtype", profile.dtype},
          {"active_steps", profile.active_steps}};
}

// The document opens with Kineto's header: HTA finds a file's rank with a search for
// `"rank": N` (a space after the colon) on one line, so this line is written by hand.
std::string document_start(const TraceRank& rank) {
  return "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": " + json(rank.backend).dump() +
         ", \"rank\": " + std::to_string(rank.rank) + ", \"world_size\": " + std::to_string(rank.world_size) +
         "},\n\"traceEvents\":[";
}

// The document's text in order: the header and each added profile's events, then the end.
void append_profile(const Profile& profile, TraceState& state, const std::function<void(const std::string&)>& sink) {
  const int variant = static_cast<int>(state.profiles.size());
  if (variant == 0 && profile.device_properties)
    state.device_properties.push_back(kineto_device_properties(*profile.device_properties));
  state.profiles.push_back(profile_summary(profile));
  emit_profile_events(profile, variant, state, [&](const json& event) {
    sink(state.events == 0 ? "\n" + event.dump() : ",\n" + event.dump());
    ++state.events;
  });
}

// deviceProperties (HTA 0.5 reads none of it), then otherData: the first profile's fields (what
// a one-profile trace always had), and every variant in order.
std::string document_end(const TraceState& state) {
  json other = state.profiles.empty() ? json::object() : state.profiles.front();
  other["producer"] = "blockscope";
  other["variants"] = state.profiles;
  return "\n],\"deviceProperties\":" + state.device_properties.dump() + ",\"displayTimeUnit\":\"ms\",\"otherData\":" +
         other.dump() + "}";
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path, TraceRank rank)
    : out_(path, "trace"), state_(std::make_unique<TraceState>()) {
  state_->rank = std::move(rank);
  write(document_start(state_->rank));
}

TraceWriter::~TraceWriter() = default;

void TraceWriter::write(const std::string& piece) {
  buffer_ += piece;
  if (buffer_.size() >= (1u << 20)) {  // about 1 MiB per write
    out_.write(buffer_);
    buffer_.clear();
  }
}

void TraceWriter::add(const Profile& profile) {
  append_profile(profile, *state_, [&](const std::string& piece) { write(piece); });
}

void TraceWriter::finish() {
  write(document_end(*state_));
  out_.write(buffer_);
  buffer_.clear();
  out_.commit();
}

std::string chrome_trace_json(const Profile& profile, const TraceRank& rank) {
  TraceState state;
  state.rank = rank;
  std::string text = document_start(rank);
  append_profile(profile, state, [&](const std::string& piece) { text += piece; });
  return text + document_end(state);
}

void write_chrome_trace(const Profile& profile, const std::string& path, const TraceRank& rank) {
  TraceWriter writer(path, rank);  // a temporary renamed into place: never half a trace
  writer.add(profile);
  writer.finish();
}

}  // namespace blockscope::profiler
