// Synthetic profiles for the profiler tests: random trees of regions, ops and kernels with
// known times, built directly (no recorder), so the tables, traces, diff and JSON can be
// checked against sums computed here independently.
#pragma once

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "profiler/session.h"

namespace blockscope::testing {

// Builds a Profile event by event, keeping parent indices and times consistent.
class ProfileBuilder {
 public:
  explicit ProfileBuilder(std::string label = "synthetic", std::string device = "cpu") {
    profile_.label = std::move(label);
    profile_.device = device;
    profile_.device_name = device == "cpu" ? "cpu (synthetic)" : "synthetic GPU";
    profile_.dtype = "f32";
  }

  // Opens an op or region at the current CPU clock; returns its index.
  int open(const std::string& name, const std::string& path = "", bool is_region = false,
           std::vector<Shape> shapes = {}, double flops = 0, double bytes = 0) {
    profiler::OpEvent event;
    event.name = name;
    event.path = path;
    event.is_region = is_region;
    event.input_shapes = std::move(shapes);
    event.flops = flops;
    event.bytes = bytes;
    event.parent = open_.empty() ? -1 : open_.back();
    event.depth = static_cast<int>(open_.size());
    event.step = step_;
    event.scope = (open_.empty() ? std::string() : profile_.ops[open_.back()].scope + "/") + name;
    event.cpu_start_us = cpu_clock_;
    event.device_start_us = device_clock_;
    profile_.ops.push_back(event);
    open_.push_back(static_cast<int>(profile_.ops.size() - 1));
    return open_.back();
  }
  void close() {
    profiler::OpEvent& event = profile_.ops[open_.back()];
    event.cpu_end_us = cpu_clock_;
    event.device_end_us = device_clock_;
    open_.pop_back();
  }
  // CPU time passing inside the innermost open event.
  void spend(double us) { cpu_clock_ += us; }
  // A kernel launched from the innermost open op: the launch takes launch_us of CPU time,
  // the kernel runs for device_us once the device is free.
  int kernel(const std::string& name, double device_us, double launch_us = 2.0, int stream = 0) {
    profiler::KernelEvent kernel;
    kernel.name = name;
    kernel.op = open_.empty() ? -1 : open_.back();
    kernel.step = step_;
    kernel.stream = stream;
    kernel.launch_start_us = cpu_clock_;
    kernel.launch_cpu_us = launch_us;
    cpu_clock_ += launch_us;
    device_clock_ = std::max(device_clock_, kernel.launch_start_us + 1.0);
    kernel.device_start_us = device_clock_;
    device_clock_ += device_us;
    kernel.device_end_us = device_clock_;
    profile_.kernels.push_back(kernel);
    return static_cast<int>(profile_.kernels.size() - 1);
  }
  void set_step(int step) { step_ = step; }
  void set_active_steps(int steps) { profile_.active_steps = steps; }
  profiler::Profile& profile() { return profile_; }

 private:
  profiler::Profile profile_;
  std::vector<int> open_;
  int step_ = 0;
  double cpu_clock_ = 10.0, device_clock_ = 0.0;
};

// A random profile: `steps` step regions, each holding a few ops (some nested two or three
// deep, some regions) that launch a few kernels from a small set of names.
inline profiler::Profile random_profile(uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const std::vector<std::string> op_names = {"linear", "softmax", "add", "attention", "layer_norm"};
  const std::vector<std::string> kernel_names = {"gemm_kernel", "softmax_kernel", "add_kernel", "copy_kernel"};
  ProfileBuilder builder;
  // Ops nest: each op spends CPU time, maybe launches kernels, maybe has children.
  std::function<void(int)> add_op = [&](int depth) {
    const bool region = pick(5) == 0;
    const std::string name = region ? "block." + std::to_string(pick(2)) : op_names[pick(op_names.size())];
    builder.open(name, region ? "" : (pick(2) ? "naive" : "fused"), region, {{1 + pick(4), 8}, {8, 3}},
                 region ? 0 : uniform(1e3, 1e6), region ? 0 : uniform(1e3, 1e5));
    builder.spend(uniform(1, 20));
    const int kernels = pick(3);
    for (int k = 0; k < kernels; ++k) builder.kernel(kernel_names[pick(kernel_names.size())], uniform(1, 200), uniform(1, 5));
    if (depth < 3) {
      const int children = pick(3);
      for (int c = 0; c < children; ++c) add_op(depth + 1);
    }
    builder.spend(uniform(1, 10));
    builder.close();
  };
  for (int step = 0; step < steps; ++step) {
    builder.set_step(step);
    builder.open("step " + std::to_string(step), "", true);
    const int ops = 1 + pick(4);
    for (int i = 0; i < ops; ++i) add_op(1);
    builder.spend(uniform(1, 5));
    builder.close();
  }
  builder.set_active_steps(steps);
  builder.profile().peaks = {1.0, 100.0, "test"};
  return builder.profile();
}

}  // namespace blockscope::testing
