#!/usr/bin/env python3
"""Check a blockscope dump against PyTorch, outside blockscope.

    blockscope run configs/blocks/tiny-gpt2.yaml --dtype f32 --dump out.safetensors
    /usr/bin/python3 tools/torch_reference.py out.safetensors [--tol 1e-5]

The dump holds "input" [batch, seq_len, d_model], "output" (blockscope's result), every weight
under its Hugging Face name, and __metadata__["blockscope"]: a JSON string describing the model
(workload, family, d_model, n_heads, n_kv_heads, head_dim, d_ff, n_layers, norm_eps,
rope_theta, norm, activation, gated, bias, rope, causal, dtype, batch, seq_len).

This script recomputes the block (or stack of blocks) in float64 from the dumped input and
weights, exactly as stored, with PyTorch as Hugging Face's GPT2Block / LlamaDecoderLayer do,
then prints two errors, each relative to its reference's largest value: of blockscope's output,
and of its change, output - input (the sublayers' sum, which the residual stream would hide
in the first). Both must be within the tolerance.

For gpt2 and llama the knobs Hugging Face fixes (norm, activation, gated MLP, biases, RoPE,
causal) are this script's own (HF_FAMILIES), not the dump's: metadata that disagrees fails.

Exit status: 0 within --tol, 1 above it (or non-finite, or a family knob that is not Hugging
Face's), 2 bad input (unreadable dump, unsupported workload, weights that do not match the
metadata).

Works with PyTorch 1.13 and 2.x: the file is read with struct + json (no safetensors package),
attention is written with matmul + softmax (no scaled_dot_product_attention).
"""

import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

# Default tolerances per dump dtype. Blockscope stores activations in the dump dtype between
# ops (as PyTorch eager does), so its error against float64 is a few roundings of that dtype.
# Measured on configs/blocks/tiny-*.yaml with weights.init=scaled (CPU), output and output -
# input alike: f32 at most 3.7e-7, f16 about 9e-4, bf16 5.3e-3; the defaults leave 4-5x.
DEFAULT_TOL = {"f32": 2e-6, "f16": 4e-3, "bf16": 2e-2}

# safetensors dtype -> (element size, decoder to float64)
ELEMENT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}


class InputProblem(Exception):
    """The dump cannot be checked (exit status 2)."""


class FamilyMismatch(Exception):
    """The dump's metadata disagrees with the Hugging Face family it names (exit status 1)."""


# What GPT2Block and LlamaDecoderLayer fix, written here from the Hugging Face modules, not read
# from the dump (blockscope's reference/families.h says the same, independently).
HF_FAMILIES = {
    "gpt2": {"norm": "layernorm", "activation": "gelu_tanh", "gated": False, "bias": True, "rope": False,
             "causal": True},
    "llama": {"norm": "rmsnorm", "activation": "silu", "gated": True, "bias": False, "rope": True, "causal": True},
}


def check_family(m):
    """Raises FamilyMismatch naming every knob of a gpt2 or llama dump that is not Hugging Face's."""
    fixed = HF_FAMILIES.get(m["family"])
    if fixed is None:
        return
    wrong = [f"{key}: the dump has {m[key]!r}, Hugging Face {m['family']} has {want!r}"
             for key, want in fixed.items() if m[key] != want]
    if m["family"] == "gpt2" and m["n_kv_heads"] != m["n_heads"]:
        wrong.append(f"n_kv_heads: the dump has {m['n_kv_heads']}, Hugging Face gpt2 has n_heads = {m['n_heads']}")
    if wrong:
        raise FamilyMismatch("; ".join(wrong))


# ---- Reading the dump ---------------------------------------------------------------------

