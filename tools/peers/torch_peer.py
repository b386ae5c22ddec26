#!/usr/bin/env python3
"""PyTorch peers of blockscope's benchmark workloads, timed the same way, written as JSON.

Runs the workloads of the blockscope suites (bench/*_bench.cpp) in PyTorch with the same
shapes, dtypes and input distribution: matmul + add and nn.Linear (eager, addmm, compiled),
the plain and GeGLU MLPs (eager and torch.compile), softmax, the fused scale + causal mask
softmax (PyTorch eager: mul, masked_fill, softmax), LayerNorm, RMSNorm, and attention as the
"Profiling in PyTorch" series writes it (naive with masked_fill, in place with masked_fill_)
plus scaled_dot_product_attention with each backend (math, efficient, flash, cuDNN), and whole
GPT-2 / Llama blocks and stacks as Hugging Face writes them (below).

Timing: CUDA events around each iteration on a GPU (L2 flushed before every iteration,
outside the timed region), wall time (time.perf_counter) on CPU; warm-up iterations first.
Works with PyTorch 1.13 (Debian's python3-torch: no SDPA, no torch.compile; those rows are
written as skipped, with the reason) and PyTorch 2.x.

Workloads come from a built-in list (--sizes smoke|cpu|gpu) or from a blockscope Google
Benchmark JSON (--from-json FILE): then exactly the workloads blockscope ran are run here.

Whole blocks and stacks (bench/block_bench.cpp; only with --from-json): one row per (kind,
config, dtype, B, S), whatever paths blockscope ran, since PyTorch has no paths. The module is
Hugging Face's GPT2Block / LlamaDecoderLayer (n_layers of them for a stack, no final norm) as
written in tools/peers/torch_reference.py, eager, in the benchmark's dtype (torch.bfloat16 for bf16:
norms and Llama's softmax in float32, as HF runs them), with blockscope's own weights and input:
the config named in the key is found in --configs (default configs/blocks/; a config's name is
its `name:`, else its file stem) and dumped with `blockscope run CONFIG --device D --dtype DT
--set input.batch=B --set input.seq_len=S [--set ...] --dump FILE` (--set: the overrides
block_bench ran with; B, S and the dtype come from the key, which already holds block_bench's
CPU default of B=1, S=128 for configs that are not tiny-*). Before timing, the module's output is
compared with the dump's "output" (blockscope's, the config's base paths) under
torch_reference.py's tolerance for the dtype; a peer that differs has no time. The mask and
RoPE cos/sin are made once, outside the timed region, as the HF model hands them to its layers.

Output schema ("blockscope.torch_peer/1"):
{
  "schema": "blockscope.torch_peer/1",
  "context": {"torch": "2.11.0", "python": "3.11.2", "device": "cpu" | "cuda:0",
              "device_name": "...", "threads": 1, "timer": "wall" | "cuda_events",
              "thread_pools": {"pinned": 1, "intra_op": 1, "inter_op": .., "openblas_threads": 1,
                               "openblas_core": "SkylakeX", "openblas_config": "..", "env": {..}},
              "cuda": "12.8" | null, "cudnn": 90100 | null, "date": "2026-...Z"},
  "results": [{
    "key": "attention/naive/f32/B=1,H=2,S=64,D=32,causal=1",   # blockscope's workload key
                                           # blocks: "stack/hf_eager/f32/tiny-gpt2,B=2,S=17"
    "workload": "attention", "variant": "naive", "dtype": "f32",   # blocks: "block" | "stack", "hf_eager"
    "shape": {"B": 1, "H": 2, "S": 64, "D": 32, "causal": 1},   # blocks: {"config": "tiny-gpt2", "B": 2, "S": 17}
    "device": "cpu",
    "impl": "what PyTorch ran, in words",
    "skipped": null | "why this row has no PyTorch time",
    "iterations": 50, "warmup": 5,
    "time_ms": {"median": .., "mean": .., "min": .., "max": .., "stdev": ..},   # wall / CUDA events
    "cpu_time_ms": {...} | null,               # CPU only: this thread's CPU time per iteration
    "flops": 1.2e9, "bytes": 3.4e6,            # per iteration, same formulas as blockscope
                                               # (blocks: op_flops / op_bytes of blockscope's first row)
    "kernels_per_iter": 5 | null,              # CUDA only: kernels + memcpys from torch.profiler
    "check": null | {"against": "...", "max_rel_error": .., "delta_rel_error": .., "tol": ..}
                                               # blocks: the peer's output vs blockscope's (dump)
  }, ...]
}

The workload key is `<workload>/<variant>/<dtype>/<shape>`, shape as `NAME=value` pairs
joined by commas in a fixed order per workload. blockscope's suites put the same key in each
benchmark's label; tools/peers/side_by_side.py matches the two on (key, device). Block keys are
`<kind>/<paths>/<dtype>/<config>,B=<batch>,S=<seq_len>` in blockscope and
`<kind>/hf_eager/<dtype>/<config>,B=..,S=..` here; side_by_side.py pairs every path mix with it.

Run it with /usr/bin/python3 on Debian (the interpreter that has python3-torch):

  build/default/bench/block_bench configs/blocks/tiny-gpt2.yaml --cpu_only \
      --benchmark_format=json --benchmark_out=bb.json
  /usr/bin/python3 tools/peers/torch_peer.py --from-json bb.json --out peer.json \
      [--configs DIR_OR_FILE...] [--set KEY=VALUE]... [--blockscope BIN] [--dump-dir DIR]
  /usr/bin/python3 tools/peers/side_by_side.py --blockscope bb.json --torch peer.json

The blockscope CLI for the dumps: --blockscope, else `blockscope` beside the suite binary the
JSON names (its build's bin/), else build/default/bin/blockscope, else PATH.

Threads: every pool PyTorch's CPU work can use is pinned to one count before torch is
imported -- intra-op (torch.set_num_threads), OpenMP (OMP_NUM_THREADS), and the BLAS library's
own pool (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS): Debian's PyTorch runs f32 GEMMs on OpenBLAS,
whose pool ignores torch.set_num_threads. The count is --threads, else the cpu_threads of the
blockscope JSON given with --from-json, else 1. The context records what each pool ended up
with ("thread_pools", read back from the libraries), the OPENBLAS_* settings of the
environment and the OpenBLAS kernel set in use ("openblas_core"); side_by_side.py refuses to
compare runs whose thread counts differ.

Like with like: causal masks are bottom-right aligned as blockscope's (SDPA's is_causal is
top-left when Sq != Sk, so such shapes get an explicit attn_mask), and a fully masked row is
zeros as in blockscope (torch.softmax gives NaN): see causal_mask() and masked_softmax().
"""

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def thread_count_to_pin(argv):
    """--threads N, else blockscope's cpu_threads from the --from-json files, else 1."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--threads", type=int, default=0)
    early.add_argument("--from-json", nargs="+", default=[])
    known, _ = early.parse_known_args(argv)
    if known.threads > 0:
        return known.threads
    counts = set()
    for path in known.from_json:
        try:
            with open(path) as handle:
                counts.add(int(json.load(handle).get("context", {}).get("cpu_threads", 0)))
        except (OSError, ValueError, TypeError):
            pass  # the full parse reports unreadable files
    counts.discard(0)
    if len(counts) > 1:
        sys.exit(f"torch_peer: the --from-json files ran with different thread counts {sorted(counts)}; "
                 "run them separately or pass --threads")
    return counts.pop() if counts else 1


# Before torch is imported: OpenMP and OpenBLAS read these once, when they load.
PINNED_THREADS = thread_count_to_pin(sys.argv[1:])
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(PINNED_THREADS)

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:  # pragma: no cover - depends on the machine
    sys.exit(f"torch_peer: PyTorch is not importable from {sys.executable} ({error}); "
             "on Debian run it with /usr/bin/python3 (python3-torch)")

SCHEMA = "blockscope.torch_peer/1"
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Workload keys and the FLOP/byte formulas are shared with the CI gate (tools/ci/).
PEERS_DIR = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(PEERS_DIR))
sys.path.insert(0, PEERS_DIR)
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "ci"))
from bench_gate import benchmark_device, formulas, make_key, parse_key  # noqa: E402
from side_by_side import BLOCK_KINDS, BLOCK_PEER_VARIANT, block_peer_key, parse_block_key  # noqa: E402
import torch_reference  # noqa: E402  (the Hugging Face-style blocks and the dump reader)


def torch_version():
    parts = []
    for piece in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


# ---- blockscope's masking semantics (docs/ARCHITECTURE.md, "Semantics that differ from PyTorch")

def causal_mask(sq, sk, device):
    """True where masked, BOTTOM-RIGHT aligned as in blockscope: key j is visible to query i when
    j <= i + sk - sq. (PyTorch SDPA's is_causal is top-left, j <= i; the two agree when sq == sk.)"""
    return torch.ones(sq, sk, dtype=torch.bool, device=device).triu(1 + sk - sq)


def empty_rows(mask):
    """[sq, 1] True for queries that see no key (only when sq > sk), or None when there are none.
    Computed once, outside the timed region (bool() synchronises)."""
    empty = mask.all(dim=-1, keepdim=True)
    return empty if bool(empty.any()) else None


def masked_softmax(scores, mask, empty):
    """softmax(scores.masked_fill(mask, -inf)) with blockscope's rule for a fully masked row:
    zeros (torch.softmax gives NaN there); `empty` from empty_rows(mask)."""
    p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return p if empty is None else p.masked_fill(empty, 0.0)


# ---- Built-in workload lists (mirror bench/*_bench.cpp) -------------------------------------

def builtin_workloads(sizes, device):
    """(workload, variant, dtype, shape) tuples for --sizes smoke|cpu|gpu."""
    out = []

    def add(workload, variants, dtypes, shapes):
        for shape in shapes:
            for dtype in dtypes:
                for variant in variants:
                    out.append((workload, variant, dtype, dict(shape)))

    linear_variants = ["naive", "epilogue", "addmm"]
    attention_variants = ["naive", "inplace", "fused_softmax", "flash",
                          "sdpa_math", "sdpa_efficient", "sdpa_cudnn"]
    if sizes == "smoke":
        dts = ["f32"]
        add("matmul_add", linear_variants, dts, [dict(M=64, N=64, K=64), dict(M=33, N=17, K=29)])
        add("linear", linear_variants, dts, [dict(M=64, N=48, K=32)])
        add("mlp_geglu", ["naive", "fused"], dts, [dict(T=16, D=64, F=128)])
        add("mlp_gelu", ["naive", "epilogue"], dts, [dict(T=16, D=64, F=128)])
        add("softmax", ["plain"], dts, [dict(R=7, N=33)])
        add("softmax_scale_causal", ["fused"], dts, [dict(B=1, H=2, S=33)])
        add("layer_norm", ["plain"], dts, [dict(R=7, N=33)])
        add("rms_norm", ["plain"], dts, [dict(R=7, N=33)])
        add("attention", attention_variants, dts,
            [dict(B=1, H=2, S=512, D=64, causal=1), dict(B=1, H=3, S=33, D=16, causal=0)])
    elif sizes == "cpu":
        dts = ["f32", "bf16"]
        add("matmul_add", linear_variants, dts, [dict(M=n, N=n, K=n) for n in (64, 256, 512)])
        add("linear", linear_variants, dts, [dict(M=512, N=3072, K=768)])
        add("mlp_geglu", ["naive", "fused"], dts, [dict(T=256, D=768, F=3072)])
        add("mlp_gelu", ["naive", "epilogue"], dts, [dict(T=256, D=768, F=3072)])
        add("softmax", ["plain"], dts, [dict(R=4096, N=1024)])
        add("softmax_scale_causal", ["fused"], dts, [dict(B=1, H=4, S=1024)])
        add("layer_norm", ["plain"], dts, [dict(R=4096, N=1024)])
        add("rms_norm", ["plain"], dts, [dict(R=4096, N=1024)])
        add("attention", attention_variants, dts,
            [dict(B=1, H=4, S=256, D=64, causal=1), dict(B=1, H=2, S=1024, D=64, causal=1),
             dict(B=1, H=1, S=2048, D=64, causal=1)])
    elif sizes == "gpu":
        dts = ["bf16", "f16"]
        add("matmul_add", linear_variants, dts + ["f32"],
            [dict(M=64, N=64, K=64), dict(M=4096, N=4096, K=4096)])
        add("linear", linear_variants, dts, [dict(M=8192, N=3072, K=768)])
        add("mlp_geglu", ["naive", "fused"], dts, [dict(T=8192, D=768, F=3072)])
        add("mlp_gelu", ["naive", "epilogue"], dts, [dict(T=8192, D=768, F=3072)])
        rows = [dict(R=65536, N=4096), dict(R=8192, N=768)]
        add("softmax", ["plain"], dts + ["f32"], rows)
        add("softmax_scale_causal", ["fused"], dts + ["f32"], [dict(B=8, H=16, S=1024)])
        add("layer_norm", ["plain"], dts + ["f32"], rows)
        add("rms_norm", ["plain"], dts + ["f32"], rows)
        add("attention", attention_variants, dts,
            [dict(B=8, H=16, S=1024, D=64, causal=1), dict(B=8, H=16, S=1024, D=64, causal=0),
             dict(B=1, H=16, S=8192, D=64, causal=1),
             dict(B=1, H=16, S=16384, D=128, causal=1)])
    else:
        raise ValueError(sizes)
    return out


def workloads_from_json(path, device, blocks):
    """The workloads a blockscope Google Benchmark JSON ran on `device` (from the labels). Block
    benchmarks (bench/block_bench.cpp) give one workload per (kind, config, dtype, B, S), whatever
    their paths; what the peer needs from the JSON for them goes into `blocks` (peer key ->
    op_flops, op_bytes, the blockscope keys, the suite binary)."""
    with open(path) as handle:
        data = json.load(handle)
    seen, out = set(), []
    for bench in data.get("benchmarks", []):
        key = bench.get("label", "")
        # Iterations, or the median of each repetition set (--benchmark_report_aggregates_only).
        if not key or (bench.get("run_type") == "aggregate" and bench.get("aggregate_name") != "median"):
            continue
        if benchmark_device(bench) != device_name_of(device):
            continue
        try:
            kind, _, dtype, name, batch, seq_len = parse_block_key(key)
        except ValueError:
            pass
        else:
            peer_key = block_peer_key(kind, dtype, name, batch, seq_len)
            if peer_key not in blocks:
                blocks[peer_key] = {"flops": bench.get("op_flops"), "bytes": bench.get("op_bytes"), "keys": [],
                                    "executable": data.get("context", {}).get("executable")}
                out.append((kind, BLOCK_PEER_VARIANT, dtype, {"config": name, "B": batch, "S": seq_len}))
            if key not in blocks[peer_key]["keys"]:
                blocks[peer_key]["keys"].append(key)
            continue
        try:
            workload, variant, dtype, shape = parse_key(key)
        except ValueError:
            continue  # anything else without a peer workload
        if key in seen:
            continue
        seen.add(key)
        out.append((workload, variant, dtype, shape))
        if workload == "attention" and variant == "flash":
            # PyTorch-only rows for the other SDPA backends, at the same shape.
            for extra in ("sdpa_math", "sdpa_efficient", "sdpa_cudnn"):
                out.append((workload, extra, dtype, dict(shape)))
    return out


def device_name_of(device):
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


def workload_key(workload, variant, dtype, shape):
    """make_key, and for whole blocks block_peer_key."""
    if workload in BLOCK_KINDS:
        return block_peer_key(workload, dtype, shape["config"], shape["B"], shape["S"])
    return make_key(workload, variant, dtype, shape)


# ---- The PyTorch workloads ---------------------------------------------------------------------

class Skip(Exception):
    """This row has no PyTorch time; the message says why."""


def rand(shape, dtype, device, generator):
    # Uniform [-1, 1), like blockscope's benchmark inputs.
    values = torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1
    return values.to(device=device, dtype=dtype)


def compiled(fn):
    if not hasattr(torch, "compile"):
        raise Skip(f"torch.compile needs PyTorch >= 2.0 (found {torch.__version__})")
    return torch.compile(fn)


def sdpa_runner(backend_name):
    """A context-manager factory that pins scaled_dot_product_attention to one backend."""
    if not hasattr(F, "scaled_dot_product_attention"):
        raise Skip(f"scaled_dot_product_attention needs PyTorch >= 2.0 (found {torch.__version__})")
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # PyTorch >= 2.3
        backends = {"math": "MATH", "efficient": "EFFICIENT_ATTENTION", "flash": "FLASH_ATTENTION",
                    "cudnn": "CUDNN_ATTENTION"}
        if not hasattr(SDPBackend, backends[backend_name]):
            raise Skip(f"SDPA backend {backend_name} is not in PyTorch {torch.__version__}")
        chosen = getattr(SDPBackend, backends[backend_name])
        return lambda: sdpa_kernel([chosen])
    except ImportError:
        if backend_name == "cudnn":
            raise Skip(f"the SDPA cuDNN backend needs PyTorch >= 2.3 (found {torch.__version__})")
        flags = dict(enable_math=backend_name == "math", enable_flash=backend_name == "flash",
                     enable_mem_efficient=backend_name == "efficient")
        return lambda: torch.backends.cuda.sdp_kernel(**flags)


def build(workload, variant, dtype_name, s, device, generator, allow_compile):
    """Returns (impl description, step function) for one workload; raises Skip."""
    dtype = DTYPES[dtype_name]
    r = lambda *shape: rand(shape, dtype, device, generator)  # noqa: E731

    def need_compile(fn):
        if not allow_compile:
            raise Skip("torch.compile disabled (--no-compile)")
        return compiled(fn)

    if workload in ("matmul_add", "linear"):
        m, n, k = s["M"], s["N"], s["K"]
        x = r(m, k)
        # matmul_add: b is [K, N] (Y = A·B + c); linear: W is [N, K] as nn.Linear stores it.
        w = r(k, n) if workload == "matmul_add" else r(n, k)
        bias = r(n)
        weight = w if workload == "matmul_add" else w.t()  # a view: no copy, as aten::t
        if variant == "naive":
            return "torch.matmul then + (2 ops)", lambda: torch.matmul(x, weight) + bias
        if variant == "epilogue":
            if workload == "linear":
                return "F.linear (nn.Linear)", lambda: F.linear(x, w, bias)
            return "torch.addmm (one call, bias in the GEMM)", lambda: torch.addmm(bias, x, weight)
        if variant == "addmm":
            fn = need_compile(lambda a, b, c: torch.matmul(a, b) + c)
            return "torch.compile(matmul + add)", lambda: fn(x, weight, bias)
        raise Skip(f"no PyTorch peer for {workload} path {variant}")

    if workload == "mlp_geglu":
        t, d, f = s["T"], s["D"], s["F"]
        x, gate, up, down = r(t, d), r(f, d), r(f, d), r(d, f)

        def geglu(x):
            return F.linear(F.gelu(F.linear(x, gate), approximate="tanh") * F.linear(x, up), down)

        if variant == "naive":
            return "eager GeGLU: gate, up, gelu(tanh), mul, down", lambda: geglu(x)
        if variant == "fused":
            fn = need_compile(geglu)
            return "torch.compile(GeGLU)", lambda: fn(x)
        raise Skip(f"no PyTorch peer for mlp_geglu path {variant}")

    if workload == "mlp_gelu":
        t, d, f = s["T"], s["D"], s["F"]
        x, fc, fc_b, proj, proj_b = r(t, d), r(f, d), r(f), r(d, f), r(d)
        if variant == "naive":
            return ("eager: matmul, +bias, gelu(tanh), matmul, +bias",
                    lambda: torch.matmul(F.gelu(torch.matmul(x, fc.t()) + fc_b, approximate="tanh"),
                                         proj.t()) + proj_b)
        if variant == "epilogue":
            return ("eager nn.Linear, gelu(tanh), nn.Linear",
                    lambda: F.linear(F.gelu(F.linear(x, fc, fc_b), approximate="tanh"), proj, proj_b))
        raise Skip(f"no PyTorch peer for mlp_gelu path {variant}")

    if workload == "softmax":
        x = r(s["R"], s["N"])
        return "torch.softmax(dim=-1)", lambda: torch.softmax(x, dim=-1)

    if workload == "softmax_scale_causal":
        b, h, n = s["B"], s["H"], s["S"]
        x = r(b, h, n, n)
        mask = causal_mask(n, n, device)
        scale = 0.125
        return ("eager: mul(scale), masked_fill(-inf), softmax",
                lambda: torch.softmax((x * scale).masked_fill(mask, float("-inf")), dim=-1))

    if workload == "layer_norm":
        n = s["N"]
        x, w, b = r(s["R"], n), r(n), r(n)
        return "F.layer_norm", lambda: F.layer_norm(x, (n,), w, b, 1e-5)

    if workload == "rms_norm":
        n = s["N"]
        x, w = r(s["R"], n), r(n)
        if hasattr(F, "rms_norm"):
            return "F.rms_norm", lambda: F.rms_norm(x, (n,), w, 1e-5)

        def rms(x):  # Llama's RMSNorm: normalise in f32, then scale
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

        return "eager RMSNorm (pow, mean, rsqrt, mul, mul)", lambda: rms(x)

    if workload == "attention":
        b, h, d, causal = s["B"], s["H"], s["D"], bool(s["causal"])
        # The suites' keys are square (S); Sq / Sk, where a shape has them, may differ.
        sq, sk = s.get("Sq", s.get("S")), s.get("Sk", s.get("S"))
        q, k, v = r(b, h, sq, d), r(b, h, sk, d), r(b, h, sk, d)
        scale = 1.0 / math.sqrt(d)
        mask = causal_mask(sq, sk, device)  # bottom-right, as blockscope masks
        empty = empty_rows(mask) if causal else None
        if variant == "naive":
            def naive():  # the series' module: masked_fill out of place (a copy)
                scores = torch.matmul(q, k.transpose(-2, -1)) * scale
                if causal:
                    return torch.matmul(masked_softmax(scores, mask, empty), v)
                return torch.matmul(torch.softmax(scores, dim=-1), v)
            return "series naive: matmul, mul, masked_fill, softmax, matmul", naive
        if variant == "inplace":
            def inplace():
                scores = torch.matmul(q, k.transpose(-2, -1)) * scale
                if causal:
                    scores.masked_fill_(mask, float("-inf"))
                    p = torch.softmax(scores, dim=-1)
                    return torch.matmul(p if empty is None else p.masked_fill_(empty, 0.0), v)
                return torch.matmul(torch.softmax(scores, dim=-1), v)
            return "series in place: matmul, mul, masked_fill_, softmax, matmul", inplace
        if variant == "fused_softmax":
            raise Skip("PyTorch eager has no fused scale + causal-mask softmax kernel "
                       "(see sdpa_math and the naive rows)")
        backend = {"flash": "flash", "sdpa_math": "math", "sdpa_efficient": "efficient",
                   "sdpa_cudnn": "cudnn"}.get(variant)
        if backend is None:
            raise Skip(f"no PyTorch peer for attention path {variant}")
        pin = sdpa_runner(backend)

        # scale= exists from PyTorch 2.1; the default 1/sqrt(D) is the same value.
        extra = {"scale": scale} if torch_version() >= (2, 1) else {}

        if causal and sq != sk:
            # is_causal would be top-left aligned here: pass blockscope's bottom-right mask
            # (attn_mask is True where attending is allowed), and zero the rows that see no key.
            allowed = ~mask

            def sdpa_bottom_right():
                with pin():
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, **extra)
                return out if empty is None else out.masked_fill(empty, 0.0)
            return (f"F.scaled_dot_product_attention (backend {backend}, bottom-right attn_mask)",
                    sdpa_bottom_right)

        def sdpa():
            with pin():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra)
        return f"F.scaled_dot_product_attention (backend {backend})", sdpa

    raise Skip(f"unknown workload {workload}")


