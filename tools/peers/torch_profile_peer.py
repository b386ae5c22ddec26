#!/usr/bin/env python3
"""Profiles the PyTorch peer of a blockscope config with torch.profiler and writes its Chrome
trace, for `blockscope report` and `blockscope diff` to put beside blockscope's own profiles:

  /usr/bin/python3 tools/peers/torch_profile_peer.py configs/series/04_attention.yaml \\
      --device cpu --set input.seq_len=256 --out torch_attention.json
  blockscope profile configs/series/04_attention.yaml --device cpu --set input.seq_len=256 --save attn.json
  blockscope report torch_attention.json attn.json attn.attention-flash.json -o attention.html
  blockscope diff torch_attention.json attn.json

The peer is the module torch_peer.py times for the same workload (peer_workloads.build,
peer_blocks.build_block): attention as the series writes it (naive: matmul, mul, masked_fill,
softmax, matmul; --variant inplace, or flash / sdpa_math / sdpa_efficient for
scaled_dot_product_attention on PyTorch 2.x), nn.Linear / addmm for linear and matmul_add, and
Hugging Face-style GPT2Block / LlamaDecoderLayer stacks on blockscope's own weights (checked
against blockscope's output first) for block and stack configs. Its shapes, dtype and paths come
from `blockscope run CONFIG --dump` (the dump's metadata: the config after --set, as blockscope
reads it), so both sides run the same workload.

Profiling: torch.profiler.profile with record_shapes and with_flops, CPU activity (and CUDA on a
GPU), under schedule(wait, warmup, active) — blockscope's defaults 1, 1, 5 — with prof.step()
after each step, so the trace holds one ProfilerStep#N range per active step. Every pool is held
to --threads (default 1), as torch_peer.py does. Works with Debian's PyTorch 1.13 (built without
Kineto: export_chrome_trace writes the legacy profiler's array of CPU events) and PyTorch 2.x
(Kineto's trace).

The trace gets three top-level keys besides what PyTorch wrote (a Chrome trace's JSON object may
hold any; a legacy array is put in that object form, under "traceEvents"): "torch_version",
"blockscope_workload" (blockscope's own description of the workload, so diff warns when a trace
is set beside another config's profile) and "blockscope_peer" (what the module is).
"""

import argparse
import json
import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import DTYPES, PINNED_THREADS, SOURCE_DIR, blockscope_dump, torch  # noqa: E402  (first: pins every thread pool, then imports torch)
from peer_blocks import build_block, find_blockscope  # noqa: E402
from peer_workloads import Skip, build  # noqa: E402
import torch_reference  # noqa: E402

PROG = "torch_profile_peer"


def fail(message):
    sys.exit(f"{PROG}: {message}")


def dump_config(blockscope, config, args, dump):
    """`blockscope run CONFIG --dump`: the workload as blockscope reads it (the dump's metadata)
    and blockscope's description of it (run's JSON "workload")."""
    items = list(args.set) + ["run.warmup=0", "run.iters=1", "compare=[]"]
    try:
        run = blockscope_dump(blockscope, config, items, dump, RuntimeError, PROG, device=args.device, dtype=args.dtype)
    except RuntimeError as problem:
        fail(str(problem))
    try:
        workload = run.get("workload", "")
        _, _, metadata = torch_reference.read_safetensors(dump, float64=False)
        m = json.loads(metadata["blockscope"])
    except (ValueError, KeyError, torch_reference.InputProblem) as problem:
        fail(f"cannot read blockscope's dump {dump}: {problem}")
    return m, workload


def path_of(m, op):
    """The config's path for `op` ("attention=naive,linear=epilogue" -> "naive")."""
    for item in m.get("paths", "").split(","):
        key, _, value = item.partition("=")
        if key == op:
            return value
    return None


