// all_reduce: validation, then run_op (family collective, FLOPs and bus bytes of the header).
#include "ops/all_reduce/all_reduce.h"

#include "ops/all_reduce/backends.h"
#include "ops/common/checks.h"
#include "ops/common/dispatch.h"

namespace blockscope::ops {

double all_reduce_bus_bytes(double bytes, int ranks) {
  return ranks <= 1 ? 0.0 : bytes * 2.0 * (ranks - 1) / ranks;
}

double all_reduce_flops(double elements, int ranks) { return ranks <= 1 ? 0.0 : (ranks - 1) * elements; }

void all_reduce(Context& ctx, Tensor& t, Communicator& comm) {
  check_on_context(ctx, "all_reduce", "t", t);
  check_contiguous("all_reduce", "t", t);
  const int ranks = comm.size();
  const double elements = static_cast<double>(t.numel());
  // Not `empty` even with no elements: the other ranks' check of counts and dtypes needs this
  // rank's part (the backends record no kernel then).
  run_op(ctx,
         OpRecord{"all_reduce", "", profiler::Family::collective, {&t}, {&t}, all_reduce_flops(elements, ranks)}
             .with_bytes(all_reduce_bus_bytes(static_cast<double>(t.nbytes()), ranks)),
         [&] { cpu::all_reduce(ctx, t, comm); }, [&] { cuda::all_reduce(ctx, t, comm); });
}

}  // namespace blockscope::ops