# ---- Whole blocks: Hugging Face-style modules with blockscope's weights --------------------------

def config_name(path, sets):
    """The name block_bench gives a config: its `name:` (or a --set name=...), else the file stem."""
    for item in reversed(sets):
        key, _, value = item.partition("=")
        if key.strip() == "name" and value.strip():
            return value.strip()
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return None
    name = None
    try:
        import yaml  # python3-yaml; the fallback below reads a plain top-level `name:` line
        document = yaml.safe_load(text)
        if isinstance(document, dict) and document.get("name") not in (None, ""):
            name = str(document["name"])
    except ImportError:
        found = re.search(r"""^name:[ \t]*["']?([^"'#\n]*?)["']?[ \t]*(#.*)?$""", text, re.MULTILINE)
        name = found.group(1) if found and found.group(1) else None
    except Exception:  # not YAML: not a config block_bench could have run
        return None
    return name or os.path.splitext(os.path.basename(path))[0]


class Configs:
    """The config files of --configs (directories: their *.yaml), found by the name in a block key."""

    def __init__(self, entries, sets):
        self.entries, self.sets, self.by_name = entries, sets, None

    def find(self, name):
        if self.by_name is None:
            self.by_name = {}
            for entry in self.entries:
                files = ([os.path.join(entry, f) for f in sorted(os.listdir(entry)) if f.endswith((".yaml", ".yml"))]
                         if os.path.isdir(entry) else [entry])
                for path in files:
                    found = config_name(path, self.sets)
                    if found is not None:
                        self.by_name.setdefault(found, []).append(path)
        files = self.by_name.get(name, [])
        if not files:
            raise Skip(f"no config named {name!r} in --configs {' '.join(self.entries)}")
        if len(files) > 1:
            raise Skip(f"config name {name!r} is ambiguous in --configs: {', '.join(files)}")
        return files[0]


