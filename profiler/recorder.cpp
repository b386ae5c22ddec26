#include "profiler/recorder.h"

#include <algorithm>
#include <chrono>

#include "runtime/error.h"

#include "profiler/cupti_correlation.h"

namespace blockscope::profiler {

namespace {
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Recorder::Recorder(Context& ctx) : ctx_(ctx), origin_ns_(steady_ns()) {}

double Recorder::now_us() const { return static_cast<double>(steady_ns() - origin_ns_) / 1000.0; }

int Recorder::begin_op(const std::string& name, const std::string& path, bool is_region,
                       const std::vector<const Tensor*>& inputs, double flops, double bytes,
                       std::optional<DType> dtype) {
  if (!recording_) return -1;
  OpEvent event;
  event.scope = ctx_.scope_path();
  event.name = name;
  event.path = path;
  event.is_region = is_region;
  // The op's dtype: stated, or its first input's (the one the catalogue's call is sized by).
  bool first = true;
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined()) {
      event.input_shapes.push_back(t->shape());
      if (first) event.dtype = t->dtype();
      first = false;
    }
  }
  if (dtype) event.dtype = *dtype;
  event.parent = open_.empty() ? -1 : open_.back();
  event.depth = static_cast<int>(open_.size());
  event.step = step_;
  event.flops = flops;
  event.bytes = bytes;
  const MemoryStats at_start = ctx_.backend().memory_stats();
  event.bytes_allocated = static_cast<int64_t>(at_start.total_allocated);
  event.start_bytes = static_cast<int64_t>(at_start.in_use);
  event.self_peak_bytes = event.start_bytes;
  if (open_.empty()) {
    peak_before_ops_ = at_start.peak_in_use;
    ctx_.backend().reset_peak_memory();
  } else {
    fold_peak();
  }
  open_peaks_.push_back(at_start.in_use);
  if (!origin_mark_.valid()) {
    origin_mark_ = ctx_.backend().mark();
    device_origin_us_ = now_us();
  }
  event.cpu_start_us = now_us();
  event.device_start = ctx_.backend().mark();
  ops_.push_back(std::move(event));
  open_.push_back(static_cast<int>(ops_.size() - 1));
  return open_.back();
}

void Recorder::end_op(int index) {
  if (index < 0) return;
  BS_CHECK(!open_.empty() && open_.back() == index, "profiler scopes closed out of order");
  OpEvent& event = ops_[index];
  event.device_end = ctx_.backend().mark();
  event.cpu_end_us = now_us();
  const MemoryStats stats = ctx_.backend().memory_stats();
  event.bytes_allocated = static_cast<int64_t>(stats.total_allocated) - event.bytes_allocated;
  fold_peak();  // the last stretch, still this op's own time
  open_.pop_back();
  event.peak_bytes = static_cast<int64_t>(open_peaks_.back());
  open_peaks_.pop_back();
  // The outermost op's end puts the backend's own peak figure back, with every op's folded in.
  if (open_.empty()) ctx_.backend().restore_peak_memory(std::max(peak_before_ops_, static_cast<size_t>(event.peak_bytes)));
}

void Recorder::fold_peak() {
  const size_t peak = ctx_.backend().memory_stats().peak_in_use;
  for (size_t& open_peak : open_peaks_) open_peak = std::max(open_peak, peak);
  OpEvent& innermost = ops_[open_.back()];
  innermost.self_peak_bytes = std::max(innermost.self_peak_bytes, static_cast<int64_t>(peak));
  ctx_.backend().reset_peak_memory();
}

int Recorder::begin_kernel(const std::string& name) {
  if (!recording_) return -1;
  KernelEvent kernel;
  kernel.name = name;
  kernel.op = open_.empty() ? -1 : open_.back();
  kernel.step = step_;
  if (!origin_mark_.valid()) {
    origin_mark_ = ctx_.backend().mark();
    device_origin_us_ = now_us();
  }
  kernel.launch_start_us = now_us();
  kernel.launch_cpu_us = kernel.launch_start_us;
  kernel.device_start = ctx_.backend().mark();
  kernels_.push_back(std::move(kernel));
#ifdef BLOCKSCOPE_WITH_CUPTI
  cupti_kernel_begin(kernels_.size());  // external id = index + 1: CUPTI names library kernels
#endif
  return static_cast<int>(kernels_.size() - 1);
}

void Recorder::end_kernel(int index) {
  if (index < 0) return;
  KernelEvent& kernel = kernels_[index];
#ifdef BLOCKSCOPE_WITH_CUPTI
  cupti_kernel_end();
#endif
  kernel.device_end = ctx_.backend().mark();
  kernel.launch_cpu_us = now_us() - kernel.launch_start_us;
}

void Recorder::resolve() {
  Backend& backend = ctx_.backend();
  backend.synchronize();
  if (!origin_mark_.valid()) return;
  // Device times start at the CPU time the origin mark was taken, so both tracks align.
  const double origin_cpu_us = device_origin_us_;
  for (OpEvent& event : ops_) {
    if (!event.device_start.valid()) continue;
    event.device_start_us = origin_cpu_us + backend.elapsed_ms(origin_mark_, event.device_start) * 1000.0;
    event.device_end_us = origin_cpu_us + backend.elapsed_ms(origin_mark_, event.device_end) * 1000.0;
    event.device_start = event.device_end = TimeMark{};
  }
  for (KernelEvent& kernel : kernels_) {
    if (!kernel.device_start.valid()) continue;
    kernel.device_start_us = origin_cpu_us + backend.elapsed_ms(origin_mark_, kernel.device_start) * 1000.0;
    kernel.device_end_us = origin_cpu_us + backend.elapsed_ms(origin_mark_, kernel.device_end) * 1000.0;
    kernel.device_start = kernel.device_end = TimeMark{};
  }
}

void Recorder::clear() {
  ops_.clear();
  kernels_.clear();
  open_.clear();
  open_peaks_.clear();
  origin_mark_ = TimeMark{};
  ctx_.backend().release_marks();
}

}  // namespace blockscope::profiler
