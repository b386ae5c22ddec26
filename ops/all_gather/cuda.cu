// CUDA all_gather: NCCL's ncclAllGather on the context's stream where the communicator moves
// device memory; otherwise staged through host memory (copy out, the communicator's all_gather,
// copy back), one "kernel" spanning the three. No device code.
#include <vector>

#include "ops/all_gather/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cuda {

void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  const bool on_device = comm.reduces_device_memory();
  if (x.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    if (on_device) comm.all_gather_on_device(ctx, x.data(), out.data(), 0, x.dtype());
    else comm.all_gather(nullptr, nullptr, 0, x.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kAllGather);
  if (on_device) {
    comm.all_gather_on_device(ctx, x.data(), out.data(), x.numel(), x.dtype());
    return;
  }
  std::vector<char> send(x.nbytes()), recv(out.nbytes());
  ctx.backend().copy_to_host(send.data(), x.data(), send.size());
  comm.all_gather(send.data(), recv.data(), x.numel(), x.dtype());
  ctx.backend().copy_to_device(out.data(), recv.data(), recv.size());
}

}  // namespace blockscope::ops::cuda