def find_blockscope(args, blocks):
    """--blockscope, else `blockscope` beside the suite binary of a --from-json file (bin/ of its
    build), else build/default/bin/blockscope of this checkout, else PATH."""
    if args.blockscope:
        return args.blockscope
    candidates = []
    for info in blocks.values():
        exe = info.get("executable")
        if exe:
            here = os.path.dirname(os.path.abspath(exe))
            candidates += [os.path.join(here, "blockscope"), os.path.join(here, "..", "bin", "blockscope"),
                           os.path.join(here, "bin", "blockscope")]
    candidates.append(os.path.join(SOURCE_DIR, "build", "default", "bin", "blockscope"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return shutil.which("blockscope")


def write_dump(blockscope, config_file, kind, dtype_name, s, device, sets, dump_dir):
    """`blockscope run CONFIG --dump` at the benchmark's dtype and shape (the user's --set first,
    then B, S and one untimed-length run): the weights and input block_bench ran with."""
    if not blockscope:
        raise Skip("no blockscope binary found for the dump (pass --blockscope BIN)")
    stem = re.sub(r"[^A-Za-z0-9._=-]", "_", f"{s['config']}.{kind}.{dtype_name}.B{s['B']}.S{s['S']}")
    dump = os.path.join(dump_dir, stem + ".safetensors")
    command = [blockscope, "run", config_file, "--device", device_name_of(device), "--dtype", dtype_name,
               "--threads", str(PINNED_THREADS), "--format", "json", "--dump", dump]
    for item in list(sets) + [f"input.batch={s['B']}", f"input.seq_len={s['S']}", "run.warmup=0", "run.iters=1"]:
        command += ["--set", item]
    print("torch_peer: " + " ".join(command), file=sys.stderr)
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        raise Skip(f"cannot run {blockscope}: {error.strerror}") from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
        raise Skip(f"blockscope run --dump failed (exit {run.returncode}): {last[:300]}")
    return dump


def build_block(kind, dtype_name, s, device, args, context, row):
    """Returns (impl description, step function) for a whole block or stack; raises Skip. The
    module's output is compared once with blockscope's (the dump's "output", the config's base
    paths) and row["check"] records it: a peer that computes something else has no time."""
    config_file = context["configs"].find(s["config"])
    dump = write_dump(context["blockscope"], config_file, kind, dtype_name, s, device, args.set, context["dump_dir"])
    try:
        tensors, _, metadata = torch_reference.read_safetensors(dump, float64=False)
        m = torch_reference.model_description(metadata)
        torch_reference.check_family(m)
        x = torch_reference.check_input(m, tensors)
    except (torch_reference.InputProblem, torch_reference.FamilyMismatch) as problem:
        raise Skip(f"{dump}: {problem}") from None
    want = {"workload": kind, "dtype": dtype_name, "batch": s["B"], "seq_len": s["S"]}
    wrong = [f"{k} {m[k]!r} (the benchmark ran {v!r})" for k, v in want.items() if m[k] != v]
    if wrong:
        raise Skip(f"the dump of {config_file} has {', '.join(wrong)}")
    dtype = DTYPES[dtype_name]
    try:
        model = torch_reference.HFBlocks(m, tensors, dtype, device)
    except torch_reference.InputProblem as problem:
        raise Skip(f"{dump}: {problem}") from None
    if model.unused:
        raise Skip(f"{dump}: tensors the PyTorch block does not use: {', '.join(model.unused)}")
    x = x.to(device=device, dtype=dtype)
    with torch.no_grad():
        errors = torch_reference.compare(model(x).cpu(), tensors["output"], tensors["input"])
    tol = torch_reference.DEFAULT_TOL[dtype_name]
    row["check"] = {"against": f"blockscope's output in the dump (paths {m.get('paths', '?')})",
                    "max_rel_error": errors["relative"], "delta_rel_error": errors["delta_relative"], "tol": tol}
    if not errors["relative"] <= tol:  # also NaN
        raise Skip(f"the PyTorch block's output differs from blockscope's: max relative error "
                   f"{errors['relative']:.3e} > {tol:g}")
    if m["family"] == "gpt2":
        module = "GPT2Block"
    elif m["family"] == "llama":
        module = "LlamaDecoderLayer"
    else:
        module = (f"custom block on the LlamaDecoderLayer code ({m['norm']}, {m['activation']}, "
                  f"{'gated' if m['gated'] else 'plain'} MLP, {'bias' if m['bias'] else 'no bias'}, "
                  f"{'RoPE' if m['rope'] else 'no RoPE'}, {'causal' if m['causal'] else 'bidirectional'})")
    layers = f" x {m['n_layers']}" if kind == "stack" else ""
    impl = (f"HF-style {module}{layers}, eager, torch {torch.__version__.split('+')[0]}, {str(dtype).split('.')[-1]}; "
            f"blockscope's weights and input ({os.path.relpath(config_file, SOURCE_DIR)})")
    return impl, lambda: model(x)


# ---- Timing ------------------------------------------------------------------------------------

class Timer:
    def __init__(self, device):
        self.device = device
        self.flush = None
        if device.type == "cuda":
            # Twice the L2 size, zeroed before each iteration so no input stays cached.
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)

    def one(self, step):
        """(wall or CUDA-event ms, CPU ms of this thread or None) for one iteration."""
        if self.device.type == "cuda":
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end), None
        begin, begin_cpu = time.perf_counter(), time.thread_time()
        step()
        # thread_time: the CPU this thread used, what Google Benchmark's cpu_time measures (equal
        # to the work done with one intra-op thread, whatever else loads the machine).
        return (time.perf_counter() - begin) * 1000.0, (time.thread_time() - begin_cpu) * 1000.0

    def run(self, step, warmup, min_time_s, min_iters, max_iters):
        for _ in range(warmup):
            step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        times, cpu_times, begin = [], [], time.perf_counter()
        while len(times) < max_iters and (len(times) < min_iters or time.perf_counter() - begin < min_time_s):
            wall, cpu = self.one(step)
            times.append(wall)
            if cpu is not None:
                cpu_times.append(cpu)
        return times, cpu_times


