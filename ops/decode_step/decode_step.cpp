// decode_step: validation once, then the CUDA kernels (ops/decode_step/cuda.cu).
#include "ops/decode_step/decode_step.h"

#include <string>

#include "ops/common/dispatch.h"
#include "ops/decode_step/backends.h"
#include "runtime/error.h"

namespace blockscope::ops {

namespace {

// There is no CPU form; the validation below refuses a CPU context before run_op could call this.
[[noreturn]] void no_cpu_form(const char* op) {
  throw Error(ErrorKind::runtime, std::string(op) + ": runs on CUDA only");
}

void check_cuda_table(const Context& ctx, const char* op, const char* what, const IndexTable& table, int64_t rows,
                      int64_t cols) {
  BS_CHECK_INPUT(ctx.device().is_cuda(), op, ": runs on CUDA devices only (on ", ctx.device().str(),
                 " decode steps run eagerly, without a step graph)");
  check_index_table(ctx, op, what, table, rows, cols);
}

// `step` (`what`) is a slice of `all` (`all_what`): contiguous, same dtype and device, shape all's
// without its first dimension.
void check_step_slice(const Context& ctx, const char* op, const char* what, const Tensor& step, const char* all_what,
                      const Tensor& all) {
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&step, what}, {&all, all_what}}) {
    BS_CHECK_INPUT(t->defined(), op, ": ", name, " is undefined");
    BS_CHECK_INPUT(t->device() == ctx.device(), op, ": ", name, " ", t->str(), " is on ", t->device().str(),
                   " but the context runs on ", ctx.device().str());
    BS_CHECK_INPUT(t->is_contiguous(), op, ": ", name, " ", t->str(), " must be contiguous");
  }
  BS_CHECK_INPUT(all.dim() >= 1 && all.size(0) >= 1, op, ": ", all_what, " ", all.str(), " must be [T, ...], T >= 1");
  BS_CHECK_INPUT(step.dtype() == all.dtype(), op, ": ", what, " ", step.str(), " and ", all_what, " ", all.str(),
                 " have different dtypes");
  const Shape one_step(all.shape().begin() + 1, all.shape().end());
  BS_CHECK_INPUT(step.shape() == one_step, op, ": ", what, " ", step.str(), " must have the shape of one step of ",
                 all_what, " ", all.str());
}

}  // namespace

void decode_step_reset(Context& ctx, IndexTable& step) {
  check_cuda_table(ctx, "decode_step_reset", "step", step, 1, 1);
  run_op(ctx, OpRecord{"decode_step_reset", "", profiler::Family::copy, {}, {}}.with_bytes(sizeof(int32_t)),
         [&] { no_cpu_form("decode_step_reset"); }, [&] { cuda::decode_step_reset(ctx, step); });
}

void decode_step_select(Context& ctx, const IndexTable& step, const IndexTable& all_positions,
                        const IndexTable& all_lengths, const Tensor& inputs, IndexTable& positions,
                        IndexTable& lengths, Tensor& x) {
  const char* op = "decode_step_select";
  const int64_t steps = all_positions.rows(), batch = all_positions.cols();
  check_cuda_table(ctx, op, "step", step, 1, 1);
  check_cuda_table(ctx, op, "all_positions", all_positions, steps, batch);
  check_cuda_table(ctx, op, "all_lengths", all_lengths, steps, batch);
  check_cuda_table(ctx, op, "positions", positions, 1, batch);
  check_cuda_table(ctx, op, "lengths", lengths, 1, batch);
  check_step_slice(ctx, op, "x", x, "inputs", inputs);
  BS_CHECK_INPUT(inputs.size(0) == steps, op, ": inputs ", inputs.str(), " has ", inputs.size(0), " steps but the ",
                 "position table ", steps);
  // The ops of the step validated and sized their launches by the bounds: every step's values
  // must lie inside them.
  for (const auto& [all, picked, name] : {std::tuple<const IndexTable*, const IndexTable*, const char*>{
                                              &all_positions, &positions, "positions"},
                                          {&all_lengths, &lengths, "lengths"}}) {
    BS_CHECK_INPUT(picked->is_bounded(), op, ": ", name, " must be a bounded IndexTable (IndexTable::bounded)");
    const IndexView range = picked->row(0);
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t b = 0; b < batch; ++b) {
        const int32_t value = all->host()[static_cast<size_t>(t * batch + b)];
        BS_CHECK_INPUT(value >= range.lowest(b) && value <= range[b], op, ": step ", t, " sequence ", b, " has ",
                       name, " ", value, ", outside the bounds [", range.lowest(b), ", ", range[b],
                       "] the step's ops were sized for");
      }
  }
  run_op(ctx,
         OpRecord{op, "", profiler::Family::copy, {&inputs}, {&x}}.with_bytes(2.0 * static_cast<double>(x.nbytes())),
         [&] { no_cpu_form(op); },
         [&] { cuda::decode_step_select(ctx, step, all_positions, all_lengths, inputs, positions, lengths, x); });
}

void decode_step_commit(Context& ctx, IndexTable& step, const Tensor& y, Tensor& outputs) {
  const char* op = "decode_step_commit";
  check_cuda_table(ctx, op, "step", step, 1, 1);
  check_step_slice(ctx, op, "y", y, "outputs", outputs);
  // outputs is not listed for the finite check: the steps after t are not written yet.
  run_op(ctx, OpRecord{op, "", profiler::Family::copy, {&y}, {}}.with_bytes(2.0 * static_cast<double>(y.nbytes())),
         [&] { no_cpu_form(op); }, [&] { cuda::decode_step_commit(ctx, step, y, outputs); });
}

}  // namespace blockscope::ops
