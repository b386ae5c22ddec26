#!/usr/bin/env python3
"""Holistic Trace Analysis (HTA, from PyPI) reads blockscope's traces and agrees with blockscope.

It runs itself with .venv-hta's Python (tools/install_deps.sh makes it), whichever started it. Two traces:
  - the default profile (`blockscope profile --trace t.json`, its three variants in one file);
  - a 2-rank tensor-parallel profile (one trace file per rank, HTA finds the ranks in them).

--device cuda (the simulated GPU's build, or a GPU): HTA's kernel breakdown, temporal breakdown,
idle time breakdown and CUDA kernel launch statistics are run on every rank and compared with
blockscope's own numbers: its --format json kernel tables (rank 0) and its --save'd profiles
(every rank). Kernel counts must be equal, kernel times within 1 %. Then the comparison is run
on doctored copies of the trace (a kernel 2 % longer; a kernel without its correlation id) and
must fail on each: the check can fail.

--device cpu: a CPU's work items are not GPU kernels and the trace does not say they are. HTA
must load both traces (ranks from distributedInfo), find no GPU event in them, and see the
CPU events blockscope recorded (ops, regions, work items, their calls).

Usage: hta_agreement_test.py BLOCKSCOPE SOURCE_DIR WORK_DIR --device cuda|cpu [--mpiexec MPIEXEC]
"""
import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from collections import defaultdict

# HTA rounds float timestamps to whole microseconds (ceil the start, floor the end) unless told
# not to; blockscope's times are finer, and a kernel of a few microseconds would lose a third.
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"

# HTA lives in its own environment (tools/install_deps.sh): run there whatever Python started us.
HTA_VENV = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".venv-hta"))
if os.path.realpath(sys.prefix) != HTA_VENV:
    venv_python = os.path.join(HTA_VENV, "bin", "python")
    if not os.access(venv_python, os.X_OK):
        sys.exit(f"FAIL: no {venv_python}: run tools/install_deps.sh, which creates .venv-hta/ with HTA")
    os.execv(venv_python, [venv_python] + sys.argv)

try:
    from hta.trace_analysis import TraceAnalysis
except ImportError as error:  # never a skip: CI must have it
    sys.exit(f"FAIL: cannot import HTA ({error}); run tools/install_deps.sh, which creates .venv-hta/")

# HTA logs each file it parses and pandas warns of its own future inside HTA: neither is ours.
logging.getLogger("hta").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", category=FutureWarning)

TOLERANCE = 0.01  # relative, on kernel times
ABS_US = 1e-3  # microseconds: the float noise of a sum of many small numbers


def close(a, b):
    return abs(a - b) <= max(TOLERANCE * max(abs(a), abs(b)), ABS_US)


# Open MPI: as root (CI), and 2 ranks on machines with fewer cores.
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def run(command, cwd):
    """Runs a blockscope command; its stdout, and stderr's lines."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=MPI_ENV)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout, result.stderr.splitlines()


def written(stderr_lines, prefix):
    """The files a blockscope command says it wrote ("saved profile PATH", "wrote trace PATH (...)")."""
    paths = []
    for line in stderr_lines:
        if line.startswith(prefix):
            paths.append(line[len(prefix):].split(" (")[0])
    return paths


def load_saved_profiles(paths):
    """Saved profiles per rank, in the order blockscope added them to that rank's trace."""
    by_rank = defaultdict(list)
    for path in paths:
        with open(path) as f:
            profile = json.load(f)
        by_rank[profile.get("tensor_parallel", {}).get("rank", 0)].append(profile)
    return by_rank


def kernel_duration(kernel):
    return max(0.0, kernel["device_end_us"] - kernel["device_start_us"])


def busy_us(profile):
    """Time with at least one kernel running (the union of the kernels' intervals)."""
    busy, end = 0.0, float("-inf")
    for start, stop in sorted((k["device_start_us"], k["device_end_us"]) for k in profile["kernels"]):
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy


def blockscope_kernels(profiles):
    """name -> [count, total us] over a rank's profiles (every variant of its trace)."""
    table = defaultdict(lambda: [0, 0.0])
    for profile in profiles:
        for kernel in profile["kernels"]:
            table[kernel["name"]][0] += 1
            table[kernel["name"]][1] += kernel_duration(kernel)
    return table


def hta_load(trace_dir):
    return TraceAnalysis(trace_dir=trace_dir)


