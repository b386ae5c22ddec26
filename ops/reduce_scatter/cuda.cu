// CUDA reduce_scatter: NCCL's ncclReduceScatter on the context's stream where the communicator
// reduces device memory; otherwise staged through host memory (copy out, the communicator's
// reduce_scatter_sum, copy back), one "kernel" spanning the three. No device code.
#include <vector>

#include "ops/reduce_scatter/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cuda {

void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  const bool on_device = comm.reduces_device_memory();
  if (out.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    if (on_device) comm.reduce_scatter_sum_on_device(ctx, x.data(), out.data(), 0, out.dtype());
    else comm.reduce_scatter_sum(nullptr, nullptr, 0, out.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kReduceScatter);
  if (on_device) {
    comm.reduce_scatter_sum_on_device(ctx, x.data(), out.data(), out.numel(), out.dtype());
    return;
  }
  std::vector<char> send(x.nbytes()), recv(out.nbytes());
  ctx.backend().copy_to_host(send.data(), x.data(), send.size());
  comm.reduce_scatter_sum(send.data(), recv.data(), out.numel(), out.dtype());
  ctx.backend().copy_to_device(out.data(), recv.data(), recv.size());
}

}  // namespace blockscope::ops::cuda