def peer_step(m, config, args, blockscope, scratch):
    """(what the module is, step function) for the config's workload; exits naming what has no peer."""
    device = torch.device(args.device)
    kind, dtype = m["workload"], m["dtype"]
    if dtype not in DTYPES:
        fail(f"dtype {dtype} has no PyTorch peer here (f32, f16, bf16)")
    try:
        if kind == "attention":
            if m["n_kv_heads"] != m["n_heads"]:
                fail("attention with n_kv_heads != n_heads (GQA) has no peer module here")
            variant = args.variant or path_of(m, "attention") or "naive"
            shape = dict(B=m["batch"], H=m["n_heads"], S=m["seq_len"], D=m["head_dim"], causal=int(m["causal"]))
            generator = torch.Generator().manual_seed(0)
            return build("attention", variant, dtype, shape, device, generator, allow_compile=False)
        if kind in ("linear", "matmul_add"):
            variant = args.variant or path_of(m, "linear") or "epilogue"
            generator = torch.Generator().manual_seed(0)
            return build(kind, variant, dtype, dict(M=m["m"], N=m["n"], K=m["k"]), device, generator, allow_compile=False)
        if kind in ("block", "stack"):
            # torch_peer.py's block peer: HF-style modules on blockscope's weights, checked first.
            context = {"configs": types.SimpleNamespace(find=lambda name: config), "blockscope": blockscope,
                       "dump_dir": scratch}
            shape = {"config": os.path.splitext(os.path.basename(config))[0], "B": m["batch"], "S": m["seq_len"]}
            block_args = types.SimpleNamespace(set=list(args.set) + ([f"dtype={args.dtype}"] if args.dtype else []))
            return build_block(kind, dtype, shape, device, block_args, context, {})
    except Skip as why:
        fail(f"no PyTorch peer for this config: {why}")
    fail(f"workload '{kind}' has no PyTorch peer here (attention, linear, matmul_add, block, stack)")


def profile(step, args):
    """Runs `step` under torch.profiler's schedule; returns the profiler (its trace collected)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=1)
    with torch.no_grad(), torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                                 with_flops=True) as prof:
        for _ in range(args.wait + args.warmup + args.active):
            step()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            prof.step()
    return prof


def add_top_level_keys(path, keys):
    """Our keys at the trace's top level; a legacy array (no Kineto) becomes the object form."""
    with open(path) as handle:
        trace = json.load(handle)
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    trace.update(keys)
    with open(path, "w") as handle:
        json.dump(trace, handle)
    return len(trace.get("traceEvents", []))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a blockscope workload YAML")
    parser.add_argument("--out", required=True, help="the Chrome trace to write (JSON)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, as blockscope's --set (repeatable)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    parser.add_argument("--dtype", help="f32 | f16 | bf16 (default: the config's)")
    parser.add_argument("--variant", help="the peer's variant (attention: naive, inplace, flash, sdpa_math, "
                                          "sdpa_efficient; linear: naive, epilogue); default: the config's path")
    parser.add_argument("--threads", type=int, default=0, help="threads in every pool (default 1)")
    parser.add_argument("--wait", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--active", type=int, default=5)
    parser.add_argument("--blockscope", help="the blockscope CLI (default: this checkout's build, else PATH)")
    args = parser.parse_args(argv)
    if args.wait < 0 or args.warmup < 0 or args.active < 1:
        fail("--wait and --warmup must be >= 0 and --active >= 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        fail("--device cuda asked for, but torch.cuda.is_available() is False")
    torch.set_num_threads(PINNED_THREADS)
    blockscope = find_blockscope(args, {})
    if not blockscope:
        fail("no blockscope CLI found (give --blockscope)")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        fail(f"--out {args.out}: no directory {out_dir}")

    with tempfile.TemporaryDirectory(prefix="torch_profile_peer.") as scratch:
        m, workload = dump_config(blockscope, args.config, args, os.path.join(scratch, "config.safetensors"))
        impl, step = peer_step(m, args.config, args, blockscope, scratch)
        prof = profile(step, args)
        prof.export_chrome_trace(args.out)
    version = torch.__version__
    events = add_top_level_keys(args.out, {"torch_version": version, "blockscope_workload": workload,
                                           "blockscope_peer": impl})
    print(f"{PROG}: wrote {args.out} ({events} events; torch {version}, {PINNED_THREADS} thread(s); "
          f"{args.active} active steps of: {impl})", file=sys.stderr)
    print(f"{PROG}: compare: blockscope diff {args.out} PROFILE.json   "
          f"(PROFILE.json from: blockscope profile {os.path.relpath(args.config, SOURCE_DIR)} ... --save PROFILE.json)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
