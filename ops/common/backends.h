// Declarations of the device-specific implementations behind each public op.
//
// Convention: the public op (ops/<op>/<op>.cpp) opens the profiler scope, validates shapes
// and dtypes once for every device, then calls cpu::<name> (ops/<op>/cpu.cpp) or
// cuda::<name> (ops/<op>/cuda.cu) with the same arguments. Composite paths (naive attention,
// the MLP) are written once in terms of public ops and need no per-device code.
#pragma once

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/batched_matmul.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/softmax/softmax.h"

#define BLOCKSCOPE_DECLARE_OP_BACKEND(ns)                                                                     \
  namespace ns {                                                                                              \
  void linear(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, LinearPath path, \
              WeightLayout layout, LinearActivation act);                                                     \
  void batched_matmul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& c, bool trans_b, float alpha,   \
                      int64_t b_group, const char* kernel_name);                                              \
  void activation(Context& ctx, const Tensor& x, Tensor& y, Activation act);                                  \
  void gated_activation(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y, Activation act);       \
  void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);                                      \
  void mul(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);                                      \
  void scale(Context& ctx, const Tensor& x, float factor, Tensor& out);                                       \
  void copy(Context& ctx, const Tensor& src, Tensor& dst);                                                    \
  void masked_fill_causal(Context& ctx, const Tensor& scores, float value, Tensor& out);                      \
  void masked_fill_causal_(Context& ctx, Tensor& scores, float value);                                        \
  void softmax(Context& ctx, const Tensor& x, Tensor& y);                                                     \
  void softmax_scale_causal(Context& ctx, const Tensor& x, float scale, bool causal, Tensor& y);              \
  void layer_norm(Context& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,         \
                  Tensor& y);                                                                                 \
  void rms_norm(Context& ctx, const Tensor& x, const Tensor& weight, float eps, Tensor& y);                    \
  void rope(Context& ctx, const Tensor& x, Tensor& y, float theta, int64_t position_offset);                  \
  void attention_flash(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,          \
                       bool causal, float scale);                                                             \
  }

namespace blockscope::ops {
BLOCKSCOPE_DECLARE_OP_BACKEND(cpu)
#ifdef BLOCKSCOPE_WITH_CUDA
BLOCKSCOPE_DECLARE_OP_BACKEND(cuda)
#endif
}  // namespace blockscope::ops

#undef BLOCKSCOPE_DECLARE_OP_BACKEND
