#!/usr/bin/env python3
"""Which OpenBLAS kernel set makes PyTorch's f32 GEMM fastest on this CPU.

    /usr/bin/python3 tools/peers/openblas_coretypes.py [--coretypes auto,Haswell,SkylakeX,...]

Debian's OpenBLAS picks its kernels by CPU detection, which can choose a set several times
slower than the CPU allows; OPENBLAS_CORETYPE overrides it, but only when set before the library
loads. So each coretype runs in its own process: one torch.addmm of GPT-2 small's c_fc shape
(256x768 -> 3072, f32) on one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
torch.set_num_threads all 1: PyTorch's f32 GEMM runs on OpenBLAS's own pool, which
set_num_threads does not reach), best of 20 after 3 warm-ups. Prints GFLOP/s per coretype and
the fastest: the OPENBLAS_CORETYPE to give tools/peers/cpu_side_by_side.sh.
"""

import argparse
import os
import subprocess
import sys

TIMING = """
import time, torch
torch.set_num_threads(1)
x, w, b = torch.randn(256, 768), torch.randn(3072, 768), torch.randn(3072)
for _ in range(3):
    torch.addmm(b, x, w.t())
best = float("inf")
for _ in range(20):
    start = time.perf_counter()
    torch.addmm(b, x, w.t())
    best = min(best, time.perf_counter() - start)
print(2 * 256 * 768 * 3072 / best / 1e9)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coretypes", default="auto,Haswell,SkylakeX,Cooperlake,SapphireRapids,Zen",
                        help="comma-separated OPENBLAS_CORETYPE values; 'auto' leaves it unset")
    args = parser.parse_args()
    rates = {}
    for coretype in args.coretypes.split(","):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env.pop("OPENBLAS_CORETYPE", None)
        if coretype != "auto":
            env["OPENBLAS_CORETYPE"] = coretype
        done = subprocess.run([sys.executable, "-c", TIMING], env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            print(f"{coretype:16s} failed: {done.stderr.strip()[-200:]}")
            continue
        rates[coretype] = float(done.stdout.strip().splitlines()[-1])
        print(f"{coretype:16s} {rates[coretype]:7.1f} GFLOP/s")
    if not rates:
        return 1
    print(f"fastest: {max(rates, key=rates.get)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
