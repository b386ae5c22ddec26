#!/usr/bin/env python3
"""blockscope vs PyTorch, side by side: one table of time ratios and a PNG chart.

Inputs: blockscope Google Benchmark JSON (bench/*_bench --benchmark_out=FILE) and
tools/peers/torch_peer.py JSON. Rows are matched on (workload key, device); the key
`<workload>/<variant>/<dtype>/<shape>` is each blockscope benchmark's label and each peer
result's "key".

  ratio = blockscope time / PyTorch time   (below 1: blockscope is faster)

Whole blocks and stacks (bench/block_bench.cpp, keys `<kind>/<paths>/<dtype>/<config>,B=..,S=..`)
are their own section, "Block rows": torch_peer.py runs one PyTorch row per (kind, config,
dtype, B, S), key `<kind>/hf_eager/<dtype>/<config>,B=..,S=..` (block_peer_key), and every
blockscope path mix of that config is compared with it:

  blockscope speed = PyTorch time / blockscope time   (above 1: blockscope is faster)

Times per iteration (--clock real, the default): blockscope's real_time (the mean over Google
Benchmark's iterations; the median aggregate when the run used --benchmark_repetitions),
PyTorch's mean (or --torch-stat median). --clock cpu compares the CPU time of the timing thread
instead (cpu_time / cpu_time_ms): steadier on a loaded machine when both sides run one thread.
Rows without a peer say why (PyTorch version, backend, dtype on this device...).

Usage:
  side_by_side.py --blockscope linear.json attention.json --torch peer.json \\
                  [--png ratios.png] [--title TEXT] > table.md
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ci"))  # the CI gate's keys
from bench_gate import DTYPE_SIZE, TIME_UNIT_S, benchmark_device, parse_key  # noqa: E402

BLOCK_KINDS = ("block", "stack")
BLOCK_PEER_VARIANT = "hf_eager"  # torch_peer.py's one variant for whole blocks


def parse_block_key(key):
    """'stack/attention=flash,linear=epilogue,mlp=epilogue/f32/tiny-gpt2,B=2,S=17' ->
    (kind, paths, dtype, config name, batch, seq_len), as bench/block_bench.cpp labels its
    benchmarks (and torch_peer.py its block rows, paths = "hf_eager"). ValueError for any other key."""
    parts = key.split("/", 3)
    if len(parts) != 4 or parts[0] not in BLOCK_KINDS or parts[2] not in DTYPE_SIZE:
        raise ValueError(f"not a block key: {key!r}")
    kind, paths, dtype, rest = parts
    pieces = rest.rsplit(",", 2)
    if len(pieces) != 3 or not pieces[0] or not pieces[1].startswith("B=") or not pieces[2].startswith("S="):
        raise ValueError(f"block key {key!r}: the shape must be <config>,B=<batch>,S=<seq_len>")
    try:
        batch, seq_len = int(pieces[1][2:]), int(pieces[2][2:])
    except ValueError:
        raise ValueError(f"block key {key!r}: B and S must be integers") from None
    return kind, paths, dtype, pieces[0], batch, seq_len


def block_peer_key(kind, dtype, name, batch, seq_len):
    """The key of the PyTorch row that every path mix of (kind, config, dtype, B, S) is compared with."""
    return f"{kind}/{BLOCK_PEER_VARIANT}/{dtype}/{name},B={batch},S={seq_len}"


def is_block_key(key):
    try:
        parse_block_key(key)
        return True
    except ValueError:
        return False


def load_blockscope(paths):
    """{(key, device): row} from Google Benchmark JSON files."""
    rows, contexts = {}, []
    for path in paths:
        with open(path) as handle:
            data = json.load(handle)
        contexts.append(data.get("context", {}))
        medians = {}
        for bench in data.get("benchmarks", []):
            if bench.get("run_type") == "aggregate" and bench.get("aggregate_name") == "median":
                medians[bench.get("run_name")] = bench
        for bench in data.get("benchmarks", []):
            # Iterations (each repetition), or with --benchmark_report_aggregates_only the median alone.
            median = bench.get("run_type") == "aggregate" and bench.get("aggregate_name") == "median"
            if (bench.get("run_type", "iteration") != "iteration" and not median) or not bench.get("label"):
                continue
            device = benchmark_device(bench)
            key = bench["label"]
            row = {"key": key, "device": device, "error": bench.get("error_message") if bench.get("error_occurred") else None,
                   "kernels": bench.get("kernels_per_iter"), "peak_extra_bytes": bench.get("peak_extra_bytes")}
            chosen = medians.get(bench.get("run_name"), bench)
            scale = TIME_UNIT_S.get(chosen.get("time_unit", "ns"), 1e-9) * 1e3
            row["time_ms"] = chosen.get("real_time", 0) * scale
            row["cpu_time_ms"] = chosen.get("cpu_time", 0) * scale
            rows.setdefault((key, device), row)  # with repetitions: one row per run name
    return rows, contexts


def load_torch(paths, stat, clock):
    rows, contexts = {}, []
    for path in paths:
        with open(path) as handle:
            data = json.load(handle)
        if data.get("schema") != "blockscope.torch_peer/1":
            sys.exit(f"side_by_side: {path} is not torch_peer JSON (schema {data.get('schema')!r})")
        contexts.append(data.get("context", {}))
        for result in data.get("results", []):
            row = dict(result)
            times = result.get("cpu_time_ms" if clock == "cpu" else "time_ms")
            if clock == "cpu" and result.get("time_ms") and not times:
                sys.exit(f"side_by_side: {path} has no CPU times (a CUDA run?): use --clock real")
            row["time"] = times[stat] if times else None
            rows[(result["key"], result["device"])] = row
    return rows, contexts


def thread_mismatches(ours_ctx, torch_ctx):
    """Why these runs cannot be compared on CPU rows: thread counts that differ, or a PyTorch
    run whose pools were not pinned (torch_peer.py before thread_pools was recorded)."""
    ours = {str(c.get("cpu_threads")) for c in ours_ctx if c.get("cpu_threads") is not None}
    problems = []
    if len(ours) > 1:
        problems.append(f"the blockscope runs used different thread counts: {sorted(ours)}")
    for c in torch_ctx:
        if str(c.get("device", "cpu")).startswith("cuda"):
            continue  # GPU rows: the host threads only launch
        pools = c.get("thread_pools")
        if not pools:
            problems.append("a torch_peer.py run without thread_pools in its context (its OpenBLAS pool was "
                            "not pinned): run torch_peer.py again")
            continue
        counts = {"intra-op": pools.get("intra_op"), "OpenBLAS": pools.get("openblas_threads")}
        for name, count in counts.items():
            if count is not None and ours and {str(count)} != ours:
                problems.append(f"PyTorch's {name} pool ran {count} thread(s), blockscope {', '.join(sorted(ours))}")
    return problems


def describe(key):
    try:
        workload, variant, dtype, shape = parse_key(key)
        return workload, variant, dtype, ",".join(f"{k}={v}" for k, v in shape.items())
    except ValueError:
        return key, "", "", ""


def row_order(item, first_seen):
    """Device, then workload, dtype, shape and path each in the order the suites ran them (the
    blockscope JSON: the suites run the path table's paths naive -> fused), PyTorch-only rows
    after; no list of workloads or paths restated here."""
    key, device = item
    try:
        workload, variant, dtype, shape = parse_key(key)
    except ValueError:
        return (device, len(first_seen), key, 0, 0, "")
    rank = lambda *what: first_seen.get(what, len(first_seen))  # noqa: E731
    return (device, rank("workload", workload), dtype, rank("shape", workload, dtype, tuple(shape.items())),
            rank("variant", variant), variant)


def pair(row, ours, peer, clock):
    """Fills a row's blockscope side (time on `clock`, kernels, a failure) and PyTorch side
    (time, what ran, kernels, a skip) and their ratio; notes only the first problem."""
    if ours is not None:
        row["kernels"] = ours["kernels"]
        if ours["error"]:
            row["note"] = f"blockscope failed: {ours['error']}"
        else:
            row["ours_ms"] = ours["cpu_time_ms"] if clock == "cpu" else ours["time_ms"]
    if peer is not None:
        row["impl"] = peer.get("impl") or ""
        row["torch_kernels"] = peer.get("kernels_per_iter")
        if peer.get("skipped"):
            row["note"] = row["note"] or f"no PyTorch time: {peer['skipped']}"
        else:
            row["torch_ms"] = peer["time"]
    if row["ours_ms"] and row["torch_ms"]:
        row["ratio"] = row["ours_ms"] / row["torch_ms"]


def geomean(values):
    return math.exp(sum(math.log(x) for x in values) / len(values))


def build_rows(blockscope, torch_rows, clock):
    rows = []
    first_seen = {}  # ("workload", w) / ("shape", w, dtype, shape) / ("variant", v) -> first appearance
    for key, _ in list(blockscope) + list(torch_rows):
        try:
            workload, variant, dtype, shape = parse_key(key)
        except ValueError:
            continue
        for what in (("workload", workload), ("shape", workload, dtype, tuple(shape.items())), ("variant", variant)):
            first_seen.setdefault(what, len(first_seen))
    keys = {item for item in set(blockscope) | set(torch_rows) if not is_block_key(item[0])}  # blocks: build_block_rows
    for (key, device) in sorted(keys, key=lambda item: row_order(item, first_seen)):
        ours, peer = blockscope.get((key, device)), torch_rows.get((key, device))
        workload, variant, dtype, shape = describe(key)
        row = {"key": key, "section": "op", "workload": workload, "variant": variant, "dtype": dtype, "shape": shape,
               "device": device, "ours_ms": None, "kernels": None, "torch_ms": None, "impl": "",
               "torch_kernels": None, "ratio": None, "note": ""}
        pair(row, ours, peer, clock)
        if ours is None and variant.startswith("sdpa_"):
            row["note"] = row["note"] or "PyTorch only: no blockscope path for this variant"
        elif ours is None:
            row["note"] = row["note"] or "not in the blockscope JSON given (--blockscope)"
        elif peer is None:
            row["note"] = row["note"] or "not run by torch_peer.py (run it with --from-json on this file)"
        rows.append(row)
    return rows


def build_block_rows(blockscope, torch_rows, clock):
    """One row per blockscope block benchmark (each path mix), paired with the PyTorch row of its
    (kind, config, dtype, B, S); then the PyTorch block rows no blockscope row asked for."""
    rows, used, groups = [], set(), {}
    for (key, device), ours in blockscope.items():
        try:
            kind, paths, dtype, name, batch, seq_len = parse_block_key(key)
        except ValueError:
            continue
        peer_key = block_peer_key(kind, dtype, name, batch, seq_len)
        peer = torch_rows.get((peer_key, device))
        row = {"key": key, "section": "block", "workload": kind, "variant": paths, "dtype": dtype,
               "shape": f"{name},B={batch},S={seq_len}", "config": name, "B": batch, "S": seq_len,
               "device": device, "ours_ms": None, "kernels": ours["kernels"], "torch_key": peer_key,
               "torch_ms": None, "impl": "", "torch_kernels": None, "ratio": None, "speed": None, "note": ""}
        pair(row, ours, peer, clock)
        if peer is None:
            row["note"] = row["note"] or f"no PyTorch row {peer_key} (run torch_peer.py with --from-json on this file)"
        else:
            used.add((peer_key, device))
        if row["ratio"]:
            row["speed"] = 1.0 / row["ratio"]
        groups.setdefault((device, peer_key), len(groups))
        rows.append(row)
    for (key, device), peer in torch_rows.items():
        if (key, device) in used:
            continue
        try:
            kind, variant, dtype, name, batch, seq_len = parse_block_key(key)
        except ValueError:
            continue
        groups.setdefault((device, key), len(groups))
        rows.append({"key": key, "section": "block", "workload": kind, "variant": "—", "dtype": dtype,
                     "shape": f"{name},B={batch},S={seq_len}", "config": name, "B": batch, "S": seq_len,
                     "device": device, "ours_ms": None, "kernels": None, "torch_key": key,
                     "torch_ms": None if peer.get("skipped") else peer["time"], "impl": peer.get("impl") or "",
                     "torch_kernels": peer.get("kernels_per_iter"), "ratio": None, "speed": None,
                     "note": "PyTorch only: no blockscope row for this config, dtype and shape"
                             + (f" ({peer['skipped']})" if peer.get("skipped") else "")})
    # Grouped per device, then per PyTorch row in the order blockscope ran them; path mixes as run.
    order = {id(row): index for index, row in enumerate(rows)}
    rows.sort(key=lambda r: (r["device"], groups[(r["device"], r["torch_key"])], order[id(r)]))
    return rows


def fmt_ms(value):
    if value is None:
        return "—"
    return f"{value:.4f}" if value < 1 else f"{value:.3f}"


def fmt_kernels(value):
    return "—" if value is None else f"{value:g}"


def block_markdown(rows):
    """The "Block rows" section: whole blocks and stacks against their one PyTorch row."""
    lines = ["## Block rows", "",
             "Whole blocks and stacks (bench/block_bench.cpp) against one PyTorch row per (kind, config, dtype, B, S): "
             "Hugging Face-style eager modules with blockscope's weights and input (tools/peers/torch_peer.py); every "
             "blockscope path mix of the config is compared with that row. "
             "**blockscope speed = PyTorch time / blockscope time** (above 1: blockscope faster).", "",
             "| kind | config | dtype | B | S | device | blockscope paths | blockscope ms | kernels | PyTorch ms "
             "| blockscope speed | PyTorch ran / note |",
             "|---|---|---|---:|---:|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        speed = f"**{r['speed']:.2f}×**" if r["speed"] is not None else "—"
        note = (r["impl"] if r["speed"] is not None else r["note"]).replace("|", "\\|")
        lines.append(f"| {r['workload']} | {r['config']} | {r['dtype']} | {r['B']} | {r['S']} | {r['device']} | "
                     f"{r['variant']} | {fmt_ms(r['ours_ms'])} | {fmt_kernels(r['kernels'])} | "
                     f"{fmt_ms(r['torch_ms'])} | {speed} | {note} |")
    speeds = [r["speed"] for r in rows if r["speed"]]
    lines.append("")
    if speeds:
        lines.append(f"{len(speeds)} matched block rows; geometric mean of blockscope speed (PyTorch / blockscope): "
                     f"{geomean(speeds):.2f}× (above 1: blockscope faster). {len(rows) - len(speeds)} block rows without a "
                     "ratio (see the note).")
    else:
        lines.append("No matched block rows: run torch_peer.py with --from-json on the block_bench JSON.")
    return "\n".join(lines)


def markdown(rows, ours_ctx, torch_ctx, stat, clock, block_rows=()):
    lines = []
    if ours_ctx:
        c = ours_ctx[0]
        lines.append(f"blockscope: {c.get('blockscope_build_type', '?')} build, devices {c.get('blockscope_devices', '?')}, "
                     f"CPU GEMM {c.get('cpu_gemm_library', '?')}, {c.get('cpu_threads', '?')} threads"
                     + (f", {c['cuda_device']} (driver {c.get('cuda_driver')})" if c.get("cuda_device") else "")
                     + f"; host {c.get('host_name', '?')}, {c.get('num_cpus', '?')} CPUs, run {c.get('date', '?')}")
    if torch_ctx:
        c = torch_ctx[0]
        pools = c.get("thread_pools") or {}
        env = pools.get("env") or {}
        lines.append(f"PyTorch {c.get('torch', '?')} on {c.get('device_name', c.get('device', '?'))}, "
                     f"{c.get('threads', '?')} threads (OpenBLAS {pools.get('openblas_threads', '?')} threads, "
                     f"kernels {pools.get('openblas_core', '?')}; OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE')}, "
                     f"OPENBLAS_L2_SIZE={env.get('OPENBLAS_L2_SIZE')}), timer {c.get('timer', '?')}, "
                     f"{stat} per iteration")
    lines.append(f"Clock compared: {'CPU time of the timing thread' if clock == 'cpu' else 'wall / CUDA-event time'}.")
    lines.append("")
    if block_rows and not rows:  # a block_bench JSON alone: no per-op table
        lines.append(block_markdown(block_rows))
        return "\n".join(lines)
    lines.append("| workload | path | dtype | shape | device | blockscope ms | kernels | PyTorch ms | PyTorch kernels "
                 "| blockscope / PyTorch | PyTorch ran / note |")
    lines.append("|---|---|---|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = f"**{r['ratio']:.2f}×**" if r["ratio"] is not None else "—"
        note = r["impl"] if r["ratio"] is not None else r["note"]
        note = note.replace("|", "\\|")
        lines.append(f"| {r['workload']} | {r['variant']} | {r['dtype']} | {r['shape']} | {r['device']} | "
                     f"{fmt_ms(r['ours_ms'])} | {fmt_kernels(r['kernels'])} | {fmt_ms(r['torch_ms'])} | "
                     f"{fmt_kernels(r['torch_kernels'])} | {ratio} | {note} |")
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    lines.append("")
    if ratios:
        lines.append(f"{len(ratios)} matched rows; geometric mean of blockscope / PyTorch: {geomean(ratios):.2f}× "
                     f"(below 1: blockscope faster). {len(rows) - len(ratios)} rows without a ratio (see the note).")
    else:
        lines.append("No matched rows: run torch_peer.py with --from-json on the blockscope JSON.")
    if block_rows:
        lines += ["", block_markdown(block_rows)]
    return "\n".join(lines)


def chart(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401 (FuncFormatter)

    matched = [r for r in rows if r["ratio"]]
    if not matched:
        print("side_by_side: no matched rows, no chart written", file=sys.stderr)
        return
    labels = [f"{r['workload']} {r['variant']} {r['dtype']} {r['shape']} [{r['device']}]" for r in matched]
    ratios = [r["ratio"] for r in matched]
    colours = ["#2a9d8f" if x <= 1 else "#e76f51" for x in ratios]
    height = max(3.0, 0.32 * len(matched) + 1.2)
    fig, ax = plt.subplots(figsize=(11, height))
    positions = list(range(len(matched)))[::-1]
    # Bars grow from 1 (parity) towards the ratio, so faster and slower read left and right.
    ax.barh(positions, [x - 1.0 for x in ratios], left=1.0, color=colours)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlim(min(min(ratios), 1.0) / 1.5, max(max(ratios), 1.0) * 1.5)
    times = matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}×")
    ax.xaxis.set_major_formatter(times)
    ax.xaxis.set_minor_formatter(times)
    ax.tick_params(axis="x", which="both", labelsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("blockscope time / PyTorch time (log scale; below 1 = blockscope faster)")
    ax.set_title(title, fontsize=10)
    for y, x in zip(positions, ratios):
        ax.text(x, y, f" {x:.2f}×", va="center", fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"side_by_side: chart written to {path}", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description="blockscope vs PyTorch: a markdown table of ratios and a PNG chart")
    parser.add_argument("--blockscope", nargs="+", required=True, metavar="GBENCH_JSON")
    parser.add_argument("--torch", nargs="+", required=True, metavar="TORCH_PEER_JSON")
    parser.add_argument("--png", metavar="FILE", help="write a bar chart of the ratios here")
    parser.add_argument("--title", default="blockscope / PyTorch time per workload")
    parser.add_argument("--torch-stat", choices=["mean", "median"], default="mean")
    parser.add_argument("--json", metavar="FILE", help="also write the merged rows as JSON")
    parser.add_argument("--clock", choices=["real", "cpu"], default="real",
                        help="real: wall / CUDA-event time (default); cpu: CPU time of the timing thread "
                             "(Google Benchmark's cpu_time, torch_peer's cpu_time_ms) -- with one thread on "
                             "both sides, steadier than wall time on a loaded machine")
    args = parser.parse_args(argv)

    ours, ours_ctx = load_blockscope(args.blockscope)
    peers, torch_ctx = load_torch(args.torch, args.torch_stat, args.clock)
    problems = thread_mismatches(ours_ctx, torch_ctx)
    if problems:
        sys.exit("side_by_side: refusing to compare: " + "; ".join(problems) +
                 " (torch_peer.py --threads N pins every pool; blockscope: OMP_NUM_THREADS / --threads)")
    rows = build_rows(ours, peers, args.clock)
    block_rows = build_block_rows(ours, peers, args.clock)
    print(markdown(rows, ours_ctx, torch_ctx, args.torch_stat, args.clock, block_rows))
    if args.png:
        chart(rows + block_rows, args.png, args.title)
    if args.json:  # one list: per-op rows ("section": "op"), then block rows ("section": "block", with "speed")
        with open(args.json, "w") as handle:
            json.dump(rows + block_rows, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
