// all_gather: validation, then run_op (family collective, no FLOPs, the bus bytes of the header).
#include "ops/all_gather/all_gather.h"

#include "ops/all_gather/backends.h"
#include "ops/common/checks.h"
#include "ops/common/dispatch.h"
#include "ops/reduce_scatter/reduce_scatter.h"

namespace blockscope::ops {

void all_gather(Context& ctx, const Tensor& x, Tensor& out, Communicator& comm) {
  const char* op = "all_gather";
  const int ranks = comm.size();
  check_row_blocks(ctx, op, "out", out, "x", x, ranks);
  // Not `empty` even with no elements: the other ranks' check of counts and dtypes needs it.
  run_op(ctx,
         OpRecord{op, "", profiler::Family::collective, {&x}, {&out}, 0.0}.with_bytes(
             reduce_scatter_bus_bytes(static_cast<double>(out.nbytes()), ranks)),
         [&] { cpu::all_gather(ctx, x, out, comm); }, [&] { cuda::all_gather(ctx, x, out, comm); });
}

}  // namespace blockscope::ops
