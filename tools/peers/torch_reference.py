#!/usr/bin/env python3
"""Check a blockscope dump against PyTorch, outside blockscope.

    blockscope run configs/blocks/tiny-gpt2.yaml --dtype f32 --dump out.safetensors
    /usr/bin/python3 tools/peers/torch_reference.py out.safetensors [--tol 1e-5]

The dump holds "input" [batch, seq_len, d_model], "output" (blockscope's result), every weight
under its Hugging Face name, and __metadata__["blockscope"]: a JSON string describing the model
(workload, family, d_model, n_heads, n_kv_heads, head_dim, d_ff, n_layers, norm_eps,
rope_theta, norm, activation, gated, bias, rope, causal, dtype, batch, seq_len).

This script recomputes the block (or stack of blocks) in float64 from the dumped input and
weights, exactly as stored, with PyTorch as Hugging Face's GPT2Block / LlamaDecoderLayer do,
then prints two errors, each relative to its reference's largest value: of blockscope's output,
and of its change, output - input (the sublayers' sum, which the residual stream would hide
in the first). Both must be within their tolerance: the dtype's, and for the change that plus
what rounding the output after each residual add can cost it (delta_tolerance).

For gpt2 and llama the knobs Hugging Face fixes (norm, activation, gated MLP, biases, RoPE,
causal) are this script's own (HF_FAMILIES), not the dump's: metadata that disagrees fails.

Exit status: 0 within --tol, 1 above it (or non-finite, or a family knob that is not Hugging
Face's), 2 bad input (unreadable dump, unsupported workload, weights that do not match the
metadata).

Works with PyTorch 1.13 and 2.x: the file is read with struct + json (no safetensors package),
attention is written with matmul + softmax (no scaled_dot_product_attention).

The blocks are nn.Modules written after Hugging Face's (GPT2Block, LlamaDecoderLayer, HFBlocks
in hf_modules.py, beside this file, re-exported here); tools/peers/torch_peer.py imports them and
times them in the benchmark's dtype, from a dump of the same config, as the PyTorch peer of
blockscope's block benchmarks.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

# The modules live beside this file (hf_modules.py); its directory is on sys.path when it runs as a
# script, not when a test loads it by path (test/fixtures/safetensors/check_torch_reference.py).
_PEERS_DIR = os.path.dirname(os.path.abspath(__file__))
if _PEERS_DIR not in sys.path:
    sys.path.insert(0, _PEERS_DIR)
# Re-exported: the peers (torch_peer.py through peer_blocks.py, torch_decode_peer.py) use these
# as torch_reference.X.
from hf_modules import (  # noqa: E402,F401
    Conv1D, GPT2Block, HFBlocks, InputProblem, LayerNorm, Linear, LlamaDecoderLayer, RMSNorm, Weights, activation,
    gelu_new, parameter, repeat_kv, rope_cos_sin, rotate_half, upcast)

# The tolerance of a dump, derived from the block's arithmetic as docs/TESTING.md explains (and
# as blockscope's own bounds are; written here again, not imported): every rounding error one
# output element depends on is at most u of the value it rounds and of random sign, so n of them
# add like sqrt(n) u (probabilistic rounding error analysis, Higham & Mary 2019). They are the
# terms of every f32 sum on its path (sum depths: the norms' d_model, q/k/v's d_model, the
# scores' head_dim, the softmax and P.V over the keys, the projections' d_model and d_ff) and
# f32 evaluations (exp, erf/tanh, cos/sin: 4 ulps, 16 roundings), in units of u32 = 2^-24, and
# every value stored in the dump dtype on the way (u of that dtype); an attention score's
# rounding reaches its probability multiplied by the score (up to ~6 at unit-scale q and k: 36
# roundings). Bound: ERROR_MARGIN * sqrt(u32^2 * f32 terms + u^2 * stored values), relative to
# the largest output. Measured on configs/blocks/tiny-*.yaml (weights.init=scaled): f32 at most
# 3.7e-7 (tolerance 2.5e-6), bf16 5.3e-3 (3.8e-2).
ERROR_MARGIN = 2.0
EVALUATION_ROUNDINGS = 16
SCORE_GAIN_ROUNDINGS = 36
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def rounding_count(m):
    """(f32 terms, stored values) one output element of the dumped block or stack depends on."""
    d, keys = m["d_model"], m["seq_len"]
    norm_terms = (2 if m["norm"] == "layernorm" else 1) * d  # mean and variance, or the mean square
    biases = 1 if m["bias"] else 0
    steps = [
        (norm_terms, 1),                                  # input norm
        (3 * d, 3 + 3 * biases),                          # q, k, v
        (2 * EVALUATION_ROUNDINGS, 2) if m["rope"] else (0, 0),
        (m["head_dim"] * (1 + SCORE_GAIN_ROUNDINGS), 1 + SCORE_GAIN_ROUNDINGS),  # scores, through exp
        (keys + EVALUATION_ROUNDINGS, 1),                 # softmax
        (keys, 1),                                        # P.V
        (m["n_heads"] * m["head_dim"], 1 + biases),       # output projection
        (0, 1),                                           # residual add
        (norm_terms, 1),                                  # post-attention norm
        (d, 1 + biases),                                  # fc / gate
        (d, 2) if m["gated"] else (0, 0),                 # up, and the product
        (EVALUATION_ROUNDINGS, 1),                        # activation
        (m["d_ff"], 1 + biases),                          # proj / down
        (0, 1),                                           # residual add
    ]
    layers = max(1, m["n_layers"])
    return sum(t for t, _ in steps) * layers, sum(v for _, v in steps) * layers


def derived_tolerance(m):
    """The dump's tolerance: max relative error of its output (see ERROR_MARGIN above)."""
    terms, stored = rounding_count(m)
    u = UNIT_ROUNDOFF.get(m["dtype"], 2.0 ** -24)
    return ERROR_MARGIN * math.sqrt(UNIT_ROUNDOFF["f32"] ** 2 * terms + u * u * stored)


