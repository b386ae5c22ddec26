#!/usr/bin/env python3
"""Check a blockscope dump against PyTorch, outside blockscope.

    blockscope run configs/blocks/tiny-gpt2.yaml --dtype f32 --dump out.safetensors
    /usr/bin/python3 tools/peers/torch_reference.py out.safetensors [--tol 1e-5]

The dump holds "input" [batch, seq_len, d_model], "output" (blockscope's result), every weight
under its Hugging Face name, and __metadata__["blockscope"]: a JSON string describing the model
(workload, family, d_model, n_heads, n_kv_heads, head_dim, d_ff, n_layers, norm_eps,
rope_theta, norm, activation, gated, bias, rope, causal, dtype, batch, seq_len).

This script recomputes the block (or stack of blocks) in float64 from the dumped input and
weights, exactly as stored, with PyTorch as Hugging Face's GPT2Block / LlamaDecoderLayer do,
then prints two errors, each relative to its reference's largest value: of blockscope's output,
and of its change, output - input (the sublayers' sum, which the residual stream would hide
in the first). Both must be within their tolerance: the dtype's, and for the change that plus
what rounding the output after each residual add can cost it (delta_tolerance).

For gpt2 and llama the knobs Hugging Face fixes (norm, activation, gated MLP, biases, RoPE,
causal) are this script's own (HF_FAMILIES), not the dump's: metadata that disagrees fails.

Exit status: 0 within --tol, 1 above it (or non-finite, or a family knob that is not Hugging
Face's), 2 bad input (unreadable dump, unsupported workload, weights that do not match the
metadata).

Works with PyTorch 1.13 and 2.x: the file is read with struct + json (no safetensors package),
attention is written with matmul + softmax (no scaled_dot_product_attention).

The blocks are nn.Modules written after Hugging Face's (GPT2Block, LlamaDecoderLayer, HFBlocks
below); tools/peers/torch_peer.py imports them and times them in the benchmark's dtype, from a dump
of the same config, as the PyTorch peer of blockscope's block benchmarks.
"""

import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F
from torch import nn

# The tolerance of a dump, derived from the block's arithmetic as docs/TESTING.md explains (and
# as blockscope's own bounds are; written here again, not imported): every rounding error one
# output element depends on is at most u of the value it rounds and of random sign, so n of them
# add like sqrt(n) u (probabilistic rounding error analysis, Higham & Mary 2019). They are the
# terms of every f32 sum on its path (sum depths: the norms' d_model, q/k/v's d_model, the
# scores' head_dim, the softmax and P.V over the keys, the projections' d_model and d_ff) and
# f32 evaluations (exp, erf/tanh, cos/sin: 4 ulps, 16 roundings), in units of u32 = 2^-24, and
# every value stored in the dump dtype on the way (u of that dtype); an attention score's
# rounding reaches its probability multiplied by the score (up to ~6 at unit-scale q and k: 36
# roundings). Bound: ERROR_MARGIN * sqrt(u32^2 * f32 terms + u^2 * stored values), relative to
# the largest output. Measured on configs/blocks/tiny-*.yaml (weights.init=scaled): f32 at most
# 3.7e-7 (tolerance 2.5e-6), bf16 5.3e-3 (3.8e-2).
ERROR_MARGIN = 2.0
EVALUATION_ROUNDINGS = 16
SCORE_GAIN_ROUNDINGS = 36
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def rounding_count(m):
    """(f32 terms, stored values) one output element of the dumped block or stack depends on."""
    d, keys = m["d_model"], m["seq_len"]
    norm_terms = (2 if m["norm"] == "layernorm" else 1) * d  # mean and variance, or the mean square
    biases = 1 if m["bias"] else 0
    steps = [
        (norm_terms, 1),                                  # input norm
        (3 * d, 3 + 3 * biases),                          # q, k, v
        (2 * EVALUATION_ROUNDINGS, 2) if m["rope"] else (0, 0),
        (m["head_dim"] * (1 + SCORE_GAIN_ROUNDINGS), 1 + SCORE_GAIN_ROUNDINGS),  # scores, through exp
        (keys + EVALUATION_ROUNDINGS, 1),                 # softmax
        (keys, 1),                                        # P.V
        (m["n_heads"] * m["head_dim"], 1 + biases),       # output projection
        (0, 1),                                           # residual add
        (norm_terms, 1),                                  # post-attention norm
        (d, 1 + biases),                                  # fc / gate
        (d, 2) if m["gated"] else (0, 0),                 # up, and the product
        (EVALUATION_ROUNDINGS, 1),                        # activation
        (m["d_ff"], 1 + biases),                          # proj / down
        (0, 1),                                           # residual add
    ]
    layers = max(1, m["n_layers"])
    return sum(t for t, _ in steps) * layers, sum(v for _, v in steps) * layers


