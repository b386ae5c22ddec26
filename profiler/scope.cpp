#include "profiler/scope.h"

#include "runtime/error.h"

namespace blockscope::profiler {

OpScope::OpScope(Context& ctx, const char* op, const char* path, Family family,
                 std::initializer_list<const Tensor*> inputs, double flops, double bytes, std::optional<DType> dtype)
    : ctx_(ctx) {
  // Before anything is pushed or recorded: a refused call leaves no trace, like validation.
  for (const Tensor* t : inputs) {
    if (t != nullptr) check_same_context(ctx, op, *t);
  }
  nvtx_push(op, family);
  ctx_.push_scope(op);
  if (Recorder* recorder = ctx_.recorder()) {
    event_ = recorder->begin_op(op, path ? path : "", false, std::vector<const Tensor*>(inputs), flops, bytes, dtype);
  }
}

OpScope::~OpScope() {
  if (Recorder* recorder = ctx_.recorder()) recorder->end_op(event_);
  ctx_.pop_scope();
  nvtx_pop();
}

RegionScope::RegionScope(Context& ctx, const std::string& name) : ctx_(ctx) {
  nvtx_push(name.c_str(), Family::region);
  ctx_.push_scope(name);
  if (Recorder* recorder = ctx_.recorder()) event_ = recorder->begin_op(name, "", true, {}, 0, 0);
}

RegionScope::~RegionScope() {
  if (Recorder* recorder = ctx_.recorder()) recorder->end_op(event_);
  ctx_.pop_scope();
  nvtx_pop();
}

NvtxRange::NvtxRange(const std::string& name) { nvtx_push(name.c_str(), Family::region); }
NvtxRange::~NvtxRange() { nvtx_pop(); }

KernelScope::KernelScope(Context& ctx, const char* name) : ctx_(ctx) {
  if (Recorder* recorder = ctx_.recorder()) event_ = recorder->begin_kernel(name);
}

KernelScope::~KernelScope() {
  if (Recorder* recorder = ctx_.recorder()) recorder->end_kernel(event_);
}

}  // namespace blockscope::profiler
