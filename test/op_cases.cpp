// One entry per op of the catalogue: its cases (shapes with odd and empty sizes, options, the
// call, the float64 reference, the bound of test/accuracy_bounds.h) and the bad calls it must
// refuse. The harness (test/op_harness_test.cpp) runs each on every device and dtype. An op
// whose behaviour has more to it than value, aliasing, kernels, cost and refusals (eps
// placement, huge logits, NaN propagation, strided heads...) keeps those tests in its own file.
#include "test/op_cases.h"

#include <cmath>
#include <limits>
#include <string>

#include "ops/activation/activation.h"
#include "ops/all_gather/all_gather.h"
#include "ops/all_reduce/all_reduce.h"
#include "ops/attention/attention.h"
#include "ops/decode_attention/decode_attention.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/elementwise/elementwise.h"
#include "ops/fp8_linear/fp8_linear.h"
#include "ops/fp8_weight_linear/fp8_weight_linear.h"
#include "ops/linear/batched_matmul.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "ops/norm/norm.h"
#include "ops/precision/precision.h"
#include "ops/reduce_scatter/reduce_scatter.h"
#include "ops/rope/rope.h"
#include "ops/softmax/softmax.h"
#include "profiler/recorder.h"
#include "reference/attention_reference.h"
#include "reference/fp8_reference.h"
#include "reference/ops_reference.h"
#include "test/accuracy_bounds.h"
#include "test/support/test_support.h"

namespace blockscope::testing {
namespace {

using reference::RefTensor;
using Refs = std::vector<RefTensor>;
using Tensors = std::vector<Tensor>;
using Needles = std::vector<std::string>;

// ---- building blocks -----------------------------------------------------------------------

InputSpec input(Shape shape, float lo = -1.0f, float hi = 1.0f) { return {std::move(shape), lo, hi, nullptr, false, nullptr}; }
InputSpec viewed(Shape made, std::function<Tensor(const Tensor&)> view, float lo = -1.0f, float hi = 1.0f) {
  return {std::move(made), lo, hi, std::move(view), false, nullptr};
}
InputSpec absent() { return {{}, 0.0f, 0.0f, nullptr, true, nullptr}; }
// A weight of fan-in `fan_in`, uniform in ±1/√fan_in, so activations stay O(1).
InputSpec weight(Shape shape, int64_t fan_in) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(fan_in, 1)));
  return input(std::move(shape), -bound, bound);
}

ops::OpCall sizes(std::map<std::string, int64_t> named, std::map<std::string, bool> flags = {},
                  std::string path = "", std::string activation = "") {
  ops::OpCall call;
  call.sizes = std::move(named);
  call.flags = std::move(flags);
  call.path = std::move(path);
  call.activation = std::move(activation);
  return call;
}

// R rows of N (the last dimension) of a tensor of shape `shape`: the row ops' sizes.
std::map<std::string, int64_t> rows_of(const Shape& shape) {
  const int64_t n = shape.back();
  return {{"R", n == 0 ? 0 : shape_numel(shape) / n}, {"N", n}};
}

using Run = std::function<void(Context&, const Tensors&, Tensor&)>;
using Reference = std::function<RefTensor(const Refs&)>;

// A case whose output has the shape of its first input and may be that input (the harness runs
// it out of place and in place).
OpCase in_place_case(std::string label, const Shape& shape, ops::OpCall call, std::vector<InputSpec> inputs, Run run,
                     Reference reference, Accuracy accuracy) {
  OpCase c;
  c.label = std::move(label);
  c.call = std::move(call);
  c.inputs = std::move(inputs);
  c.output = shape;
  c.run = std::move(run);
  c.reference = std::move(reference);
  c.accuracy = std::move(accuracy);
  c.alias_input = 0;
  return c;
}

const RefTensor* optional(const RefTensor& t) { return t.data.empty() && t.shape.empty() ? nullptr : &t; }

Accuracy one_rounding() {
  return {"max relative", [](const Measured& m) { return max_relative_error(m.got, m.want.data); },
          [](const Measured& m) { return one_rounding_bound(m.dtype, max_abs(m.want)); }};
}
Accuracy exact() {
  return {"abs", [](const Measured& m) { return max_abs_error(m.got, m.want.data); },
          [](const Measured&) { return 0.0; }};
}
Accuracy softmax_rows() {
  return {"row relative",
          [](const Measured& m) {
            return max_row_relative_error(m.got, m.want.data, static_cast<size_t>(m.want.shape.back()));
          },
          [](const Measured& m) { return softmax_bound(m.dtype, m.want.shape.back()); }};
}
Accuracy norm_rows() {
  return {"max relative", [](const Measured& m) { return max_relative_error(m.got, m.want.data); },
          [](const Measured& m) { return norm_bound(m.dtype, m.want.shape.back()); }};
}
Accuracy absolute(std::function<double(const Measured&)> bound) {
  return {"abs", [](const Measured& m) { return max_abs_error(m.got, m.want.data); }, std::move(bound)};
}
// The activation's evaluation error over its input x (plain) or |gate·up| (gated).
Accuracy activation_ulps(bool gated) {
  return {"f32 ulps",
          [gated](const Measured& m) {
            RefTensor x = m.inputs[0];
            if (gated)
              for (size_t i = 0; i < x.data.size(); ++i) x.data[i] *= m.inputs[1].data[i];
            return testing::activation_ulps(m.got, m.want, x, m.dtype);
          },
          [](const Measured&) { return kActivationUlps; }};
}

std::string shape_label(const Shape& s) { return shape_str(s); }
std::string act_label(ops::Activation act) { return ops::activation_name(act); }

// ---- elementwise ---------------------------------------------------------------------------

OpCases add_cases() {
  OpCases entry{"add", {}, {}};
  // (a, b): same shape, bias over the last dim, over the last two, one element, more than one
  // chunk per row, a single long row, no rows.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{7, 33}, {7, 33}}, {{7, 33}, {33}}, {{3, 5, 17}, {5, 17}}, {{1, 1}, {1}},
      {{3, 2500}, {2500}}, {{5000}, {5000}}, {{0, 8}, {8}}};
  for (const auto& [a, b] : shapes) {
    const bool broadcast = a != b;
    const int64_t n = shape_numel(b), rows = n == 0 ? 0 : shape_numel(a) / n;
    OpCase c;
    c.label = "a " + shape_label(a) + " b " + shape_label(b);
    c.call = sizes({{"R", broadcast ? rows : 1}, {"N", broadcast ? n : shape_numel(a)}}, {{"broadcast", broadcast}});
    c.inputs = {input(a), input(b)};
    c.output = a;
    c.run = [](Context& ctx, const Tensors& in, Tensor& out) { ops::add(ctx, in[0], in[1], out); };
    c.reference = [](const Refs& in) { return reference::elementwise_add(in[0], in[1]); };
    c.accuracy = one_rounding();
    c.alias_input = 0;
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {
      {"b neither a's shape nor its last dimension",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor a = ctx.empty({4, 6}, dt), b = ctx.empty({5}, dt), out = ctx.empty({4, 6}, dt);
         *needles = {"add", b.str(), a.str()};
         ops::add(ctx, a, b, out);
       }},
      {"b of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         const DType other = dt == DType::f32 ? DType::f16 : DType::f32;
         Tensor a = ctx.empty({4, 6}, dt), b = ctx.empty({4, 6}, other), out = ctx.empty({4, 6}, dt);
         *needles = {"add", b.str(), "dtype"};
         ops::add(ctx, a, b, out);
       }},
  };
  return entry;
}

OpCases mul_cases() {
  OpCases entry{"mul", {}, {}};
  const auto mul_case = [](std::string label, const Shape& s, std::vector<InputSpec> inputs) {
    return in_place_case(
        std::move(label), s, sizes(rows_of(s)), std::move(inputs),
        [](Context& ctx, const Tensors& in, Tensor& out) { ops::mul(ctx, in[0], in[1], out); },
        [](const Refs& in) { return reference::elementwise_mul(in[0], in[1]); }, one_rounding());
  };
  for (const Shape& s : {Shape{7, 33}, Shape{1, 1}, Shape{3, 2500}, Shape{0, 4}})
    entry.cases.push_back(mul_case(shape_label(s), s, {input(s), input(s)}));
  // 3·2^-13 · -3·2^-13 = -2.25·2^-24: below f16's smallest normal, stored as -2·2^-24 (a
  // relative error of 11%, the underflow rounding); flushed to zero it errs by twice that.
  const float small = std::ldexp(3.0f, -13);
  entry.cases.push_back(mul_case("underflowing product", {1, 1}, {input({1, 1}, small, small), input({1, 1}, -small, -small)}));
  entry.bad_calls = {{"b of another shape", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor a = ctx.empty({4, 6}, dt), b = ctx.empty({6, 4}, dt), out = ctx.empty({4, 6}, dt);
                        *needles = {"mul", b.str(), "same shape"};
                        ops::mul(ctx, a, b, out);
                      }}};
  return entry;
}

OpCases scale_cases() {
  OpCases entry{"scale", {}, {}};
  for (const Shape& s : {Shape{7, 33}, Shape{1, 1}, Shape{3, 2500}, Shape{0, 4}}) {
    entry.cases.push_back(in_place_case(
        shape_label(s), s, sizes(rows_of(s)), {input(s)},
        [](Context& ctx, const Tensors& in, Tensor& out) { ops::scale(ctx, in[0], 0.375f, out); },
        [](const Refs& in) { return reference::elementwise_scale(in[0], 0.375); }, one_rounding()));
  }
  entry.bad_calls = {{"a strided output", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor x = ctx.empty({4, 6}, dt), out = ctx.empty({6, 4}, dt).transpose(0, 1);
                        *needles = {"scale", out.str(), "contiguous"};
                        ops::scale(ctx, x, 2.0f, out);
                      }}};
  return entry;
}