def derived_tolerance(m):
    """The dump's tolerance: max relative error of its output (see ERROR_MARGIN above)."""
    terms, stored = rounding_count(m)
    u = UNIT_ROUNDOFF.get(m["dtype"], 2.0 ** -24)
    return ERROR_MARGIN * math.sqrt(UNIT_ROUNDOFF["f32"] ** 2 * terms + u * u * stored)


# The change a block makes, output - input, is read off an output rounded to the dump dtype after
# each residual add: each rounding may move it by half a unit in the last place of |output|, u
# times max|output| (u = 2^-24 f32, 2^-11 f16, 2^-8 bf16: unit roundoff). Relative to
# max|output - input| that is u * max|output| / max|output - input| per add — large when the
# sublayers add little to a large residual stream (the default init: |output| ~ 36x the change),
# whatever the CPU. Its tolerance is the dtype's plus that term, for every residual add (two per
# layer), with a margin of 2 (docs/TESTING.md).
RESIDUAL_ROUNDING_MARGIN = 2.0


def delta_tolerance(tol, dtype, n_layers, scale, delta_scale):
    """The tolerance of output - input: `tol` plus the residual adds' rounding of the output,
    relative to the change's scale (see UNIT_ROUNDOFF above)."""
    if delta_scale <= 0:
        return tol
    adds = 2 * max(1, n_layers)
    return tol + RESIDUAL_ROUNDING_MARGIN * adds * UNIT_ROUNDOFF.get(dtype, 2.0 ** -24) * scale / delta_scale

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

NATIVE_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def decode(dtype, shape, raw, float64=True):
    """Raw little-endian bytes -> tensor of `shape`: float64, or (float64=False) the stored dtype
    (bf16 stays bf16: the widening below is exact both ways)."""
    data = bytearray(raw)  # writable copy: torch.frombuffer warns on read-only buffers
    count = math.prod(shape)
    if count == 0:
        return torch.zeros(shape, dtype=torch.float64 if float64 else NATIVE_DTYPE.get(dtype, torch.float64))
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
    return values.to(torch.float64 if float64 else NATIVE_DTYPE[dtype]).reshape(shape).clone()


def read_safetensors(path, float64=True):
    """Returns ({name: tensor}, {name: dtype string}, metadata dict); tensors in float64, or with
    float64=False in their stored dtype (tools/peers/torch_peer.py)."""
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
        tensors[name] = decode(dtype, shape, data[begin:end], float64)
        dtypes[name] = dtype
    return tensors, dtypes, metadata


# ---- The blocks as Hugging Face writes them (shared with tools/peers/torch_peer.py) ----------------
#
# nn.Modules with the op sequence of Hugging Face's GPT2Block (Conv1D = addmm, fused c_attn,
# eager attention with torch.where on a bool causal mask, gelu_new written out) and
# LlamaDecoderLayer (nn.Linear = F.linear, LlamaRMSNorm in float32, rotary cos/sin from
# float32 angles, repeat_kv, eager attention with an additive mask and a float32 softmax,
# LlamaMLP), built in any dtype from the dump's weights. This script runs them in float64 (the
# reference); tools/peers/torch_peer.py times them in the benchmark's dtype, as HF would run them
# (float32 for norms and Llama's softmax; nothing promoted further).

def upcast(dtype):
    """The dtype Hugging Face computes RMSNorm and Llama's softmax in: float32, or float64 when the
    tensors are float64 (the reference loses nothing)."""
    return torch.promote_types(dtype, torch.float32)


def parameter(tensor):
    return nn.Parameter(tensor, requires_grad=False)


