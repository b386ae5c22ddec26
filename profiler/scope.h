// Profiler scopes used by ops and by the block code.
//
//   OpScope      one per op call: NVTX range + recorder op event (FLOPs and bytes from the
//                op's own formula). Pushes the op name onto the context's scope path.
//   RegionScope  a named region ("block.0", "attn", "step 3"), like torch's record_function.
//   KernelScope  one per kernel launch (CUDA) or work item (CPU): a recorder kernel event.
//   NvtxRange    an NVTX range only, no recorder event: a name per instance that the tables
//                would not group ("decode/step.3" inside the decode_step region).
//
// With no recorder attached, OpScope and RegionScope only push NVTX ranges.
#pragma once

#include <optional>

#include <initializer_list>
#include <string>
#include <vector>

#include "profiler/nvtx.h"
#include "profiler/recorder.h"
#include "runtime/context.h"

namespace blockscope::profiler {

class OpScope {
 public:
  OpScope(Context& ctx, const char* op, const char* path, Family family,
          std::initializer_list<const Tensor*> inputs, double flops = 0, double bytes = 0,
          std::optional<DType> dtype = std::nullopt);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Context& ctx_;
  int event_ = -1;
};

class RegionScope {
 public:
  RegionScope(Context& ctx, const std::string& name);
  ~RegionScope();
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  Context& ctx_;
  int event_ = -1;
};

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Keeps the context's recorder as it is now and puts it back when it ends, also when what runs
// in between throws: the profiler attaches its own for a session, a CUDA graph capture detaches
// it (a capture runs nothing to record).
class RecorderAttachment {
 public:
  explicit RecorderAttachment(Context& ctx) : ctx_(ctx), previous_(ctx.recorder()) {}
  ~RecorderAttachment() { ctx_.set_recorder(previous_); }
  RecorderAttachment(const RecorderAttachment&) = delete;
  RecorderAttachment& operator=(const RecorderAttachment&) = delete;

 private:
  Context& ctx_;
  Recorder* previous_;
};

class KernelScope {
 public:
  KernelScope(Context& ctx, const char* name);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  // The recorded event (null when not recording): the CUDA launch helper fills in its
  // grid, block, registers and occupancy.
  KernelEvent* event() { return ctx_.recorder() ? ctx_.recorder()->kernel(event_) : nullptr; }
  // Records what ran (KernelEvent::implementation) when recording.
  void set_implementation(const std::string& what) {
    if (KernelEvent* e = event()) e->implementation = what;
  }

 private:
  Context& ctx_;
  int event_ = -1;
};

}  // namespace blockscope::profiler