def summary(times):
    return {"median": statistics.median(times), "mean": statistics.fmean(times), "min": min(times),
            "max": max(times), "stdev": statistics.pstdev(times) if len(times) > 1 else 0.0}


def count_cuda_kernels(step):
    """Kernels and memcpys one iteration launches, from torch.profiler (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    count = 0
    for event in prof.events():
        kind = str(getattr(event, "device_type", ""))
        if "CUDA" in kind and event.name and not event.name.startswith("cudaLaunch"):
            count += 1
    return count


def loaded_openblas():
    """The OpenBLAS library this process loaded (through torch), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libopenblas" in line and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def thread_pools():
    """What each pool PyTorch may use is set to, read back from the libraries."""
    pools = {"pinned": PINNED_THREADS, "intra_op": torch.get_num_threads(),
             "inter_op": torch.get_num_interop_threads(),
             "env": {name: os.environ.get(name) for name in
                     ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                      "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
             "openblas_threads": None, "openblas_core": None, "openblas_config": None}
    openblas = loaded_openblas()
    if openblas is not None:
        if hasattr(openblas, "openblas_get_num_threads"):
            pools["openblas_threads"] = int(openblas.openblas_get_num_threads())
        for key, symbol in (("openblas_core", "openblas_get_corename"), ("openblas_config", "openblas_get_config")):
            if hasattr(openblas, symbol):
                getattr(openblas, symbol).restype = ctypes.c_char_p
                pools[key] = getattr(openblas, symbol)().decode(errors="replace")
    return pools


def run_all(args):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_peer: --device cuda asked for, but torch.cuda.is_available() is False")
    torch.set_num_threads(PINNED_THREADS)
    pools = thread_pools()
    if pools["openblas_threads"] not in (None, PINNED_THREADS):
        sys.exit(f"torch_peer: OpenBLAS runs {pools['openblas_threads']} threads although "
                 f"OPENBLAS_NUM_THREADS={PINNED_THREADS} was set before torch loaded")
    print(f"torch_peer: {PINNED_THREADS} thread(s) in every pool (intra-op {pools['intra_op']}, OpenBLAS "
          f"{pools['openblas_threads']}, core {pools['openblas_core']})", file=sys.stderr)
    blocks = {}  # block peer key -> what the blockscope JSON says about it
    if args.from_json:
        workloads = [w for path in args.from_json for w in workloads_from_json(path, device, blocks)]
    else:
        workloads = builtin_workloads(args.sizes, device)
    if args.filter:
        workloads = [w for w in workloads if args.filter in workload_key(*w)]
    block_context = None
    if any(w[0] in BLOCK_KINDS for w in workloads):
        dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="torch_peer_dumps.")
        os.makedirs(dump_dir, exist_ok=True)
        block_context = {"configs": Configs(args.configs, args.set), "blockscope": find_blockscope(args, blocks),
                         "dump_dir": dump_dir}
        print(f"torch_peer: block rows from {block_context['blockscope']} run --dump (configs "
              f"{' '.join(args.configs)}; dumps in {dump_dir})", file=sys.stderr)

    timer = Timer(device)
    results = []
    for workload, variant, dtype, shape in workloads:
        key = workload_key(workload, variant, dtype, shape)
        if workload in BLOCK_KINDS:  # no single formula: the sums blockscope's ops recorded
            flops, nbytes = blocks[key]["flops"], blocks[key]["bytes"]
        else:
            flops, nbytes = formulas(workload, dtype, shape)
        row = {"key": key, "workload": workload, "variant": variant, "dtype": dtype, "shape": shape,
               "device": device_name_of(device), "impl": None, "skipped": None, "iterations": 0,
               "warmup": args.warmup, "time_ms": None, "cpu_time_ms": None, "flops": flops, "bytes": nbytes,
               "kernels_per_iter": None, "check": None}
        generator = torch.Generator().manual_seed(args.seed)
        try:
            if workload in BLOCK_KINDS:
                impl, step = build_block(workload, dtype, shape, device, args, block_context, row)
            else:
                impl, step = build(workload, variant, dtype, shape, device, generator, not args.no_compile)
            row["impl"] = impl
            with torch.no_grad():
                times, cpu_times = timer.run(step, args.warmup, args.min_time, args.min_iters, args.max_iters)
                if device.type == "cuda" and args.count_kernels:
                    row["kernels_per_iter"] = count_cuda_kernels(step)
            row["iterations"] = len(times)
            row["time_ms"] = summary(times)
            row["cpu_time_ms"] = summary(cpu_times) if cpu_times else None
        except Skip as reason:
            row["skipped"] = str(reason)
        except Exception as error:  # a PyTorch limitation (dtype not supported on CPU, ...)
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            row["skipped"] = f"PyTorch {torch.__version__} failed: {type(error).__name__}: {first_line[:200]}"
        results.append(row)
        status = row["skipped"] or f"{row['time_ms']['median']:.4f} ms median over {row['iterations']}"
        if row["check"]:
            status += (f" (output vs blockscope's: max relative error {row['check']['max_rel_error']:.2e}, "
                       f"of output - input {row['check']['delta_rel_error']:.2e})")
        print(f"torch_peer: {key} [{row['device']}]: {status}", file=sys.stderr)
    if block_context and not args.dump_dir:
        shutil.rmtree(block_context["dump_dir"], ignore_errors=True)
    return device, results


