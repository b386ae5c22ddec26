"""The PyTorch side of each per-op workload (torch_peer.py): the built-in lists, the workloads a
blockscope benchmark JSON ran, blockscope's masking semantics, and the step function of each
(workload, variant, dtype, shape)."""

import json
import math

from peer_setup import DTYPES, F, torch, torch_version  # first: pins the thread pools, then imports torch
from bench_gate import benchmark_device, make_key, parse_key
from side_by_side import BLOCK_KINDS, BLOCK_PEER_VARIANT, block_peer_key, parse_block_key


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

def builtin_workloads(sizes, device, paths):
    """(workload, variant, dtype, shape) tuples for --sizes smoke|cpu|gpu; the variants of the ops
    with paths are blockscope's path table (`paths`: bench_gate.path_names), attention's plus
    the PyTorch-only SDPA backends."""
    out = []

    def add(workload, variants, dtypes, shapes):
        for shape in shapes:
            for dtype in dtypes:
                for variant in variants:
                    out.append((workload, variant, dtype, dict(shape)))

    linear_variants = paths["linear"]
    attention_variants = paths["attention"] + ["sdpa_math", "sdpa_efficient", "sdpa_cudnn"]
    if sizes == "smoke":
        dts = ["f32"]
        add("matmul_add", linear_variants, dts, [dict(M=64, N=64, K=64), dict(M=33, N=17, K=29)])
        add("linear", linear_variants, dts, [dict(M=64, N=48, K=32)])
        add("mlp_geglu", paths["mlp_geglu"], dts, [dict(T=16, D=64, F=128)])
        add("mlp_gelu", paths["mlp_gelu"], dts, [dict(T=16, D=64, F=128)])
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
        add("mlp_geglu", paths["mlp_geglu"], dts, [dict(T=256, D=768, F=3072)])
        add("mlp_gelu", paths["mlp_gelu"], dts, [dict(T=256, D=768, F=3072)])
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
        add("mlp_geglu", paths["mlp_geglu"], dts, [dict(T=8192, D=768, F=3072)])
        add("mlp_gelu", paths["mlp_gelu"], dts, [dict(T=8192, D=768, F=3072)])
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
