#!/usr/bin/env python3
"""tp_bench's smoke run (ctest tp_bench_smoke): the suite on one rank, then on 2 CPU ranks under
mpirun, each --smoke with JSON out. Fails unless every expected row is there once, with its
counters: all_reduce rows (f32, bf16) whose bus bandwidth is the algorithm bandwidth times
2(R - 1)/R (0 on one rank), block rows at tp=R for tiny-gpt2 and tiny-llama, each with FLOPs.
Times are not gated.

Where `BLOCKSCOPE info` says a GPU is usable, every row is expected on cuda:0 too, over NCCL on 2
ranks where NCCL is built.

Usage: tp_bench_smoke.py TP_BENCH MPIEXEC WORK_DIR BLOCKSCOPE
"""
import json
import os
import shutil
import subprocess
import sys


def run(cmd, out_path, env):
    result = subprocess.run(cmd + ["--smoke", "--benchmark_format=json", f"--benchmark_out={out_path}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=500)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {result.returncode}:\n{result.stdout[-3000:]}")
    with open(out_path) as f:
        return [b for b in json.load(f)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]


def check(rows, ranks, devices, nccl):
    problems = []
    names = [r["name"].split("/iterations:")[0] for r in rows]  # fixed iterations add /iterations:N/real_time
    expected = []
    for device in devices:
        for dtype in ("f32", "bf16"):
            expected.append(f"all_reduce/sum/{dtype}/elements={2 * 17 * 64},ranks={ranks}/{device}")
            for config in ("tiny-gpt2", "tiny-llama"):
                expected.append(f"block/tp={ranks}/{dtype}/{config}/{device}")
    if len(names) != len(expected):
        problems.append(f"{len(names)} rows, expected {len(expected)}: {sorted(set(names) - set(expected))} unexpected")
    for name in expected:
        count = names.count(name)
        if count != 1:
            problems.append(f"{name}: {count} rows (expected 1)")
    for row in rows:
        if ranks > 1 and "/cuda:" in row["name"] and nccl and "NCCL" not in row.get("label", ""):
            problems.append(f"{row['name']}: not over NCCL in a build with NCCL (label {row.get('label')!r})")
        if row["name"].startswith("all_reduce/"):
            alg, bus = row.get("alg_GBps"), row.get("bus_GBps")
            if alg is None or bus is None or alg <= 0:
                problems.append(f"{row['name']}: alg_GBps {alg}, bus_GBps {bus}")
            elif abs(bus - alg * 2 * (ranks - 1) / ranks) > 1e-9 * max(1.0, alg):
                problems.append(f"{row['name']}: bus_GBps {bus} is not alg_GBps {alg} x 2(R-1)/R")
        elif row["name"].startswith("block/"):
            if not row.get("FLOPs", 0) > 0:
                problems.append(f"{row['name']}: FLOPs counter {row.get('FLOPs')}")
    return problems


def main():
    tp_bench, mpiexec, work = sys.argv[1:4]
    info = json.loads(subprocess.run([sys.argv[4], "info", "--format", "json"], stdout=subprocess.PIPE, text=True,
                                     check=True).stdout)
    devices = ["cpu", "cuda:0"] if info.get("cuda_available") else ["cpu"]
    nccl = bool(info.get("nccl_built"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    problems = []
    one = run([tp_bench], os.path.join(work, "tp1.json"), env)
    problems += [f"1 rank: {p}" for p in check(one, 1, devices, nccl)]
    two = run([mpiexec, "-np", "2", tp_bench], os.path.join(work, "tp2.json"), env)
    problems += [f"2 ranks: {p}" for p in check(two, 2, devices, nccl)]
    stray = [f for f in os.listdir(work) if f not in ("tp1.json", "tp2.json")]
    if stray:
        problems.append(f"files other ranks should not have written: {stray}")
    for p in problems:
        print("FAIL:", p)
    print(f"tp_bench_smoke: {len(one)} rows on 1 rank, {len(two)} on 2; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