def context(device):
    ctx = {"torch": torch.__version__, "python": platform.python_version(), "device": device_name_of(device),
           "threads": torch.get_num_threads(), "thread_pools": thread_pools(),
           "timer": "cuda_events" if device.type == "cuda" else "wall",
           "cuda": torch.version.cuda, "cudnn": None, "machine": platform.machine(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if device.type == "cuda":
        ctx["device_name"] = torch.cuda.get_device_name(device)
        ctx["cudnn"] = torch.backends.cudnn.version()
    else:
        ctx["device_name"] = f"cpu ({platform.processor() or platform.machine()})"
    return ctx


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    parser.add_argument("--sizes", default="smoke", choices=["smoke", "cpu", "gpu"],
                        help="built-in workload list (ignored with --from-json)")
    parser.add_argument("--from-json", metavar="FILE", nargs="+",
                        help="run the workloads of these blockscope Google Benchmark JSON files")
    parser.add_argument("--filter", help="only workload keys containing this text")
    parser.add_argument("--out", "-o", metavar="FILE", help="write the JSON here (default: stdout)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds of timed iterations per row")
    parser.add_argument("--min-iters", type=int, default=5)
    parser.add_argument("--max-iters", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for every pool (intra-op, OpenMP, OpenBLAS/MKL); 0: blockscope's "
                             "cpu_threads from --from-json, else 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument("--count-kernels", action="store_true",
                        help="on CUDA, count kernels per iteration with torch.profiler")
    parser.add_argument("--configs", metavar="DIR_OR_FILE", nargs="+",
                        default=[os.path.join(SOURCE_DIR, "configs", "blocks")],
                        help="block rows: where the config named in each block key is looked for (directories: "
                             "their *.yaml; a config's name is its `name:`, else its file stem); default "
                             "configs/blocks/ of this checkout")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="block rows: a config override block_bench ran with (its --set=...), repeatable; "
                             "input.batch, input.seq_len and dtype come from each key")
    parser.add_argument("--blockscope", metavar="BIN",
                        help="block rows: the blockscope CLI that writes the dumps (default: beside the suite "
                             "binary named in the JSON, bin/ of its build; else build/default/bin/blockscope; "
                             "else PATH)")
    parser.add_argument("--dump-dir", metavar="DIR",
                        help="block rows: keep the dumps here (default: a temporary directory, removed)")
    args = parser.parse_args(argv)

    device, results = run_all(args)
    document = {"schema": SCHEMA, "context": context(device), "results": results}
    text = json.dumps(document, indent=2)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