class Conv1D(nn.Module):
    """GPT-2's transformers.pytorch_utils.Conv1D: weight [in, out], y = addmm(b, x, W)."""

    def __init__(self, weight, bias):
        super().__init__()
        self.weight, self.bias = parameter(weight), parameter(bias)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class Linear(nn.Module):
    """nn.Linear with given weights: weight [out, in], optional bias."""

    def __init__(self, weight, bias):
        super().__init__()
        self.weight = parameter(weight)
        self.bias = None if bias is None else parameter(bias)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class LayerNorm(nn.Module):
    """nn.LayerNorm (in the tensor dtype, as PyTorch runs it); bias optional."""

    def __init__(self, weight, bias, eps):
        super().__init__()
        self.weight = parameter(weight)
        self.bias = None if bias is None else parameter(bias)
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """LlamaRMSNorm: normalise in float32, round to the input dtype, then multiply by the weight."""

    def __init__(self, weight, eps):
        super().__init__()
        self.weight, self.eps = parameter(weight), eps

    def forward(self, x):
        input_dtype = x.dtype
        h = x.to(upcast(input_dtype))
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return self.weight * h.to(input_dtype)


def gelu_new(x):
    """GPT-2's activation_function "gelu_new" (transformers NewGELUActivation), written out."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def activation(name, x):
    if name == "gelu_tanh":  # Hugging Face "gelu_pytorch_tanh"
        return F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu(x)
    if name == "silu":
        return F.silu(x)
    if name == "relu":
        return F.relu(x)
    raise InputProblem(f"unknown activation '{name}'")


def rope_cos_sin(seq_len, head_dim, theta, dtype=torch.float64, device="cpu"):
    """[S, D] cos and sin as LlamaRotaryEmbedding: float32 inv_freq and angles, cos/sin of them
    in float32 then cast to the activations' dtype (in float64 for the float64 reference, so that
    long sequences compare like for like)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    positions = torch.arange(seq_len, dtype=torch.int64).float()
    freqs = torch.outer(positions, inv_freq)  # [S, D/2], float32
    emb = torch.cat((freqs, freqs), dim=-1).to(upcast(dtype))  # [S, D]
    return emb.cos().to(device=device, dtype=dtype), emb.sin().to(device=device, dtype=dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n_rep):
    """[B, Hkv, S, D] -> [B, Hkv * n_rep, S, D]: query head h reads kv head h // n_rep."""
    if n_rep == 1:
        return x
    b, kv_heads, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv_heads, n_rep, s, d).reshape(b, kv_heads * n_rep, s, d)


class GPT2Block(nn.Module):
    """GPT2Block (pre-LN, fused QKV Conv1D with bias, gelu_new MLP); weights h.N.*."""

    def __init__(self, m, w, layer, dtype, device):
        super().__init__()
        p = f"h.{layer}."
        d, f_dim = m["d_model"], m["d_ff"]
        self.n_heads, self.head_dim = m["n_heads"], m["head_dim"]
        if self.n_heads * self.head_dim != d:
            raise InputProblem(f"gpt2 needs n_heads * head_dim == d_model, got {self.n_heads} * {self.head_dim} != {d}")
        get = lambda name, shape: w.need(p + name, shape).to(device=device, dtype=dtype)  # noqa: E731
        eps = m["norm_eps"]
        self.ln_1 = LayerNorm(get("ln_1.weight", [d]), get("ln_1.bias", [d]), eps)
        self.c_attn = Conv1D(get("attn.c_attn.weight", [d, 3 * d]), get("attn.c_attn.bias", [3 * d]))
        self.c_proj = Conv1D(get("attn.c_proj.weight", [d, d]), get("attn.c_proj.bias", [d]))
        self.ln_2 = LayerNorm(get("ln_2.weight", [d]), get("ln_2.bias", [d]), eps)
        self.c_fc = Conv1D(get("mlp.c_fc.weight", [d, f_dim]), get("mlp.c_fc.bias", [f_dim]))
        self.mlp_proj = Conv1D(get("mlp.c_proj.weight", [f_dim, d]), get("mlp.c_proj.bias", [d]))
        self.split_size = d

    def split_heads(self, x):
        return x.view(x.size()[:-1] + (self.n_heads, self.head_dim)).permute(0, 2, 1, 3)

    @staticmethod
    def merge_heads(x):
        x = x.permute(0, 2, 1, 3).contiguous()
        return x.view(x.size()[:-2] + (x.size(-2) * x.size(-1),))

    def attn(self, q, k, v, causal_mask):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        if causal_mask is not None:  # bool [1, 1, S, S], True where attending is allowed
            mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
            w = torch.where(causal_mask, w, mask_value)
        w = F.softmax(w, dim=-1).type(v.dtype)
        return torch.matmul(w, v)

    def forward(self, x, causal_mask=None):
        residual = x
        h = self.ln_1(x)
        q, k, v = self.c_attn(h).split(self.split_size, dim=2)
        a = self.merge_heads(self.attn(self.split_heads(q), self.split_heads(k), self.split_heads(v), causal_mask))
        x = residual + self.c_proj(a)
        residual = x
        return residual + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x))))


