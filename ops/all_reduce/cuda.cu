// CUDA all_reduce. Two ways, by the communicator's engine:
//   NCCL (reduces_device_memory): ncclAllReduce in place on the context's stream, enqueued like
//     a kernel — the recorded "kernel" is the collective's time on the stream;
//   otherwise (MPI between processes): staged through host memory — the tensor is copied to the
//     host (the backend's stream synchronised first: the copy waits for the work that wrote it),
//     reduced by the communicator, and copied back; one "kernel" event spans the three. Refused
//     inside a CUDA graph capture by the backend's copies (host round trip).
// No device code: the same file builds with nvcc and nvcc-sim.
#include <vector>

#include "ops/all_reduce/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cuda {

void all_reduce(Context& ctx, Tensor& t, Communicator& comm) {
  if (t.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    if (comm.reduces_device_memory()) {
      comm.all_reduce_sum_on_device(ctx, nullptr, 0, t.dtype());
    } else {
      comm.all_reduce_sum(nullptr, 0, t.dtype());
    }
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kAllReduce);
  if (comm.reduces_device_memory()) {
    comm.all_reduce_sum_on_device(ctx, t.data(), t.numel(), t.dtype());
    return;
  }
  std::vector<char> host(t.nbytes());
  ctx.backend().copy_to_host(host.data(), t.data(), host.size());
  comm.all_reduce_sum(host.data(), t.numel(), t.dtype());
  ctx.backend().copy_to_device(t.data(), host.data(), host.size());
}

}  // namespace blockscope::ops::cuda