def decode(dtype, shape, raw):
    """Raw little-endian bytes -> float64 tensor of `shape`."""
    data = bytearray(raw)  # writable copy: torch.frombuffer warns on read-only buffers
    count = math.prod(shape)
    if count == 0:
        return torch.zeros(shape, dtype=torch.float64)
    if dtype == "F32":
        values = torch.frombuffer(data, dtype=torch.float32)
    elif dtype == "F64":
        values = torch.frombuffer(data, dtype=torch.float64)
    elif dtype == "F16":
        values = torch.frombuffer(data, dtype=torch.float16)
    elif dtype == "BF16":
        # bf16 is the top half of a float32: widen the 16 bits and shift them into place.
        bits = torch.frombuffer(data, dtype=torch.int16).to(torch.int32) & 0xFFFF
        values = (bits << 16).view(torch.float32)
    else:
        raise InputProblem(f"unsupported dtype {dtype}")
    return values.to(torch.float64).reshape(shape)


def read_safetensors(path):
    """Returns ({name: float64 tensor}, {name: dtype string}, metadata dict)."""
    if sys.byteorder != "little":
        raise InputProblem("this reader assumes a little-endian machine")
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as error:
        raise InputProblem(f"cannot read {path}: {error.strerror}") from None
    if len(blob) < 8:
        raise InputProblem(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise InputProblem(f"{path}: header length {header_len} goes past the end of the file")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputProblem(f"{path}: header is not valid JSON: {error}") from None
    if not isinstance(header, dict):
        raise InputProblem(f"{path}: header is not a JSON object")
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", None) or {}
    tensors, dtypes = {}, {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputProblem(f"{path}: tensor '{name}' has a malformed entry {info!r}") from None
        if dtype not in ELEMENT_SIZE:
            raise InputProblem(f"{path}: tensor '{name}' has unsupported dtype {dtype}")
        if not 0 <= begin <= end <= len(data) or end - begin != math.prod(shape) * ELEMENT_SIZE[dtype]:
            raise InputProblem(f"{path}: tensor '{name}' has bad data_offsets [{begin}, {end}] for {dtype}{shape}")
        tensors[name] = decode(dtype, shape, data[begin:end])
        dtypes[name] = dtype
    return tensors, dtypes, metadata


# ---- The model, in float64 ------------------------------------------------------------------

class Weights:
    """Looks weights up by name and remembers which were used (to catch naming mismatches)."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.used = set()

    def need(self, name, shape):
        if name not in self.tensors:
            raise InputProblem(f"the dump has no weight '{name}'")
        t = self.tensors[name]
        if list(t.shape) != list(shape):
            raise InputProblem(f"weight '{name}' has shape {list(t.shape)}, the metadata implies {list(shape)}")
        self.used.add(name)
        return t

    def optional(self, name, shape, present):
        """A bias: required when the model has biases, absent otherwise."""
        if present:
            return self.need(name, shape)
        if name in self.tensors:
            raise InputProblem(f"the dump has '{name}', but its metadata says bias: false")
        return None

    def unused(self):
        return sorted(set(self.tensors) - self.used - {"input", "output"})


def activation(name, x):
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu(x)
    if name == "silu":
        return F.silu(x)
    if name == "relu":
        return F.relu(x)
    raise InputProblem(f"unknown activation '{name}'")


def normalize(m, x, weight, bias):
    if m["norm"] == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), weight, bias, m["norm_eps"])
    if m["norm"] == "rmsnorm":  # LlamaRMSNorm
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m["norm_eps"]) * weight
    raise InputProblem(f"unknown norm '{m['norm']}'")


def rope_cos_sin(seq_len, head_dim, theta):
    # Hugging Face LlamaRotaryEmbedding computes the angles in float32; so do we (then cos and
    # sin in float64), so that long sequences compare like for like.
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    positions = torch.arange(seq_len, dtype=torch.int64).float()
    freqs = torch.outer(positions, inv_freq)  # [S, D/2], float32
    emb = torch.cat((freqs, freqs), dim=-1).to(torch.float64)  # [S, D]
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(m, q, k, v):
    """q: [B, H, S, D], k and v: [B, Hkv, S, D] -> [B, H, S, D]."""
    group = m["n_heads"] // m["n_kv_heads"]
    k = k.repeat_interleave(group, dim=1)  # query head h reads kv head h // group (repeat_kv)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(m["head_dim"])
    if m["causal"]:
        seq = q.shape[-2]
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def split_heads(x, heads, head_dim):
    """[B, S, heads * D] -> [B, heads, S, D]."""
    b, s, _ = x.shape
    return x.reshape(b, s, heads, head_dim).transpose(1, 2)


def merge_heads(x):
    """[B, H, S, D] -> [B, S, H * D]."""
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def gpt2_block(m, w, layer, x):
    """GPT2Block: Conv1D weights are [in, out], so y = x @ W + b."""
    p = f"h.{layer}."
    d, f_dim = m["d_model"], m["d_ff"]
    h_count, hd = m["n_heads"], m["head_dim"]
    if h_count * hd != d:
        raise InputProblem(f"gpt2 needs n_heads * head_dim == d_model, got {h_count} * {hd} != {d}")
    h = normalize(m, x, w.need(p + "ln_1.weight", [d]), w.need(p + "ln_1.bias", [d]))
    qkv = h @ w.need(p + "attn.c_attn.weight", [d, 3 * d]) + w.need(p + "attn.c_attn.bias", [3 * d])
    q, k, v = (split_heads(part, h_count, hd) for part in qkv.split(d, dim=-1))
    a = merge_heads(attention(m, q, k, v))
    x = x + a @ w.need(p + "attn.c_proj.weight", [d, d]) + w.need(p + "attn.c_proj.bias", [d])
    h = normalize(m, x, w.need(p + "ln_2.weight", [d]), w.need(p + "ln_2.bias", [d]))
    u = activation(m["activation"], h @ w.need(p + "mlp.c_fc.weight", [d, f_dim]) + w.need(p + "mlp.c_fc.bias", [f_dim]))
    return x + u @ w.need(p + "mlp.c_proj.weight", [f_dim, d]) + w.need(p + "mlp.c_proj.bias", [d])


def llama_block(m, w, layer, x):
    """LlamaDecoderLayer (and blockscope's "custom": Llama names, optional biases, any norm,
    activation, gated or plain MLP). nn.Linear weights are [out, in]: y = x @ W^T + b."""
    p = f"model.layers.{layer}."
    d, f_dim = m["d_model"], m["d_ff"]
    h_count, kv_count, hd = m["n_heads"], m["n_kv_heads"], m["head_dim"]
    bias = m["bias"]
    norm_bias = bias and m["norm"] == "layernorm"

    def linear(name, x_in, out_features, in_features, with_bias):
        y = x_in @ w.need(p + name + ".weight", [out_features, in_features]).T
        b = w.optional(p + name + ".bias", [out_features], with_bias)
        return y if b is None else y + b

    h = normalize(m, x, w.need(p + "input_layernorm.weight", [d]),
                  w.optional(p + "input_layernorm.bias", [d], norm_bias))
    q = split_heads(linear("self_attn.q_proj", h, h_count * hd, d, bias), h_count, hd)
    k = split_heads(linear("self_attn.k_proj", h, kv_count * hd, d, bias), kv_count, hd)
    v = split_heads(linear("self_attn.v_proj", h, kv_count * hd, d, bias), kv_count, hd)
    if m["rope"]:
        cos, sin = rope_cos_sin(x.shape[1], hd, m["rope_theta"])  # [S, D], broadcast over B, H
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    x = x + linear("self_attn.o_proj", merge_heads(attention(m, q, k, v)), d, h_count * hd, bias)
    h = normalize(m, x, w.need(p + "post_attention_layernorm.weight", [d]),
                  w.optional(p + "post_attention_layernorm.bias", [d], norm_bias))
    if m["gated"]:  # LlamaMLP: down(act(gate(h)) * up(h)), no biases
        u = activation(m["activation"], linear("mlp.gate_proj", h, f_dim, d, False)) * linear("mlp.up_proj", h, f_dim, d, False)
    else:
        u = activation(m["activation"], linear("mlp.up_proj", h, f_dim, d, bias))
    return x + linear("mlp.down_proj", u, d, f_dim, bias)


REQUIRED_KEYS = ["workload", "family", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "n_layers",
                 "norm_eps", "rope_theta", "norm", "activation", "gated", "bias", "rope", "causal", "dtype",
                 "batch", "seq_len"]


def model_description(metadata):
    if "blockscope" not in metadata:
        raise InputProblem("the dump has no __metadata__ key 'blockscope' (was it written by blockscope --dump?)")
    try:
        m = json.loads(metadata["blockscope"])
    except json.JSONDecodeError as error:
        raise InputProblem(f"__metadata__['blockscope'] is not JSON: {error}") from None
    missing = [key for key in REQUIRED_KEYS if key not in m]
    if missing:
        raise InputProblem(f"__metadata__['blockscope'] lacks {', '.join(missing)}")
    if m["workload"] not in ("block", "stack"):
        raise InputProblem(f"workload '{m['workload']}' is not checked by this script (only block and stack)")
    if m["family"] not in ("gpt2", "llama", "custom"):
        raise InputProblem(f"unknown family '{m['family']}'")
    if m["n_kv_heads"] <= 0 or m["n_heads"] % m["n_kv_heads"] != 0:
        raise InputProblem(f"n_kv_heads {m['n_kv_heads']} does not divide n_heads {m['n_heads']}")
    return m


def reference_output(m, tensors):
    x = tensors.get("input")
    if x is None or "output" not in tensors:
        raise InputProblem("the dump needs tensors 'input' and 'output'")
    expected = [m["batch"], m["seq_len"], m["d_model"]]
    if list(x.shape) != expected:
        raise InputProblem(f"input has shape {list(x.shape)}, the metadata implies {expected}")
    w = Weights(tensors)
    block = gpt2_block if m["family"] == "gpt2" else llama_block
    for layer in range(m["n_layers"]):
        x = block(m, w, layer, x)
    unused = w.unused()
    if unused:
        raise InputProblem(f"the dump has tensors this reference does not use: {', '.join(unused)}")
    return x


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="a safetensors file written by blockscope --dump")
    parser.add_argument("--tol", type=float, default=None,
                        help="max relative error allowed (default by dump dtype: "
                             + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_TOL.items()) + ")")
    args = parser.parse_args(argv)

    try:
        tensors, dtypes, metadata = read_safetensors(args.dump)
        m = model_description(metadata)
        check_family(m)
        reference = reference_output(m, tensors)
    except InputProblem as problem:
        print(f"torch_reference: {args.dump}: {problem}", file=sys.stderr)
        return 2
    except FamilyMismatch as mismatch:
        print(f"FAIL: {args.dump}: {mismatch}")
        return 1

    output = tensors["output"]
    if output.shape != reference.shape:
        print(f"torch_reference: output has shape {list(output.shape)}, the reference {list(reference.shape)}",
              file=sys.stderr)
        return 1
    dtype = m["dtype"]
    tol = args.tol if args.tol is not None else DEFAULT_TOL.get(dtype, 1e-5)

    scale = reference.abs().max().item()
    difference = (output - reference).abs()
    finite = bool(torch.isfinite(output).all())
    max_abs = difference.max().item() if output.numel() else 0.0
    relative = max_abs / scale if scale > 0 else max_abs
    if not finite:
        relative = float("nan")
    worst = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0]) if output.numel() and finite else ()
    # The change the block makes: the same difference, over the scale of reference - input.
    delta_scale = (reference - tensors["input"]).abs().max().item()
    delta_relative = max_abs / delta_scale if delta_scale > 0 else max_abs
    if not finite:
        delta_relative = float("nan")

    print(f"torch {torch.__version__}: {m['family']} {m['workload']} x{m['n_layers']}, {dtype}, "
          f"batch {m['batch']}, seq {m['seq_len']}, d_model {m['d_model']}, heads {m['n_heads']}/{m['n_kv_heads']}")
    print(f"max relative error {relative:.3e} (max abs {max_abs:.3e}, max |ref| {scale:.3e}, worst at {list(worst)}); "
          f"tolerance {tol:.1e}")
    print(f"max relative error of output - input {delta_relative:.3e} (max |ref - input| {delta_scale:.3e})")
    if not (relative <= tol):  # also catches NaN
        print("FAIL: blockscope's output differs from the PyTorch float64 reference beyond the tolerance")
        return 1
    if not (delta_relative <= tol):
        print("FAIL: blockscope's change to its input (output - input) differs from the reference's beyond the "
              "tolerance")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
