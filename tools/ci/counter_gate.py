#!/usr/bin/env python3
"""CI gate on our kernels' hardware counters, counted on the simulated GPU.

Counters are exact and deterministic there (sim/counters.cpp: sectors, bank conflicts, occupancy
by Nsight Compute's rules), so CI can gate what no timing on a shared CPU can. Each case below
profiles a config with `blockscope profile --device cuda --counters --format json`; every kernel
launch of the counted forward is compared with bench/counters/sim_baseline.json:

  * global load and store sector efficiency must not drop (0.5 percentage points of slack);
  * shared-memory bank conflicts (ld, st, ldmatrix, cp.async) must not rise;
  * theoretical occupancy must not drop (when ptxas's registers are known on both sides);
  * the launches themselves (count, order, kernel names, grids, blocks) must be the same —
    a change there is a new baseline (`update`), reviewed like any other change.
Absolute rules, whatever the baseline says: the tensor-core flash kernel and every copy kernel
store at 100% sector efficiency, and no ldmatrix conflicts anywhere (the tiles are swizzled).

Usage:
  counter_gate.py check --blockscope BIN [--baseline FILE]   count every case, gate against FILE
  counter_gate.py update --blockscope BIN [--baseline FILE]  count every case, write FILE
  counter_gate.py self-test --baseline FILE                  doctored counts must fail each rule
"""

import argparse
import copy
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BASELINE = os.path.join(ROOT, "bench", "counters", "sim_baseline.json")

# One step, no warm-up: the profile itself is not what is gated, the counted forward is.
QUICK = ["--set", "profile.schedule.wait=0", "--set", "profile.schedule.warmup=0", "--set", "profile.schedule.active=1"]

# (name, config, extra arguments): small shapes that still take every kernel's main loop
# more than once (several tiles, several blocks) and its tails.
CASES = [
    ("attention-bf16", "configs/series/04_attention.yaml", ["--set", "input.batch=1", "--set", "input.seq_len=160"]),
    ("gpt2-f32", "configs/default.yaml", ["--set", "input.batch=1", "--set", "input.seq_len=72"]),
    ("llama-bf16", "configs/blocks/tiny-llama.yaml", ["--dtype", "bf16", "--set", "input.batch=1", "--set", "input.seq_len=72"]),
    ("mlp-geglu-bf16", "configs/series/03_mlp_geglu.yaml", ["--set", "input.batch=1", "--set", "input.seq_len=32",
                                                            "--set", "model.d_model=256", "--set", "model.d_ff=512"]),
    ("decode-bf16", "configs/decode/tiny-llama-decode.yaml", ["--dtype", "bf16", "--set", "decode.new_tokens=2"]),
]

GATED_EFFICIENCY = ("ld_efficiency_pct", "st_efficiency_pct")
SLACK_PCT = 0.5