class LlamaDecoderLayer(nn.Module):
    """LlamaDecoderLayer (RMSNorm, GQA, RoPE, SwiGLU; weights model.layers.N.*), and blockscope's
    "custom" on the same code: optional biases, any norm and activation, gated or plain MLP,
    RoPE and causal mask optional."""

    def __init__(self, m, w, layer, dtype, device):
        super().__init__()
        p = f"model.layers.{layer}."
        d, f_dim = m["d_model"], m["d_ff"]
        self.n_heads, self.n_kv_heads, self.head_dim = m["n_heads"], m["n_kv_heads"], m["head_dim"]
        self.scaling = self.head_dim ** -0.5
        self.activation, self.gated, self.rope = m["activation"], m["gated"], m["rope"]
        bias = m["bias"]
        norm_bias = bias and m["norm"] == "layernorm"
        to = lambda t: None if t is None else t.to(device=device, dtype=dtype)  # noqa: E731

        def linear(name, out_features, in_features, with_bias):
            return Linear(to(w.need(p + name + ".weight", [out_features, in_features])),
                          to(w.optional(p + name + ".bias", [out_features], with_bias)))

        def norm(name):
            weight = to(w.need(p + name + ".weight", [d]))
            nbias = to(w.optional(p + name + ".bias", [d], norm_bias))
            if m["norm"] == "layernorm":
                return LayerNorm(weight, nbias, m["norm_eps"])
            if m["norm"] == "rmsnorm":
                return RMSNorm(weight, m["norm_eps"])
            raise InputProblem(f"unknown norm '{m['norm']}'")

        self.input_layernorm = norm("input_layernorm")
        self.q_proj = linear("self_attn.q_proj", self.n_heads * self.head_dim, d, bias)
        self.k_proj = linear("self_attn.k_proj", self.n_kv_heads * self.head_dim, d, bias)
        self.v_proj = linear("self_attn.v_proj", self.n_kv_heads * self.head_dim, d, bias)
        self.o_proj = linear("self_attn.o_proj", d, self.n_heads * self.head_dim, bias)
        self.post_attention_layernorm = norm("post_attention_layernorm")
        if self.gated:  # LlamaMLP: down(act(gate(h)) * up(h)), no biases
            self.gate_proj = linear("mlp.gate_proj", f_dim, d, False)
            self.up_proj = linear("mlp.up_proj", f_dim, d, False)
        else:
            self.up_proj = linear("mlp.up_proj", f_dim, d, bias)
        self.down_proj = linear("mlp.down_proj", d, f_dim, bias)

    def self_attn(self, x, cos, sin, attention_mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        if self.rope:  # apply_rotary_pos_emb; cos, sin [S, D] broadcast over B, H
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        groups = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        if attention_mask is not None:  # additive [1, 1, S, S]: 0 or the dtype's minimum
            w = w + attention_mask
        w = F.softmax(w, dim=-1, dtype=upcast(q.dtype)).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(a)

    def mlp(self, h):
        if self.gated:
            return self.down_proj(activation(self.activation, self.gate_proj(h)) * self.up_proj(h))
        return self.down_proj(activation(self.activation, self.up_proj(h)))

    def forward(self, x, cos=None, sin=None, attention_mask=None):
        residual = x
        x = residual + self.self_attn(self.input_layernorm(x), cos, sin, attention_mask)
        residual = x
        return residual + self.mlp(self.post_attention_layernorm(x))


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


class HFBlocks(nn.Module):
    """The dump's n_layers blocks in `dtype` on `device` (blockscope's block is one, its stack
    n_layers with no final norm). The causal mask and, for RoPE, cos/sin are made once here:
    the Hugging Face model computes them once per forward and hands them to every layer.
    `unused` lists the dump's tensors no layer took."""

    def __init__(self, m, tensors, dtype=torch.float64, device="cpu"):
        super().__init__()
        w = Weights(tensors)
        block = GPT2Block if m["family"] == "gpt2" else LlamaDecoderLayer
        self.layers = nn.ModuleList(block(m, w, layer, dtype, device) for layer in range(m["n_layers"]))
        self.unused = w.unused()
        seq = m["seq_len"]
        allowed = torch.ones(seq, seq, dtype=torch.bool, device=device).tril().view(1, 1, seq, seq)
        if m["family"] == "gpt2":
            self.inputs = {"causal_mask": allowed if m["causal"] else None}
        else:
            mask = None
            if m["causal"]:
                mask = torch.zeros(1, 1, seq, seq, dtype=dtype, device=device).masked_fill(
                    ~allowed, torch.finfo(dtype).min)
            cos = sin = None
            if m["rope"]:
                cos, sin = rope_cos_sin(seq, m["head_dim"], m["rope_theta"], dtype, device)
            self.inputs = {"cos": cos, "sin": sin, "attention_mask": mask}

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, **self.inputs)
        return x


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