# The change a block makes, output - input, is read off an output rounded to the dump dtype after
# each residual add: each rounding may move it by half a unit in the last place of |output|, u
# times max|output| (u = 2^-24 f32, 2^-11 f16, 2^-8 bf16: unit roundoff). Relative to
# max|output - input| that is u * max|output| / max|output - input| per add — large when the
# sublayers add little to a large residual stream (the default init: |output| ~ 36x the change),
# whatever the CPU. Its tolerance is the dtype's plus that term, for every residual add (two per
# layer), with a margin of 2 (docs/TESTING.md).
RESIDUAL_ROUNDING_MARGIN = 2.0


def delta_tolerance(tol, dtype, n_layers, scale, delta_scale):
    """The tolerance of output - input: `tol` plus the residual adds' rounding of the output,
    relative to the change's scale (see UNIT_ROUNDOFF above)."""
    if delta_scale <= 0:
        return tol
    adds = 2 * max(1, n_layers)
    return tol + RESIDUAL_ROUNDING_MARGIN * adds * UNIT_ROUNDOFF.get(dtype, 2.0 ** -24) * scale / delta_scale

# safetensors dtype -> (element size, decoder to float64)
ELEMENT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}

# InputProblem (the dump cannot be checked, exit status 2) comes from hf_modules.py, whose modules
# raise it too.


class FamilyMismatch(Exception):
    """The dump's metadata disagrees with the Hugging Face family it names (exit status 1)."""


# What GPT2Block and LlamaDecoderLayer fix, written here from the Hugging Face modules, not read
# from the dump (blockscope's reference/families.h says the same, independently).
HF_FAMILIES = {
    "gpt2": {"norm": "layernorm", "activation": "gelu_tanh", "gated": False, "bias": True, "rope": False,
             "causal": True},
    "llama": {"norm": "rmsnorm", "activation": "silu", "gated": True, "bias": False, "rope": True, "causal": True},
}


def check_family(m):
    """Raises FamilyMismatch naming every knob of a gpt2 or llama dump that is not Hugging Face's."""
    fixed = HF_FAMILIES.get(m["family"])
    if fixed is None:
        return
    wrong = [f"{key}: the dump has {m[key]!r}, Hugging Face {m['family']} has {want!r}"
             for key, want in fixed.items() if m[key] != want]
    if m["family"] == "gpt2" and m["n_kv_heads"] != m["n_heads"]:
        wrong.append(f"n_kv_heads: the dump has {m['n_kv_heads']}, Hugging Face gpt2 has n_heads = {m['n_heads']}")
    if wrong:
        raise FamilyMismatch("; ".join(wrong))


