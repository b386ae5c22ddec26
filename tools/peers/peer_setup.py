"""Set-up every torch_peer module shares (tools/peers/torch_peer.py is the entry point): the thread
count pinned in every pool before PyTorch loads, then torch itself, the dtypes, and where the
repository's shared code is (tools/ci/bench_gate.py's keys and formulas, side_by_side.py's block
keys, torch_reference.py's Hugging Face-style blocks). Importing it pins the pools: it must be
imported before anything imports torch."""

import argparse
import json
import os
import subprocess
import sys


def thread_count_to_pin(argv):
    """--threads N, else blockscope's cpu_threads from the --from-json files, else 1."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--threads", type=int, default=0)
    early.add_argument("--from-json", nargs="+", default=[])
    known, _ = early.parse_known_args(argv)
    if known.threads > 0:
        return known.threads
    counts = set()
    for path in known.from_json:
        try:
            with open(path) as handle:
                counts.add(int(json.load(handle).get("context", {}).get("cpu_threads", 0)))
        except (OSError, ValueError, TypeError):
            pass  # the full parse reports unreadable files
    counts.discard(0)
    if len(counts) > 1:
        sys.exit(f"torch_peer: the --from-json files ran with different thread counts {sorted(counts)}; "
                 "run them separately or pass --threads")
    return counts.pop() if counts else 1


# Before torch is imported: OpenMP and OpenBLAS read these once, when they load.
PINNED_THREADS = thread_count_to_pin(sys.argv[1:])
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(PINNED_THREADS)

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:  # pragma: no cover - depends on the machine
    sys.exit(f"torch_peer: PyTorch is not importable from {sys.executable} ({error}); "
             "on Debian run it with /usr/bin/python3 (python3-torch)")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Workload keys and the FLOP/byte formulas are shared with the CI gate (tools/ci/), block keys
# with side_by_side.py, the Hugging Face-style blocks with torch_reference.py (this directory).
PEERS_DIR = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(PEERS_DIR))
sys.path.insert(0, PEERS_DIR)
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "ci"))


def torch_version():
    parts = []
    for piece in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def blockscope_package(blockscope):
    """The Python package built beside the program `blockscope` (BUILD/bin/blockscope ->
    BUILD/python/blockscope, docs/PYTHON.md), imported; None where there is none or it does not
    load in this Python (another version: the program serves then)."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(blockscope))), "python")
    if not os.path.isdir(os.path.join(folder, "blockscope")):
        return None
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        import blockscope as package
    except ImportError:
        return None
    return package


def blockscope_dump(blockscope, config, sets, dump, error, label, device="cpu", dtype=None):
    """`blockscope run CONFIG --dump DUMP` at PINNED_THREADS with `sets` (--set items): through
    the Python package built beside the program (no process: `Workload.run(dump=...)`), else the
    program itself. Returns run's JSON document; raises `error` (the caller's exception class: a
    skipped row, a refused peer) with blockscope's message when it fails."""
    package = blockscope_package(blockscope)
    if package is not None:
        print(f"{label}: blockscope.load({config!r}, {list(sets)!r}).run(device={device!r}, dtype={dtype!r}, "
              f"dump={dump!r})", file=sys.stderr)
        try:
            return package.load(config, overrides=list(sets)).run(device=device, dtype=dtype, threads=PINNED_THREADS,
                                                                 dump=dump)
        except package.Error as problem:
            raise error(f"blockscope run --dump failed: {str(problem)[:300]}") from None
    command = [blockscope, "run", config, "--device", device, "--threads", str(PINNED_THREADS), "--format", "json",
               "--dump", dump]
    if dtype:
        command += ["--dtype", dtype]
    for item in sets:
        command += ["--set", item]
    print(f"{label}: " + " ".join(command), file=sys.stderr)
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as problem:
        raise error(f"cannot run {command[0]}: {problem.strerror}") from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
        raise error(f"blockscope run --dump failed (exit {run.returncode}): {last[:300]}")
    return json.loads(run.stdout)


def write_json(document, path):
    """A peer's JSON document to `path`, or to stdout when there is none."""
    text = json.dumps(document, indent=2)
    if path:
        with open(path, "w") as handle:
            handle.write(text + "\n")
    else:
        print(text)
