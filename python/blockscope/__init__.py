"""blockscope in Python: transformer workloads from YAML configs, run, checked and profiled by
the same C++ core as the ``blockscope`` command, and the ops on your own arrays.

    import blockscope as bs
    w = bs.load("configs/series/04_attention.yaml", overrides={"model.seq_len": 128})
    p = w.profile()            # every variant; p.ops, p.kernels, p.verdict, p.variants
    p                          # in Jupyter: the HTML report inline
    y = bs.ops.attention(q, k, v, path="flash", causal=True)   # NumPy or torch CPU arrays

docs/PYTHON.md has the whole API."""

import json as _json

from . import _core, ops
from ._errors import BlockscopeWarning, ConfigError, DeviceError, Error, FileError, InputError, RuntimeFailure
from ._profile import Profile, Variant, diff, profile, report
from ._workload import Workload, load, read_safetensors

__version__ = "0.1.0"

__all__ = ["load", "Workload", "Profile", "Variant", "profile", "diff", "report", "info", "set_threads", "ops",
           "read_safetensors", "Error", "ConfigError", "InputError", "DeviceError", "FileError", "RuntimeFailure",
           "BlockscopeWarning"]


def info():
    """The build, devices, peaks and path table (`blockscope info --format json`) as a dict."""
    return _json.loads(_core.info())


def set_threads(threads):
    """CPU threads for every pool blockscope uses (0: its default: OMP_NUM_THREADS, else the
    physical cores less one). Workload methods take ``threads=`` per call as well."""
    _core.set_threads(threads)