OpCases copy_cases() {
  OpCases entry{"copy", {}, {}};
  struct View {
    const char* what;
    Shape made;
    std::function<Tensor(const Tensor&)> view;
  };
  // Contiguous (one device copy), and the gathers of a block: a permutation (innermost stride
  // != 1), a slice of the middle dim, the QKV split, a misaligned start.
  const std::vector<View> views = {
      {"contiguous", {3, 7, 5}, nullptr},
      {"permuted", {3, 7, 5}, [](const Tensor& t) { return t.permute({2, 0, 1}); }},
      {"middle slice", {3, 7, 5}, [](const Tensor& t) { return t.slice(1, 2, 6); }},
      {"qkv split", {2, 7, 3, 2, 37}, [](const Tensor& t) { return t.select(2, 1); }},
      {"misaligned", {2 * 5 * 3 * 8 + 1},
       [](const Tensor& t) { return t.slice(0, 1, 2 * 5 * 3 * 8 + 1).reshape({2, 5, 3, 8}).transpose(1, 2); }},
      {"empty", {0, 5}, nullptr},
  };
  for (const View& v : views) {
    Shape shape = v.made;
    if (v.view) {
      Context probe(Device::cpu());
      shape = v.view(probe.empty(v.made, DType::f32)).shape();
    }
    OpCase c;
    c.label = std::string(v.what) + " " + shape_label(shape);
    c.call = sizes(rows_of(shape), {{"strided", v.view != nullptr}});
    c.inputs = {viewed(v.made, v.view)};
    c.output = shape;
    c.run = [](Context& ctx, const Tensors& in, Tensor& out) { ops::copy(ctx, in[0], out); };
    c.reference = [](const Refs& in) { return in[0]; };
    c.accuracy = exact();
    c.bit_identical_across_devices = true;
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {{"dst of another shape", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor src = ctx.empty({4, 6}, dt), dst = ctx.empty({6, 4}, dt);
                        *needles = {"copy", dst.str()};
                        ops::copy(ctx, src, dst);
                      }}};
  return entry;
}

// Score shapes: Sq == Sk, Sq < Sk, Sq > Sk (whole rows masked), one element, none.
const std::vector<Shape>& score_shapes() {
  static const std::vector<Shape> shapes = {{2, 3, 7, 7}, {2, 5, 11}, {11, 5}, {1, 1}, {0, 4, 4}};
  return shapes;
}
ops::OpCall score_sizes(const Shape& s) {
  const int64_t sq = s[s.size() - 2], sk = s.back();
  return sizes({{"B", sq * sk == 0 ? 0 : shape_numel(s) / (sq * sk)}, {"Sq", sq}, {"Sk", sk}});
}

OpCases masked_fill_cases() {
  OpCases entry{"masked_fill", {}, {}};
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (const Shape& s : score_shapes()) {
    OpCase c;
    c.label = shape_label(s);
    c.call = score_sizes(s);
    c.inputs = {input(s)};
    c.output = s;
    c.run = [minus_inf](Context& ctx, const Tensors& in, Tensor& out) {
      ops::masked_fill_causal(ctx, in[0], minus_inf, out);
    };
    c.reference = [minus_inf](const Refs& in) { return reference::causal_masked_fill(in[0], minus_inf); };
    c.accuracy = exact();
    c.bit_identical_across_devices = true;
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {{"out aliasing scores", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor scores = ctx.empty({4, 6}, dt);
                        *needles = {"masked_fill_causal", "aliases"};
                        ops::masked_fill_causal(ctx, scores, 0.0f, scores);
                      }}};
  return entry;
}

OpCases masked_fill_inplace_cases() {
  OpCases entry{"masked_fill_", {}, {}};
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (const Shape& s : score_shapes()) {
    OpCase c;
    c.label = shape_label(s);
    c.call = score_sizes(s);
    c.inputs = {input(s)};
    c.output = s;
    c.run = [minus_inf](Context& ctx, const Tensors&, Tensor& out) { ops::masked_fill_causal_(ctx, out, minus_inf); };
    c.reference = [minus_inf](const Refs& in) { return reference::causal_masked_fill(in[0], minus_inf); };
    c.accuracy = exact();
    c.in_place_only = true;
    c.bit_identical_across_devices = true;
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {{"a vector of scores", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor vector = ctx.empty({6}, dt);
                        *needles = {"masked_fill_causal_", vector.str(), "2-D"};
                        ops::masked_fill_causal_(ctx, vector, 0.0f);
                      }}};
  return entry;
}

// ---- activations ---------------------------------------------------------------------------

OpCases activation_cases() {
  OpCases entry{"activation", {}, {}};
  for (const Shape& s : {Shape{1, 1}, Shape{7, 37}, Shape{1000, 100}, Shape{15, 4097}, Shape{0, 3}}) {
    for (ops::Activation act : ops::activations()) {
      entry.cases.push_back(in_place_case(
          shape_label(s) + " " + act_label(act), s, sizes(rows_of(s), {}, "", ops::activation_name(act)),
          {input(s, -4.0f, 4.0f)},
          [act](Context& ctx, const Tensors& in, Tensor& out) { ops::activation(ctx, in[0], out, act); },
          [act](const Refs& in) { return reference::activation(in[0], act); }, activation_ulps(false)));
    }
  }
  entry.bad_calls = {
      {"y of another shape",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), y = ctx.empty({4, 9}, dt);
         *needles = {x.str(), y.str()};
         ops::activation(ctx, x, y, ops::Activation::silu);
       }},
      {"y of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), y = ctx.empty({4, 8}, dt == DType::f32 ? DType::f16 : DType::f32);
         *needles = {"dtype", y.str()};
         ops::activation(ctx, x, y, ops::Activation::relu);
       }},
      {"a strided x",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({8, 4}, dt).transpose(0, 1), y = ctx.empty({4, 8}, dt);
         *needles = {x.str(), "contiguous"};
         ops::activation(ctx, x, y, ops::Activation::gelu_erf);
       }},
  };
  return entry;
}

// gate and up are the column halves of one [rows, 2F] tensor (the fused MLP path: strided
// views, no copy) or two contiguous tensors.
OpCases gated_activation_cases() {
  OpCases entry{"gated_activation", {}, {}};
  for (const auto& [rows, f] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 37}, {1000, 100}, {3, 4097}, {0, 5}}) {
    for (ops::Activation act : ops::activations()) {
      for (bool halves : {true, false}) {
        OpCase c;
        c.label = "rows " + std::to_string(rows) + " F " + std::to_string(f) + " " + act_label(act) +
                  (halves ? " halves of [rows, 2F]" : " contiguous");
        c.call = sizes({{"R", rows}, {"N", f}}, {}, "", ops::activation_name(act));
        const int64_t cols = f;
        if (halves) {
          c.inputs = {viewed({rows, 2 * f}, [cols](const Tensor& t) { return t.slice(1, 0, cols); }, -4.0f, 4.0f),
                      viewed({rows, 2 * f}, [cols](const Tensor& t) { return t.slice(1, cols, 2 * cols); }, -4.0f, 4.0f)};
        } else {
          c.inputs = {input({rows, f}, -4.0f, 4.0f), input({rows, f}, -4.0f, 4.0f)};
        }
        c.output = {rows, f};
        c.run = [act](Context& ctx, const Tensors& in, Tensor& out) { ops::gated_activation(ctx, in[0], in[1], out, act); };
        c.reference = [act](const Refs& in) { return reference::gated_activation(in[0], in[1], act); };
        c.accuracy = activation_ulps(true);
        entry.cases.push_back(std::move(c));
      }
    }
  }
  entry.bad_calls = {
      {"up of another shape",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor gate = ctx.empty({4, 8}, dt), up = ctx.empty({4, 7}, dt), y = ctx.empty({4, 8}, dt);
         *needles = {gate.str(), up.str()};
         ops::gated_activation(ctx, gate, up, y, ops::Activation::silu);
       }},
      {"a transposed gate",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor gate = ctx.empty({8, 4}, dt).transpose(0, 1), up = ctx.empty({4, 8}, dt), y = ctx.empty({4, 8}, dt);
         *needles = {gate.str()};
         ops::gated_activation(ctx, gate, up, y, ops::Activation::silu);
       }},
      {"y of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor gate = ctx.empty({4, 8}, dt), y = ctx.empty({4, 8}, dt == DType::f32 ? DType::f16 : DType::f32);
         *needles = {"dtype"};
         ops::gated_activation(ctx, gate, gate, y, ops::Activation::silu);
       }},
  };
  return entry;
}

// ---- norms and softmax ---------------------------------------------------------------------

// Hidden sizes that are not multiples of 8 (37, 100, 4097), rows 1 / 7 / many, none.
const std::vector<Shape>& row_shapes() {
  static const std::vector<Shape> shapes = {{1, 37}, {7, 100}, {1000, 37}, {7, 4097}, {64, 4097}, {0, 16}};
  return shapes;
}

OpCases layer_norm_cases() {
  OpCases entry{"layer_norm", {}, {}};
  // Two eps: the usual one, and one that changes every output (the inputs have a variance of
  // 1/3 and a mean square near 9), so an eps that is ignored or replaced is caught.
  for (const Shape& s : row_shapes()) {
    for (bool bias : {true, false}) {
      for (float eps : {1e-5f, 0.5f}) {
        // x in [2, 4): a mean far from zero (a one-pass variance would lose digits).
        entry.cases.push_back(in_place_case(
            shape_label(s) + (bias ? " bias" : " no bias") + " eps " + std::to_string(eps), s,
            sizes(rows_of(s), {{"bias", bias}}), {input(s, 2.0f, 4.0f), input({s[1]}), bias ? input({s[1]}) : absent()},
            [eps](Context& ctx, const Tensors& in, Tensor& out) { ops::layer_norm(ctx, in[0], in[1], in[2], eps, out); },
            [eps](const Refs& in) { return reference::layer_norm(in[0], in[1], optional(in[2]), eps); }, norm_rows()));
      }
    }
  }
  entry.bad_calls = {
      {"weight of another size",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), w = ctx.empty({11}, dt), y = ctx.empty({4, 10}, dt);
         *needles = {w.str(), x.str()};
         ops::layer_norm(ctx, x, w, Tensor(), 1e-5f, y);
       }},
      {"bias of another size",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), w = ctx.empty({10}, dt), b = ctx.empty({11}, dt), y = ctx.empty({4, 10}, dt);
         *needles = {"bias", b.str()};
         ops::layer_norm(ctx, x, w, b, 1e-5f, y);
       }},
      {"a transposed x",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({10, 4}, dt).transpose(0, 1), w = ctx.empty({10}, dt), y = ctx.empty({4, 10}, dt);
         *needles = {x.str()};
         ops::layer_norm(ctx, x, w, Tensor(), 1e-5f, y);
       }},
      {"a negative eps",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), w = ctx.empty({10}, dt), y = ctx.empty({4, 10}, dt);
         *needles = {"eps"};
         ops::layer_norm(ctx, x, w, Tensor(), -1.0f, y);
       }},
  };
  return entry;
}

