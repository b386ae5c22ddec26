"""What a call of bs.ops costs from Python, beside torch on the same tensors (docs/PYTHON.md).

    OMP_NUM_THREADS=1 PYTHONPATH=build/default/python .venv/bin/python bench/python_overhead.py

For a 1 x 8 float32 softmax (the op itself is well under a microsecond) it times, per call, the
median of 7 rounds of 2000 calls: bs.ops.softmax returning a new array, the same into out= (no
allocation), torch.softmax and torch.softmax(out=) on the same data through torch.from_numpy,
and the op's own time inside blockscope as its profiler records it (self CPU of the softmax
row): the difference is the Python binding (argument parsing, borrowing the arrays over DLPack,
the error guard with its signal scope, the result's array). One thread each side; the machine,
the libraries and the versions are printed first."""
import json
import platform
import statistics
import subprocess
import time

import numpy as np

import blockscope as bs

CALLS, ROUNDS = 2000, 7


def per_call_us(fn):
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        rounds.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(rounds)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    bs.set_threads(1)
    x = np.random.default_rng(0).standard_normal((1, 8), dtype=np.float32)
    out = np.empty_like(x)
    rows = {"bs.ops.softmax(x)": per_call_us(lambda: bs.ops.softmax(x)),
            "bs.ops.softmax(x, out=out)": per_call_us(lambda: bs.ops.softmax(x, out=out))}
    with bs.profile() as p:
        for _ in range(CALLS):
            bs.ops.softmax(x, out=out)
    row = next(r for r in p.ops if r["name"] == "softmax")
    rows["blockscope's softmax op itself (profiler, self CPU)"] = row["self_cpu_us"] / row["calls"]
    versions = {"blockscope": bs.__version__, "numpy": np.__version__}
    try:
        import torch
        torch.set_num_threads(1)
        tx, tout = torch.from_numpy(x), torch.from_numpy(out)
        rows["torch.softmax(x, -1)"] = per_call_us(lambda: torch.softmax(tx, -1))
        rows["torch.softmax(x, -1, out=out)"] = per_call_us(lambda: torch._softmax(tx, -1, False, out=tout))
        versions["torch"] = torch.__version__
    except ImportError:
        pass
    info = bs.info()
    print(json.dumps({"cpu": cpu_model(), "python": platform.python_version(), "versions": versions,
                      "blockscope_build": info.get("build"), "threads": 1, "calls": CALLS, "rounds": ROUNDS}, indent=1))
    print(f"{'call (1 x 8 float32)':55s} {'us per call':>12s}")
    for name, us in rows.items():
        print(f"{name:55s} {us:12.2f}")
    binding = rows["bs.ops.softmax(x, out=out)"] - rows["blockscope's softmax op itself (profiler, self CPU)"]
    print(f"{'the binding (out= call less the op itself)':55s} {binding:12.2f}")


if __name__ == "__main__":
    main()