def hta_kernel_counts(analysis, rank):
    """name -> count of what HTA parsed as GPU activity on a rank (any event with a stream)."""
    sym = analysis.t.symbol_table.get_sym_table()
    trace = analysis.t.get_trace(rank)
    return trace[trace["stream"].ne(-1)]["name"].map(lambda i: sym[i]).value_counts().to_dict()


def compare_gpu(analysis, saved, json_tables):
    """Every disagreement between HTA's analyses and blockscope's numbers, as lines."""
    failures = []
    ranks = analysis.t.get_ranks()
    if ranks != sorted(saved):
        return [f"HTA found ranks {ranks}, blockscope saved ranks {sorted(saved)}"]
    _, metrics = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=True)
    temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
    launches = analysis.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)

    for rank in ranks:
        ours = blockscope_kernels(saved[rank])
        kernel_count = sum(count for count, _ in ours.values())
        hta_counts = hta_kernel_counts(analysis, rank)
        for name in sorted(set(ours) | set(hta_counts)):
            if hta_counts.get(name, 0) != ours.get(name, [0])[0]:
                failures.append(f"rank {rank}: {name}: HTA counts {hta_counts.get(name, 0)} kernels, "
                                f"blockscope {ours.get(name, [0])[0]}")
        # Kernel breakdown: time per kernel name.
        rows = metrics[metrics["rank"] == rank].set_index("name")["sum (us)"].to_dict()
        for name, (_, total) in ours.items():
            if not close(rows.get(name, 0.0), total):
                failures.append(f"rank {rank}: kernel breakdown {name}: HTA {rows.get(name, 0.0):.3f} us, "
                                f"blockscope {total:.3f} us")
        # Temporal breakdown: the time with a kernel running is blockscope's busy device time;
        # the idle time is the rest of the span, which the idle time breakdown splits up.
        busy = sum(busy_us(p) for p in saved[rank])
        row = temporal.loc[rank]
        hta_busy = row["compute_time(us)"] + row["non_compute_time(us)"]
        if not close(hta_busy, busy):
            failures.append(f"rank {rank}: temporal breakdown: HTA's kernels run {hta_busy:.3f} us, "
                            f"blockscope's {busy:.3f} us")
        if not close(row["kernel_time(us)"] - row["idle_time(us)"], busy):
            failures.append(f"rank {rank}: temporal breakdown: span {row['kernel_time(us)']:.3f} us less idle "
                            f"{row['idle_time(us)']:.3f} us is not blockscope's busy {busy:.3f} us")
        idle_rank = idle[idle["rank"] == rank]
        if sorted(idle_rank["stream"].unique()) != [1]:
            failures.append(f"rank {rank}: idle time breakdown: streams {sorted(idle_rank['stream'].unique())}, "
                            "blockscope launches on one (stream 1 in the trace)")
        if not close(idle_rank["idle_time"].sum(), row["idle_time(us)"]):
            failures.append(f"rank {rank}: idle time breakdown sums to {idle_rank['idle_time'].sum():.3f} us, "
                            f"the temporal breakdown's idle time is {row['idle_time(us)']:.3f} us")
        # Launch statistics: one row per launch and kernel joined by correlation id; ids count
        # the rank's kernels in the order of its trace.
        stats = launches[rank].set_index("correlation")
        if len(stats) != kernel_count:
            failures.append(f"rank {rank}: launch statistics pair {len(stats)} launches with kernels, "
                            f"blockscope launched {kernel_count}")
        correlation = 0
        for profile in saved[rank]:
            for kernel in profile["kernels"]:
                correlation += 1
                if correlation not in stats.index:
                    continue
                got = stats.loc[correlation]
                if not close(got["gpu_duration"], kernel_duration(kernel)):
                    failures.append(f"rank {rank}: correlation {correlation} ({kernel['name']}): HTA's kernel "
                                    f"{got['gpu_duration']:.3f} us, blockscope's {kernel_duration(kernel):.3f} us")
                if not close(got["cpu_duration"], kernel["launch_cpu_us"]):
                    failures.append(f"rank {rank}: correlation {correlation} ({kernel['name']}): HTA's launch "
                                    f"{got['cpu_duration']:.3f} us, blockscope's {kernel['launch_cpu_us']:.3f} us")
    # blockscope's own kernel tables (--format json, rank 0) are what the saved profiles say.
    if json_tables is not None:
        table = defaultdict(lambda: [0, 0.0])
        for variant in json_tables["variants"]:
            for row in variant["kernels"]["rows"]:
                table[row["name"]][0] += row["calls"]
                table[row["name"]][1] += row["total_us"]
        rows = metrics[metrics["rank"] == 0].set_index("name")["sum (us)"].to_dict()
        hta_counts = hta_kernel_counts(analysis, 0)
        for name, (count, total) in table.items():
            if hta_counts.get(name, 0) != count:
                failures.append(f"kernel table {name}: {count} calls, HTA counts {hta_counts.get(name, 0)}")
            if not close(rows.get(name, 0.0), total):
                failures.append(f"kernel table {name}: {total:.3f} us, HTA {rows.get(name, 0.0):.3f} us")
    return failures