OpCases rms_norm_cases() {
  OpCases entry{"rms_norm", {}, {}};
  for (const Shape& s : row_shapes()) {
    for (float eps : {1e-5f, 0.5f}) {
      entry.cases.push_back(in_place_case(
          shape_label(s) + " eps " + std::to_string(eps), s, sizes(rows_of(s)), {input(s, 2.0f, 4.0f), input({s[1]})},
          [eps](Context& ctx, const Tensors& in, Tensor& out) { ops::rms_norm(ctx, in[0], in[1], eps, out); },
          [eps](const Refs& in) { return reference::rms_norm(in[0], in[1], eps); }, norm_rows()));
    }
  }
  entry.bad_calls = {
      {"weight of another size",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), w = ctx.empty({11}, dt), y = ctx.empty({4, 10}, dt);
         *needles = {w.str(), x.str()};
         ops::rms_norm(ctx, x, w, 1e-5f, y);
       }},
      {"y of another shape",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), w = ctx.empty({10}, dt), y = ctx.empty({4, 11}, dt);
         *needles = {y.str(), x.str()};
         ops::rms_norm(ctx, x, w, 1e-5f, y);
       }},
      {"weight of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 10}, dt), y = ctx.empty({4, 10}, dt);
         Tensor w = ctx.empty({10}, dt == DType::f32 ? DType::bf16 : DType::f32);
         *needles = {"dtype", w.str()};
         ops::rms_norm(ctx, x, w, 1e-5f, y);
       }},
  };
  return entry;
}

OpCases softmax_cases() {
  OpCases entry{"softmax", {}, {}};
  for (const Shape& s : {Shape{1, 1}, Shape{7, 33}, Shape{3, 5, 1000}, Shape{2, 4097}, Shape{0, 9}}) {
    entry.cases.push_back(in_place_case(
        shape_label(s), s, sizes(rows_of(s)), {input(s, -6.0f, 6.0f)},
        [](Context& ctx, const Tensors& in, Tensor& out) { ops::softmax(ctx, in[0], out); },
        [](const Refs& in) { return reference::softmax_rows(in[0]); }, softmax_rows()));
  }
  entry.bad_calls = {
      {"y of another shape",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 6}, dt), y = ctx.empty({4, 7}, dt);
         *needles = {"softmax", x.str(), y.str()};
         ops::softmax(ctx, x, y);
       }},
      {"y of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 6}, dt), y = ctx.empty({4, 6}, dt == DType::bf16 ? DType::f32 : DType::bf16);
         *needles = {"softmax", y.str(), "dtype"};
         ops::softmax(ctx, x, y);
       }},
      {"a transposed x",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({6, 4}, dt).transpose(0, 1), y = ctx.empty({4, 6}, dt);
         *needles = {"softmax", "contiguous"};
         ops::softmax(ctx, x, y);
       }},
  };
  return entry;
}

OpCases softmax_scale_causal_cases() {
  OpCases entry{"softmax_scale_causal", {}, {}};
  // Sq == Sk, Sq < Sk, Sq > Sk (the first Sq - Sk rows see no key: zeros), one element, none.
  for (const Shape& s : {Shape{2, 3, 7, 7}, Shape{2, 13, 70}, Shape{70, 13}, Shape{1, 1}, Shape{1, 129, 129},
                         Shape{0, 4, 4}}) {
    for (bool causal : {true, false}) {
      entry.cases.push_back(in_place_case(
          shape_label(s) + (causal ? " causal" : " full"), s, sizes(rows_of(s)), {input(s, -30.0f, 30.0f)},
          [causal](Context& ctx, const Tensors& in, Tensor& out) {
            ops::softmax_scale_causal(ctx, in[0], 0.125f, causal, out);
          },
          [causal](const Refs& in) { return reference::softmax_scale_causal(in[0], 0.125, causal); }, softmax_rows()));
    }
  }
  entry.bad_calls = {{"a vector of scores", [](Context& ctx, DType dt, Needles* needles) {
                        Tensor vector = ctx.empty({6}, dt);
                        *needles = {"softmax_scale_causal", vector.str(), "[..., Sq, Sk]"};
                        ops::softmax_scale_causal(ctx, vector, 1.0f, true, vector);
                      }}};
  return entry;
}

// ---- rope ----------------------------------------------------------------------------------

OpCases rope_cases() {
  OpCases entry{"rope", {}, {}};
  const std::vector<Shape> shapes = {{2, 3, 7, 64}, {1, 2, 33, 128}, {2, 3, 5, 6}, {1, 1, 1, 2}, {1, 4, 1000, 64},
                                     {1, 2, 0, 8}};
  for (const Shape& s : shapes) {
    for (int64_t offset : {int64_t{0}, int64_t{4093}, int64_t{70001}}) {
      for (float theta : {10000.0f, 500000.0f}) {
        OpCase c = in_place_case(
            shape_label(s) + " offset " + std::to_string(offset) + " theta " + std::to_string(theta), s,
            sizes({{"B", s[0]}, {"H", s[1]}, {"S", s[2]}, {"D", s[3]}}), {input(s)},
            [offset, theta](Context& ctx, const Tensors& in, Tensor& out) { ops::rope(ctx, in[0], out, theta, offset); },
            [offset, theta](const Refs& in) { return reference::rope(in[0], theta, offset); },
            absolute([](const Measured& m) { return rope_bound(m.inputs[0], m.want, m.dtype); }));
        // The same cos/sin table (ops/rope/rope_table.h) and f32 products on both devices:
        // bit-identical, offsets past 2^16 (windowed tables) included.
        c.bit_identical_across_devices = true;
        entry.cases.push_back(std::move(c));
      }
    }
  }
  entry.bad_calls = {
      {"an odd head dim",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({1, 2, 3, 7}, dt), y = ctx.empty({1, 2, 3, 7}, dt);
         *needles = {x.str(), "even"};
         ops::rope(ctx, x, y, 10000.0f);
       }},
      {"three dimensions",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({2, 3, 8}, dt), y = ctx.empty({2, 3, 8}, dt);
         *needles = {x.str(), "[B, H, S, D]"};
         ops::rope(ctx, x, y, 10000.0f);
       }},
      {"y neither contiguous nor x's view",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({1, 2, 3, 8}, dt), y = ctx.empty({1, 3, 2, 8}, dt).transpose(1, 2);
         *needles = {y.str(), "contiguous"};
         ops::rope(ctx, x, y, 10000.0f);
       }},
      {"y of another dtype",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({1, 2, 3, 8}, dt), y = ctx.empty({1, 2, 3, 8}, dt == DType::f32 ? DType::f16 : DType::f32);
         *needles = {"dtype", y.str()};
         ops::rope(ctx, x, y, 10000.0f);
       }},
      {"a negative position offset",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({1, 2, 3, 8}, dt), y = ctx.empty({1, 2, 3, 8}, dt);
         *needles = {"position_offset"};
         ops::rope(ctx, x, y, 10000.0f, -1);
       }},
  };
  return entry;
}

// ---- precision (FP8 casts) -------------------------------------------------------------------
// The harness's dtype is the compute side's: x of quantize and amax, y of dequantize.

InputSpec fixed(Shape shape, DType dtype, float lo, float hi) {
  InputSpec spec = input(std::move(shape), lo, hi);
  spec.dtype = [dtype](DType) { return dtype; };
  return spec;
}
reference::Fp8Kind fp8_kind(DType dtype) {
  return dtype == DType::fp8_e5m2 ? reference::Fp8Kind::e5m2 : reference::Fp8Kind::e4m3;
}
const std::vector<Shape> kPrecisionShapes = {{7, 33}, {1, 1}, {3, 2500}, {2, 3, 17}, {0, 8}};
const std::vector<DType> kFp8Types = {DType::fp8_e4m3, DType::fp8_e5m2};

// Scales up to 200 over x in ±4: a share of each case saturates (|x · scale| > 448 in e4m3).
OpCases quantize_cases() {
  OpCases entry{"quantize", {}, {}};
  entry.own_types = true;
  for (const DType fp8 : kFp8Types) {
    for (const Shape& s : kPrecisionShapes) {
      OpCase c;
      c.label = shape_label(s) + " to " + dtype_name(fp8);
      c.call = sizes(rows_of(s));
      c.inputs = {input(s, -4.0f, 4.0f), fixed({1}, DType::f32, 0.5f, 200.0f)};
      c.output = s;
      c.output_dtype = fp8;
      c.run = [](Context& ctx, const Tensors& in, Tensor& out) { ops::quantize(ctx, in[0], in[1], out); };
      c.reference = [fp8](const Refs& in) { return reference::quantize(in[0], in[1].data[0], fp8_kind(fp8)); };
      c.accuracy = exact();
      c.bit_identical_across_devices = true;
      entry.cases.push_back(std::move(c));
    }
    // With the running amax (inputs[0], updated in place): max(amax, max |x|). Not of an empty x:
    // the case's output (the amax) has an element where the op's (y) has none.
    for (const Shape& s : kPrecisionShapes) {
      if (shape_numel(s) == 0) continue;
      OpCase c;
      c.label = shape_label(s) + " to " + dtype_name(fp8) + ", running amax";
      c.call = sizes(rows_of(s), {{"amax", true}});
      c.inputs = {fixed({1}, DType::f32, 0.0f, 3.0f), input(s, -4.0f, 4.0f), fixed({1}, DType::f32, 0.5f, 200.0f)};
      c.output = {1};
      c.in_place_only = true;
      c.run = [fp8](Context& ctx, const Tensors& in, Tensor& out) {
        Tensor y = ctx.empty(in[1].shape(), fp8);
        ops::quantize(ctx, in[1], in[2], y, out);
      };
      c.reference = [](const Refs& in) {
        RefTensor running = reference::amax(in[1]);
        running.data[0] = std::max(running.data[0], in[0].data[0]);
        return running;
      };
      c.accuracy = exact();
      c.bit_identical_across_devices = true;
      entry.cases.push_back(std::move(c));
    }
  }
  entry.bad_calls = {
      {"y not FP8",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({1}, DType::f32), y = ctx.empty({4, 8}, dt);
         *needles = {"quantize", y.str(), "fp8_e4m3 or fp8_e5m2"};
         ops::quantize(ctx, x, scale, y);
       }},
      {"x FP8",
       [](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, DType::fp8_e4m3), scale = ctx.empty({1}, DType::f32);
         Tensor y = ctx.empty({4, 8}, DType::fp8_e4m3);
         *needles = {"quantize", x.str(), "f32, f16 or bf16"};
         ops::quantize(ctx, x, scale, y);
       }},
      {"a scale of two elements",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({2}, DType::f32), y = ctx.empty({4, 8}, DType::fp8_e4m3);
         *needles = {"quantize", "scale", scale.str(), "one element"};
         ops::quantize(ctx, x, scale, y);
       }},
      {"a bf16 amax",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({1}, DType::f32), y = ctx.empty({4, 8}, DType::fp8_e5m2);
         Tensor amax = ctx.empty({1}, DType::bf16);
         *needles = {"quantize", "amax", amax.str(), "f32"};
         ops::quantize(ctx, x, scale, y, amax);
       }},
      {"y a view of x's bytes",
       [](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, DType::f32), scale = ctx.empty({1}, DType::f32);
         Tensor y(x.storage(), {4, 8}, DType::fp8_e4m3);
         *needles = {"quantize", "overlaps"};
         ops::quantize(ctx, x, scale, y);
       }},
      {"amax is the scale",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({1}, DType::f32), y = ctx.empty({4, 8}, DType::fp8_e4m3);
         *needles = {"quantize", "the scale itself"};
         ops::quantize(ctx, x, scale, y, scale);
       }},
      {"shapes differ",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({1}, DType::f32), y = ctx.empty({8, 4}, DType::fp8_e4m3);
         *needles = {"quantize", x.str(), y.str(), "same shape"};
         ops::quantize(ctx, x, scale, y);
       }},
      {"a strided x",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({8, 4}, dt).transpose(0, 1), scale = ctx.empty({1}, DType::f32);
         Tensor y = ctx.empty({4, 8}, DType::fp8_e4m3);
         *needles = {"quantize", x.str(), "contiguous"};
         ops::quantize(ctx, x, scale, y);
       }},
  };
  return entry;
}

