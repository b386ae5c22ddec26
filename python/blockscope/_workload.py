"""Workloads from configs: bs.load(...), then .run(), .check(), .profile() — the CLI's
commands in-process (python/commands.cpp), their JSON as Python objects."""

import json
import os
import tempfile

from . import _core
from ._errors import FileError
from ._profile import Profile, _pass_on, _read_json


def load(config=None, overrides=None):
    """A workload from a config: a path (str or os.PathLike), YAML text (a str holding a
    newline or a ``key:``), or None for the built-in default. `overrides` are config keys to
    set, validated like the file: ``{"model.d_model": 256, "paths.attention": "flash"}``, or
    ``--set`` items as a list (``["model.d_model=256"]``). ConfigError names the file, line and
    key of what does not validate."""
    if isinstance(overrides, (list, tuple)):
        sets = [str(item) for item in overrides]
    else:
        sets = [f"{key}={_yaml_value(value)}" for key, value in (overrides or {}).items()]
    path, text, source = "", "", ""
    if config is None:
        pass
    elif isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and ":" not in config.split("/")[-1]):
        path = os.fspath(config)
        if not os.path.exists(path):
            raise FileError(2, f"no config file {path!r}", path)
    elif isinstance(config, str):
        text, source = config, "<config text>"
    else:
        raise TypeError(f"config: expected a path, YAML text or None, not {type(config).__name__}")
    kind, keys = _core.load_config(path, text, source, sets)
    return Workload(path, text, source, sets, kind, keys)


def _yaml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)  # JSON is YAML
    return str(value)


class Workload:
    """A validated config (with its overrides). ``config`` holds every key as read, in file order."""

    def __init__(self, path, text, source, sets, kind, keys):
        self._path, self._text, self._source, self._sets = path, text, source, list(sets)
        self.kind = kind
        self.config = dict(keys)

    def _command(self, name, device=None, dtype=None, threads=0, save="", trace="", counters=False, predict="",
                 dump=""):
        """The command's exit code and its JSON; what it said on stderr passed on as warnings."""
        code, out, err = _core.workload_command(name, self._path, self._text, self._source, self._sets, device or "",
                                                dtype or "", threads, save, trace, counters, predict or "", dump)
        _pass_on(err, stacklevel=4)
        return code, _read_json(out, name)

    def run(self, device=None, dtype=None, threads=0, outputs=False, dump=None):
        """Times the forward (run: warm-up, then timed forwards per variant), as `blockscope run
        --format json`. With ``outputs=True`` also one forward's input, output and weights as
        NumPy arrays (``result["tensors"]``, Hugging Face names; bfloat16 as float32, exactly);
        with ``dump=PATH`` the same written to a .safetensors file (`--dump`), its metadata
        holding the config as blockscope read it."""
        if not outputs and not dump:
            return self._command("run", device, dtype, threads)[1]
        with tempfile.TemporaryDirectory(prefix="blockscope-run-") as folder:
            path = os.fspath(dump) if dump else os.path.join(folder, "dump.safetensors")
            result = self._command("run", device, dtype, threads, dump=path)[1]
            if outputs:
                result["tensors"] = read_safetensors(path)
            return result

    def check(self, device=None, dtype=None, threads=0):
        """Every path against the float64 reference (`blockscope check --format json`); the
        result's ``passed`` is False when a path is outside the accuracy rule."""
        code, result = self._command("check", device, dtype, threads)
        if isinstance(result, dict):
            result.setdefault("passed", code == 0)
        return result

    def profile(self, device=None, dtype=None, threads=0, trace=None, counters=False, predict=None):
        """Profiles every variant on the config's schedule (`blockscope profile --format json`)."""
        folder = tempfile.TemporaryDirectory(prefix="blockscope-profile-")
        _, summary = self._command("profile", device, dtype, threads, save=os.path.join(folder.name, "profile.json"),
                                   trace=os.fspath(trace) if trace else "", counters=counters, predict=predict)
        return Profile(summary, folder)

    def __repr__(self):
        source = self._path or self._source or "the built-in default"
        return f"<blockscope.Workload {self.kind} from {source}>"


# safetensors: 8 bytes of header length (little endian), the header (JSON: name -> dtype, shape,
# data_offsets), then the data. What `run --dump` writes.
_SAFETENSORS_TYPES = {"F32": "float32", "F16": "float16", "F64": "float64", "I32": "int32", "I64": "int64", "U8": "uint8"}


def read_safetensors(path):
    """Every tensor of a .safetensors file as a NumPy array (bfloat16 widened to float32, exactly)."""
    import numpy  # here, not at import: the package loads without NumPy (its stubs are made so)

    with open(path, "rb") as f:
        data = f.read()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        kind = entry["dtype"]
        if kind == "BF16":
            bits = numpy.frombuffer(body[start:end], dtype=numpy.uint16).astype(numpy.uint32) << 16
            array = bits.view(numpy.float32)
        elif kind in _SAFETENSORS_TYPES:
            array = numpy.frombuffer(body[start:end], dtype=numpy.dtype(_SAFETENSORS_TYPES[kind])).copy()
        else:
            raise ValueError(f"{path}: tensor {name!r} of type {kind}, which this reader does not take")
        tensors[name] = array.reshape(entry["shape"])
    return tensors
