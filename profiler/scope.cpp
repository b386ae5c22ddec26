#include "profiler/scope.h"

#include <exception>

#include "runtime/error.h"

namespace blockscope::profiler {

OpScope::OpScope(Context& ctx, const char* op, const char* path, Family family,
                 std::initializer_list<const Tensor*> inputs, double flops, double bytes)
    : ctx_(ctx), op_(op), uncaught_(std::uncaught_exceptions()) {
  // Before anything is pushed or recorded: a refused call leaves no trace, like validation.
  for (const Tensor* t : inputs) {
    if (t != nullptr) check_same_context(ctx, op, *t);
  }
  nvtx_push(op, family);
  ctx_.push_scope(op);
  if (Recorder* recorder = ctx_.recorder()) {
    event_ = recorder->begin_op(op, path ? path : "", false, std::vector<const Tensor*>(inputs), flops, bytes);
  }
}

OpScope::~OpScope() noexcept(false) {
  if (Recorder* recorder = ctx_.recorder()) recorder->end_op(event_);
  ctx_.pop_scope();
  nvtx_pop();
  // Debug mode: surface an asynchronous failure here, naming the op that caused it.
  if (ctx_.sync_after_each_op() && std::uncaught_exceptions() == uncaught_) {
    try {
      ctx_.synchronize();
    } catch (const Error& error) {
      throw Error(error.kind(), std::string("op '") + op_ + "' failed: " + error.what());
    }
  }
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

KernelScope::KernelScope(Context& ctx, const char* name) : ctx_(ctx) {
  if (Recorder* recorder = ctx_.recorder()) event_ = recorder->begin_kernel(name);
}

KernelScope::~KernelScope() {
  if (Recorder* recorder = ctx_.recorder()) recorder->end_kernel(event_);
}

}  // namespace blockscope::profiler