// FP8 inputs across their range (±400, rounded to the format); scale_inv keeps f16 outputs
// normal (above 2^-14).
OpCases dequantize_cases() {
  OpCases entry{"dequantize", {}, {}};
  entry.own_types = true;
  for (const DType fp8 : kFp8Types) {
    for (const Shape& s : kPrecisionShapes) {
      OpCase c;
      c.label = shape_label(s) + " from " + dtype_name(fp8);
      c.call = sizes(rows_of(s));
      c.inputs = {fixed(s, fp8, -400.0f, 400.0f), fixed({1}, DType::f32, 0.25f, 2.0f)};
      c.output = s;
      c.run = [](Context& ctx, const Tensors& in, Tensor& out) { ops::dequantize(ctx, in[0], in[1], out); };
      c.reference = [](const Refs& in) { return reference::dequantize(in[0], in[1].data[0]); };
      c.accuracy = one_rounding();
      c.bit_identical_across_devices = true;
      entry.cases.push_back(std::move(c));
    }
  }
  entry.bad_calls = {
      {"x not FP8",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), scale = ctx.empty({1}, DType::f32), y = ctx.empty({4, 8}, dt);
         *needles = {"dequantize", x.str(), "fp8_e4m3 or fp8_e5m2"};
         ops::dequantize(ctx, x, scale, y);
       }},
      {"y FP8",
       [](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, DType::fp8_e5m2), scale = ctx.empty({1}, DType::f32);
         Tensor y = ctx.empty({4, 8}, DType::fp8_e4m3);
         *needles = {"dequantize", y.str(), "f32, f16 or bf16"};
         ops::dequantize(ctx, x, scale, y);
       }},
      {"an f16 scale_inv",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, DType::fp8_e4m3), scale = ctx.empty({1}, DType::f16), y = ctx.empty({4, 8}, dt);
         *needles = {"dequantize", "scale_inv", scale.str(), "f32"};
         ops::dequantize(ctx, x, scale, y);
       }},
  };
  return entry;
}

OpCases amax_cases() {
  OpCases entry{"amax", {}, {}};
  for (const Shape& s : kPrecisionShapes) {
    OpCase c;
    c.label = shape_label(s);
    c.call = sizes(rows_of(s));
    c.inputs = {input(s, -5.0f, 3.0f)};
    c.output = {1};
    c.output_dtype = DType::f32;
    c.run = [](Context& ctx, const Tensors& in, Tensor& out) { ops::amax(ctx, in[0], out); };
    c.reference = [](const Refs& in) { return reference::amax(in[0]); };
    c.accuracy = exact();
    c.bit_identical_across_devices = true;
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {
      {"an amax of two elements",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), out = ctx.empty({2}, DType::f32);
         *needles = {"amax", out.str(), "one element"};
         ops::amax(ctx, x, out);
       }},
      {"a strided x",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({8, 4}, dt).transpose(0, 1), out = ctx.empty({1}, DType::f32);
         *needles = {"amax", x.str(), "contiguous"};
         ops::amax(ctx, x, out);
       }},
  };
  return entry;
}

// The scale step on its own (the roll, NaN and overflow: precision_test.cpp): the old scale is
// inputs[0], updated in place; the history is read, not rolled.
OpCases fp8_scale_update_cases() {
  OpCases entry{"fp8_scale_update", {}, {}};
  entry.own_types = true;
  for (const int64_t h : {int64_t{1}, int64_t{16}, int64_t{33}, int64_t{1024}}) {
    for (const DType format : kFp8Types) {
      for (const ops::AmaxAlgo algo : {ops::AmaxAlgo::max, ops::AmaxAlgo::most_recent}) {
        for (const int margin : {0, 3}) {
          // The saturation count alongside (its values: precision_test.cpp), on one history length.
          const bool saturation = h == 16;
          OpCase c;
          c.label = "H=" + std::to_string(h) + " " + dtype_name(format) + " " + ops::amax_algo_name(algo) +
                    " margin " + std::to_string(margin) + (saturation ? " saturation" : "");
          c.call = sizes({{"H", h}}, {{"saturation", saturation}});
          c.inputs = {fixed({1}, DType::f32, 0.5f, 2.0f), fixed({h}, DType::f32, 0.01f, 20.0f)};
          c.output = {1};
          c.in_place_only = true;
          c.run = [format, algo, margin, saturation](Context& ctx, const Tensors& in, Tensor& out) {
            Tensor history = in[1], inverse = ctx.empty({1}, DType::f32);
            Tensor counts = saturation ? ctx.empty({3}, DType::f32) : Tensor();
            if (saturation) from_floats(counts, {0, 0, 0});
            ops::fp8_scale_update(ctx, history, out, inverse, {format, algo, margin, false}, counts);
          };
          c.reference = [format, algo, margin](const Refs& in) {
            double amax = in[1].data[0];
            if (algo == ops::AmaxAlgo::max)
              for (double v : in[1].data) amax = std::max(amax, v);
            RefTensor scale(Shape{1});
            scale.data[0] = static_cast<float>(reference::fp8_largest(fp8_kind(format)) / amax) / std::pow(2.0, margin);
            return scale;
          };
          c.accuracy = exact();
          c.bit_identical_across_devices = true;
          entry.cases.push_back(std::move(c));
        }
      }
    }
  }
  entry.bad_calls = {
      {"a history longer than one block",
       [](Context& ctx, DType, Needles* needles) {
         Tensor h = ctx.empty({1025}, DType::f32), s = ctx.empty({1}, DType::f32), i = ctx.empty({1}, DType::f32);
         *needles = {"fp8_scale_update", h.str(), "1024"};
         ops::fp8_scale_update(ctx, h, s, i, {});
       }},
      {"a bf16 format",
       [](Context& ctx, DType, Needles* needles) {
         Tensor h = ctx.empty({4}, DType::f32), s = ctx.empty({1}, DType::f32), i = ctx.empty({1}, DType::f32);
         *needles = {"fp8_scale_update", "bf16", "not an FP8 type"};
         ops::fp8_scale_update(ctx, h, s, i, {DType::bf16, ops::AmaxAlgo::max, 0, false});
       }},
      {"scale_inv is the scale",
       [](Context& ctx, DType, Needles* needles) {
         Tensor h = ctx.empty({4}, DType::f32), s = ctx.empty({1}, DType::f32);
         *needles = {"fp8_scale_update", "overlap"};
         ops::fp8_scale_update(ctx, h, s, s, {});
       }},
      {"a negative margin",
       [](Context& ctx, DType, Needles* needles) {
         Tensor h = ctx.empty({4}, DType::f32), s = ctx.empty({1}, DType::f32), i = ctx.empty({1}, DType::f32);
         *needles = {"fp8_scale_update", "margin -1"};
         ops::fp8_scale_update(ctx, h, s, i, {DType::fp8_e4m3, ops::AmaxAlgo::max, -1, false});
       }},
      {"saturation counts in the history",
       [](Context& ctx, DType, Needles* needles) {
         Tensor h = ctx.empty({4}, DType::f32), s = ctx.empty({1}, DType::f32), i = ctx.empty({1}, DType::f32);
         *needles = {"fp8_scale_update", "overlap"};
         ops::fp8_scale_update(ctx, h, s, i, {}, h.slice(0, 0, 3));
       }},
  };
  return entry;
}

