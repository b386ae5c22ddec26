#!/usr/bin/env python3
"""The PyTorch peer of blockscope's `workload: decode`: Hugging Face's eager decode loop with a
DynamicCache, on blockscope's own weights and inputs, checked against blockscope's outputs, then
timed on one thread: time to first token (the prefill) and per-token time.

  /usr/bin/python3 tools/peers/torch_decode_peer.py configs/decode/llama-decode.yaml \
      [--set KEY=VALUE]... [--reps 5] [--warmup 1] [--threads 1] [--blockscope BIN] \
      [--dump-dir DIR] [--out peer.json]

The weights and inputs: `blockscope run CONFIG --device cpu --threads N --format json
--set run={warmup: 0, iters: 1} --set compare=[] [--set ...] --dump FILE` (the --set items here
go to blockscope as they are: the dtype, decode.batch, decode.prompt_len, ...). The dump holds
every weight under its Hugging Face name, "input" [B, P, d] (the prompts' hidden states, P the
longest prompt; rows past a sequence's prompt_lens[b] are padding), "decode_input" [T, B, 1, d]
(each step's new token per sequence, step-major) and "output" [T, B, 1, d] (blockscope's
decode outputs, the config's base paths); its __metadata__ "blockscope" JSON gives the model,
dtype, prompt_lens, new_tokens and blockscope's kv_cache.

The decode loop, as transformers' generate() runs a decoder-only model in eager mode (one
forward per step, no LM head: the next step's input is the dump's decode_input[t], as in
blockscope):

- Modules: tools/peers/torch_reference.py's GPT2Block / LlamaDecoderLayer (its projections,
  norms and MLP as they are; imported, not copied), with the attention taking a cache
  (CachedGPT2Block, CachedLlamaLayer below), as HF's GPT2Attention / LlamaAttention with
  past_key_values.
- Ragged batches are left-padded, as generate() wants decoder-only prompts (padding_side="left"):
  sequence b's prompt sits in the last prompt_lens[b] rows of one [B, P, d] prefill, the rows
  before it are zeros (they stay exactly zero through Llama layers; either way masked), and a 2D
  attention_mask [B, K] (0 for padding) is made into each forward's 4D additive mask as HF does
  (prefill: causal + padding [B, 1, P, P]; a step: padding only [B, 1, 1, K]). Llama positions
  are attention_mask.cumsum(-1) - 1 (padding: 1), as prepare_inputs_for_generation computes
  them: sequence b's step t is at position prompt_lens[b] + t, blockscope's position. A batch of
  equal prompts has no padding (the default side-by-side runs batch 1).
- The cache is HF's DynamicCache: per layer a key and a value [B, Hkv, K, D] (Llama: after RoPE,
  before repeat_kv); the prefill stores its k/v, then each step's update() is torch.cat of the
  new position along dim -2 (a new tensor and a copy of the whole cache per layer per step, as
  HF eager does), and the 2D attention mask grows by torch.cat of a column of ones.
- Llama: RMSNorm in float32, RoPE from a cos/sin table of every position (HF's cos_cached,
  torch_reference.rope_cos_sin) indexed by position_ids each forward, repeat_kv, matmul, + mask,
  softmax in float32, matmul, o_proj, SwiGLU MLP. GPT-2: fused c_attn (Conv1D = addmm), split
  heads, matmul / sqrt(D), torch.where with the causal "bias" buffer slice, + padding mask,
  softmax in the dtype, matmul, c_proj, gelu_new MLP. (HF's GPT-2 has n_positions 1024 for its
  position embedding; blockscope's block has no embedding, so the causal buffer here is sized to
  the longest prompt + new_tokens.)

Check before timing: the loop's T x B decode outputs against the dump's "output" under
torch_reference.py's tolerance for the dtype (derived_tolerance with the keys' depth = longest
prompt + new_tokens; twice it, as torch_peer.py's block rows: both sides err against float64 by
up to it). A peer that differs gets no time: "skipped" says why, exit status 1.

Timing: one thread in every pool (peer_setup.py pins OMP/OpenBLAS/MKL before torch loads;
torch.set_num_threads), wall clock (time.perf_counter, with this thread's CPU time beside it),
under torch.no_grad. --warmup whole generations untimed, then --reps generations, each timed as
the prefill (time to first token: every layer over the padded prompts, the cache built) and each
decode step (every layer for one token per sequence, the mask and positions made as HF makes
them per forward). Reported as blockscope's decode JSON names them: ttft_us (median, min, max
over the reps), per_token_us (median, min, max over every step of every rep; the first and last
step's medians: growth with the cache), tokens_per_s = batch / median per-token time.

Output JSON (--out FILE, else stdout; a summary goes to stderr):
{
  "schema": "blockscope.torch_decode_peer/1",
  "context": {"torch": "1.13.1", "python": "3.11.2", "threads": 1, "thread_pools": {...},
              "cpu_model": "...", "cpu_isa": ["avx512f", ..., "amx_bf16", ...], "timer": "wall",
              "load_average": [..] (start), "date": "..."},
  "config": "configs/decode/llama-decode.yaml", "sets": [...], "dump_command": [...],
  "workload": {"family", "dtype", "batch", "prompt_lens", "new_tokens", "n_layers", "d_model",
               "n_heads", "n_kv_heads", "head_dim", "d_ff", "blockscope_kv_cache": {...}},
  "impl": "what PyTorch ran, in words", "ragged": "how a ragged batch is handled",
  "check": {"against", "max_rel_error", "delta_rel_error", "tol"},
  "skipped": null | "why there is no time",
  "warmup": 1, "reps": 5,
  "ttft_us": {"median", "min", "max", "samples"}, "ttft_cpu_us": {...},
  "per_token_us": {"median", "min", "max", "first_step", "last_step", "samples"},
  "per_token_cpu_us": {...}, "tokens_per_s": ..,
  "cache": {"kind": "DynamicCache (torch.cat per step)", "positions_after": K, "bytes_after": ..}
}

Exit status: 0 timed, 1 the check failed (JSON written, no time), 2 bad input (the dump could not
be written or read, a workload or family this peer does not run).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import DTYPES, PINNED_THREADS, SOURCE_DIR, blockscope_dump, torch, write_json  # noqa: E402  (first: pins every pool, then imports torch)
from peer_timing import Timer, thread_pools  # noqa: E402
import torch_reference as ref  # noqa: E402

SCHEMA = "blockscope.torch_decode_peer/1"
DECODE_KEYS = ["prompt_lens", "new_tokens", "kv_cache"]


class Problem(Exception):
    """Bad input: the dump cannot be made or read, or holds what this peer does not run (exit 2)."""


# ---- The cache and the cached attention, as Hugging Face's eager decode runs them ------------------

class DynamicCache:
    """transformers' DynamicCache: a key and a value per layer, [B, Hkv, K, D]. The first update of
    a layer (the prefill) stores its tensors; every later one is torch.cat along the sequence."""

    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def update(self, key, value, layer):
        if len(self.key_cache) <= layer:
            self.key_cache.append(key)
            self.value_cache.append(value)
        else:
            self.key_cache[layer] = torch.cat([self.key_cache[layer], key], dim=-2)
            self.value_cache[layer] = torch.cat([self.value_cache[layer], value], dim=-2)
        return self.key_cache[layer], self.value_cache[layer]

    def length(self):
        return self.key_cache[0].shape[-2] if self.key_cache else 0

    def nbytes(self):
        return sum(t.numel() * t.element_size() for t in self.key_cache + self.value_cache)


class CachedLlamaLayer(ref.LlamaDecoderLayer):
    """LlamaDecoderLayer with LlamaAttention's past_key_value path: RoPE at the given positions,
    the new k/v appended to the cache, attention over the whole cache."""

    def attention(self, x, cos, sin, mask, cache, layer):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        # apply_rotary_pos_emb: cos, sin [B, 1, S, D] (each sequence's own positions)
        q, k = q * cos + ref.rotate_half(q) * sin, k * cos + ref.rotate_half(k) * sin
        k, v = cache.update(k, v, layer)
        groups = self.n_heads // self.n_kv_heads
        k, v = ref.repeat_kv(k, groups), ref.repeat_kv(v, groups)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + mask  # additive [B, 1, S, K]
        w = torch.nn.functional.softmax(w, dim=-1, dtype=ref.upcast(q.dtype)).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, s, -1)
        return self.o_proj(a)

    def forward(self, x, inputs, cache, layer):
        residual = x
        x = residual + self.attention(self.input_layernorm(x), inputs["cos"], inputs["sin"], inputs["mask"],
                                      cache, layer)
        residual = x
        return residual + self.mlp(self.post_attention_layernorm(x))


class CachedGPT2Block(ref.GPT2Block):
    """GPT2Block with GPT2Attention's layer_past path: the new k/v appended to the cache, then
    _attn over it (torch.where with the causal buffer's slice, + the padding mask)."""

    def cached_attn(self, q, k, v, causal, padding):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device))
        w = w + padding  # additive [B, 1, 1, K]
        w = torch.nn.functional.softmax(w, dim=-1).type(v.dtype)
        return torch.matmul(w, v)

    def forward(self, x, inputs, cache, layer):
        residual = x
        q, k, v = self.c_attn(self.ln_1(x)).split(self.split_size, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        k, v = cache.update(k, v, layer)
        a = self.merge_heads(self.cached_attn(q, k, v, inputs["causal"], inputs["padding"]))
        x = residual + self.c_proj(a)
        residual = x
        return residual + self.mlp_proj(ref.gelu_new(self.c_fc(self.ln_2(x))))


class DecodeModel:
    """The dump's n_layers layers in `dtype`, and one HF forward over them with a cache: forward()
    is the prefill (S = P) or a decode step (S = 1), the masks and positions made from the 2D
    attention mask as the HF model makes them each forward."""

    def __init__(self, m, tensors, dtype):
        w = ref.Weights(tensors)
        self.family, self.dtype = m["family"], dtype
        block = CachedGPT2Block if self.family == "gpt2" else CachedLlamaLayer
        self.layers = [block(m, w, i, dtype, "cpu") for i in range(m["n_layers"])]
        self.unused = sorted(set(w.unused()) - {"decode_input"})
        max_len = max(m["prompt_lens"]) + m["new_tokens"]
        if self.family == "gpt2":  # GPT2Attention's "bias" buffer: the causal mask of every position
            self.bias = torch.ones(max_len, max_len, dtype=torch.bool).tril().view(1, 1, max_len, max_len)
        else:  # LlamaRotaryEmbedding's cos_cached / sin_cached [max_len, D]
            self.cos_table, self.sin_table = ref.rope_cos_sin(max_len, m["head_dim"], m["rope_theta"], dtype)

    def forward(self, x, attention_mask, cache):
        """x [B, S, d]; attention_mask [B, past + S] (1 real, 0 padding). Returns [B, S, d]."""
        b, s, _ = x.shape
        past = cache.length()
        keys = past + s
        low = torch.finfo(self.dtype).min
        # The padding mask as HF expands a 2D one: [B, 1, 1, K], 0 or the dtype's minimum.
        padding = (1.0 - attention_mask[:, None, None, :].to(self.dtype)) * low
        if self.family == "gpt2":
            inputs = {"causal": self.bias[:, :, keys - s:keys, :keys], "padding": padding}
        else:
            # prepare_inputs_for_generation's position_ids, LlamaRotaryEmbedding's cos/sin at them
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
            position_ids = position_ids[:, -s:]
            cos, sin = self.cos_table[position_ids].unsqueeze(1), self.sin_table[position_ids].unsqueeze(1)
            if s > 1:  # _prepare_4d_causal_attention_mask: causal [S, K] (query i at past + i), + padding
                causal = torch.full((s, keys), low, dtype=self.dtype).triu(past + 1)
                mask = causal[None, None].expand(b, 1, s, keys).masked_fill(padding.bool(), low)
            else:  # one query: the expanded padding mask alone
                mask = padding
            inputs = {"cos": cos, "sin": sin, "mask": mask}
        for layer, module in enumerate(self.layers):
            x = module(x, inputs, cache, layer)
        return x


# ---- The dump ---------------------------------------------------------------------------------------

def find_blockscope(given):
    """--blockscope, else the newer of build/default/bin/blockscope and build/cpu/bin/blockscope of
    this checkout (an older one may predate workload: decode), else PATH."""
    if given:
        return given
    built = [os.path.join(SOURCE_DIR, "build", build, "bin", "blockscope") for build in ("default", "cpu")]
    built = [path for path in built if os.path.isfile(path) and os.access(path, os.X_OK)]
    if built:
        return max(built, key=os.path.getmtime)
    return shutil.which("blockscope")


def write_dump(blockscope, config, sets, dump):
    """`blockscope run CONFIG --dump`: one untimed-length run of the base paths (compare off)."""
    if not blockscope:
        raise Problem("no blockscope binary found for the dump (pass --blockscope BIN)")
    items = ["run={warmup: 0, iters: 1}", "compare=[]"] + list(sets)
    blockscope_dump(blockscope, config, items, dump, Problem, "torch_decode_peer")
    return [blockscope, "run", config, "--device", "cpu", "--threads", str(PINNED_THREADS)] + \
        [word for item in items for word in ("--set", item)] + ["--dump", dump]


def read_dump(path):
    """(tensors in their stored dtype, the model description) of a decode dump."""
    try:
        tensors, _, metadata = ref.read_safetensors(path, float64=False)
    except ref.InputProblem as problem:
        raise Problem(str(problem)) from None
    if "blockscope" not in metadata:
        raise Problem(f"{path}: no __metadata__ key 'blockscope' (was it written by blockscope --dump?)")
    m = json.loads(metadata["blockscope"])
    missing = [key for key in ref.REQUIRED_KEYS + DECODE_KEYS if key not in m]
    if missing:
        raise Problem(f"{path}: the metadata lacks {', '.join(missing)}")
    if m["workload"] != "decode":
        raise Problem(f"{path}: workload {m['workload']!r}; this peer runs decode (blocks: torch_peer.py)")
    if m["family"] not in ("gpt2", "llama"):
        raise Problem(f"{path}: family {m['family']!r}; the decode peer runs gpt2 and llama")
    if m["dtype"] not in DTYPES:
        raise Problem(f"{path}: dtype {m['dtype']!r}")
    try:
        ref.check_family(m)
    except ref.FamilyMismatch as mismatch:
        raise Problem(f"{path}: {mismatch}") from None
    B, P, T, d = m["batch"], max(m["prompt_lens"]), m["new_tokens"], m["d_model"]
    want = {"input": [B, P, d], "decode_input": [T, B, 1, d], "output": [T, B, 1, d]}
    for name, shape in want.items():
        if name not in tensors or list(tensors[name].shape) != shape:
            got = list(tensors[name].shape) if name in tensors else "missing"
            raise Problem(f"{path}: {name!r} is {got}, the metadata implies {shape}")
    if len(m["prompt_lens"]) != B:
        raise Problem(f"{path}: prompt_lens {m['prompt_lens']} for batch {B}")
    return tensors, m


def left_padded(m, prompts):
    """The prefill's input and 2D attention mask: sequence b's prompt (its first prompt_lens[b] rows
    of the right-padded dump input) in the last rows, zeros before it (mask 0)."""
    B, P = prompts.shape[0], prompts.shape[1]
    x = torch.zeros_like(prompts)
    mask = torch.zeros(B, P, dtype=torch.long)
    for b, length in enumerate(m["prompt_lens"]):
        x[b, P - length:] = prompts[b, :length]
        mask[b, P - length:] = 1
    return x.contiguous(), mask


# ---- The generation, checked, then timed ----------------------------------------------------------

class Generation:
    """One generation (prefill + new_tokens steps), as generate()'s loop: each piece a callable, so
    that the Timer can time them one by one."""

    def __init__(self, model, x, mask, steps):
        self.model, self.x, self.mask0, self.steps = model, x, mask, steps

    def prefill(self):
        self.cache, self.mask = DynamicCache(), self.mask0
        self.model.forward(self.x, self.mask, self.cache)

    def step(self, t):
        # _update_model_kwargs_for_generation: the mask grows by the new token, then the forward.
        self.mask = torch.cat([self.mask, self.mask.new_ones((self.mask.shape[0], 1))], dim=-1)
        return self.model.forward(self.steps[t], self.mask, self.cache)

    def outputs(self):
        self.prefill()
        return torch.stack([self.step(t) for t in range(len(self.steps))])


def us_summary(values_ms):
    return {"median": statistics.median(values_ms) * 1e3, "min": min(values_ms) * 1e3,
            "max": max(values_ms) * 1e3, "samples": len(values_ms)}


def cpu_flags():
    """(model name, the AVX-512 / AMX flags) from /proc/cpuinfo."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = sorted(f for f in value.split() if f.startswith(("avx512", "amx")))
                    break
    except OSError:
        pass
    return model, flags


def context():
    model, flags = cpu_flags()
    return {"torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
            "thread_pools": thread_pools(), "cpu_model": model, "cpu_isa": flags, "machine": platform.machine(),
            "cores_online": os.cpu_count(), "timer": "wall", "load_average": list(os.getloadavg()),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def run(args):
    torch.set_num_threads(PINNED_THREADS)
    pools = thread_pools()
    if pools["openblas_threads"] not in (None, PINNED_THREADS):
        raise Problem(f"OpenBLAS runs {pools['openblas_threads']} threads although OPENBLAS_NUM_THREADS="
                      f"{PINNED_THREADS} was set before torch loaded")
    document = {"schema": SCHEMA, "context": context(), "config": args.config, "sets": args.set}
    dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="torch_decode_peer.")
    os.makedirs(dump_dir, exist_ok=True)
    try:
        dump = os.path.join(dump_dir, os.path.splitext(os.path.basename(args.config))[0] + ".safetensors")
        document["dump_command"] = write_dump(find_blockscope(args.blockscope), args.config, args.set, dump)
        tensors, m = read_dump(dump)
    finally:
        if not args.dump_dir:
            shutil.rmtree(dump_dir, ignore_errors=True)
    B, T = m["batch"], m["new_tokens"]
    document["workload"] = {key: m[key] for key in ("family", "dtype", "batch", "prompt_lens", "new_tokens", "n_layers",
                                                    "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff")}
    document["workload"]["blockscope_kv_cache"] = m["kv_cache"]
    dtype = DTYPES[m["dtype"]]
    model = DecodeModel(m, tensors, dtype)
    if model.unused:
        raise Problem(f"tensors the PyTorch layers do not use: {', '.join(model.unused)}")
    module = "GPT2Block" if m["family"] == "gpt2" else "LlamaDecoderLayer"
    layers = f" x {m['n_layers']}" if m["n_layers"] > 1 else ""
    document["impl"] = (f"HF-style eager decode: {module}{layers} with past_key_values, DynamicCache (torch.cat per "
                        f"step), torch {torch.__version__.split('+')[0]}, {str(dtype).split('.')[-1]}; blockscope's "
                        f"weights and inputs ({os.path.relpath(os.path.abspath(args.config), SOURCE_DIR)})")
    ragged = len(set(m["prompt_lens"])) > 1
    document["ragged"] = ("left-padded to the longest prompt (generate()'s padding_side='left'), padding masked "
                          "through the 2D attention mask" if ragged else "no padding (every prompt has the same length)")
    x, mask = left_padded(m, tensors["input"].to(dtype))
    steps = [tensors["decode_input"][t].to(dtype).contiguous() for t in range(T)]
    generation = Generation(model, x, mask, steps)

    # The check: every decode output against blockscope's, under the dtype's tolerance (keys as deep
    # as the longest prompt + new_tokens). Both sides err against float64 by up to it: twice it.
    with torch.no_grad():
        errors = ref.compare(generation.outputs(), tensors["output"], tensors["decode_input"])
    depth = dict(m, seq_len=max(m["prompt_lens"]) + T)
    tol = 2.0 * ref.derived_tolerance(depth)
    document["check"] = {"against": f"blockscope's decode outputs in the dump (paths {m.get('paths', '?')})",
                         "max_rel_error": errors["relative"], "delta_rel_error": errors["delta_relative"], "tol": tol}
    document.update({"skipped": None, "warmup": args.warmup, "reps": args.reps, "ttft_us": None, "ttft_cpu_us": None,
                     "per_token_us": None, "per_token_cpu_us": None, "tokens_per_s": None, "cache": None})
    if not errors["relative"] <= tol:  # also NaN
        document["skipped"] = (f"the PyTorch decode outputs differ from blockscope's: max relative error "
                               f"{errors['relative']:.3e} > {tol:.3g}")
        return document, 1

    timer = Timer(torch.device("cpu"))
    ttft, ttft_cpu, per_token, per_token_cpu = [], [], [], []
    by_step = [[] for _ in range(T)]
    with torch.no_grad():
        for _ in range(args.warmup):
            generation.outputs()
        for _ in range(args.reps):
            wall, cpu = timer.one(generation.prefill)
            ttft.append(wall)
            ttft_cpu.append(cpu)
            for t in range(T):
                wall, cpu = timer.one(lambda: generation.step(t))
                per_token.append(wall)
                per_token_cpu.append(cpu)
                by_step[t].append(wall)
    document["ttft_us"], document["ttft_cpu_us"] = us_summary(ttft), us_summary(ttft_cpu)
    document["per_token_us"] = us_summary(per_token)
    document["per_token_us"]["first_step"] = statistics.median(by_step[0]) * 1e3
    document["per_token_us"]["last_step"] = statistics.median(by_step[-1]) * 1e3
    document["per_token_cpu_us"] = us_summary(per_token_cpu)
    document["tokens_per_s"] = B / (document["per_token_us"]["median"] * 1e-6)
    document["cache"] = {"kind": "DynamicCache (torch.cat per step)", "positions_after": generation.cache.length(),
                         "bytes_after": generation.cache.nbytes()}
    document["context"]["load_average_end"] = list(os.getloadavg())
    return document, 0


def summary_text(doc):
    w = doc.get("workload", {})
    lines = [f"torch_decode_peer: {doc['config']} ({w.get('family')}, {w.get('dtype')}, batch {w.get('batch')}, "
             f"prompts {w.get('prompt_lens')}, {w.get('new_tokens')} new tokens, {w.get('n_layers')} layer(s)); "
             f"torch {torch.__version__}, {PINNED_THREADS} thread(s)"]
    check = doc.get("check")
    if check:
        lines.append(f"  check vs blockscope's outputs: max relative error {check['max_rel_error']:.2e} "
                     f"(of output - input {check['delta_rel_error']:.2e}), tolerance {check['tol']:.2e}")
    if doc.get("skipped"):
        lines.append(f"  no time: {doc['skipped']}")
    elif doc.get("ttft_us"):
        t, p = doc["ttft_us"], doc["per_token_us"]
        lines.append(f"  time to first token: median {t['median'] / 1e3:.2f} ms (min {t['min'] / 1e3:.2f}, "
                     f"max {t['max'] / 1e3:.2f}) over {t['samples']} reps")
        lines.append(f"  per token: median {p['median'] / 1e3:.3f} ms (min {p['min'] / 1e3:.3f}, max "
                     f"{p['max'] / 1e3:.3f}) over {p['samples']} steps; first step {p['first_step'] / 1e3:.3f} ms, "
                     f"last {p['last_step'] / 1e3:.3f} ms (cache -> {doc['cache']['positions_after']} positions); "
                     f"{doc['tokens_per_s']:.1f} tokens/s")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="a blockscope decode config (configs/decode/*.yaml)")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="a config override, passed to blockscope run --dump as --set (repeatable)")
    parser.add_argument("--reps", type=int, default=5, help="timed generations (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed generations first (default 1)")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for every pool (intra-op, OpenMP, OpenBLAS/MKL); default 1")
    parser.add_argument("--blockscope", metavar="BIN",
                        help="the blockscope CLI for the dump (default: the newer of build/default/bin and "
                             "build/cpu/bin of this checkout, else PATH)")
    parser.add_argument("--dump-dir", metavar="DIR", help="keep the dump here (default: a temporary directory, removed)")
    parser.add_argument("--out", "-o", metavar="FILE", help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.warmup < 0:
        parser.error("--reps must be at least 1 and --warmup at least 0")
    try:
        document, status = run(args)
    except Problem as problem:
        print(f"torch_decode_peer: {args.config}: {problem}", file=sys.stderr)
        return 2
    print(summary_text(document), file=sys.stderr)
    write_json(document, args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
