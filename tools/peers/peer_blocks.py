"""Whole blocks and stacks for torch_peer.py: Hugging Face-style GPT2Block / LlamaDecoderLayer
modules (torch_reference.py) run on blockscope's own weights and input, which `blockscope run
--dump` writes for the config named in the block key; the module's output is checked against
blockscope's before it is timed."""

import os
import re
import shutil

from peer_setup import DTYPES, PINNED_THREADS, SOURCE_DIR, blockscope_dump, torch
from peer_workloads import Skip, device_name_of
import torch_reference


# ---- Whole blocks: Hugging Face-style modules with blockscope's weights --------------------------

def config_name(path, sets):
    """The name block_bench gives a config: its `name:` (or a --set name=...), else the file stem."""
    for item in reversed(sets):
        key, _, value = item.partition("=")
        if key.strip() == "name" and value.strip():
            return value.strip()
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return None
    name = None
    try:
        import yaml  # python3-yaml; the fallback below reads a plain top-level `name:` line
        document = yaml.safe_load(text)
        if isinstance(document, dict) and document.get("name") not in (None, ""):
            name = str(document["name"])
    except ImportError:
        found = re.search(r"""^name:[ \t]*["']?([^"'#\n]*?)["']?[ \t]*(#.*)?$""", text, re.MULTILINE)
        name = found.group(1) if found and found.group(1) else None
    except Exception:  # not YAML: not a config block_bench could have run
        return None
    return name or os.path.splitext(os.path.basename(path))[0]


class Configs:
    """The config files of --configs (directories: their *.yaml), found by the name in a block key."""

    def __init__(self, entries, sets):
        self.entries, self.sets, self.by_name = entries, sets, None

    def find(self, name):
        if self.by_name is None:
            self.by_name = {}
            for entry in self.entries:
                files = ([os.path.join(entry, f) for f in sorted(os.listdir(entry)) if f.endswith((".yaml", ".yml"))]
                         if os.path.isdir(entry) else [entry])
                for path in files:
                    found = config_name(path, self.sets)
                    if found is not None:
                        self.by_name.setdefault(found, []).append(path)
        files = self.by_name.get(name, [])
        if not files:
            raise Skip(f"no config named {name!r} in --configs {' '.join(self.entries)}")
        if len(files) > 1:
            raise Skip(f"config name {name!r} is ambiguous in --configs: {', '.join(files)}")
        return files[0]


def find_blockscope(args, blocks):
    """--blockscope, else `blockscope` beside the suite binary of a --from-json file (bin/ of its
    build), else build/default/bin/blockscope of this checkout, else PATH."""
    if args.blockscope:
        return args.blockscope
    candidates = []
    for info in blocks.values():
        exe = info.get("executable")
        if exe:
            here = os.path.dirname(os.path.abspath(exe))
            candidates += [os.path.join(here, "blockscope"), os.path.join(here, "..", "bin", "blockscope"),
                           os.path.join(here, "bin", "blockscope")]
    candidates.append(os.path.join(SOURCE_DIR, "build", "default", "bin", "blockscope"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return shutil.which("blockscope")


def write_dump(blockscope, config_file, kind, dtype_name, s, device, sets, dump_dir):
    """`blockscope run CONFIG --dump` at the benchmark's dtype and shape (the user's --set first,
    then B, S and one untimed-length run): the weights and input block_bench ran with."""
    if not blockscope:
        raise Skip("no blockscope binary found for the dump (pass --blockscope BIN)")
    stem = re.sub(r"[^A-Za-z0-9._=-]", "_", f"{s['config']}.{kind}.{dtype_name}.B{s['B']}.S{s['S']}")
    dump = os.path.join(dump_dir, stem + ".safetensors")
    items = list(sets) + [f"input.batch={s['B']}", f"input.seq_len={s['S']}", "run.warmup=0", "run.iters=1"]
    blockscope_dump(blockscope, config_file, items, dump, Skip, "torch_peer", device=device_name_of(device),
                    dtype=dtype_name)
    return dump


def build_block(kind, dtype_name, s, device, args, context, row):
    """Returns (impl description, step function) for a whole block or stack; raises Skip. The
    module's output is compared once with blockscope's (the dump's "output", the config's base
    paths) and row["check"] records it: a peer that computes something else has no time."""
    config_file = context["configs"].find(s["config"])
    dump = write_dump(context["blockscope"], config_file, kind, dtype_name, s, device, args.set, context["dump_dir"])
    try:
        tensors, _, metadata = torch_reference.read_safetensors(dump, float64=False)
        m = torch_reference.model_description(metadata)
        torch_reference.check_family(m)
        x = torch_reference.check_input(m, tensors)
    except (torch_reference.InputProblem, torch_reference.FamilyMismatch) as problem:
        raise Skip(f"{dump}: {problem}") from None
    want = {"workload": kind, "dtype": dtype_name, "batch": s["B"], "seq_len": s["S"]}
    wrong = [f"{k} {m[k]!r} (the benchmark ran {v!r})" for k, v in want.items() if m[k] != v]
    if wrong:
        raise Skip(f"the dump of {config_file} has {', '.join(wrong)}")
    dtype = DTYPES[dtype_name]
    try:
        model = torch_reference.HFBlocks(m, tensors, dtype, device)
    except torch_reference.InputProblem as problem:
        raise Skip(f"{dump}: {problem}") from None
    if model.unused:
        raise Skip(f"{dump}: tensors the PyTorch block does not use: {', '.join(model.unused)}")
    x = x.to(device=device, dtype=dtype)
    with torch.no_grad():
        errors = torch_reference.compare(model(x).cpu(), tensors["output"], tensors["input"])
    # Both sides err against float64 by up to the derived tolerance: their difference by twice it.
    tol = 2.0 * torch_reference.derived_tolerance(m)
    row["check"] = {"against": f"blockscope's output in the dump (paths {m.get('paths', '?')})",
                    "max_rel_error": errors["relative"], "delta_rel_error": errors["delta_relative"], "tol": tol}
    if not errors["relative"] <= tol:  # also NaN
        raise Skip(f"the PyTorch block's output differs from blockscope's: max relative error "
                   f"{errors['relative']:.3e} > {tol:g}")
    if m["family"] == "gpt2":
        module = "GPT2Block"
    elif m["family"] == "llama":
        module = "LlamaDecoderLayer"
    else:
        module = (f"custom block on the LlamaDecoderLayer code ({m['norm']}, {m['activation']}, "
                  f"{'gated' if m['gated'] else 'plain'} MLP, {'bias' if m['bias'] else 'no bias'}, "
                  f"{'RoPE' if m['rope'] else 'no RoPE'}, {'causal' if m['causal'] else 'bidirectional'})")
    layers = f" x {m['n_layers']}" if kind == "stack" else ""
    impl = (f"HF-style {module}{layers}, eager, torch {torch.__version__.split('+')[0]}, {str(dtype).split('.')[-1]}; "
            f"blockscope's weights and input ({os.path.relpath(config_file, SOURCE_DIR)})")
    return impl, lambda: model(x)