// The FP8 GEMM: x e4m3 and w e4m3 or e5m2, their dequantisation factors about 1/40, into y of
// the harness's type. The reference multiplies the scaled FP8 values exactly, so the bound is a
// linear's of y's type (the FP8 inputs are exact). FP8 outputs: test/fp8_linear_test.cpp.
OpCases fp8_linear_cases() {
  OpCases entry{"fp8_linear", {}, {}};
  entry.own_types = true;
  struct Size {
    int64_t rows, in, out;
  };
  const auto bias_type = [](DType y) { return y == DType::f16 ? DType::f16 : DType::bf16; };
  for (const Size& s : std::vector<Size>{{1, 16, 16}, {7, 32, 48}, {33, 64, 16}, {0, 16, 32}, {5, 128, 80}}) {
    for (const DType w_type : kFp8Types) {
      for (bool bias : {false, true}) {
        for (bool gelu : {false, true}) {
          const bool amax = bias && !gelu;  // the amax output given (its value: fp8_linear_test.cpp)
          OpCase c;
          c.label = "x [" + std::to_string(s.rows) + ", " + std::to_string(s.in) + "] out " + std::to_string(s.out) +
                    " w " + dtype_name(w_type) + (bias ? " bias" : "") + (gelu ? " gelu" : "") + (amax ? " amax" : "");
          c.call = sizes({{"M", s.rows}, {"K", s.in}, {"N", s.out}}, {{"bias", bias}, {"gelu", gelu}, {"amax", amax}});
          InputSpec b = bias ? input({s.out}) : absent();
          if (bias) b.dtype = bias_type;
          c.inputs = {fixed({s.rows, s.in}, DType::fp8_e4m3, -4.0f, 4.0f), fixed({1}, DType::f32, 0.01f, 0.04f),
                      fixed({s.out, s.in}, w_type, -2.0f, 2.0f), fixed({1}, DType::f32, 0.01f, 0.04f), b};
          c.output = {s.rows, s.out};
          c.run = [gelu, amax](Context& ctx, const Tensors& in, Tensor& out) {
            ops::Fp8LinearOptions options;
            options.gelu = gelu;
            if (amax) options.out_amax = ctx.empty({1}, DType::f32);
            ops::fp8_linear(ctx, in[0], in[1], in[2], in[3], in[4], out, options);
          };
          const auto scaled = [](const Refs& in) {
            RefTensor x = in[0], w = in[2];
            for (double& v : x.data) v *= in[1].data[0];
            for (double& v : w.data) v *= in[3].data[0];
            return std::make_pair(x, w);
          };
          c.reference = [gelu, scaled](const Refs& in) {
            const auto [x, w] = scaled(in);
            const RefTensor pre = reference::linear(x, w, optional(in[4]), true);
            return gelu ? reference::activation(pre, ops::Activation::gelu_tanh) : pre;
          };
          c.accuracy = absolute([scaled](const Measured& m) {
            const auto [x, w] = scaled(m.inputs);
            const RefTensor pre = reference::linear(x, w, optional(m.inputs[4]), true);
            const RefTensor magnitude = reference::linear_magnitude(x, w, optional(m.inputs[4]), true);
            return linear_bound(pre, magnitude, x.shape.back(), m.dtype);
          });
          entry.cases.push_back(std::move(c));
        }
      }
    }
  }
  const auto call = [](Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                       const ops::Fp8LinearOptions& options = {}) {
    const Tensor one = ctx.empty({1}, DType::f32);
    ops::fp8_linear(ctx, x, one, w, one, bias, y, options);
  };
  entry.bad_calls = {
      {"both operands e5m2",
       [call](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e5m2), w = ctx.empty({16, 16}, DType::fp8_e5m2), y = ctx.empty({4, 16}, dt);
         *needles = {"fp8_linear", "both fp8_e5m2"};
         call(ctx, x, w, Tensor(), y);
       }},
      {"a bf16 x",
       [call](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::bf16), w = ctx.empty({16, 16}, DType::fp8_e4m3), y = ctx.empty({4, 16}, dt);
         *needles = {"fp8_linear", x.str(), "fp8_e4m3 or fp8_e5m2"};
         call(ctx, x, w, Tensor(), y);
       }},
      {"K not a multiple of 16",
       [call](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 24}, DType::fp8_e4m3), w = ctx.empty({16, 24}, DType::fp8_e4m3), y = ctx.empty({4, 16}, dt);
         *needles = {"fp8_linear", "K = 24", "multiples of 16"};
         call(ctx, x, w, Tensor(), y);
       }},
      {"N not a multiple of 16",
       [call](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({20, 16}, DType::fp8_e4m3), y = ctx.empty({4, 20}, dt);
         *needles = {"fp8_linear", "N = 20", "multiples of 16"};
         call(ctx, x, w, Tensor(), y);
       }},
      {"a bias of y's type when y is f32 (cuBLASLt wants bf16)",
       [call](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({16, 16}, DType::fp8_e4m3);
         Tensor y = ctx.empty({4, 16}, DType::f32), b = ctx.empty({16}, DType::f32);
         *needles = {"fp8_linear", b.str(), "bf16[16]"};
         call(ctx, x, w, b, y);
       }},
      {"an FP8 y without out_scale",
       [call](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({16, 16}, DType::fp8_e4m3);
         Tensor y = ctx.empty({4, 16}, DType::fp8_e4m3);
         *needles = {"fp8_linear", "out_scale"};
         call(ctx, x, w, Tensor(), y);
       }},
      {"an e5m2 y from e4m3 operands",
       [call](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({16, 16}, DType::fp8_e4m3);
         Tensor y = ctx.empty({4, 16}, DType::fp8_e5m2);
         ops::Fp8LinearOptions options;
         options.out_scale = ctx.empty({1}, DType::f32);
         *needles = {"fp8_linear", y.str(), "e5m2 only from an e5m2 operand"};
         call(ctx, x, w, Tensor(), y, options);
       }},
      {"an out_scale for a bf16 y",
       [call](Context& ctx, DType, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({16, 16}, DType::fp8_e4m3);
         Tensor y = ctx.empty({4, 16}, DType::bf16);
         ops::Fp8LinearOptions options;
         options.out_scale = ctx.empty({1}, DType::f32);
         *needles = {"fp8_linear", "out_scale applies to an FP8 y only"};
         call(ctx, x, w, Tensor(), y, options);
       }},
      {"y of the wrong shape",
       [call](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, DType::fp8_e4m3), w = ctx.empty({32, 16}, DType::fp8_e4m3), y = ctx.empty({4, 16}, dt);
         *needles = {"fp8_linear", y.str(), "[4, 32]"};
         call(ctx, x, w, Tensor(), y);
       }},
  };
  return entry;
}

// Weight-only FP8: x, bias and y of the harness's type, w FP8 codes with one dequantisation
// factor per row. The reference multiplies x by the dequantised weight exactly, so the bound is
// a linear's of y's type. Sizes cross every kernel boundary: M ≤ 16 (the CPU's skinny kernel;
// one CUDA pass), 17 and 40 (the CPU's panels, 256 rows each at N = 300; two and three CUDA
// passes), K and N off the vector widths (37, 7: the scalar tails and CUDA's scalar loads).
OpCases fp8_weight_linear_cases() {
  OpCases entry{"fp8_weight_linear", {}, {}};
  entry.own_types = true;
  struct Size {
    int64_t rows, in, out;
  };
  for (const Size& s : std::vector<Size>{{1, 64, 16}, {3, 37, 7}, {16, 64, 48}, {17, 40, 300}, {40, 24, 9},
                                         {0, 16, 8}}) {
    for (const DType w_type : kFp8Types) {
      for (bool bias : {false, true}) {
        for (bool gelu : {false, true}) {
          if (gelu && !bias && s.rows != 3) continue;  // GELU alone once per format is enough
          OpCase c;
          c.label = "x [" + std::to_string(s.rows) + ", " + std::to_string(s.in) + "] out " + std::to_string(s.out) +
                    " w " + dtype_name(w_type) + (bias ? " bias" : "") + (gelu ? " gelu" : "");
          c.call = sizes({{"M", s.rows}, {"K", s.in}, {"N", s.out}}, {{"bias", bias}, {"gelu", gelu}});
          c.inputs = {input({s.rows, s.in}, -2.0f, 2.0f), fixed({s.out, s.in}, w_type, -2.0f, 2.0f),
                      fixed({s.out}, DType::f32, 0.005f, 0.05f), bias ? input({s.out}) : absent()};
          c.output = {s.rows, s.out};
          c.run = [gelu](Context& ctx, const Tensors& in, Tensor& out) {
            ops::fp8_weight_linear(ctx, in[0], in[1], in[2], in[3], out, gelu);
          };
          const auto dequantized = [](const Refs& in) {
            RefTensor w = in[1];
            const int64_t k = w.shape.back();
            for (size_t i = 0; i < w.data.size(); ++i) w.data[i] *= in[2].data[i / static_cast<size_t>(k)];
            return w;
          };
          c.reference = [gelu, dequantized](const Refs& in) {
            const RefTensor pre = reference::linear(in[0], dequantized(in), optional(in[3]), true);
            return gelu ? reference::activation(pre, ops::Activation::gelu_tanh) : pre;
          };
          c.accuracy = absolute([dequantized](const Measured& m) {
            const RefTensor w = dequantized(m.inputs);
            const RefTensor pre = reference::linear(m.inputs[0], w, optional(m.inputs[3]), true);
            const RefTensor magnitude = reference::linear_magnitude(m.inputs[0], w, optional(m.inputs[3]), true);
            return linear_bound(pre, magnitude, w.shape.back(), m.dtype);
          });
          entry.cases.push_back(std::move(c));
        }
      }
    }
  }
  const auto fp8 = [](Context& ctx, Shape shape) { return ctx.empty(std::move(shape), DType::fp8_e4m3); };
  const auto scales = [](Context& ctx, int64_t n) { return ctx.empty({n}, DType::f32); };
  entry.bad_calls = {
      {"an FP8 x",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = fp8(ctx, {4, 16}), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 8}, dt);
         *needles = {"fp8_weight_linear", x.str(), "fp8_linear"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
      {"a w of the compute type",
       [scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, dt), w = ctx.empty({8, 16}, dt), y = ctx.empty({4, 8}, dt);
         *needles = {"fp8_weight_linear", w.str(), "fp8_e4m3 or fp8_e5m2"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
      {"one scale for the whole weight",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, dt), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 8}, dt), s = scales(ctx, 1);
         *needles = {"fp8_weight_linear", s.str(), "f32[8]", "per row"};
         ops::fp8_weight_linear(ctx, x, w, s, Tensor(), y);
       }},
      {"a bf16 w_scale",
       [fp8](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, dt), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 8}, dt);
         Tensor s = ctx.empty({8}, DType::bf16);
         *needles = {"fp8_weight_linear", s.str(), "f32[8]"};
         ops::fp8_weight_linear(ctx, x, w, s, Tensor(), y);
       }},
      {"K = 0",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 0}, dt), w = fp8(ctx, {8, 0}), y = ctx.empty({4, 8}, dt);
         *needles = {"fp8_weight_linear", "K = 0"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
      {"y of another dtype than x",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         const DType other = dt == DType::f32 ? DType::bf16 : DType::f32;
         Tensor x = ctx.empty({4, 16}, dt), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 8}, other);
         *needles = {"fp8_weight_linear", y.str(), "different dtypes"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
      {"a bias of the wrong length",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, dt), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 8}, dt), b = ctx.empty({16}, dt);
         *needles = {"fp8_weight_linear", b.str(), "[8]"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), b, y);
       }},
      {"y of the wrong shape",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 16}, dt), w = fp8(ctx, {8, 16}), y = ctx.empty({4, 16}, dt);
         *needles = {"fp8_weight_linear", y.str(), "[4, 8]"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
      {"y over x",
       [fp8, scales](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), w = fp8(ctx, {8, 8}), y = x;
         *needles = {"fp8_weight_linear", "overlaps"};
         ops::fp8_weight_linear(ctx, x, w, scales(ctx, 8), Tensor(), y);
       }},
  };
  return entry;
}

