#include "profiler/trace.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "profiler/summary.h"
#include "runtime/error.h"
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

std::string chrome_trace_json(const Profile& profile) {
  const int host_pid = static_cast<int>(::getpid());
  const int dev_pid = device_pid(profile, host_pid);
  const bool on_cpu = profile.device == "cpu";
  json events = json::array();

  events.push_back(metadata("process_name", host_pid, -1, "host: " + profile.label));
  events.push_back(metadata("process_sort_index", host_pid, -1, "0"));
  events.back()["args"] = {{"sort_index", 0}};
  events.push_back(metadata("thread_name", host_pid, 0, "ops (CPU)"));
  events.push_back(metadata("process_name", dev_pid, -1,
                            on_cpu ? "cpu work items" : profile.device + " (" + profile.device_name + ")"));
  events.push_back(metadata("process_sort_index", dev_pid, -1, "1"));
  events.back()["args"] = {{"sort_index", 1}};
  std::set<int> streams;
  for (const KernelEvent& kernel : profile.kernels) streams.insert(kernel.stream);
  for (int stream : streams) {
    events.push_back(metadata("thread_name", dev_pid, stream,
                              on_cpu ? "work items" : "stream " + std::to_string(stream)));
  }

  // CPU track: one complete ("X") slice per op and region; nesting follows from the times.
  for (const OpEvent& op : profile.ops) {
    json args = {{"scope", op.scope}, {"step", op.step}};
    if (!op.path.empty()) args["path"] = op.path;
    if (!op.input_shapes.empty()) {
      args["input_shapes"] = shapes_json(op.input_shapes);
      args["dtype"] = dtype_name(op.dtype);
    }
    if (op.flops > 0) args["flops"] = op.flops;
    if (op.bytes > 0) args["bytes"] = op.bytes;
    if (op.bytes_allocated != 0) args["bytes_allocated"] = op.bytes_allocated;
    events.push_back({{"ph", "X"},
                      {"cat", op.is_region ? "region" : "op"},
                      {"name", op.name},
                      {"pid", host_pid},
                      {"tid", 0},
                      {"ts", op.cpu_start_us},
                      {"dur", std::max(0.0, op.cpu_end_us - op.cpu_start_us)},
                      {"args", args}});
  }

  // Per kernel: the launch call on the CPU track (inside its op), the kernel on the device
  // track, and a flow arrow from the first to the second ("f" binds to the enclosing slice).
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    const KernelEvent& kernel = profile.kernels[i];
    const int flow_id = static_cast<int>(i) + 1;
    json launch_args = {{"kernel", kernel.name}};
    if (kernel.op >= 0 && static_cast<size_t>(kernel.op) < profile.ops.size()) {
      launch_args["op"] = profile.ops[kernel.op].scope;
    }
    events.push_back({{"ph", "X"},
                      {"cat", "launch"},
                      {"name", on_cpu ? "run " + kernel.name : "launch " + kernel.name},
                      {"pid", host_pid},
                      {"tid", 0},
                      {"ts", kernel.launch_start_us},
                      {"dur", std::max(0.0, kernel.launch_cpu_us)},
                      {"args", launch_args}});
    json kernel_args = {{"step", kernel.step}};
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
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", kernel.name},
                      {"pid", dev_pid},
                      {"tid", kernel.stream},
                      {"ts", kernel.device_start_us},
                      {"dur", kernel_duration_us(kernel)},
                      {"args", kernel_args}});
    events.push_back({{"ph", "s"}, {"cat", "launch"}, {"name", "launch"}, {"id", flow_id},
                      {"pid", host_pid}, {"tid", 0}, {"ts", kernel.launch_start_us}});
    events.push_back({{"ph", "f"}, {"cat", "launch"}, {"name", "launch"}, {"id", flow_id}, {"bp", "e"},
                      {"pid", dev_pid}, {"tid", kernel.stream}, {"ts", kernel.device_start_us}});
  }

  json trace = {{"traceEvents", events},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"producer", "blockscope"},
                  {"label", profile.label},
                  {"device", profile.device},
                  {"device_name", profile.device_name},
                  {"dtype", profile.dtype},
                  {"active_steps", profile.active_steps}}}};
  return trace.dump();
}

void write_chrome_trace(const Profile& profile, const std::string& path) {
  OutputFile out(path, "trace");  // a temporary renamed into place: never half a trace
  out.write(chrome_trace_json(profile));
  out.commit();
}

}  // namespace blockscope::profiler
