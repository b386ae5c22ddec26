// CUDA all_reduce, staged through host memory until an NCCL engine exists: the tensor is copied
// to the host (the backend's stream synchronised first: the copy waits for the work that wrote
// it), reduced by the communicator, and copied back. One "kernel" event spans the three, so the
// time recorded is the whole exchange. No device code: the same file builds with nvcc and
// nvcc-sim. Refused inside a CUDA graph capture by the backend's copies (host round trip).
#include <vector>

#include "ops/all_reduce/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cuda {

void all_reduce(Context& ctx, Tensor& t, Communicator& comm) {
  if (t.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    comm.all_reduce_sum(nullptr, 0, t.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kAllReduce);
  std::vector<char> host(t.nbytes());
  ctx.backend().copy_to_host(host.data(), t.data(), host.size());
  comm.all_reduce_sum(host.data(), t.numel(), t.dtype());
  ctx.backend().copy_to_device(t.data(), host.data(), host.size());
}

}  // namespace blockscope::ops::cuda