// ---- GEMMs ---------------------------------------------------------------------------------

OpCases linear_cases() {
  OpCases entry{"linear", {}, {}};
  struct Size {
    int64_t rows, in, out;
  };
  // {3, 1024, 512}: a decode-step GEMM whose weights (1 MiB in f16 and bf16) CUDA streams with its
  // own kernel (ops/linear/skinny_gemm.h) on the naive and epilogue paths when out_in.
  for (const Size& s :
       std::vector<Size>{{1, 37, 100}, {7, 100, 37}, {300, 72, 41}, {0, 8, 5}, {3, 0, 4}, {3, 1024, 512}}) {
    for (ops::LinearPath path : ops::all_paths<ops::LinearPath>(ops::PathOp::linear)) {
      for (ops::WeightLayout layout : {ops::WeightLayout::out_in, ops::WeightLayout::in_out}) {
        for (bool bias : {true, false}) {
          for (bool gelu : {false, true}) {
            const bool out_in = layout == ops::WeightLayout::out_in;
            OpCase c;
            c.label = "x [" + std::to_string(s.rows) + ", " + std::to_string(s.in) + "] out " + std::to_string(s.out) +
                      " " + ops::path_name(path) + (out_in ? " out_in" : " in_out") + (bias ? " bias" : "") +
                      (gelu ? " gelu" : "");
            c.call = sizes({{"M", s.rows}, {"K", s.in}, {"N", s.out}},
                           {{"bias", bias}, {"gelu", gelu}, {"in_out", !out_in}}, ops::path_name(path));
            c.inputs = {input({s.rows, s.in}), weight(out_in ? Shape{s.out, s.in} : Shape{s.in, s.out}, s.in),
                        bias ? input({s.out}) : absent()};
            c.output = {s.rows, s.out};
            const ops::LinearActivation act = gelu ? ops::LinearActivation::gelu_tanh : ops::LinearActivation::none;
            c.run = [path, layout, act](Context& ctx, const Tensors& in, Tensor& out) {
              ops::linear(ctx, in[0], in[1], in[2], out, path, layout, act);
            };
            c.reference = [out_in, gelu](const Refs& in) {
              const RefTensor pre = reference::linear(in[0], in[1], optional(in[2]), out_in);
              return gelu ? reference::activation(pre, ops::Activation::gelu_tanh) : pre;
            };
            c.accuracy = absolute([out_in](const Measured& m) {
              const RefTensor pre = reference::linear(m.inputs[0], m.inputs[1], optional(m.inputs[2]), out_in);
              const RefTensor magnitude = reference::linear_magnitude(m.inputs[0], m.inputs[1], optional(m.inputs[2]), out_in);
              return linear_bound(pre, magnitude, m.inputs[0].shape.back(), m.dtype);
            });
            entry.cases.push_back(std::move(c));
          }
        }
      }
    }
  }
  entry.bad_calls = {
      {"a weight of the wrong in-features",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), w = ctx.empty({5, 9}, dt), y = ctx.empty({4, 5}, dt);
         *needles = {"linear", w.str(), x.str()};
         ops::linear(ctx, x, w, Tensor(), y, ops::LinearPath::epilogue);
       }},
      {"a bias of the wrong size",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({4, 8}, dt), w = ctx.empty({5, 8}, dt), b = ctx.empty({6}, dt), y = ctx.empty({4, 5}, dt);
         *needles = {"linear", b.str()};
         ops::linear(ctx, x, w, b, y, ops::LinearPath::naive);
       }},
  };
  return entry;
}

OpCases batched_matmul_cases() {
  OpCases entry{"batched_matmul", {}, {}};
  struct Case {
    Shape a, b;
    bool trans_b;
    int64_t group;
  };
  // QKᵀ and PV shapes with odd sizes, GQA groups of 4 and 8, vectors, one element, none.
  const std::vector<Case> shapes = {{{2, 3, 7, 5}, {2, 3, 11, 5}, true, 1}, {{2, 3, 7, 11}, {2, 3, 11, 5}, false, 1},
                                    {{1, 8, 9, 64}, {1, 2, 13, 64}, true, 4}, {{1, 8, 9, 13}, {1, 1, 13, 128}, false, 8},
                                    {{1, 1}, {1, 1}, false, 1}, {{3, 1, 4}, {3, 4, 1}, false, 1},
                                    {{2, 0, 4}, {2, 4, 3}, false, 1}};
  for (const Case& s : shapes) {
    const int64_t m = s.a[s.a.size() - 2], k = s.a.back(), n = s.trans_b ? s.b[s.b.size() - 2] : s.b.back();
    Shape out = s.a;
    out.back() = n;
    OpCase c;
    c.label = "a " + shape_label(s.a) + " b " + shape_label(s.b) + (s.trans_b ? " trans_b" : "") + " group " +
              std::to_string(s.group);
    int64_t batch = 1;  // the leading dimensions of a
    for (size_t d = 0; d + 2 < s.a.size(); ++d) batch *= s.a[d];
    c.call = sizes({{"batch", batch}, {"G", s.group}, {"M", m}, {"K", k}, {"N", n}}, {}, "gemm_test");
    c.inputs = {input(s.a), input(s.b)};
    c.output = out;
    const bool trans_b = s.trans_b;
    const int64_t group = s.group;
    c.run = [trans_b, group](Context& ctx, const Tensors& in, Tensor& o) {
      ops::batched_matmul(ctx, in[0], in[1], o, trans_b, 0.75f, group, "gemm_test");
    };
    c.reference = [trans_b, group](const Refs& in) { return reference::batched_matmul(in[0], in[1], trans_b, 0.75, group); };
    c.accuracy = absolute([trans_b, group](const Measured& m) {
      const reference::RefTensor magnitude =
          reference::batched_matmul(abs_of(m.inputs[0]), abs_of(m.inputs[1]), trans_b, 0.75, group);
      return batched_matmul_bound(m.want, magnitude, m.inputs[0].shape.back(), m.dtype);
    });
    entry.cases.push_back(std::move(c));
  }
  entry.bad_calls = {
      {"k that differs",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor a = ctx.empty({2, 3, 4}, dt), b = ctx.empty({2, 5, 6}, dt), c = ctx.empty({2, 3, 6}, dt);
         *needles = {"batched_matmul", a.str(), b.str()};
         ops::batched_matmul(ctx, a, b, c, false, 1.0f);
       }},
      {"a batch that is not b_group times b's",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor a = ctx.empty({3, 3, 4}, dt), b = ctx.empty({2, 4, 6}, dt), c = ctx.empty({3, 3, 6}, dt);
         *needles = {"batched_matmul", "b_group"};
         ops::batched_matmul(ctx, a, b, c, false, 1.0f, 1);
       }},
  };
  return entry;
}

// ---- attention and the MLP -----------------------------------------------------------------

OpCases attention_cases() {
  OpCases entry{"attention", {}, {}};
  struct Size {
    int64_t b, h, hkv, sq, sk, d;
  };
  // seq 1, odd sizes, GQA over a tile tail, Sq < Sk (decode-like), Sq > Sk (causal rows that
  // see no key are zeros), head_dim 128, no queries.
  const std::vector<Size> shapes = {{1, 2, 2, 1, 1, 64}, {2, 3, 3, 7, 7, 64},  {1, 8, 2, 70, 70, 64},
                                    {1, 2, 2, 7, 19, 64}, {1, 2, 2, 19, 7, 128}, {1, 2, 1, 0, 5, 64}};
  for (const Size& s : shapes) {
    for (ops::AttentionPath path : ops::all_paths<ops::AttentionPath>(ops::PathOp::attention)) {
      for (bool causal : {true, false}) {
        OpCase c;
        c.label = "B=" + std::to_string(s.b) + " H=" + std::to_string(s.h) + " Hkv=" + std::to_string(s.hkv) +
                  " Sq=" + std::to_string(s.sq) + " Sk=" + std::to_string(s.sk) + " D=" + std::to_string(s.d) + " " +
                  ops::path_name(path) + (causal ? " causal" : " full");
        c.call = sizes({{"B", s.b}, {"H", s.h}, {"Hkv", s.hkv}, {"Sq", s.sq}, {"Sk", s.sk}, {"D", s.d}},
                       {{"causal", causal}}, ops::path_name(path));
        c.inputs = {input({s.b, s.h, s.sq, s.d}, -2.0f, 2.0f), input({s.b, s.hkv, s.sk, s.d}, -2.0f, 2.0f),
                    input({s.b, s.hkv, s.sk, s.d})};
        c.output = {s.b, s.h, s.sq, s.d};
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
        c.run = [path, causal, scale](Context& ctx, const Tensors& in, Tensor& out) {
          ops::attention(ctx, in[0], in[1], in[2], out, path, causal, scale);
        };
        c.reference = [causal, scale](const Refs& in) { return reference::attention(in[0], in[1], in[2], causal, scale); };
        c.accuracy = {"row relative",
                      [](const Measured& m) {
                        return max_row_relative_error(m.got, m.want.data, static_cast<size_t>(m.want.shape.back()));
                      },
                      [](const Measured& m) { return attention_bound(m.dtype, m.inputs[0].shape.back(), m.inputs[1].shape[2]); }};
        entry.cases.push_back(std::move(c));
      }
    }
  }
  entry.bad_calls = {
      {"heads that are not a multiple of the kv heads",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor q = ctx.empty({1, 3, 4, 8}, dt), k = ctx.empty({1, 2, 4, 8}, dt), out = ctx.empty({1, 3, 4, 8}, dt);
         *needles = {"attention", q.str(), k.str()};
         ops::attention(ctx, q, k, k, out, ops::AttentionPath::naive, true, 1.0f);
       }},
      {"head dims that differ",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor q = ctx.empty({1, 2, 4, 8}, dt), k = ctx.empty({1, 2, 4, 16}, dt), out = ctx.empty({1, 2, 4, 8}, dt);
         *needles = {"attention", "head dims"};
         ops::attention(ctx, q, k, k, out, ops::AttentionPath::flash, true, 1.0f);
       }},
  };
  return entry;
}