def summary(analysis, saved):
    """The figures, printed for the record."""
    _, metrics = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=True)
    temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    launches = analysis.get_cuda_kernel_launch_stats(ranks=analysis.t.get_ranks(), visualize=False)
    for rank in analysis.t.get_ranks():
        ours = blockscope_kernels(saved[rank])
        rows = metrics[metrics["rank"] == rank].set_index("name")["sum (us)"].to_dict()
        row = temporal.loc[rank]
        print(f"  rank {rank}: {sum(c for c, _ in ours.values())} kernels, "
              f"{sum(t for _, t in ours.values()):.1f} us (blockscope); HTA {sum(rows.values()):.1f} us; "
              f"HTA's span {row['kernel_time(us)']:.1f} us, idle {row['idle_time(us)']:.1f} us "
              f"({row['idle_time_pctg']}%); {len(launches[rank])} launches paired, mean launch "
              f"{launches[rank]['cpu_duration'].mean():.1f} us, mean delay {launches[rank]['launch_delay'].mean():.1f} us")
        for name, (count, total) in sorted(ours.items(), key=lambda item: -item[1][1])[:6]:
            print(f"    {name:40s} {count:5d}  blockscope {total:12.3f} us  HTA {rows.get(name, 0.0):12.3f} us")


def doctor(trace_dir, out_dir, change):
    """A copy of trace_dir whose rank-0 trace `change` edited (the planted bug)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    shutil.copytree(trace_dir, out_dir)
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        with open(path) as f:
            trace = json.load(f)
        if trace["distributedInfo"]["rank"] != 0:
            continue
        change(trace["traceEvents"])
        with open(path, "w") as f:
            # The header as blockscope writes it: HTA looks for `"rank": N` with a space.
            f.write(json.dumps(trace, indent=1))
    return out_dir


def kernels_of(events):
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]


def lengthen_a_kernel_name(events):
    """Every kernel of the first kernel's name 2 % longer (each still ends before the next)."""
    kernels = kernels_of(events)
    name = kernels[0]["name"]
    for kernel in kernels:
        if kernel["name"] == name:
            kernel["dur"] *= 1.02


def drop_a_correlation(events):
    del kernels_of(events)[0]["args"]["correlation"]


def profile_into(work, name, command):
    """Runs one `profile` into its own folder; (trace dir, saved profiles, stdout)."""
    folder = os.path.join(work, name)
    shutil.rmtree(folder, ignore_errors=True)
    traces = os.path.join(folder, "traces")
    os.makedirs(traces)
    stdout, stderr = run(command + ["--trace", os.path.join(traces, "trace.json"),
                                    "--save", os.path.join(folder, "saved.json")], cwd=folder)
    trace_files = written(stderr, "wrote trace ")
    if sorted(os.path.basename(p) for p in trace_files) != sorted(os.listdir(traces)):
        sys.exit(f"FAIL: {name}: blockscope says it wrote {trace_files}, the folder holds {os.listdir(traces)}")
    return traces, load_saved_profiles(written(stderr, "saved profile ")), stdout


