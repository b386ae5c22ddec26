"""A Python session with blockscope, as one would type it in Jupyter (each block a cell).
Run by the tests (ctest python_example); docs/PYTHON.md walks through it.

    PYTHONPATH=build/default/python .venv/bin/python examples/python_session.py
"""
import pathlib
import tempfile

import numpy as np

import blockscope as bs

ROOT = pathlib.Path(__file__).resolve().parents[1]

# %% A workload from a config, with overrides, profiled: the series' attention lesson.
w = bs.load(ROOT / "configs" / "series" / "04_attention.yaml", overrides={"input.seq_len": 64, "device": "cpu"})
p = w.profile(threads=1)
for v in p.variants:
    top = max(v.ops, key=lambda row: row["self_device_us"] or 0)
    print(f"{v.label:32s} step {v.step_time_us['median']:9.1f} us   top op {top['name']} ({top['path'] or '-'})")
print(p.verdict["line"])
# In Jupyter, `p` alone shows the HTML report inline (Profile._repr_html_).

# %% What changed from the base path to the first compare variant, and a report file.
with tempfile.TemporaryDirectory() as folder:
    saved = p.save(pathlib.Path(folder) / "attention.json")
    d = bs.diff(saved[0], saved[1])
    print(d["summary"])
    print("report:", bs.report([p], pathlib.Path(folder) / "attention.html", title="attention paths"))

# %% The ops on your own arrays: no copies in or out.
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 4, 64, 32), dtype=np.float32) for _ in range(3))
with bs.profile(label="my attention") as mine:
    out_naive = bs.ops.attention(q, k, v, path="naive", causal=True)
    out_flash = bs.ops.attention(q, k, v, path="flash", causal=True)
print("flash vs naive, max |difference|:", float(np.max(np.abs(out_flash - out_naive))))
for row in mine.ops:
    print(f"  {row['name']:12s} {row['path'] or '':10s} calls {row['calls']}  self CPU {row['self_cpu_us']:8.1f} us")

# %% Torch tensors work the same way (DLPack), when torch is installed.
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    x = torch.randn(8, 64)
    y = bs.ops.layer_norm(x, torch.ones(64), torch.zeros(64))
    print("torch in, torch out:", type(y).__name__, tuple(y.shape),
          "max |difference| to torch:", float((y - torch.nn.functional.layer_norm(x, (64,))).abs().max()))

# %% Errors are Python exceptions that say what is wrong.
try:
    bs.load("name: x\nworkload: blok\n")
except bs.ConfigError as error:
    print("ConfigError:", error)