OpCases mlp_cases() {
  OpCases entry{"mlp", {}, {}};
  struct Size {
    int64_t rows, d, f;
  };
  // {2, 512, 1024}: decode-step MLPs whose 1 MiB (f16, bf16) weights CUDA streams (skinny_gemm.h).
  for (const Size& s : std::vector<Size>{{1, 37, 100}, {7, 48, 96}, {0, 16, 24}, {2, 512, 1024}}) {
    for (ops::MlpPath path : ops::all_paths<ops::MlpPath>(ops::PathOp::mlp)) {
      for (bool gated : {false, true}) {
        const ops::PathInfo& info = ops::path_info(path);
        if (!(gated ? info.gated_mlp : info.plain_mlp)) continue;
        for (ops::Activation act : {ops::Activation::gelu_tanh, ops::Activation::silu}) {
          OpCase c;
          c.label = "T=" + std::to_string(s.rows) + " D=" + std::to_string(s.d) + " F=" + std::to_string(s.f) + " " +
                    (gated ? "gated " : "plain ") + ops::path_name(path) + " " + act_label(act);
          c.call = sizes({{"T", s.rows}, {"D", s.d}, {"F", s.f}}, {{"gated", gated}, {"bias", !gated}},
                         ops::path_name(path), ops::activation_name(act));
          // x, then fc (gate), fc bias (up), proj (down), proj bias (none): [out, in] weights.
          if (gated) {
            c.inputs = {input({s.rows, s.d}), weight({s.f, s.d}, s.d), weight({s.f, s.d}, s.d), weight({s.d, s.f}, s.f)};
          } else {
            c.inputs = {input({s.rows, s.d}), weight({s.f, s.d}, s.d), input({s.f}), weight({s.d, s.f}, s.f),
                        input({s.d})};
          }
          c.output = {s.rows, s.d};
          c.run = [gated, act, path](Context& ctx, const Tensors& in, Tensor& out) {
            ops::MlpWeights w;
            w.gated = gated;
            w.activation = act;
            if (gated) {
              w.gate_weight = in[1];
              w.up_weight = in[2];
              w.down_weight = in[3];
              if (path == ops::MlpPath::fused) ops::pack_gate_up(ctx, w);
            } else {
              w.fc_weight = in[1];
              w.fc_bias = in[2];
              w.proj_weight = in[3];
              w.proj_bias = in[4];
            }
            ops::mlp(ctx, in[0], w, out, path);
          };
          c.reference = [gated, act](const Refs& in) {
            return gated ? reference::mlp_gated(in[0], in[1], in[2], in[3], act, true)
                         : reference::mlp_plain(in[0], in[1], &in[2], in[3], &in[4], act, true);
          };
          c.accuracy = absolute([gated, act](const Measured& m) {
            const Refs& in = m.inputs;
            return gated ? mlp_gated_bound(in[0], in[1], in[2], in[3], act, true, m.want, m.dtype)
                         : mlp_plain_bound(in[0], in[1], &in[2], in[3], &in[4], act, true, m.want, m.dtype);
          });
          c.alias_input = 0;  // x is read only by the first GEMM, y written only by the last
          entry.cases.push_back(std::move(c));
        }
      }
    }
  }
  entry.bad_calls = {
      {"a path that does not apply to a gated MLP",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::MlpWeights w;
         w.gated = true;
         w.gate_weight = ctx.empty({6, 4}, dt);
         w.up_weight = ctx.empty({6, 4}, dt);
         w.down_weight = ctx.empty({4, 6}, dt);
         Tensor x = ctx.empty({2, 4}, dt), y = ctx.empty({2, 4}, dt);
         *needles = {"mlp", "epilogue", "gated"};
         ops::mlp(ctx, x, w, y, ops::MlpPath::epilogue);
       }},
      {"a proj weight of the wrong shape",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::MlpWeights w;
         w.fc_weight = ctx.empty({6, 4}, dt);
         w.proj_weight = ctx.empty({4, 5}, dt);
         Tensor x = ctx.empty({2, 4}, dt), y = ctx.empty({2, 4}, dt);
         *needles = {"mlp", "proj_weight", w.proj_weight.str()};
         ops::mlp(ctx, x, w, y, ops::MlpPath::naive);
       }},
  };
  return entry;
}

}  // namespace


// ---- KV cache and decode attention ---------------------------------------------------------

// Runs `setup` with the profiler detached: a case's cache is made and filled before the call
// under test, which alone must record what the catalogue says.
template <typename Setup>
void unrecorded(Context& ctx, Setup setup) {
  profiler::Recorder* recorder = ctx.recorder();
  ctx.set_recorder(nullptr);
  setup();
  ctx.set_recorder(recorder);
}

// A cache for sequences of `lengths` positions: paged (pages of 8, shuffled) or contiguous
// (max_len = the longest).
ops::KvCache case_cache(Context& ctx, ops::KvLayout layout, int64_t kv_heads, int64_t head_dim,
                        const std::vector<int64_t>& lengths, DType dtype) {
  ops::KvCacheShape shape{layout, kv_heads, head_dim, 8, {}};
  int64_t longest = 1;
  for (int64_t length : lengths) longest = std::max(longest, length);
  if (layout == ops::KvLayout::contiguous) shape.page_size = longest;
  for (int64_t length : lengths) shape.positions.push_back(layout == ops::KvLayout::paged ? std::max<int64_t>(length, 1) : longest);
  return ops::make_kv_cache(ctx, shape, dtype, layout == ops::KvLayout::paged ? 12345 : 0);
}

std::vector<int32_t> int32s(const std::vector<int64_t>& values) { return {values.begin(), values.end()}; }

OpCases kv_cache_write_cases() {
  OpCases entry{"kv_cache_write", {}, {}};
  struct Size {
    int64_t b, hkv, s, d;
    std::vector<int64_t> starts, counts;
  };
  // Prefill (starts 0, ragged counts, a sequence with none), decode appends past page
  // boundaries, a strided source (a fused projection's k half).
  const std::vector<Size> shapes = {{3, 2, 13, 16, {0, 0, 0}, {13, 1, 0}},
                                    {2, 4, 1, 64, {7, 16}, {1, 1}},
                                    {1, 1, 5, 8, {3}, {5}}};
  for (const Size& z : shapes) {
    for (ops::KvLayout layout : {ops::KvLayout::contiguous, ops::KvLayout::paged}) {
      for (bool strided : {false, true}) {
        int64_t written = 0;
        std::vector<int64_t> capacity;
        for (size_t i = 0; i < z.counts.size(); ++i) {
          written += z.counts[i];
          capacity.push_back(z.starts[i] + z.s);
        }
        OpCase c;
        c.label = "B=" + std::to_string(z.b) + " Hkv=" + std::to_string(z.hkv) + " S=" + std::to_string(z.s) +
                  " D=" + std::to_string(z.d) + " " + ops::kv_layout_name(layout) + (strided ? " strided" : "");
        c.call = sizes({{"B", z.b}, {"Hkv", z.hkv}, {"S", z.s}, {"D", z.d}, {"W", written}});
        const Shape source{z.b, z.hkv, z.s, z.d};
        // Strided: [B, S, 2, Hkv, D] made, its k half viewed as [B, Hkv, S, D].
        const auto view = [](const Tensor& t) { return t.select(2, 0).permute({0, 2, 1, 3}); };
        c.inputs = strided ? std::vector<InputSpec>{viewed({z.b, z.s, 2, z.hkv, z.d}, view),
                                                    viewed({z.b, z.s, 2, z.hkv, z.d}, view)}
                           : std::vector<InputSpec>{input(source), input(source)};
        // The output: what the cache holds at positions [starts[b], starts[b] + S) of each
        // sequence, as [2 (k | v), B, Hkv, S, D]; rows not written read back as zeros.
        c.output = {2, z.b, z.hkv, z.s, z.d};
        c.run = [z, layout, capacity](Context& ctx, const Tensors& in, Tensor& out) {
          ops::KvCache cache;
          IndexTable starts, counts;
          unrecorded(ctx, [&] {
            cache = case_cache(ctx, layout, z.hkv, z.d, capacity, out.dtype());  // what the output reads back
            starts = IndexTable(ctx, int32s(z.starts), 1, z.b);
            counts = IndexTable(ctx, int32s(z.counts), 1, z.b);
          });
          ops::kv_cache_write(ctx, in[0], in[1], cache, starts.row(0), counts.row(0));
          unrecorded(ctx, [&] {
            const std::vector<float> k = to_floats(cache.k), v = to_floats(cache.v);
            std::vector<float> held(static_cast<size_t>(shape_numel(out.shape())), 0.0f);
            for (int which = 0; which < 2; ++which)
              for (int64_t b = 0; b < z.b; ++b)
                for (int64_t h = 0; h < z.hkv; ++h)
                  for (int64_t s = 0; s < z.counts[static_cast<size_t>(b)]; ++s) {
                    const int64_t row = cache.row_offset(b, h, z.starts[static_cast<size_t>(b)] + s);
                    for (int64_t d = 0; d < z.d; ++d)
                      held[static_cast<size_t>((((which * z.b + b) * z.hkv + h) * z.s + s) * z.d + d)] =
                          (which == 0 ? k : v)[static_cast<size_t>(row + d)];
                  }
            from_floats(out, held);
          });
        };
        c.reference = [z](const Refs& in) {
          RefTensor out({2, z.b, z.hkv, z.s, z.d});
          for (int which = 0; which < 2; ++which)
            for (int64_t b = 0; b < z.b; ++b)
              for (int64_t h = 0; h < z.hkv; ++h)
                for (int64_t s = 0; s < z.counts[static_cast<size_t>(b)]; ++s)
                  for (int64_t d = 0; d < z.d; ++d)
                    out.data[static_cast<size_t>((((which * z.b + b) * z.hkv + h) * z.s + s) * z.d + d)] =
                        in[static_cast<size_t>(which)].data[static_cast<size_t>(((b * z.hkv + h) * z.s + s) * z.d + d)];
          return out;
        };
        c.accuracy = exact();
        c.bit_identical_across_devices = true;
        entry.cases.push_back(std::move(c));
      }
    }
  }
  entry.bad_calls = {
      {"a row past the sequence's capacity",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::KvCache cache = case_cache(ctx, ops::KvLayout::paged, 2, 8, {8, 8}, dt);
         Tensor k = ctx.empty({2, 2, 2, 8}, dt);
         const IndexTable starts(ctx, {7, 0}, 1, 2), counts(ctx, {2, 2}, 1, 2);
         *needles = {"kv_cache_write", "sequence 0 would write positions [7, 9)", "holds 8"};
         ops::kv_cache_write(ctx, k, k, cache, starts.row(0), counts.row(0));
       }},
      {"kv heads that are not the cache's",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::KvCache cache = case_cache(ctx, ops::KvLayout::contiguous, 2, 8, {8, 8}, dt);
         Tensor k = ctx.empty({2, 3, 2, 8}, dt);
         const IndexTable starts(ctx, {0, 0}, 1, 2), counts(ctx, {2, 2}, 1, 2);
         *needles = {"kv_cache_write", k.str(), "Hkv = 2"};
         ops::kv_cache_write(ctx, k, k, cache, starts.row(0), counts.row(0));
       }},
  };
  return entry;
}

