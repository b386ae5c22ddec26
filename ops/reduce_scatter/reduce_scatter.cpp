// reduce_scatter: validation, then run_op (family collective, FLOPs and bus bytes of the header).
#include "ops/reduce_scatter/reduce_scatter.h"

#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/reduce_scatter/backends.h"

namespace blockscope::ops {

double reduce_scatter_bus_bytes(double bytes, int ranks) { return ranks <= 1 ? 0.0 : bytes * (ranks - 1) / ranks; }

void reduce_scatter(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  const char* op = "reduce_scatter";
  const int ranks = comm.size();
  check_row_blocks(ctx, op, "x", x, "out", out, ranks);
  const double elements = static_cast<double>(x.numel());
  // Not `empty` even with no elements: the other ranks' check of counts and dtypes needs this
  // rank's part (the backends record no kernel then).
  run_op(ctx,
         OpRecord{op, "", profiler::Family::collective, {&x}, {&out}, ranks <= 1 ? 0.0 : elements * (ranks - 1) / ranks}
             .with_bytes(reduce_scatter_bus_bytes(static_cast<double>(x.nbytes()), ranks)),
         [&] { cpu::reduce_scatter(ctx, x, out, comm); }, [&] { cuda::reduce_scatter(ctx, x, out, comm); });
}

}  // namespace blockscope::ops
