"""Profiles in Python: the tables `blockscope profile --format json` prints, and the saved
profiles (`--save`) behind them, which diff, report and save use."""

import json
import os
import shutil
import tempfile
import warnings

from . import _core
from ._errors import BlockscopeWarning, FileError

# Lines of standard error that only say where the core wrote its temporary files.
_QUIET_PREFIXES = ("saved profile ", "wrote trace ", "wrote report ", "wrote ")


def _pass_on(stderr, stacklevel=3):
    """Turns what a command said on standard error into Python warnings (notes, warnings,
    skipped variants), leaving out the lines about its own temporary files. `stacklevel`: the
    user's frame, counted from here."""
    for line in stderr.splitlines():
        if line.strip() and not line.startswith(_QUIET_PREFIXES):
            warnings.warn(line, BlockscopeWarning, stacklevel=stacklevel)


def _read_json(text, what):
    try:
        return json.loads(text)
    except ValueError as error:  # the core printed something that is not JSON: a bug, said plainly
        raise RuntimeError(f"blockscope: {what} printed no JSON ({error}): {text[:200]!r}") from None


class Variant:
    """One variant of a profile: its label, op and kernel tables (lists of dicts, the columns
    of the CLI's JSON), its verdict and step times."""

    def __init__(self, summary, saved_path):
        self.label = summary["label"]
        self.ops = summary["ops"]["rows"]
        self.kernels = summary["kernels"]["rows"]
        self.verdict = summary["ops"].get("verdict")
        self.step_time_us = summary["ops"].get("step_time_us")
        self.summary = summary
        self.saved_path = saved_path

    def __repr__(self):
        return f"<blockscope.Variant {self.label!r}: {len(self.ops)} ops, {len(self.kernels)} kernels>"


class Profile:
    """What `blockscope profile` measured: every variant (the base first), the diffs of each to
    the base, and the saved profiles behind them (kept in a temporary folder while this lives).

    ``ops``, ``kernels`` and ``verdict`` are the base variant's; ``variants`` has them all."""

    def __init__(self, summary, folder):
        self._folder = folder  # a TemporaryDirectory: the saved profiles live as long as this does
        self.summary = summary
        saved = {}
        for name in sorted(os.listdir(folder.name)):
            if name.endswith(".json"):
                path = os.path.join(folder.name, name)
                with open(path, encoding="utf-8") as f:
                    saved[json.load(f)["label"]] = path
        self.variants = [Variant(v, saved.get(v["label"])) for v in summary["variants"]]
        self.diffs = summary.get("diffs", [])

    @property
    def ops(self):
        return self.variants[0].ops

    @property
    def kernels(self):
        return self.variants[0].kernels

    @property
    def verdict(self):
        return self.variants[0].verdict

    def variant(self, label):
        """The variant of that label (as the tables show it: "attention=naive")."""
        for v in self.variants:
            if v.label == label:
                return v
        raise KeyError(f"no variant {label!r}; the variants are {[v.label for v in self.variants]}")

    def save(self, path):
        """Writes the base variant's saved profile to `path` and every other variant's to
        PATH.<label>.json, as `--save` does; returns the paths written."""
        written = []
        path = os.fspath(path)
        for i, v in enumerate(self.variants):
            target = path if i == 0 else _core.variant_path(path, v.label)
            try:
                shutil.copyfile(v.saved_path, target)
            except OSError as error:
                raise FileError(error.errno, f"cannot save the profile of {v.label!r}: {error.strerror}", target) from None
            written.append(target)
        return written

    def to_html(self, title=""):
        """The HTML report of every variant (`blockscope report`): one self-contained page."""
        with tempfile.TemporaryDirectory(prefix="blockscope-report-") as folder:
            output = os.path.join(folder, "report.html")
            _code, _out, err = _core.report([v.saved_path for v in self.variants], output, title, False)
            _pass_on(err)
            with open(output, encoding="utf-8") as f:
                return f.read()

    def _repr_html_(self):  # Jupyter shows the report inline
        return self.to_html()

    def diff(self, other):
        """What changed from this profile's base variant to `other`'s (a Profile or a saved
        profile's path): the JSON `blockscope diff --format json` prints, as a dict."""
        return diff(self, other)

    def to_pandas(self, table="ops"):
        """The op or kernel table of every variant as one pandas DataFrame (a `variant` column
        first). Needs pandas."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Profile.to_pandas needs pandas (pip install pandas); .ops and .kernels are lists of dicts") from None
        if table not in ("ops", "kernels"):
            raise ValueError(f"table={table!r}: expected 'ops' or 'kernels'")
        rows = [{"variant": v.label, **row} for v in self.variants for row in getattr(v, table)]
        return pandas.DataFrame(rows)

    def __repr__(self):
        labels = ", ".join(v.label for v in self.variants)
        return f"<blockscope.Profile of {self.summary.get('workload', 'ops')}: {labels}>"


def diff(before, after):
    """`blockscope diff BEFORE AFTER --format json` on two saved profiles (paths or Profiles)."""
    paths = [p.variants[0].saved_path if isinstance(p, Profile) else os.fspath(p) for p in (before, after)]
    _code, out, err = _core.diff(paths[0], paths[1])
    _pass_on(err)
    return _read_json(out, "diff")


def report(inputs, output, title="", force=False):
    """`blockscope report INPUTS... -o OUTPUT`: one HTML report of saved profiles (paths or
    Profiles, each profile's variants in order)."""
    paths = []
    for item in inputs:
        paths += [v.saved_path for v in item.variants] if isinstance(item, Profile) else [os.fspath(item)]
    _code, _out, err = _core.report(paths, os.fspath(output), title, force)
    _pass_on(err)
    return os.fspath(output)


class profile:
    """Profiles the ops called inside a ``with`` block, as one step::

        with bs.profile() as p:
            y = bs.ops.linear(x, w, b)
        print(p.ops)

    After the block, ``p`` is a Profile of one variant (``label``)."""

    def __init__(self, label="python", row_limit=0):
        self._label = label
        self._row_limit = row_limit
        self._recording = None
        self._profile = None

    def __enter__(self):
        self._recording = _core.StepRecording(self._label)
        return self

    def __exit__(self, kind, value, traceback):
        recording, self._recording = self._recording, None
        if kind is not None:
            del recording  # an exception in the block: nothing kept, the recorder detached
            return False
        saved, ops, kernels = recording.finish(self._row_limit)
        folder = tempfile.TemporaryDirectory(prefix="blockscope-profile-")
        with open(os.path.join(folder.name, "profile.json"), "w", encoding="utf-8") as f:
            f.write(saved)
        ops_table = _read_json(ops, "the op table")
        summary = {"workload": "ops called from Python", "variants": [
            {"label": self._label, "ops": {**ops_table, "label": self._label}, "kernels": _read_json(kernels, "the kernel table")}]}
        self._profile = Profile(summary, folder)
        return False

    def __getattr__(self, name):
        # Everything a Profile has, once the block has ended.
        if name.startswith("_"):
            raise AttributeError(name)
        if self._profile is None:
            raise RuntimeError("the profile is still recording (read it after the with block)")
        return getattr(self._profile, name)

    def _repr_html_(self):
        return self._profile.to_html() if self._profile is not None else None