# ---- Reading the dump ---------------------------------------------------------------------

NATIVE_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def decode(dtype, shape, raw, float64=True):
    """Raw little-endian bytes -> tensor of `shape`: float64, or (float64=False) the stored dtype
    (bf16 stays bf16: the widening below is exact both ways)."""
    data = bytearray(raw)  # writable copy: torch.frombuffer warns on read-only buffers
    count = math.prod(shape)
    if count == 0:
        return torch.zeros(shape, dtype=torch.float64 if float64 else NATIVE_DTYPE.get(dtype, torch.float64))
    if dtype == "F32":
        values = torch.frombuffer(data, dtype=torch.float32)
    elif dtype == "F64":
        values = torch.frombuffer(data, dtype=torch.float64)
    elif dtype == "F16":
        values = torch.frombuffer(data, dtype=torch.float16)
    elif dtype == "BF16":
        # bf16 is the top half of a float32: widen the 16 bits and shift them into place.
        bits = torch.frombuffer(data, dtype=torch.int16).to(torch.int32) & 0xFFFF
        values = (bits << 16).view(torch.float32)
    else:
        raise InputProblem(f"unsupported dtype {dtype}")
    return values.to(torch.float64 if float64 else NATIVE_DTYPE[dtype]).reshape(shape).clone()


