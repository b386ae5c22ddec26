// CPU all_gather: the communicator's all_gather on the tensors' memory, one work item.
#include "ops/all_gather/backends.h"
#include "profiler/scope.h"

namespace blockscope::ops::cpu {

void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  if (x.numel() == 0) {  // no work, no kernel: only the ranks' check of counts and dtypes
    comm.all_gather(x.data(), out.data(), 0, x.dtype());
    return;
  }
  profiler::KernelScope kernel(ctx, kernel_names::kAllGather);
  comm.all_gather(x.data(), out.data(), x.numel(), x.dtype());
}

}  // namespace blockscope::ops::cpu