def count_case(blockscope, name, config, extra):
    command = [blockscope, "profile", os.path.join(ROOT, config), "--device", "cuda", "--counters", "--format", "json"]
    command += QUICK + extra
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"counter_gate: case {name}: `{' '.join(command)}` failed ({done.returncode}):\n{done.stderr}")
    document = json.loads(done.stdout)
    variants = {}
    for variant in document["variants"]:
        launches = []
        for row in variant.get("counters", []):
            launches.append({key: row.get(key) for key in (
                "name", "grid", "block", "registers", "occupancy_pct", "ld_efficiency_pct", "st_efficiency_pct",
                "ld_sectors", "st_sectors", "bank_conflicts", "shared_wavefronts", "limiter")} | {
                "ldsm_conflicts": row.get("metrics", {}).get(
                    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum", 0)})
        variants[variant["label"]] = launches
    return {"command": " ".join(["blockscope", "profile", config, "--device", "cuda", "--counters"] + extra),
            "order": [variant["label"] for variant in document["variants"]],  # the run's order
            "variants": variants}


def count_all(blockscope):
    return {name: count_case(blockscope, name, config, extra) for name, config, extra in CASES}


def absolute_rules(where, launch):
    problems = []
    if launch["ldsm_conflicts"]:
        problems.append(f"{where}: {launch['ldsm_conflicts']:g} ldmatrix bank conflicts (the tiles are swizzled: none)")
    full_store = launch["name"].startswith("flash_attention_kernel<") or launch["name"].startswith("copy_kernel<")
    if full_store and launch["st_sectors"] and launch["st_efficiency_pct"] < 100.0:
        problems.append(f"{where}: store sector efficiency {launch['st_efficiency_pct']:.1f}% (must be 100%)")
    return problems


def compare(counted, baseline):
    problems = []
    for case, data in counted.items():
        if case not in baseline:
            problems.append(f"{case}: not in the baseline (run `counter_gate.py update`)")
            continue
        for label, launches in data["variants"].items():
            before = baseline[case]["variants"].get(label)
            where_case = f"{case} / {label}"
            if before is None:
                problems.append(f"{where_case}: not in the baseline (run `counter_gate.py update`)")
                continue
            shape = lambda ls: [(l["name"], l["grid"], l["block"]) for l in ls]
            if shape(launches) != shape(before):
                problems.append(f"{where_case}: the launches changed (was {shape(before)}, now {shape(launches)}): "
                                "review, then `counter_gate.py update`")
                continue
            for i, (now, was) in enumerate(zip(launches, before)):
                where = f"{where_case} / launch {i + 1} {now['name']}"
                problems += absolute_rules(where, now)
                for key in GATED_EFFICIENCY:
                    if now[key] is not None and was[key] is not None and now[key] < was[key] - SLACK_PCT:
                        problems.append(f"{where}: {key} fell from {was[key]:.1f}% to {now[key]:.1f}%")
                if now["bank_conflicts"] > was["bank_conflicts"]:
                    problems.append(f"{where}: bank conflicts rose from {was['bank_conflicts']:g} to {now['bank_conflicts']:g}")
                if (now["registers"] is not None and was["registers"] is not None
                        and now["occupancy_pct"] < was["occupancy_pct"] - 0.01):
                    problems.append(f"{where}: theoretical occupancy fell from {was['occupancy_pct']:.1f}% to "
                                    f"{now['occupancy_pct']:.1f}% ({now['registers']:g} registers, limiter {now['limiter']})")
    return problems


def self_test(baseline):
    """Each rule must catch a doctored count; the baseline against itself must pass.
    Returns (checks made, failures)."""
    failures = []
    if compare(baseline, baseline):
        failures.append("the baseline does not pass against itself: " + "; ".join(compare(baseline, baseline)[:3]))

    def first(data, predicate):
        for case in data.values():
            for launches in case["variants"].values():
                for launch in launches:
                    if predicate(launch):
                        return launch
        return None

    doctors = [
        ("a load's sector efficiency dropped", lambda l: l["ld_efficiency_pct"], lambda l: l.update(ld_efficiency_pct=l["ld_efficiency_pct"] - 5)),
        ("a store's sector efficiency dropped", lambda l: l["st_efficiency_pct"], lambda l: l.update(st_efficiency_pct=l["st_efficiency_pct"] - 5)),
        ("bank conflicts rose", lambda l: True, lambda l: l.update(bank_conflicts=l["bank_conflicts"] + 1)),
        ("ldmatrix conflicts appeared", lambda l: True, lambda l: l.update(ldsm_conflicts=8)),
        ("occupancy fell", lambda l: l["registers"] is not None and l["occupancy_pct"], lambda l: l.update(occupancy_pct=l["occupancy_pct"] - 10)),
        ("a launch's grid changed", lambda l: True, lambda l: l.update(grid=l["grid"] + "x")),
    ]
    for what, chosen, doctor in doctors:
        doctored = copy.deepcopy(baseline)
        launch = first(doctored, chosen)
        if launch is None:
            failures.append(f"no launch to doctor for '{what}'")
            continue
        doctor(launch)
        if not compare(doctored, baseline):
            failures.append(f"not caught: {what}")
    return 1 + len(doctors), failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["check", "update", "self-test"])
    parser.add_argument("--blockscope", help="the blockscope CLI of a cuda-sim build")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    args = parser.parse_args()
    if args.command == "self-test":
        with open(args.baseline) as f:
            checks, failures = self_test(json.load(f)["cases"])
        for failure in failures:
            print(f"counter_gate self-test: {failure}", file=sys.stderr)
        print(f"counter_gate self-test: {checks - len(failures)} passed, {len(failures)} failed")
        return 1 if failures else 0
    if not args.blockscope:
        sys.exit("counter_gate: --blockscope BIN is required")
    counted = count_all(args.blockscope)
    if args.command == "update":
        with open(args.baseline, "w") as f:
            json.dump({"about": "Kernel counters of our kernels on the simulated GPU, per case and launch "
                               "(tools/ci/counter_gate.py update writes it; check gates against it).",
                       "cases": counted}, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"counter_gate: wrote {args.baseline}")
        return 0
    with open(args.baseline) as f:
        baseline = json.load(f)["cases"]
    problems = compare(counted, baseline)
    launches = sum(len(ls) for case in counted.values() for ls in case["variants"].values())
    for problem in problems:
        print(f"counter_gate: {problem}", file=sys.stderr)
    print(f"counter_gate: {len(CASES)} cases, {launches} launches: "
          f"{'all within the baseline' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