OpCases decode_attention_cases() {
  OpCases entry{"decode_attention", {}, {}};
  struct Size {
    int64_t h, hkv, d;
    std::vector<int64_t> lengths;
  };
  // One token; lengths off the page (8) and tile sizes; GQA 1, 4 and 8; head dims 16, 64, 128.
  const std::vector<Size> shapes = {{2, 2, 64, {1}}, {8, 2, 64, {1, 19, 37}}, {8, 1, 16, {64, 9}}, {4, 4, 128, {33, 8}}};
  for (const Size& z : shapes) {
    const int64_t b = static_cast<int64_t>(z.lengths.size());
    int64_t longest = 0, total = 0;
    for (int64_t length : z.lengths) longest = std::max(longest, length), total += length;
    for (ops::KvLayout layout : {ops::KvLayout::contiguous, ops::KvLayout::paged}) {
      for (ops::AttentionPath path : {ops::AttentionPath::naive, ops::AttentionPath::flash}) {
        OpCase c;
        c.label = "B=" + std::to_string(b) + " H=" + std::to_string(z.h) + " Hkv=" + std::to_string(z.hkv) +
                  " D=" + std::to_string(z.d) + " longest=" + std::to_string(longest) + " " +
                  ops::kv_layout_name(layout) + " " + ops::path_name(path);
        c.call = sizes({{"B", b}, {"H", z.h}, {"Hkv", z.hkv}, {"D", z.d}, {"L", total}}, {}, ops::path_name(path));
        c.inputs = {input({b, z.h, z.d}, -2.0f, 2.0f), input({b, z.hkv, longest, z.d}, -2.0f, 2.0f),
                    input({b, z.hkv, longest, z.d})};
        c.output = {b, z.h, z.d};
        const float scale = 1.0f / std::sqrt(static_cast<float>(z.d));
        c.run = [z, b, layout, path, scale](Context& ctx, const Tensors& in, Tensor& out) {
          ops::KvCache cache;
          IndexTable zeros, lengths;
          unrecorded(ctx, [&] {
            cache = case_cache(ctx, layout, z.hkv, z.d, z.lengths, in[0].dtype());
            zeros = IndexTable(ctx, std::vector<int32_t>(static_cast<size_t>(b), 0), 1, b);
            lengths = IndexTable(ctx, int32s(z.lengths), 1, b);
            ops::kv_cache_write(ctx, in[1], in[2], cache, zeros.row(0), lengths.row(0));
          });
          ops::decode_attention(ctx, in[0], cache, lengths.row(0), out, path, scale);
        };
        c.reference = [z, scale](const Refs& in) {
          return reference::decode_attention(in[0], in[1], in[2], z.lengths, scale);
        };
        c.accuracy = {"row relative",
                      [](const Measured& m) {
                        return max_row_relative_error(m.got, m.want.data, static_cast<size_t>(m.want.shape.back()));
                      },
                      [longest](const Measured& m) { return attention_bound(m.dtype, m.want.shape.back(), longest); }};
        entry.cases.push_back(std::move(c));
      }
    }
  }
  entry.bad_calls = {
      {"a length past the cache",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::KvCache cache = case_cache(ctx, ops::KvLayout::paged, 2, 8, {8, 3}, dt);
         Tensor q = ctx.empty({2, 4, 8}, dt), out = ctx.empty({2, 4, 8}, dt);
         const IndexTable lengths(ctx, {8, 9}, 1, 2);
         *needles = {"decode_attention", "sequence 1 has length 9", "[1, 8]"};
         ops::decode_attention(ctx, q, cache, lengths.row(0), out, ops::AttentionPath::flash, 1.0f);
       }},
      {"an attention path with no decode form",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::KvCache cache = case_cache(ctx, ops::KvLayout::contiguous, 2, 8, {8, 3}, dt);
         Tensor q = ctx.empty({2, 4, 8}, dt), out = ctx.empty({2, 4, 8}, dt);
         const IndexTable lengths(ctx, {8, 3}, 1, 2);
         *needles = {"decode_attention", "inplace", "no decode form"};
         ops::decode_attention(ctx, q, cache, lengths.row(0), out, ops::AttentionPath::inplace, 1.0f);
       }},
      {"q with a strided head dim",
       [](Context& ctx, DType dt, Needles* needles) {
         ops::KvCache cache = case_cache(ctx, ops::KvLayout::contiguous, 2, 8, {8, 3}, dt);
         Tensor q = ctx.empty({2, 8, 4}, dt).transpose(1, 2), out = ctx.empty({2, 4, 8}, dt);
         const IndexTable lengths(ctx, {8, 3}, 1, 2);
         *needles = {"decode_attention", q.str(), "contiguous"};
         ops::decode_attention(ctx, q, cache, lengths.row(0), out, ops::AttentionPath::flash, 1.0f);
       }},
  };
  return entry;
}

// ---- collectives ---------------------------------------------------------------------------

// The collectives run in one process: ranks = 1 (single_rank_communicator), so the result is
// the input itself, and FLOPs and bus bytes are 0; these shapes, each with its `run`.
std::vector<OpCase> one_rank_cases(const std::function<void(Context&, const Tensors&, Tensor&)>& run) {
  std::vector<OpCase> cases;
  for (const Shape& s : {Shape{7, 33}, Shape{1}, Shape{3, 5, 17}, Shape{2500}, Shape{0, 4}}) {
    OpCase c;
    c.label = shape_label(s) + " ranks=1";
    c.call = sizes({{"N", shape_numel(s)}, {"ranks", 1}});
    c.inputs = {input(s)};
    c.output = s;
    c.run = run;
    c.reference = [](const Refs& in) { return in[0]; };
    c.accuracy = exact();
    c.bit_identical_across_devices = true;
    cases.push_back(std::move(c));
  }
  return cases;
}

// test/mpi_all_reduce_test.cpp runs 2 ranks under mpirun.
OpCases all_reduce_cases() {
  OpCases entry{"all_reduce", {}, {}};
  entry.cases = one_rank_cases(
      [](Context& ctx, const Tensors&, Tensor& out) { ops::all_reduce(ctx, out, single_rank_communicator()); });
  for (OpCase& c : entry.cases) c.in_place_only = true;
  entry.bad_calls = {
      {"a strided tensor",
       [](Context& ctx, DType dt, Needles* needles) {
         Tensor t = ctx.empty({6, 4}, dt).transpose(0, 1);
         *needles = {"all_reduce", t.str(), "contiguous"};
         ops::all_reduce(ctx, t, single_rank_communicator());
       }},
      {"an undefined tensor",
       [](Context& ctx, DType, Needles* needles) {
         Tensor t;
         *needles = {"all_reduce", "undefined"};
         ops::all_reduce(ctx, t, single_rank_communicator());
       }},
  };
  return entry;
}

// Sequence parallelism's pair (one rank: its block is the whole tensor). test/mpi_all_reduce_test.cpp
// runs 2 ranks under mpirun, test/tensor_parallel_gpu_test.cpp GPUs over NCCL.
OpCases row_block_collective_cases(const char* name,
                                   void (*op)(Context&, const Tensor&, Tensor&, Communicator&)) {
  OpCases entry{name, {}, {}};
  entry.cases = one_rank_cases(
      [op](Context& ctx, const Tensors& in, Tensor& out) { op(ctx, in[0], out, single_rank_communicator()); });
  entry.bad_calls = {
      {"blocks that do not stack",
       [name, op](Context& ctx, DType dt, Needles* needles) {
         const Tensor x = ctx.empty({6, 4}, dt);
         Tensor out = ctx.empty({6, 5}, dt);
         *needles = {name, x.str(), out.str(), "blocks"};
         op(ctx, x, out, single_rank_communicator());
       }},
      {"a strided tensor",
       [name, op](Context& ctx, DType dt, Needles* needles) {
         const Tensor x = ctx.empty({6, 4}, dt).transpose(0, 1);
         Tensor out = ctx.empty({4, 6}, dt);
         *needles = {name, x.str(), "contiguous"};
         op(ctx, x, out, single_rank_communicator());
       }},
      {"out aliasing x",
       [name, op](Context& ctx, DType dt, Needles* needles) {
         Tensor x = ctx.empty({6, 4}, dt);
         *needles = {name, "overlaps"};
         op(ctx, x, x, single_rank_communicator());
       }},
  };
  return entry;
}

const std::vector<OpCases>& op_cases() {
  static const std::vector<OpCases> cases = {
      add_cases(),        mul_cases(),         scale_cases(),         copy_cases(),
      masked_fill_cases(), masked_fill_inplace_cases(), activation_cases(), gated_activation_cases(),
      layer_norm_cases(), rms_norm_cases(),    softmax_cases(),       softmax_scale_causal_cases(),
      rope_cases(),       linear_cases(),      fp8_linear_cases(), fp8_weight_linear_cases(), batched_matmul_cases(), attention_cases(),
      kv_cache_write_cases(), decode_attention_cases(), mlp_cases(), quantize_cases(), dequantize_cases(),
      amax_cases(), fp8_scale_update_cases(), all_reduce_cases(),
      row_block_collective_cases("reduce_scatter", ops::reduce_scatter),
      row_block_collective_cases("all_gather", ops::all_gather),
  };
  return cases;
}

}  // namespace blockscope::testing
