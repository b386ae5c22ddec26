// The ops on the caller's arrays (bs.ops.*): inputs borrowed in place, the result a new array
// over blockscope's storage or the caller's `out` array itself, each op the same call the
// workloads make (ops/<op>/<op>.h), recorded when a `with bs.profile():` block is open.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <functional>
#include <optional>

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/common/activations.h"
#include "ops/linear/linear.h"
#include "ops/mlp/mlp.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/softmax/softmax.h"
#include "python/arrays.h"

namespace blockscope::python {

namespace {

using Optional = std::optional<InputArray>;

Tensor borrow_optional(const Optional& array, const char* argument) {
  return array ? borrow(*array, argument) : Tensor();
}

// Runs `op` into `out` (the caller's array, written in place and returned as itself) or into a
// new tensor of `shape` and x's dtype, returned as an array of the inputs' kind. Called inside
// the op's one guarded() (each costs four sigaction calls: a microsecond of a small op's five).
nb::object run_op(const nb::object& out, const Shape& shape, DType dtype, bool as_torch,
                  const std::function<void(Tensor&)>& op) {
  {
    Tensor y;
    if (out.is_none()) {
      y = cpu_context().empty(shape, dtype);
    } else {
      OutputArray array;
      if (!nb::try_cast(out, array)) throw InputError("out: not a writable CPU array (NumPy or torch)");
      y = borrow_output(array, "out");
    }
    {
      nb::gil_scoped_release released;  // other Python threads run meanwhile
      op(y);
    }
    return out.is_none() ? to_array(y, as_torch) : out;
  }
}

template <typename Path>
Path path_named(const std::string& name, ops::PathOp op) {
  Path path;
  if (!ops::parse_path(name, &path)) {
    std::string known;
    for (const std::string& n : ops::path_names(op)) known += (known.empty() ? "" : ", ") + n;
    throw InputError("path='" + name + "': no such " + ops::path_op_name(op) + " path (expected one of " + known + ")");
  }
  return path;
}

ops::Activation activation_named(const std::string& name) {
  ops::Activation act;
  if (!ops::parse_activation(name, &act)) {
    std::string known;
    for (const std::string& n : ops::activation_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("activation='" + name + "': expected one of " + known);
  }
  return act;
}

}  // namespace

void define_ops(nb::module_& m) {
  nb::module_ o = m.def_submodule("ops", "The ops on arrays; see blockscope.ops for the documented wrappers.");

  o.def(
      "borrowable", [](nb::handle value) { InputArray array; return nb::try_cast(value, array); }, nb::arg("value"),
      "Whether `value` converts to an array the ops take (DLPack or the buffer protocol): what names the argument "
      "when a call's arguments do not convert.");

  o.def(
      "linear",
      [](const InputArray& x_array, const InputArray& w_array, const Optional& bias_array, const std::string& path,
         const std::string& layout, const std::string& activation, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x"), w = borrow(w_array, "weight"), bias = borrow_optional(bias_array, "bias");
          if (layout != "out_in" && layout != "in_out")
            throw InputError("layout='" + layout + "': expected out_in (nn.Linear's [out, in]) or in_out ([in, out])");
          if (activation != "none" && activation != "gelu_tanh")
            throw InputError("activation='" + activation + "': a linear's epilogue is none or gelu_tanh");
          if (w.dim() != 2) throw InputError("weight " + w.str() + ": expected 2 dimensions");
          if (x.dim() < 1) throw InputError("x " + x.str() + ": expected at least 1 dimension");
          const ops::LinearPath p = path_named<ops::LinearPath>(path, ops::PathOp::linear);
          Shape y_shape = x.shape();  // [..., out]
          y_shape.back() = layout == "out_in" ? w.size(0) : w.size(1);
          return run_op(out, y_shape, x.dtype(), as_torch, [&](Tensor& y) {
            ops::linear(cpu_context(), x, w, bias, y, p,
                        layout == "out_in" ? ops::WeightLayout::out_in : ops::WeightLayout::in_out,
                        activation == "gelu_tanh" ? ops::LinearActivation::gelu_tanh : ops::LinearActivation::none);
          });
        });
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("path"), nb::arg("layout"), nb::arg("activation"),
      nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "attention",
      [](const InputArray& q_array, const InputArray& k_array, const InputArray& v_array, const std::string& path,
         bool causal, std::optional<double> scale, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor q = borrow(q_array, "q"), k = borrow(k_array, "k"), v = borrow(v_array, "v");
          if (q.dim() != 4) throw InputError("q " + q.str() + ": expected [batch, heads, seq, head_dim]");
          const ops::AttentionPath p = path_named<ops::AttentionPath>(path, ops::PathOp::attention);
          const float s = static_cast<float>(scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
          return run_op(out, q.shape(), q.dtype(), as_torch,
                        [&](Tensor& y) { ops::attention(cpu_context(), q, k, v, y, p, causal, s); });
        });
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("path"), nb::arg("causal"), nb::arg("scale").none(),
      nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "softmax",
      [](const InputArray& x_array, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x");
          return run_op(out, x.shape(), x.dtype(), as_torch, [&](Tensor& y) { ops::softmax(cpu_context(), x, y); });
        });
      },
      nb::arg("x"), nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "layer_norm",
      [](const InputArray& x_array, const InputArray& w_array, const Optional& b_array, double eps,
         const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x"), w = borrow(w_array, "weight"), b = borrow_optional(b_array, "bias");
          return run_op(out, x.shape(), x.dtype(), as_torch,
                        [&](Tensor& y) { ops::layer_norm(cpu_context(), x, w, b, static_cast<float>(eps), y); });
        });
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("eps"), nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "rms_norm",
      [](const InputArray& x_array, const InputArray& w_array, double eps, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x"), w = borrow(w_array, "weight");
          return run_op(out, x.shape(), x.dtype(), as_torch,
                        [&](Tensor& y) { ops::rms_norm(cpu_context(), x, w, static_cast<float>(eps), y); });
        });
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("eps"), nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "rope",
      [](const InputArray& x_array, double theta, int64_t position_offset, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x");
          return run_op(out, x.shape(), x.dtype(), as_torch, [&](Tensor& y) {
            ops::rope(cpu_context(), x, y, static_cast<float>(theta), position_offset);
          });
        });
      },
      nb::arg("x"), nb::arg("theta"), nb::arg("position_offset"), nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "activation",
      [](const InputArray& x_array, const std::string& activation, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x");
          const ops::Activation act = activation_named(activation);
          return run_op(out, x.shape(), x.dtype(), as_torch,
                        [&](Tensor& y) { ops::activation(cpu_context(), x, y, act); });
        });
      },
      nb::arg("x"), nb::arg("activation"), nb::arg("out").none(), nb::arg("as_torch"));

  o.def(
      "mlp",
      [](const InputArray& x_array, const Optional& fc_w, const Optional& fc_b, const Optional& proj_w,
         const Optional& proj_b, const Optional& gate_w, const Optional& up_w, const Optional& down_w,
         const std::string& activation, const std::string& path, const nb::object& out, bool as_torch) {
        return guarded("InputError", [&] {
          const Tensor x = borrow(x_array, "x");
          ops::MlpWeights weights;
          weights.activation = activation_named(activation);
          weights.gated = gate_w.has_value();
          if (weights.gated) {
            if (!up_w || !down_w) throw InputError("a gated MLP needs gate_weight, up_weight and down_weight");
            if (fc_w || fc_b || proj_w || proj_b) throw InputError("a gated MLP takes gate/up/down weights, not fc/proj ones");
            weights.gate_weight = borrow(*gate_w, "gate_weight");
            weights.up_weight = borrow(*up_w, "up_weight");
            weights.down_weight = borrow(*down_w, "down_weight");
          } else {
            if (!fc_w || !proj_w) throw InputError("an MLP needs fc_weight and proj_weight (or gate/up/down weights)");
            if (up_w || down_w) throw InputError("up_weight and down_weight need gate_weight (a gated MLP)");
            weights.fc_weight = borrow(*fc_w, "fc_weight");
            weights.fc_bias = borrow_optional(fc_b, "fc_bias");
            weights.proj_weight = borrow(*proj_w, "proj_weight");
            weights.proj_bias = borrow_optional(proj_b, "proj_bias");
          }
          const ops::MlpPath p = path_named<ops::MlpPath>(path, ops::PathOp::mlp);
          // The fused path reads gate|up as one weight, packed from the two (a copy, once per call).
          if (weights.gated && p == ops::MlpPath::fused) ops::pack_gate_up(cpu_context(), weights);
          return run_op(out, x.shape(), x.dtype(), as_torch, [&](Tensor& y) { ops::mlp(cpu_context(), x, weights, y, p); });
        });
      },
      nb::arg("x"), nb::arg("fc_weight").none(), nb::arg("fc_bias").none(), nb::arg("proj_weight").none(),
      nb::arg("proj_bias").none(), nb::arg("gate_weight").none(), nb::arg("up_weight").none(),
      nb::arg("down_weight").none(), nb::arg("activation"), nb::arg("path"), nb::arg("out").none(),
      nb::arg("as_torch"));
}

}  // namespace blockscope::python
