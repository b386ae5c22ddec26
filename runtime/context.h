// Context: the device, its backend, the profiler recorder and the scope path.
// Every op takes a Context first; a context runs work in order on one stream.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/tensor.h"

namespace blockscope {

namespace profiler {
class Recorder;
}

class Context {
 public:
  // Creates the backend for `device` (throws if CUDA is not built in or the device is absent).
  explicit Context(Device device = Device::cpu());
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  Backend& backend() { return *backend_; }
  const std::shared_ptr<Backend>& backend_ptr() const { return backend_; }

  // A new, uninitialised tensor on this context's device (contiguous).
  Tensor empty(const Shape& shape, DType dtype);
  // A copy of `src` (any device, any strides) as a contiguous tensor on this device. Also the
  // way to hand a tensor from another context on the same GPU to this one: the source
  // context's stream is synchronised first, so the copy reads finished data.
  Tensor copy_from(const Tensor& src);

  void synchronize() { backend_->synchronize(); }

  // Profiler: null when not profiling (ops then only open NVTX ranges).
  profiler::Recorder* recorder() const { return recorder_; }
  void set_recorder(profiler::Recorder* recorder) { recorder_ = recorder; }

  // Scope path, e.g. {"block.0", "attn"}; ops and regions push and pop through
  // profiler scopes. joined: "block.0/attn".
  void push_scope(const std::string& name) { scope_.push_back(name); }
  void pop_scope() { scope_.pop_back(); }
  const std::vector<std::string>& scope() const { return scope_; }
  std::string scope_path() const;

  // Debug aid: synchronise and check for errors after every op (CUDA), naming the op.
  bool sync_after_each_op() const { return sync_after_each_op_; }
  void set_sync_after_each_op(bool on) { sync_after_each_op_ = on; }
  // Diagnosis (run.check_finite): after every op, synchronise and fail naming the op whose
  // output holds a NaN or an infinity.
  bool check_finite_after_each_op() const { return check_finite_after_each_op_; }
  void set_check_finite_after_each_op(bool on) { check_finite_after_each_op_ = on; }

 private:
  Device device_;
  std::shared_ptr<Backend> backend_;
  profiler::Recorder* recorder_ = nullptr;
  std::vector<std::string> scope_;
  bool sync_after_each_op_ = false;
  bool check_finite_after_each_op_ = false;
};

// Cross-context use on one GPU. Each CUDA context has its own stream, and nothing orders two
// streams: a tensor written on context A's stream and read by an op on context B's stream
// (same GPU) could be read before A's kernels finish. Ops therefore refuse (InputError) an
// input whose storage belongs to another CUDA context, naming the fix: `b.copy_from(t)`,
// which synchronises A's stream first. (Ordering by events instead would need every tensor
// to carry its producer's stream and every consumer to wait on it; a refusal is simpler and
// never silently slower.) Called by profiler::OpScope for the tensors each op lists, so it
// covers every public op; CPU contexts run synchronously and share tensors freely.
void check_same_context(Context& ctx, const char* op, const Tensor& t);

// Backend factories. make_cuda_backend exists only in CUDA builds; cuda_available() says
// whether a usable GPU is present (false in CPU-only builds).
std::shared_ptr<Backend> make_cpu_backend();
bool cuda_built();
// True when the CUDA backend runs on the simulated GPU (BLOCKSCOPE_CUDA=SIM, sim/).
bool cuda_simulated();
bool cuda_available();
int cuda_device_count();

}  // namespace blockscope
