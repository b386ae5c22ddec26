#!/usr/bin/env python3
"""CI gates on blockscope's Google Benchmark JSON: only what is stable on a shared machine.

Gated (each a failure with a message naming the benchmark):
  * kernels per iteration, per workload and path, and FLOPs and bytes per iteration — the ops'
    own records (counters op_flops, op_bytes) and the suites' rate counters (FLOPs,
    bytes_per_second x time) — against blockscope's op catalogue (ops/catalogue/catalogue.h),
    asked with `blockscope info --cost SPEC` for the op call each workload key describes
    (cost_spec below): no formula or kernel count is restated here;
  * ratios within one run with wide margins: peak_extra_bytes of the flash attention path far
    below the naive path's (no S x S scores), in-place and fused_softmax below naive (one
    scores buffer instead of two; f32 only on CPU, where f16/bf16 GEMMs use f32 scratch that
    sets the peak of every materialising path);
  * every benchmark ran (no error_occurred) and every suite produced benchmarks.
Never gated: absolute times, or time ratios.

Usage:
  bench_gate.py run --out-dir DIR SUITE_BINARY...   smoke-run each suite on CPU (--smoke
                                                     --cpu_only), keep DIR/<suite>.json, gate
  bench_gate.py check FILE.json...                  gate existing runs (CPU or CUDA)
  (both take --blockscope BIN, the CLI whose catalogue to read; default: `blockscope`
   next to the first suite binary, as in a build's bin/)
  bench_gate.py self-test --blockscope BIN          doctored inputs must fail each gate

The workload key (also each benchmark's label) is `<workload>/<variant>/<dtype>/<shape>`;
parse_key(), cost_spec() and load_costs() here are shared with tools/peers/torch_peer.py and
tools/peers/side_by_side.py.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import time

DTYPE_SIZE = {"f32": 4, "f16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}

# Shape names in the order each workload's key spells them (bench/*_bench.cpp).
SHAPE_ORDER = {
    "matmul_add": ["M", "N", "K"],
    "linear": ["M", "N", "K"],
    "mlp_gelu": ["T", "D", "F"],
    "mlp_geglu": ["T", "D", "F"],
    "softmax": ["R", "N"],
    "softmax_scale_causal": ["B", "H", "S"],
    "layer_norm": ["R", "N"],
    "rms_norm": ["R", "N"],
    "attention": ["B", "H", "S", "D", "causal"],
    "decode_attention": ["B", "H", "Hkv", "D", "S", "paged", "split_keys"],
    "onednn_matmul": ["M", "N", "K"],
    "fp8_linear": ["M", "N", "K"],
    "fp8_weight_linear": ["M", "N", "K"],
}


def parse_key(key):
    """'attention/naive/f32/B=1,H=2,S=64,D=32,causal=1' -> (workload, variant, dtype, shape dict).

    Raises ValueError for anything that is not a known workload key (block benchmarks)."""
    parts = key.split("/")
    if len(parts) != 4:
        raise ValueError(f"not a workload key: {key!r}")
    workload, variant, dtype, shape_text = parts
    if workload not in SHAPE_ORDER or dtype not in DTYPE_SIZE:
        raise ValueError(f"unknown workload or dtype in key {key!r}")
    shape = {}
    for pair in shape_text.split(","):
        name, _, value = pair.partition("=")
        shape[name] = int(value)
    if list(shape) != SHAPE_ORDER[workload]:
        raise ValueError(f"key {key!r}: shape names must be {SHAPE_ORDER[workload]}")
    return workload, variant, dtype, shape


def make_key(workload, variant, dtype, shape):
    return f"{workload}/{variant}/{dtype}/" + ",".join(f"{n}={shape[n]}" for n in SHAPE_ORDER[workload])


def cost_spec(workload, variant, dtype, s):
    """The op call a workload key describes, as `blockscope info --cost` takes it. The suites'
    workloads are ops of the catalogue: matmul_add and linear (bias, no GELU) on their path,
    oneDNN's own matmul as linear's epilogue with a bias, GPT-2's plain MLP and the GeGLU MLP
    (tanh-GELU, bench/mlp_bench.cpp), the row ops (LayerNorm with a bias), the fused scale +
    causal softmax over [B, H, S, S] scores, self-attention (Sq = Sk = S, Hkv = H), decode
    attention over B sequences of S cached positions each (L = B * S; the key carries the flag
    split_keys as bench/decode_bench.cpp computed it with flash_decode_splits, and the layout,
    which changes no cost), the FP8 GEMMs with a bias, both operands FP8 or the weight
    alone (bench/linear_bench.cpp)."""
    d = f"dtype={dtype}"
    if workload in ("matmul_add", "linear", "onednn_matmul"):
        path = "epilogue" if workload == "onednn_matmul" else variant
        return f"linear/{path}:M={s['M']},K={s['K']},N={s['N']},bias=1,{d}"
    if workload in ("fp8_linear", "fp8_weight_linear"):  # FP8 GEMMs with a bias, into the key's dtype
        return f"{workload}:M={s['M']},K={s['K']},N={s['N']},bias=1,{d}"
    if workload in ("mlp_gelu", "mlp_geglu"):
        gated = int(workload == "mlp_geglu")
        return (f"mlp/{variant}:T={s['T']},D={s['D']},F={s['F']},gated={gated},bias={1 - gated},"
                f"activation=gelu_tanh,{d}")
    if workload in ("softmax", "rms_norm"):
        return f"{workload}:R={s['R']},N={s['N']},{d}"
    if workload == "layer_norm":
        return f"layer_norm:R={s['R']},N={s['N']},bias=1,{d}"
    if workload == "softmax_scale_causal":
        return f"softmax_scale_causal:R={s['B'] * s['H'] * s['S']},N={s['S']},{d}"
    if workload == "attention":
        return (f"attention/{variant}:B={s['B']},H={s['H']},Hkv={s['H']},Sq={s['S']},Sk={s['S']},D={s['D']},"
                f"causal={s['causal']},{d}")
    if workload == "decode_attention":
        return (f"decode_attention/{variant}:B={s['B']},H={s['H']},Hkv={s['Hkv']},D={s['D']},L={s['B'] * s['S']},"
                f"split_keys={s['split_keys']},{d}")
    raise ValueError(f"no op for workload {workload!r}")


BLOCKSCOPE = None  # the CLI whose catalogue gate_file() reads (set by main)
COSTS = {}  # cost spec -> {"flops", "bytes", "kernels": {"cpu": [...], "cuda": [...]}}, by load_costs()


def load_costs(blockscope, specs):
    """Asks `blockscope info --cost` for every spec not asked yet (one process for all)."""
    missing = sorted(set(specs) - set(COSTS))
    if not missing:
        return
    command = [blockscope, "info"] + [arg for spec in missing for arg in ("--cost", spec)]
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise GateError(f"`{blockscope} info --cost ...` failed (exit {result.returncode}): {result.stderr.strip()}")
        for entry in json.loads(result.stdout)["costs"]:
            COSTS[entry["spec"]] = entry
    except (OSError, ValueError, KeyError) as error:
        raise GateError(f"cannot read the op catalogue from `{blockscope} info --cost`: {error}")


INFO = {}  # blockscope CLI -> its `info --format json`, read once per process


def blockscope_info(blockscope, key):
    """One section ("paths", "dtypes", ...) of `blockscope info --format json`."""
    try:
        if blockscope not in INFO:
            result = subprocess.run([blockscope, "info", "--format", "json"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, check=True)
            INFO[blockscope] = json.loads(result.stdout)
        return INFO[blockscope][key]
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as error:
        raise GateError(f"cannot read {key!r} from `{blockscope} info --format json`: {error}")


def path_names(blockscope):
    """The path table's names per workload family, as `blockscope info --format json` lists
    them: {"linear": [...], "attention": [...], "mlp_gelu": [...plain MLP paths],
    "mlp_geglu": [...gated MLP paths]}."""
    rows = blockscope_info(blockscope, "paths")
    names = {"linear": [], "attention": [], "mlp_gelu": [], "mlp_geglu": []}
    for row in rows:
        if row["op"] == "mlp":
            for family, applies in (("mlp_gelu", row["plain_mlp"]), ("mlp_geglu", row["gated_mlp"])):
                if applies:
                    names[family].append(row["name"])
        else:
            names[row["op"]].append(row["name"])
    return names


def formulas(workload, variant, dtype, shape):
    """(FLOPs, bytes) of one iteration, from the catalogue (load_costs first)."""
    entry = COSTS[cost_spec(workload, variant, dtype, shape)]
    return entry["flops"], entry["bytes"]


def expected_kernels(workload, variant, dtype, shape, device):
    """Kernels per iteration on `device` ("cpu", "cuda0", ...) from the catalogue."""
    entry = COSTS[cost_spec(workload, variant, dtype, shape)]
    return len(entry["kernels"]["cpu" if device == "cpu" else "cuda"])


# The block suite's labels ("block/<paths>/<dtype>/<config>,B=..,S=.."): gated on their
# counters only.
BLOCK_WORKLOADS = {"block", "stack", "decode_step"}  # decode_step: bench/decode_bench.cpp's whole steps

# Libraries timed outside blockscope for comparison (bench/linear_bench.cpp's oneDNN matmul):
# no op runs, so only the suite's own rate counters are gated.
LIBRARY_WORKLOADS = {"onednn_matmul"}

class GateError(Exception):
    """A problem with the gate's own inputs (not a benchmark failure)."""