def read_safetensors(path, float64=True):
    """Returns ({name: tensor}, {name: dtype string}, metadata dict); tensors in float64, or with
    float64=False in their stored dtype (tools/peers/torch_peer.py)."""
    if sys.byteorder != "little":
        raise InputProblem("this reader assumes a little-endian machine")
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as error:
        raise InputProblem(f"cannot read {path}: {error.strerror}") from None
    if len(blob) < 8:
        raise InputProblem(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise InputProblem(f"{path}: header length {header_len} goes past the end of the file")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputProblem(f"{path}: header is not valid JSON: {error}") from None
    if not isinstance(header, dict):
        raise InputProblem(f"{path}: header is not a JSON object")
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", None) or {}
    tensors, dtypes = {}, {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputProblem(f"{path}: tensor '{name}' has a malformed entry {info!r}") from None
        if dtype not in ELEMENT_SIZE:
            raise InputProblem(f"{path}: tensor '{name}' has unsupported dtype {dtype}")
        if not 0 <= begin <= end <= len(data) or end - begin != math.prod(shape) * ELEMENT_SIZE[dtype]:
            raise InputProblem(f"{path}: tensor '{name}' has bad data_offsets [{begin}, {end}] for {dtype}{shape}")
        tensors[name] = decode(dtype, shape, data[begin:end], float64)
        dtypes[name] = dtype
    return tensors, dtypes, metadata


REQUIRED_KEYS = ["workload", "family", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "n_layers",
                 "norm_eps", "rope_theta", "norm", "activation", "gated", "bias", "rope", "causal", "dtype",
                 "batch", "seq_len"]


def model_description(metadata):
    if "blockscope" not in metadata:
        raise InputProblem("the dump has no __metadata__ key 'blockscope' (was it written by blockscope --dump?)")
    try:
        m = json.loads(metadata["blockscope"])
    except json.JSONDecodeError as error:
        raise InputProblem(f"__metadata__['blockscope'] is not JSON: {error}") from None
    missing = [key for key in REQUIRED_KEYS if key not in m]
    if missing:
        raise InputProblem(f"__metadata__['blockscope'] lacks {', '.join(missing)}")
    if m["workload"] not in ("block", "stack"):
        raise InputProblem(f"workload '{m['workload']}' is not checked by this script (only block and stack)")
    if m["family"] not in ("gpt2", "llama", "custom"):
        raise InputProblem(f"unknown family '{m['family']}'")
    if m["n_kv_heads"] <= 0 or m["n_heads"] % m["n_kv_heads"] != 0:
        raise InputProblem(f"n_kv_heads {m['n_kv_heads']} does not divide n_heads {m['n_heads']}")
    return m


def check_input(m, tensors):
    """The dump's input, checked against the metadata's shape."""
    x = tensors.get("input")
    if x is None or "output" not in tensors:
        raise InputProblem("the dump needs tensors 'input' and 'output'")
    expected = [m["batch"], m["seq_len"], m["d_model"]]
    if list(x.shape) != expected:
        raise InputProblem(f"input has shape {list(x.shape)}, the metadata implies {expected}")
    return x


def reference_output(m, tensors):
    x = check_input(m, tensors)
    model = HFBlocks(m, tensors, torch.float64)
    if model.unused:
        raise InputProblem(f"the dump has tensors this reference does not use: {', '.join(model.unused)}")
    with torch.no_grad():
        return model(x.to(torch.float64))


def compare(output, reference, block_input):
    """(relative error of output, relative error of output - input, worst index) against
    `reference`, each over its reference's largest value; NaN when output is not finite."""
    output, reference, block_input = (t.to(torch.float64) for t in (output, reference, block_input))
    scale = reference.abs().max().item() if reference.numel() else 0.0
    difference = (output - reference).abs()
    finite = bool(torch.isfinite(output).all())
    max_abs = difference.max().item() if output.numel() else 0.0
    relative = max_abs / scale if scale > 0 else max_abs
    worst = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0]) if output.numel() and finite else ()
    # The change the block makes: the same difference, over the scale of reference - input.
    delta_scale = (reference - block_input).abs().max().item() if reference.numel() else 0.0
    delta_relative = max_abs / delta_scale if delta_scale > 0 else max_abs
    if not finite:
        relative = delta_relative = float("nan")
    return {"relative": relative, "delta_relative": delta_relative, "max_abs": max_abs, "scale": scale,
            "delta_scale": delta_scale, "worst": list(worst)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", help="a safetensors file written by blockscope --dump")
    parser.add_argument("--tol", type=float, default=None,
                        help="max relative error allowed (default: derived from the dump's shapes and "
                             "dtype, docs/TESTING.md)")
    args = parser.parse_args(argv)

    try:
        tensors, dtypes, metadata = read_safetensors(args.dump)
        m = model_description(metadata)
        check_family(m)
        reference = reference_output(m, tensors)
    except InputProblem as problem:
        print(f"torch_reference: {args.dump}: {problem}", file=sys.stderr)
        return 2
    except FamilyMismatch as mismatch:
        print(f"FAIL: {args.dump}: {mismatch}")
        return 1

    output = tensors["output"]
    if output.shape != reference.shape:
        print(f"torch_reference: output has shape {list(output.shape)}, the reference {list(reference.shape)}",
              file=sys.stderr)
        return 1
    dtype = m["dtype"]
    tol = args.tol if args.tol is not None else derived_tolerance(m)

    errors = compare(output, reference, tensors["input"])
    relative, delta_relative = errors["relative"], errors["delta_relative"]
    max_abs, scale, delta_scale, worst = errors["max_abs"], errors["scale"], errors["delta_scale"], errors["worst"]

    print(f"torch {torch.__version__}: {m['family']} {m['workload']} x{m['n_layers']}, {dtype}, "
          f"batch {m['batch']}, seq {m['seq_len']}, d_model {m['d_model']}, heads {m['n_heads']}/{m['n_kv_heads']}")
    print(f"max relative error {relative:.3e} (max abs {max_abs:.3e}, max |ref| {scale:.3e}, worst at {list(worst)}); "
          f"tolerance {tol:.1e}")
    delta_tol = tol if args.tol is not None else delta_tolerance(tol, dtype, m["n_layers"], scale, delta_scale)
    print(f"max relative error of output - input {delta_relative:.3e} (max |ref - input| {delta_scale:.3e}); "
          f"tolerance {delta_tol:.1e} (the dtype's plus the residual adds' rounding of |output|)")
    if not (relative <= tol):  # also catches NaN
        print("FAIL: blockscope's output differs from the PyTorch float64 reference beyond the tolerance")
        return 1
    if not (delta_relative <= delta_tol):
        print("FAIL: blockscope's change to its input (output - input) differs from the reference's beyond the "
              "tolerance")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
