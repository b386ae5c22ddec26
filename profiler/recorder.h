// The event recorder: one OpEvent per op call or named region, one KernelEvent per kernel
// launch (CUDA) or work item (CPU). Device times are marks resolved after synchronize().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/context.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace blockscope::profiler {

struct OpEvent {
  std::string scope;       // full path including this op: "block.0/attn/softmax"
  std::string name;        // op or region name: "softmax", "block.0"
  std::string path;        // implementation path ("fused_softmax"), empty for regions
  bool is_region = false;  // a named region (record_function), not an op
  std::vector<Shape> input_shapes;
  DType dtype = DType::f32;
  int parent = -1;  // index of the enclosing event in the same step, -1 at top level
  int depth = 0;
  int step = 0;
  double cpu_start_us = 0, cpu_end_us = 0;  // since the recorder's origin
  TimeMark device_start, device_end;
  double device_start_us = 0, device_end_us = 0;  // resolved by Recorder::resolve()
  double flops = 0;  // from the op's own formula
  double bytes = 0;  // bytes the op must read and write at least
  int64_t bytes_allocated = 0;  // by this op and its children
  int64_t peak_bytes = 0;       // device memory in use at its highest during the op
  int64_t self_peak_bytes = 0;  // ... while none of its children ran (what the op itself held)
  int64_t start_bytes = 0;      // device memory in use when the op began
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct KernelEvent {
  std::string name;  // "softmax_causal_scale_kernel", "cpu_gemm", or the CUPTI name
  int op = -1;       // index of the op event that launched it
  int step = 0;
  int stream = 0;
  Dim3 grid, block;
  int registers = 0;
  int64_t static_smem = 0, dynamic_smem = 0;
  double occupancy = 0;        // theoretical, 0..1; 0 when unknown (library kernels)
  // What ran, where the name alone does not say: the CPU GEMM library's kernel and the weights'
  // layout ("onednn brg:avx512_core_amx, packed weights", "openblas sgemm, f32 widened"); "" else.
  std::string implementation;
  double launch_cpu_us = 0;    // CPU time of the launch call (duration)
  double launch_start_us = 0;  // when the launch call began (CPU clock, for trace flows)
  TimeMark device_start, device_end;
  double device_start_us = 0, device_end_us = 0;
};

class Recorder {
 public:
  explicit Recorder(Context& ctx);

  // Steps: events are tagged with the current step. The schedule (wait/warmup/active)
  // decides which steps are recorded at all; see recording().
  void set_step(int step) { step_ = step; }
  int step() const { return step_; }
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }

  // Called by profiler scopes. Return the event index (or -1 when not recording).
  int begin_op(const std::string& name, const std::string& path, bool is_region,
               const std::vector<const Tensor*>& inputs, double flops, double bytes,
               std::optional<DType> dtype = std::nullopt);
  void end_op(int index);
  int begin_kernel(const std::string& name);  // CPU time of the launch starts here
  void end_kernel(int index);                 // and ends here
  KernelEvent* kernel(int index) { return index >= 0 ? &kernels_[index] : nullptr; }

  // Synchronises the device and converts every mark to microseconds since the first mark.
  void resolve();
  void clear();

  const std::vector<OpEvent>& ops() const { return ops_; }
  const std::vector<KernelEvent>& kernels() const { return kernels_; }
  std::vector<OpEvent>& mutable_ops() { return ops_; }
  std::vector<KernelEvent>& mutable_kernels() { return kernels_; }
  Device device() const { return ctx_.device(); }

  double now_us() const;

 private:
  Context& ctx_;
  int step_ = 0;
  bool recording_ = true;
  std::vector<OpEvent> ops_;
  std::vector<KernelEvent> kernels_;
  std::vector<int> open_;  // stack of open op events
  // Memory peaks: the backend's peak is reset at every op boundary (begin or end), so each
  // reading covers a stretch of one op's own time, its innermost open op's.
  std::vector<size_t> open_peaks_;  // per open op: its peak so far, children's included
  size_t peak_before_ops_ = 0;      // the backend's peak before the outermost op began
  void fold_peak();                 // credits the stretch since the last boundary, then resets
  int64_t origin_ns_ = 0;
  TimeMark origin_mark_;
  double device_origin_us_ = 0;
};

}  // namespace blockscope::profiler
