"""The Hugging Face-style blocks: nn.Modules with the op sequence of Hugging Face's GPT2Block and
LlamaDecoderLayer (and blockscope's "custom" family on Llama's code), built in any dtype from a
dump's weights, and HFBlocks, a dump's n_layers of them.

Apart from torch_reference.py (the check of a dump: its reader, tolerances and comparison) because
these modules are what the PyTorch peers share: torch_reference.py runs them in float64 as the
reference; tools/peers/torch_peer.py (through peer_blocks.py) and torch_decode_peer.py time them in
the benchmark's dtype. torch_reference.py re-exports every name here, so `torch_reference.X` keeps
working for its importers.

nn.Modules with the op sequence of Hugging Face's GPT2Block (Conv1D = addmm, fused c_attn,
eager attention with torch.where on a bool causal mask, gelu_new written out) and
LlamaDecoderLayer (nn.Linear = F.linear, LlamaRMSNorm in float32, rotary cos/sin from
float32 angles, repeat_kv, eager attention with an additive mask and a float32 softmax,
LlamaMLP). The reference runs them in float64; the peers in the benchmark's dtype, as HF would
run them (float32 for norms and Llama's softmax; nothing promoted further).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class InputProblem(Exception):
    """The dump cannot be checked (exit status 2). Defined here, where the modules raise it for
    weights that do not fit the metadata; torch_reference.py's reader raises it too."""


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
