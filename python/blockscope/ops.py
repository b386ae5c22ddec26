"""The ops on your arrays: NumPy arrays and torch CPU tensors (float32, float16, bfloat16) go in
without a copy (DLPack / the buffer protocol), and the result comes back as the same kind: a new
array over blockscope's memory, or ``out`` itself, written in place. Each call is the op the
workloads run (the CPU backend in this build), recorded inside ``with bs.profile():``.

Strided inputs are taken where the op takes them (attention's flash path, a linear's rows) and
refused with an InputError naming the argument where it does not; negative and zero strides
(reversed and broadcast views) are refused everywhere."""

from . import _core
from ._errors import InputError

__all__ = ["linear", "attention", "softmax", "layer_norm", "rms_norm", "rope", "activation", "mlp"]


def _is_torch(*arrays):
    return any(type(a).__module__.startswith("torch") for a in arrays if a is not None)


def _call(op, arrays, *args):
    """_core.ops.<op>(*args); when nanobind cannot take an argument as an array (a list, a string,
    a tensor DLPack cannot export), an InputError naming that argument instead of its TypeError
    about overloads."""
    try:
        return getattr(_core.ops, op)(*args)
    except TypeError:
        for argument, value in arrays.items():
            if value is not None and not _core.ops.borrowable(value):
                raise InputError(f"{argument}: a {type(value).__module__}.{type(value).__qualname__} is not an array "
                                 "blockscope can take (a NumPy array or a CPU torch tensor, through DLPack or the "
                                 "buffer protocol)") from None
        raise


def linear(x, weight, bias=None, *, path="epilogue", layout="out_in", activation="none", out=None):
    """y = x @ weight.T + bias (``layout="out_in"``, nn.Linear's [out, in] weight) or x @ weight + bias
    (``"in_out"``); ``activation="gelu_tanh"`` applies GELU after the bias. Paths: naive, epilogue, addmm."""
    return _call("linear", {"x": x, "weight": weight, "bias": bias}, x, weight, bias, path, layout, activation, out,
                 _is_torch(x, weight, bias))


def attention(q, k, v, *, path="flash", causal=False, scale=None, out=None):
    """Scaled dot-product attention. q: [B, H, Sq, D], k and v: [B, Hkv, Sk, D] (grouped-query when
    Hkv < H); ``scale`` defaults to 1/sqrt(D); ``causal`` masks bottom-right aligned (as the
    workloads do; PyTorch SDPA's is_causal is top-left when Sq != Sk). Paths: naive, inplace,
    fused_softmax, flash."""
    return _call("attention", {"q": q, "k": k, "v": v}, q, k, v, path, causal, scale, out, _is_torch(q, k, v))


def softmax(x, *, out=None):
    """Softmax over the last dimension."""
    return _call("softmax", {"x": x}, x, out, _is_torch(x))


def layer_norm(x, weight, bias=None, *, eps=1e-5, out=None):
    """LayerNorm over the last dimension (biased variance, as torch.nn.LayerNorm)."""
    return _call("layer_norm", {"x": x, "weight": weight, "bias": bias}, x, weight, bias, eps, out,
                 _is_torch(x, weight, bias))


def rms_norm(x, weight, *, eps=1e-6, out=None):
    """RMSNorm over the last dimension (Llama's: normalise in float32, then scale)."""
    return _call("rms_norm", {"x": x, "weight": weight}, x, weight, eps, out, _is_torch(x, weight))


def rope(x, *, theta=10000.0, position_offset=0, out=None):
    """Rotary position embedding (Hugging Face Llama's rotate_half) of x: [B, H, S, D], row s at
    position ``position_offset + s``."""
    return _call("rope", {"x": x}, x, theta, position_offset, out, _is_torch(x))


def activation(x, kind="gelu_tanh", *, out=None):
    """An activation elementwise: gelu_erf, gelu_tanh, silu or relu."""
    return _call("activation", {"x": x}, x, kind, out, _is_torch(x))


def mlp(x, *, fc_weight=None, fc_bias=None, proj_weight=None, proj_bias=None, gate_weight=None, up_weight=None,
        down_weight=None, activation="gelu_tanh", path="naive", out=None):
    """The transformer MLP on x: [rows, d_model]. Plain (GPT-2): proj(act(fc(x))), weights [out, in].
    Gated (Llama): down(act(gate(x)) * up(x)). Paths: naive; epilogue (plain); fused (gated)."""
    arrays = {"x": x, "fc_weight": fc_weight, "fc_bias": fc_bias, "proj_weight": proj_weight, "proj_bias": proj_bias,
              "gate_weight": gate_weight, "up_weight": up_weight, "down_weight": down_weight}
    return _call("mlp", arrays, x, fc_weight, fc_bias, proj_weight, proj_bias, gate_weight, up_weight, down_weight,
                 activation, path, out, _is_torch(*arrays.values()))
