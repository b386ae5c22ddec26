#!/usr/bin/env python3
"""Our kernels' counters on the simulated GPU beside Nsight Compute's on a GPU.

The simulated GPU's counts (bench/counters/sim_baseline.json, written by counter_gate.py from the
same workloads) are exact functions of each kernel's access pattern; on a GPU Nsight Compute
measures the same metrics by name. For deterministic kernels sectors and bank conflicts should
match one to one; each difference is a fact to explain (a compiler that merged accesses, a
rule the simulator models differently).

Usage:
  compare_counters.py compare --baseline FILE --case CASE --ncu NCU.csv [--out FILE.md]
      NCU.csv: `ncu --csv --metrics <compare_counters.py metrics> blockscope profile ...` of the
      case's command (one step, no --counters), every launch of every variant in order
  compare_counters.py metrics     the --metrics list to give ncu
  compare_counters.py self-test --baseline FILE   a CSV written from the baseline must match; a
                                                  doctored one must not
Exit: 0 every compared count equal, 1 some differ (the table says which), 2 bad input.
"""

import argparse
import csv
import io
import json
import sys

# The baseline's columns and the Nsight Compute metric (or sum of metrics) each one is.
METRICS = {
    "ld_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
    "st_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
    "bank_conflicts": ["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                       "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                       "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"],
}


def metric_list():
    return sorted({m for names in METRICS.values() for m in names})


def read_ncu(text):
    """{launch id: (kernel name, {metric: value})} in launch order, from ncu's --csv details page."""
    launches = {}
    for row in csv.DictReader(io.StringIO(text)):
        try:
            launch = int(row["ID"])
            value = float(str(row["Metric Value"]).replace(",", ""))
        except (KeyError, ValueError):
            continue  # ncu's banner lines, units rows
        name, metrics = launches.setdefault(launch, (row.get("Kernel Name", ""), {}))
        metrics[row["Metric Name"]] = value
    return [launches[i] for i in sorted(launches)]


def sim_launches(baseline, case):
    if case not in baseline:
        sys.exit(f"compare_counters: case '{case}' is not in the baseline (cases: {', '.join(sorted(baseline))})")
    out = []
    for label in baseline[case]["order"]:  # as the profile runs them: the ncu report's order
        out += [(label, launch) for launch in baseline[case]["variants"][label]]
    return out


def compare(baseline, case, ncu_text):
    """Rows (variant, kernel, column, simulated, measured, equal) and whether all are equal."""
    gpu = read_ncu(ncu_text)
    rows, equal_all, at = [], True, 0
    for label, launch in sim_launches(baseline, case):
        base = launch["name"].split("<", 1)[0]
        while at < len(gpu) and base not in gpu[at][0]:  # library kernels (cuBLASLt) in between
            at += 1
        if at == len(gpu):
            rows.append((label, launch["name"], "-", "-", "not found in the ncu report", False))
            equal_all = False
            continue
        measured = gpu[at][1]
        at += 1
        for column, names in METRICS.items():
            if any(n not in measured for n in names):
                rows.append((label, launch["name"], column, launch[column], "not measured", False))
                equal_all = False
                continue
            value = sum(measured[n] for n in names)
            same = abs(value - launch[column]) < 0.5
            equal_all &= same
            rows.append((label, launch["name"], column, launch[column], value, same))
    return rows, equal_all


def markdown(rows, case):
    out = [f"# Counters: simulated GPU vs Nsight Compute ({case})", "",
           "| variant | kernel | counter | simulated | GPU | equal |", "|---|---|---|---:|---:|---|"]
    for label, kernel, column, sim, gpu, same in rows:
        fmt = lambda v: f"{v:g}" if isinstance(v, (int, float)) else str(v)
        out.append(f"| {label} | {kernel} | {column} | {fmt(sim)} | {fmt(gpu)} | {'yes' if same else '**no**'} |")
    return "\n".join(out) + "\n"


def fake_ncu_csv(baseline, case, doctor=None):
    """What ncu would print if the GPU counted exactly as the simulator did (library kernels between)."""
    lines = io.StringIO()
    writer = csv.writer(lines, quoting=csv.QUOTE_ALL)
    writer.writerow(["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"])
    launch_id = 0
    for _, launch in sim_launches(baseline, case):
        writer.writerow([launch_id, "sm90_xmma_gemm_bf16bf16_bf16f32", metric_list()[0], "sector", "123"])
        launch_id += 1
        values = {n: 0.0 for n in metric_list()}
        for column, names in METRICS.items():
            values[names[0]] = float(launch[column])
        if doctor:
            doctor(values)
        for name, value in values.items():
            writer.writerow([launch_id, f"void blockscope::ops::cuda::kernels::{launch['name']}(...)", name, "", f"{value:,.0f}"])
        launch_id += 1
    return lines.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["compare", "metrics", "self-test"])
    parser.add_argument("--baseline")
    parser.add_argument("--case", default="attention-bf16")
    parser.add_argument("--ncu")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.command == "metrics":
        print(",".join(metric_list()))
        return 0
    if not args.baseline:
        sys.exit("compare_counters: --baseline FILE is required")
    with open(args.baseline) as f:
        baseline = json.load(f)["cases"]
    if args.command == "self-test":
        failures = []
        rows, same = compare(baseline, args.case, fake_ncu_csv(baseline, args.case))
        if not same or not rows:
            failures.append("an exact copy of the simulated counts did not compare equal")
        rows, same = compare(baseline, args.case, fake_ncu_csv(
            baseline, args.case, lambda v: v.update({METRICS["st_sectors"][0]: v[METRICS["st_sectors"][0]] + 4})))
        if same:
            failures.append("four more store sectors on the GPU went unnoticed")
        for failure in failures:
            print(f"compare_counters self-test: {failure}", file=sys.stderr)
        checks = 2  # the exact copy, the doctored one
        print(f"compare_counters self-test: {checks - len(failures)} passed, {len(failures)} failed")
        return 1 if failures else 0
    if not args.ncu:
        sys.exit("compare_counters: --ncu FILE is required")
    with open(args.ncu) as f:
        rows, same = compare(baseline, args.case, f.read())
    text = markdown(rows, args.case)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text, end="")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
