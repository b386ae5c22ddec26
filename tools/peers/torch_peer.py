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
import datetime
import os
import platform
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_setup import PINNED_THREADS, SOURCE_DIR, torch, write_json  # noqa: E402  (first: pins every thread pool, then imports torch)
from bench_gate import GateError, cost_spec, formulas, load_costs, path_names  # noqa: E402
from peer_blocks import Configs, build_block, find_blockscope  # noqa: E402
from peer_timing import Timer, count_cuda_kernels, summary, thread_pools  # noqa: E402
from peer_workloads import Skip, build, builtin_workloads, device_name_of, workload_key, workloads_from_json  # noqa: E402
from side_by_side import BLOCK_KINDS  # noqa: E402

SCHEMA = "blockscope.torch_peer/1"


def catalogue_call(workload, variant, dtype, shape):
    """The op call whose catalogue numbers a row reports. PyTorch-only attention rows (the other
    SDPA backends) cost what attention costs on every path: its FLOPs and bytes do not depend
    on the path, so blockscope's naive path stands in for them."""
    if workload == "attention" and variant.startswith("sdpa_"):
        variant = "naive"
    return workload, variant, dtype, shape


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
    # The CLI (--blockscope, else beside the --from-json files' suites, else this checkout's build):
    # its path table for --sizes, its op catalogue for the rows' FLOPs and bytes, --dump for blocks.
    blockscope = find_blockscope(args, blocks)
    try:
        if not args.from_json:
            if not blockscope:
                sys.exit("torch_peer: --sizes needs the blockscope CLI for its path table (give --blockscope)")
            workloads = builtin_workloads(args.sizes, device, path_names(blockscope))
        if args.filter:
            workloads = [w for w in workloads if args.filter in workload_key(*w)]
        op_rows = [w for w in workloads if w[0] not in BLOCK_KINDS]
        if op_rows:
            if not blockscope:
                sys.exit("torch_peer: no blockscope CLI for the op catalogue's FLOPs and bytes (give --blockscope)")
            load_costs(blockscope, [cost_spec(*catalogue_call(*w)) for w in op_rows])
    except GateError as error:
        sys.exit(f"torch_peer: {error}")
    block_context = None
    if any(w[0] in BLOCK_KINDS for w in workloads):
        dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="torch_peer_dumps.")
        os.makedirs(dump_dir, exist_ok=True)
        block_context = {"configs": Configs(args.configs, args.set), "blockscope": blockscope, "dump_dir": dump_dir}
        print(f"torch_peer: block rows from {block_context['blockscope']} run --dump (configs "
              f"{' '.join(args.configs)}; dumps in {dump_dir})", file=sys.stderr)

    timer = Timer(device)
    results = []
    for workload, variant, dtype, shape in workloads:
        key = workload_key(workload, variant, dtype, shape)
        if workload in BLOCK_KINDS:  # no single formula: the sums blockscope's ops recorded
            flops, nbytes = blocks[key]["flops"], blocks[key]["bytes"]
        else:
            flops, nbytes = formulas(*catalogue_call(workload, variant, dtype, shape))
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
        except NameError:  # a bug in these scripts, not a PyTorch limitation: never a skipped row
            raise
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
    write_json(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