def check_input(m, tensors):
    """The dump's input, checked against the metadata's shape."""
    x = tensors.get("input")
    if x is None or "output" not in tensors:
        raise InputProblem("the dump needs tensors 'input' and 'output'")
    expected = [m["batch"], m["seq_len"], m["d_model"]]
    if list(x.shape) != expected:
        raise InputProblem(f"input has shape {list(x.shape)}, the metadata implies {expected}")
    return x


def reference_output(m, tensors):
    x = check_input(m, tensors)
    model = HFBlocks(m, tensors, torch.float64)
    if model.unused:
        raise InputProblem(f"the dump has tensors this reference does not use: {', '.join(model.unused)}")
    with torch.no_grad():
        return model(x.to(torch.float64))


def compare(output, reference, block_input):
    """(relative error of output, relative error of output - input, worst index) against
    `reference`, each over its reference's largest value; NaN when output is not finite."""
    output, reference, block_input = (t.to(torch.float64) for t in (output, reference, block_input))
    scale = reference.abs().max().item() if reference.numel() else 0.0
    difference = (output - reference).abs()
    finite = bool(torch.isfinite(output).all())
    max_abs = difference.max().item() if output.numel() else 0.0
    relative = max_abs / scale if scale > 0 else max_abs
    worst = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0]) if output.numel() and finite else ()
    # The change the block makes: the same difference, over the scale of reference - input.
    delta_scale = (reference - block_input).abs().max().item() if reference.numel() else 0.0
    delta_relative = max_abs / delta_scale if delta_scale > 0 else max_abs
    if not finite:
        relative = delta_relative = float("nan")
    return {"relative": relative, "delta_relative": delta_relative, "max_abs": max_abs, "scale": scale,
            "delta_scale": delta_scale, "worst": list(worst)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="a safetensors file written by blockscope --dump")
    parser.add_argument("--tol", type=float, default=None,
                        help="max relative error allowed (default: derived from the dump's shapes and "
                             "dtype, docs/TESTING.md)")
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
    tol = args.tol if args.tol is not None else derived_tolerance(m)

    errors = compare(output, reference, tensors["input"])
    relative, delta_relative = errors["relative"], errors["delta_relative"]
    max_abs, scale, delta_scale, worst = errors["max_abs"], errors["scale"], errors["delta_scale"], errors["worst"]

    print(f"torch {torch.__version__}: {m['family']} {m['workload']} x{m['n_layers']}, {dtype}, "
          f"batch {m['batch']}, seq {m['seq_len']}, d_model {m['d_model']}, heads {m['n_heads']}/{m['n_kv_heads']}")
    print(f"max relative error {relative:.3e} (max abs {max_abs:.3e}, max |ref| {scale:.3e}, worst at {list(worst)}); "
          f"tolerance {tol:.1e}")
    delta_tol = tol if args.tol is not None else delta_tolerance(tol, dtype, m["n_layers"], scale, delta_scale)
    print(f"max relative error of output - input {delta_relative:.3e} (max |ref - input| {delta_scale:.3e}); "
          f"tolerance {delta_tol:.1e} (the dtype's plus the residual adds' rounding of |output|)")
    if not (relative <= tol):  # also catches NaN
        print("FAIL: blockscope's output differs from the PyTorch float64 reference beyond the tolerance")
        return 1
    if not (delta_relative <= delta_tol):
        print("FAIL: blockscope's change to its input (output - input) differs from the reference's beyond the "
              "tolerance")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