def check_gpu(args, work):
    failures = []
    cli = args.blockscope
    default_dir, default_saved, stdout = profile_into(
        work, "default", [cli, "profile", "--device", "cuda", "--format", "json"])
    tables = json.loads(stdout)
    tp_dir, tp_saved, _ = profile_into(
        work, "tp", [cli, "profile", os.path.join(args.source, "configs/blocks/tiny-gpt2.yaml"),
                     "--device", "cuda", "--set", "parallel.tensor=2"])
    if sorted(tp_saved) != [0, 1] or len(os.listdir(tp_dir)) != 2:
        sys.exit(f"FAIL: tensor parallel: saved ranks {sorted(tp_saved)}, traces {os.listdir(tp_dir)}")

    for name, trace_dir, saved, json_tables in (("default profile", default_dir, default_saved, tables),
                                                ("tensor parallel, 2 ranks", tp_dir, tp_saved, None)):
        analysis = hta_load(trace_dir)
        found = compare_gpu(analysis, saved, json_tables)
        print(f"{name}: HTA {'agrees' if not found else 'DISAGREES'} with blockscope")
        summary(analysis, saved)
        failures += [f"{name}: {line}" for line in found]

    # The planted bugs: each must make the comparison fail where it should.
    for what, change, caught_by in (
            ("every kernel of one name 2 % longer", lengthen_a_kernel_name, "kernel breakdown"),
            ("a kernel without its correlation id", drop_a_correlation, "launch statistics pair")):
        doctored = doctor(default_dir, os.path.join(work, "doctored"), change)
        found = compare_gpu(hta_load(doctored), default_saved, None)
        hits = [line for line in found if caught_by in line]
        if hits:
            print(f"planted bug ({what}) caught: {hits[0]} (and {len(found) - 1} more)")
        else:
            failures.append(f"planted bug ({what}) went unnoticed by the {caught_by} check: {found}")
    return failures


def check_cpu(args, work):
    failures = []
    cli = args.blockscope
    runs = [("default profile", [cli, "profile", "--device", "cpu"], 1)]
    if args.mpiexec:
        runs.append(("tensor parallel, 2 ranks",
                     [args.mpiexec, "-np", "2", cli, "profile", os.path.join(args.source, "configs/blocks/tiny-gpt2.yaml"),
                      "--device", "cpu", "--set", "parallel.tensor=2"], 2))
    else:
        print("NOTE: --no-mpi: this build has no tensor parallelism on the CPU; one rank's trace checked")
    for name, command, ranks in runs:
        trace_dir, saved, _ = profile_into(work, name.split(",")[0].replace(" ", "_"), command)
        analysis = hta_load(trace_dir)
        if analysis.t.get_ranks() != list(range(ranks)):
            failures.append(f"{name}: HTA found ranks {analysis.t.get_ranks()}, expected {list(range(ranks))}")
            continue
        sym = analysis.t.symbol_table.get_sym_table()
        for rank in range(ranks):
            info = analysis.t.meta_data[rank]["distributedInfo"]
            if info != {"backend": "mpi" if ranks > 1 else "none", "rank": rank, "world_size": ranks}:
                failures.append(f"{name}: rank {rank}'s distributedInfo is {info}")
            trace = analysis.t.get_trace(rank)
            on_gpu = int(trace["stream"].ne(-1).sum())
            if on_gpu:
                failures.append(f"{name}: rank {rank}: HTA takes {on_gpu} CPU events for GPU activity")
            cats = trace["cat"].map(lambda i: sym[i]).value_counts().to_dict()
            ops = sum(1 for p in saved[rank] for op in p["ops"] if not op["is_region"])
            regions = sum(1 for p in saved[rank] for op in p["ops"] if op["is_region"])
            items = sum(len(p["kernels"]) for p in saved[rank])
            want = {"cpu_op": ops + items, "user_annotation": regions, "cpu_work_item": items}
            if cats != want:
                failures.append(f"{name}: rank {rank}: HTA's events by category {cats}, blockscope recorded {want}")
            print(f"{name}: rank {rank}: HTA loaded {ops} ops, {regions} regions, {items} work items "
                  f"and their calls; no GPU activity")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blockscope")
    parser.add_argument("source")
    parser.add_argument("work")
    parser.add_argument("--device", choices=["cuda", "cpu", "auto"], required=True,
                        help="auto: cuda where this build sees a GPU (blockscope info), else cpu")
    mpi = parser.add_mutually_exclusive_group(required=True)
    mpi.add_argument("--mpiexec", help="Open MPI's mpiexec, for the 2-rank CPU trace")
    mpi.add_argument("--no-mpi", action="store_true", help="a build without MPI: no 2-rank CPU trace")
    args = parser.parse_args()
    args.blockscope, args.source, args.work = (os.path.abspath(p) for p in (args.blockscope, args.source, args.work))
    if not os.access(args.blockscope, os.X_OK):
        sys.exit(f"FAIL: {args.blockscope}: not an executable blockscope")
    if args.device == "auto":
        info = json.loads(run([args.blockscope, "info", "--format", "json"], cwd=".")[0])
        args.device = "cuda" if info.get("cuda_available") else "cpu"
    print(f"device: {args.device}")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    failures = check_gpu(args, args.work) if args.device == "cuda" else check_cpu(args, args.work)
    for line in failures:
        print("FAIL:", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
