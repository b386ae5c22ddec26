// The prologue and dispatch every public op shares (docs/ADDING_AN_OP.md). A public op
// (ops/<op>/<op>.cpp):
//   1. validates its arguments (ops/common/checks.h and its own rules) — a refused call
//      leaves no trace: no profiler event, no NVTX range;
//   2. calls run_op with its record (name, path, family, inputs, outputs, FLOPs; bytes only
//      where they differ from its tensors' sizes), which opens
//      the profiler scope, runs ops::cpu::<op> or ops::cuda::<op> for the context's device
//      ("not built in" when this build has no CUDA backend), closes the scope and, in debug
//      mode (Context::sync_after_each_op), synchronises and names the op on a failure.
// Composite ops (naive attention, the MLP: written once in terms of public ops) call
// run_composite_op with one body for every device.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "ops/common/flops.h"
#include "profiler/scope.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace blockscope::ops {

#ifdef BLOCKSCOPE_WITH_CUDA
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

// What the profiler records for one op call. `inputs` are the tensors whose shapes the op
// table shows (and which must belong to the context, profiler::OpScope); `outputs` the ones
// it writes (checked by Context::check_finite_after_each_op). Its bytes are the least traffic
// -- every input read once, every output written once -- unless the op states others
// (with_bytes: collectives' bus bytes, a cache write's rows, a mask's elements, the MLP's
// weights).
struct OpRecord {
  const char* name;
  const char* path;  // implementation path ("fused_softmax"), "" when the op has one
  profiler::Family family;
  std::initializer_list<const Tensor*> inputs;
  std::initializer_list<const Tensor*> outputs;
  double flops = 0;
  bool empty = false;  // nothing to compute (a zero-element tensor): recorded, nothing runs
  // The outputs' elements a causal mask covers ([..., Sq, Sk], bottom-right aligned) hold the
  // fill value by design (masked_fill's −inf before a softmax): run.check_finite checks the
  // others, and what follows (the softmax) as every op.
  bool causal_fill = false;
  std::optional<double> stated_bytes = std::nullopt;  // set by with_bytes
  // The op takes FP8 tensors (quantize, dequantize, the FP8 GEMM); every other op refuses one
  // (the storage rule of runtime/dtype.h, check_storage_rule).
  bool takes_fp8 = false;
  // The dtype the op is recorded under (its catalogue call's): its first input's unless stated
  // (dequantize and fp8_linear: their output's, the compute side).
  std::optional<DType> recorded_dtype = std::nullopt;

  OpRecord& with_bytes(double bytes) {
    stated_bytes = bytes;
    return *this;
  }
  OpRecord& taking_fp8() {
    takes_fp8 = true;
    return *this;
  }
  OpRecord& recorded_as(DType dtype) {
    recorded_dtype = dtype;
    return *this;
  }
  // The stated bytes, or the sizes of the defined inputs and outputs (an undefined tensor --
  // a missing bias -- counts 0; one tensor both read and written counts twice).
  double bytes() const {
    if (stated_bytes) return *stated_bytes;
    return tensor_bytes(inputs) + tensor_bytes(outputs);
  }
};

// The storage rule (runtime/dtype.h): unless the record takes FP8, an FP8 input or output is
// refused with an invalid_input error naming the op and the tensor -- before any scope opens,
// so the refused call leaves no trace. run_op and run_composite_op call it first.
void check_storage_rule(const OpRecord& record);

// After the op: in debug mode (sync_after_each_op) waits for its queued work and names the op
// when it failed; with check_finite_after_each_op, names the op whose output holds a NaN or an
// infinity (the first op to write one: inner ops of a composite finish before it) -- but for
// the masked elements of a causal_fill op, −inf by design.
void finish_op(Context& ctx, const OpRecord& record);

// on_cpu / on_cuda: callables running the device implementation. In a build without CUDA,
// on_cuda is never called (the discarded branch below), so it may name ops::cuda functions
// that are declared but not defined in that build.
template <class OnCpu, class OnCuda>
void run_op(Context& ctx, const OpRecord& record, OnCpu&& on_cpu, OnCuda&& on_cuda) {
  check_storage_rule(record);
  {
    profiler::OpScope scope(ctx, record.name, record.path, record.family, record.inputs, record.flops,
                            record.bytes(), record.recorded_dtype);
    if (record.empty) {
      // recorded with no work
    } else if (ctx.device().is_cpu()) {
      on_cpu();
    } else if constexpr (kCudaBuilt) {
      on_cuda();
    } else {
      throw Error(ErrorKind::runtime, std::string(record.name) + ": device " + ctx.device().str() +
                                          " is not built in (this build has no CUDA backend)");
    }
  }
  finish_op(ctx, record);
}

template <class Body>
void run_composite_op(Context& ctx, const OpRecord& record, Body&& body) {
  check_storage_rule(record);
  {
    profiler::OpScope scope(ctx, record.name, record.path, record.family, record.inputs, record.flops,
                            record.bytes(), record.recorded_dtype);
    if (!record.empty) body();
  }
  finish_op(ctx, record);
}

}  // namespace blockscope::ops