def load_catalogue(blockscope, benchmarks):
    """Loads the catalogue's numbers for every workload key among `benchmarks` and checks that
    blockscope's dtypes are the ones DTYPE_SIZE names."""
    dtypes = {d["name"]: d["bytes"] for d in blockscope_info(blockscope, "dtypes")}
    if dtypes != DTYPE_SIZE:
        raise GateError(f"blockscope's dtypes {dtypes} are not DTYPE_SIZE {DTYPE_SIZE}")
    specs = []
    for bench in benchmarks:
        try:
            specs.append(cost_spec(*parse_key(bench.get("label", ""))))
        except ValueError:
            pass  # blocks and unparseable labels: gate_benchmarks reports what it must
    load_costs(blockscope, specs)


TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def benchmark_device(bench):
    """Benchmarks are named `<key>/<device>[/real_time|/manual_time]`."""
    rest = bench.get("name", "")[len(bench.get("label", "")) + 1:]
    return rest.split("/")[0] if rest else "?"


def close(actual, expected, rel):
    return abs(actual - expected) <= rel * max(abs(expected), 1.0)


def gate_benchmarks(benchmarks, source):
    """Returns a list of failure messages for one run's benchmarks."""
    failures = []
    runs = [b for b in benchmarks if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        failures.append(f"{source}: no benchmarks ran")
    by_group = {}  # (device, workload, dtype, shape key) -> {variant: bench}
    for bench in runs:
        name = bench.get("name", "?")
        if bench.get("error_occurred"):
            failures.append(f"{name}: benchmark failed: {bench.get('error_message', '?')}")
            continue
        label = bench.get("label", "")
        where = f"{name} ({source})"
        if label.split("/")[0] in BLOCK_WORKLOADS:
            # Whole blocks (bench/block_bench.cpp): no per-op formula, but the counters exist.
            if not bench.get("kernels_per_iter"):
                failures.append(f"{where}: counter kernels_per_iter missing or zero")
            continue
        try:
            workload, variant, dtype, shape = parse_key(label)
        except ValueError as error:
            failures.append(f"{where}: cannot parse its label: {error}")
            continue
        try:
            flops, nbytes = formulas(workload, variant, dtype, shape)
        except (KeyError, ValueError):
            failures.append(f"{where}: the op catalogue has no {workload} call on path {variant}")
            continue
        library = workload in LIBRARY_WORKLOADS
        want = 0 if library else expected_kernels(workload, variant, dtype, shape, benchmark_device(bench))
        got = bench.get("kernels_per_iter", 0 if library else None)
        if got != want:
            failures.append(f"{where}: {got} kernels per iteration, the op catalogue (blockscope info) says {want}")
        for counter, expected in (() if library else (("op_flops", flops), ("op_bytes", nbytes))):
            value = bench.get(counter)
            if value is None:
                failures.append(f"{where}: counter {counter} missing")
            elif not close(value, expected, 1e-6):
                failures.append(f"{where}: the op recorded {counter} = {value:.6g}, the catalogue gives {expected:.6g}")
        # The suites' own rate counters: rate x time per iteration = the formula.
        seconds = bench.get("real_time", 0) * TIME_UNIT_S.get(bench.get("time_unit", "ns"), 1e-9)
        for counter, expected in (("FLOPs", flops), ("bytes_per_second", nbytes)):
            rate = bench.get(counter)
            if rate is None:
                failures.append(f"{where}: counter {counter} missing")
            elif seconds > 0 and not close(rate * seconds, expected, 1e-3):
                failures.append(f"{where}: {counter} x time = {rate * seconds:.6g} per iteration, "
                                f"the catalogue gives {expected:.6g}")
        group = (benchmark_device(bench), workload, dtype, json.dumps(shape, sort_keys=True))
        by_group.setdefault(group, {})[variant] = bench

    # Same-run memory ratios, wide margins (allocator peaks are deterministic on CPU).
    for (device, workload, dtype, shape_text), variants in sorted(by_group.items()):
        if workload != "attention" or "naive" not in variants:
            continue
        shape = json.loads(shape_text)
        missing = [v for v, bench in variants.items() if "peak_extra_bytes" not in bench]
        if missing:
            failures.append(f"attention {dtype} {shape_text} on {device}: counter peak_extra_bytes missing for "
                            f"{', '.join(sorted(missing))}")
            continue
        naive = variants["naive"]["peak_extra_bytes"]
        scores = shape["B"] * shape["H"] * shape["S"] * shape["S"] * DTYPE_SIZE[dtype]
        if shape["S"] < 256 or naive < scores:
            continue  # too small for the scores to dominate (or no scores measured)
        label = f"attention {dtype} {shape_text} on {device}"
        if "flash" in variants:
            flash = variants["flash"]["peak_extra_bytes"]
            if not flash <= 0.25 * naive:
                failures.append(f"{label}: flash peak_extra_bytes {flash:.0f} is not below a quarter of "
                                f"naive's {naive:.0f} (flash must not materialise the scores)")
        # CPU GEMMs on f16/bf16 compute in f32 scratch as large as the scores, and that scratch,
        # not naive's second scores buffer, sets the peak of every materialising path there.
        if shape["causal"] and (dtype == "f32" or device != "cpu"):
            for variant in ("inplace", "fused_softmax"):
                if variant in variants:
                    value = variants[variant]["peak_extra_bytes"]
                    if not value <= 0.75 * naive:
                        failures.append(f"{label}: {variant} peak_extra_bytes {value:.0f} is not below 3/4 of "
                                        f"naive's {naive:.0f} (naive's out-of-place masked_fill keeps a "
                                        f"second scores buffer; {variant} must not)")
    return failures


def gate_file(path):
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as error:
        return [f"{path}: cannot read benchmark JSON: {error}"]
    benchmarks = data.get("benchmarks", [])
    try:
        load_catalogue(BLOCKSCOPE, benchmarks)
    except GateError as error:
        return [f"{path}: {error}"]
    return gate_benchmarks(benchmarks, os.path.basename(path))


def run_suites(binaries, out_dir, extra):
    """Smoke-runs each suite on CPU; returns (json paths, failures)."""
    os.makedirs(out_dir, exist_ok=True)
    paths, failures = [], []
    for binary in binaries:
        suite = os.path.basename(binary)
        out = os.path.join(out_dir, suite + ".json")
        command = [binary, "--smoke", "--cpu_only", f"--benchmark_out={out}", "--benchmark_out_format=json"] + extra
        begin = time.monotonic()
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(f"bench_gate: {suite}: exit {result.returncode} in {time.monotonic() - begin:.1f} s -> {out}")
        if result.returncode != 0:
            failures.append(f"{suite}: exit code {result.returncode}\n{result.stdout[-2000:]}")
            continue
        paths.append(out)
    return paths, failures


# ---- Self-test: every gate must be able to fail ----------------------------------------------

def _synthetic_run():
    """A passing run built from the formulas (what a correct suite writes)."""
    benchmarks = []
    shape = {"B": 1, "H": 2, "S": 512, "D": 64, "causal": 1}  # as self_test loads it
    scores = 1 * 2 * 512 * 512 * 4
    peaks = {"naive": 2 * scores, "inplace": scores, "fused_softmax": scores, "flash": 200000}
    for variant in ("naive", "inplace", "fused_softmax", "flash"):
        key = make_key("attention", variant, "f32", shape)
        flops, nbytes = formulas("attention", variant, "f32", shape)
        benchmarks.append({"name": key + "/cpu/real_time", "label": key, "run_type": "iteration",
                           "real_time": 1000.0, "time_unit": "us", "FLOPs": flops / 1e-3,
                           "bytes_per_second": nbytes / 1e-3, "op_flops": flops, "op_bytes": nbytes,
                           "kernels_per_iter": expected_kernels("attention", variant, "f32", shape, "cpu"),
                           "peak_extra_bytes": peaks[variant]})
    return benchmarks


def _self_test_bench_compare(benchmarks, problems):
    """tools/ci/bench_compare passes a run against itself and fails a 1.5x slower copy."""
    import tempfile
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_compare")
    with tempfile.TemporaryDirectory() as scratch:
        base, slow = os.path.join(scratch, "base.json"), os.path.join(scratch, "slow.json")
        context = {"date": "synthetic", "num_cpus": 1, "mhz_per_cpu": 1, "library_build_type": "release"}
        with open(base, "w") as handle:
            json.dump({"context": context, "benchmarks": benchmarks}, handle)
        slower = copy.deepcopy(benchmarks)
        for bench in slower:
            bench["real_time"] *= 1.5
            bench["cpu_time"] = bench["real_time"]
        for bench in benchmarks:
            bench.setdefault("cpu_time", bench["real_time"])
        with open(base, "w") as handle:
            json.dump({"context": context, "benchmarks": benchmarks}, handle)
        with open(slow, "w") as handle:
            json.dump({"context": context, "benchmarks": slower}, handle)
        same = subprocess.run([sys.executable, tool, base, base], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if same.returncode == 2 and "not found" in same.stdout:
            print("bench_gate self-test: bench_compare skipped (compare.py not installed)")
            return 0
        if same.returncode != 0:
            problems.append(f"bench_compare failed a run against itself (exit {same.returncode}): {same.stdout[-500:]}")
        worse = subprocess.run([sys.executable, tool, base, slow, "--threshold", "0.2"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        if worse.returncode != 1:
            problems.append(f"bench_compare passed a 1.5x slower run at a 20% threshold (exit {worse.returncode})")
    return 2


def self_test(blockscope):
    shape = {"B": 1, "H": 2, "S": 512, "D": 64, "causal": 1}
    library_key = ("onednn_matmul", "plain_weights", "bf16", {"M": 8, "N": 4, "K": 2})
    load_costs(blockscope, [cost_spec("attention", v, "f32", shape) for v in ("naive", "inplace", "fused_softmax", "flash")]
               + [cost_spec(*library_key)])
    good = _synthetic_run()
    problems = []
    if gate_benchmarks(good, "synthetic"):
        problems.append(f"a correct run failed the gate: {gate_benchmarks(good, 'synthetic')}")
    doctored = {
        "kernel count": lambda b: b[0].update(kernels_per_iter=5),
        "op FLOPs": lambda b: b[1].update(op_flops=b[1]["op_flops"] * 2),
        "op bytes": lambda b: b[2].update(op_bytes=b[2]["op_bytes"] + 4),
        "FLOP rate": lambda b: b[3].update(FLOPs=b[3]["FLOPs"] * 1.01),
        "flash memory": lambda b: b[3].update(peak_extra_bytes=b[0]["peak_extra_bytes"]),
        "inplace memory": lambda b: b[1].update(peak_extra_bytes=b[0]["peak_extra_bytes"]),
        "benchmark error": lambda b: b[2].update(error_occurred=True, error_message="boom"),
        "unparseable label": lambda b: b[1].update(label="attention/naive/f32/B=x,H=2"),
        "unknown workload label": lambda b: b[1].update(label="attentoin/naive/f32/B=1,H=2,S=512,D=64,causal=1"),
        "missing kernel counter": lambda b: b[2].pop("kernels_per_iter"),
        "missing memory counter": lambda b: b[3].pop("peak_extra_bytes"),
        "block without counters": lambda b: b.append({"name": "block/x/f32/tiny,B=1,S=2/cpu", "run_type": "iteration",
                                                      "label": "block/x/f32/tiny,B=1,S=2"}),
    }
    # A library row (oneDNN's own matmul): gated on its FLOP rate only.
    seconds = 2e-3
    library_row = {"name": "onednn_matmul/plain_weights/bf16/M=8,N=4,K=2/cpu/real_time", "run_type": "iteration",
                   "label": "onednn_matmul/plain_weights/bf16/M=8,N=4,K=2", "real_time": seconds * 1e3,
                   "time_unit": "ms", "FLOPs": 2.0 * 8 * 4 * 2 / seconds,
                   "bytes_per_second": 2.0 * (8 * 2 + 2 * 4 + 4 + 8 * 4) / seconds}
    if gate_benchmarks(good + [library_row], "synthetic"):
        problems.append(f"a correct library row failed the gate: {gate_benchmarks(good + [library_row], 'synthetic')}")
    doctored["library FLOP rate"] = lambda b: b.append(dict(library_row, FLOPs=library_row["FLOPs"] * 2))
    doctored["library rate counter"] = lambda b: b.append({k: v for k, v in library_row.items() if k != "FLOPs"})
    for what, change in doctored.items():
        run = copy.deepcopy(good)
        change(run)
        if not gate_benchmarks(run, "synthetic"):
            problems.append(f"a run with a wrong {what} passed the gate")
    if not gate_benchmarks([], "empty"):
        problems.append("an empty run passed the gate")
    checks = len(doctored) + 3
    checks += _self_test_bench_compare(good, problems)
    for problem in problems:
        print(f"bench_gate self-test: FAIL: {problem}")
    print(f"bench_gate self-test: {checks - len(problems)} of {checks} checks passed")
    return 1 if problems else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description="CI gates on blockscope benchmark JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="smoke-run suites on CPU, keep their JSON, gate them")
    run.add_argument("--out-dir", required=True)
    run.add_argument("--blockscope", help="the blockscope CLI whose op catalogue to read")
    run.add_argument("binaries", nargs="+")
    check = sub.add_parser("check", help="gate existing benchmark JSON files")
    check.add_argument("--blockscope", required=True, help="the blockscope CLI whose op catalogue to read")
    check.add_argument("files", nargs="+")
    test = sub.add_parser("self-test", help="check that every gate can fail")
    test.add_argument("--blockscope", required=True, help="the blockscope CLI whose catalogue to read")
    args, extra = parser.parse_known_args(argv)

    global BLOCKSCOPE
    if args.command == "self-test":
        BLOCKSCOPE = args.blockscope
        try:
            return self_test(args.blockscope)
        except GateError as error:
            print(f"bench_gate self-test: FAIL: {error}")
            return 1
    BLOCKSCOPE = args.blockscope or os.path.join(os.path.dirname(os.path.abspath(args.binaries[0])), "blockscope")
    if args.command == "run":
        paths, failures = run_suites(args.binaries, args.out_dir, extra)
    else:
        paths, failures = args.files, []
    checked = 0
    for path in paths:
        failures += gate_file(path)
        checked += 1
    for failure in failures:
        print(f"bench_gate: FAIL: {failure}")
    print(f"bench_gate: {checked} run(s) checked, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
