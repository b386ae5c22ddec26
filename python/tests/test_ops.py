"""bs.ops on NumPy arrays and torch tensors: values against float64 references written here
(NumPy, independent of blockscope), no copies in or out, strides, and every bad argument a
named error. Fresh random inputs each run (the seed is in the failure message)."""

import math
import os

import numpy as np
import pytest

import blockscope as bs

SEED = int.from_bytes(os.urandom(4), "little")
TOLERANCE = {np.float32: 2e-5, np.float16: 4e-3}


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def close(got, want, dtype, scale=None):
    scale = scale if scale is not None else max(1.0, float(np.max(np.abs(want))))
    error = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want))) / scale
    assert error <= TOLERANCE[dtype], f"seed {SEED}: relative error {error:.3g} > {TOLERANCE[dtype]}"


def ref_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def ref_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_attention(q, k, v, causal, scale):
    groups = q.shape[1] // k.shape[1]
    k = np.repeat(k, groups, axis=1)
    v = np.repeat(v, groups, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    sq, sk = q.shape[2], k.shape[2]
    if causal:  # bottom-right aligned: query i sees keys j <= i + (sk - sq)
        mask = np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq)
        s = np.where(mask, -np.inf, s)
    return ref_softmax(s) @ v


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("path", ["naive", "epilogue", "addmm"])
def test_linear_against_float64(rng, dtype, path):
    x = rng.uniform(-1, 1, (5, 3, 24)).astype(dtype)
    w = rng.uniform(-0.2, 0.2, (40, 24)).astype(dtype)
    b = rng.uniform(-1, 1, 40).astype(dtype)
    want = x.astype(np.float64) @ w.astype(np.float64).T + b
    y = bs.ops.linear(x, w, b, path=path)
    assert y.shape == (5, 3, 40) and y.dtype == dtype
    close(y, want, dtype)
    # in_out layout and the GELU epilogue
    y2 = bs.ops.linear(x, np.ascontiguousarray(w.T), b, path=path, layout="in_out", activation="gelu_tanh")
    close(y2, ref_gelu_tanh(want), dtype)


@pytest.mark.parametrize("path", ["naive", "inplace", "fused_softmax", "flash"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_against_float64_with_gqa(rng, path, causal):
    q = rng.standard_normal((2, 4, 7, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 9, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 9, 16)).astype(np.float32)
    y = bs.ops.attention(q, k, v, path=path, causal=causal)
    close(y, ref_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal, 0.25),
          np.float32)


def test_flash_takes_strided_views_in_place(rng):
    # q, k, v as [B, S, H, D] slices of a fused QKV projection, permuted to [B, H, S, D]: no copy.
    qkv = rng.standard_normal((2, 6, 3, 4, 8)).astype(np.float32)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    assert not q.flags.c_contiguous
    y = bs.ops.attention(q, k, v, path="flash", causal=True)
    close(y, ref_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), True, 1 / math.sqrt(8)),
          np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_norms_softmax_rope_activation(rng, dtype):
    x = rng.uniform(-2, 2, (3, 5, 32)).astype(dtype)
    w = rng.uniform(0.5, 1.5, 32).astype(dtype)
    b = rng.uniform(-1, 1, 32).astype(dtype)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    close(bs.ops.layer_norm(x, w, b, eps=1e-5), (x64 - mean) / np.sqrt(var + 1e-5) * w + b, dtype)
    close(bs.ops.rms_norm(x, w, eps=1e-6), x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w, dtype)
    close(bs.ops.softmax(x), ref_softmax(x64), dtype, scale=1.0)
    close(bs.ops.activation(x, "silu"), x64 / (1 + np.exp(-x64)), dtype)
    # RoPE, rotate_half: pairs (d, d + D/2) rotate by pos * theta^(-2d/D)
    r = rng.uniform(-1, 1, (1, 2, 5, 8)).astype(dtype)
    r64 = r.astype(np.float64)
    pos = np.arange(3, 8)[:, None]
    angle = pos * 10000.0 ** (-2 * np.arange(4) / 8)
    cos, sin = np.cos(angle), np.sin(angle)
    first, second = r64[..., :4], r64[..., 4:]
    want = np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    close(bs.ops.rope(r, theta=10000.0, position_offset=3), want, dtype)


@pytest.mark.parametrize("path", ["naive", "epilogue"])
def test_plain_mlp(rng, path):
    x = rng.uniform(-1, 1, (6, 16)).astype(np.float32)
    fc, fc_b = rng.uniform(-0.3, 0.3, (64, 16)).astype(np.float32), rng.uniform(-0.1, 0.1, 64).astype(np.float32)
    proj, proj_b = rng.uniform(-0.3, 0.3, (16, 64)).astype(np.float32), rng.uniform(-0.1, 0.1, 16).astype(np.float32)
    h = ref_gelu_tanh(x.astype(np.float64) @ fc.T + fc_b)
    y = bs.ops.mlp(x, fc_weight=fc, fc_bias=fc_b, proj_weight=proj, proj_bias=proj_b, path=path)
    close(y, h @ proj.T + proj_b, np.float32)


@pytest.mark.parametrize("path", ["naive", "fused"])
def test_gated_mlp(rng, path):
    x = rng.uniform(-1, 1, (6, 16)).astype(np.float32)
    gate, up = (rng.uniform(-0.3, 0.3, (48, 16)).astype(np.float32) for _ in range(2))
    down = rng.uniform(-0.3, 0.3, (16, 48)).astype(np.float32)
    x64 = x.astype(np.float64)
    g = x64 @ gate.T
    want = (g / (1 + np.exp(-g)) * (x64 @ up.T)) @ down.T
    y = bs.ops.mlp(x, gate_weight=gate, up_weight=up, down_weight=down, activation="silu", path=path)
    close(y, want, np.float32)


def test_results_share_blockscope_memory_and_out_is_written_in_place(rng):
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    y = bs.ops.linear(x, w)
    assert not y.flags.owndata  # a view of blockscope's storage, not a NumPy copy of it
    out = np.full((4, 16), np.nan, np.float32)
    address = out.ctypes.data
    result = bs.ops.linear(x, w, out=out)
    assert result is out and out.ctypes.data == address
    np.testing.assert_array_equal(out, y)
    # softmax may write over its input: the caller's own memory, read and written in place
    z = rng.uniform(-1, 1, (3, 10)).astype(np.float32)
    want = ref_softmax(z.astype(np.float64))
    assert bs.ops.softmax(z, out=z) is z
    close(z, want, np.float32, scale=1.0)


def test_read_only_inputs_are_taken_and_left_alone(rng):
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    before = x.copy()
    x.setflags(write=False)
    bs.ops.softmax(x)
    np.testing.assert_array_equal(x, before)
    with pytest.raises(bs.InputError, match="out: not a writable"):
        bs.ops.softmax(before, out=x)


def test_a_tensor_whose_memory_was_released_is_refused(rng):
    torch = pytest.importorskip("torch")
    t = torch.ones(2, 4)
    (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).resize_(0)  # data_ptr() is now 0
    # torch 2.x exports it with a null pointer (before: a crash reading it); 1.13 does not export it
    with pytest.raises(bs.InputError, match=r"x: (an array of \[2, 4\] elements with no memory behind it|"
                                            r"a torch.Tensor is not an array)"):
        bs.ops.softmax(t)


def test_torch_tensors_in_and_out_without_copies(rng):
    torch = pytest.importorskip("torch")  # Debian's python3-torch (tools/install_deps.sh): present in CI
    x = torch.from_numpy(rng.uniform(-1, 1, (4, 8)).astype(np.float32))
    w = torch.from_numpy(rng.uniform(-1, 1, (16, 8)).astype(np.float32))
    y = bs.ops.linear(x, w)
    assert isinstance(y, torch.Tensor) and y.shape == (4, 16)
    close(y.numpy(), x.double().numpy() @ w.double().numpy().T, np.float32)
    out = torch.empty(4, 16)
    pointer = out.data_ptr()
    assert bs.ops.linear(x, w, out=out) is out and out.data_ptr() == pointer
    assert torch.equal(out, y)
    # bfloat16 has no NumPy type; torch carries it both ways
    xb = x.to(torch.bfloat16)
    yb = bs.ops.softmax(xb)
    assert yb.dtype == torch.bfloat16
    close(yb.float().numpy(), ref_softmax(xb.double().numpy()), np.float16, scale=1.0)


def test_bad_arrays_are_named_errors(rng):
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    with pytest.raises(bs.InputError, match=r"x: elements of type float64"):
        bs.ops.linear(x.astype(np.float64), w)
    with pytest.raises(bs.InputError, match=r"weight: elements of type int32"):
        bs.ops.linear(x, w.astype(np.int32))
    with pytest.raises(bs.InputError, match=r"x: a negative stride in dimension 1"):
        bs.ops.softmax(x[:, ::-1])
    with pytest.raises(bs.InputError, match=r"x: stride 0 in dimension 0"):
        bs.ops.softmax(np.broadcast_to(x[0], (4, 8)))
    with pytest.raises(bs.InputError, match=r"linear.*f32\[16, 9\]"):
        bs.ops.linear(x, rng.uniform(-1, 1, (16, 9)).astype(np.float32))
    with pytest.raises(bs.InputError, match=r"path='fast': no such attention path \(expected one of naive, inplace"):
        bs.ops.attention(x[None, None], x[None, None], x[None, None], path="fast")
    with pytest.raises(bs.InputError, match=r"activation='swiglu': expected one of"):
        bs.ops.activation(x, "swiglu")
    with pytest.raises(bs.InputError, match=r"softmax"):
        bs.ops.softmax(x, out=np.empty((4, 9), np.float32))  # out of another shape
    with pytest.raises(bs.InputError, match=r"contiguous"):
        bs.ops.softmax(np.ascontiguousarray(rng.uniform(size=(8, 4)).astype(np.float32)).T)
    with pytest.raises(bs.InputError, match=r"a gated MLP needs"):
        bs.ops.mlp(x, gate_weight=w, path="fused", activation="silu")
    with pytest.raises(bs.InputError, match=r"x: a builtins.str is not an array blockscope can take"):
        bs.ops.softmax("not an array")
    with pytest.raises(bs.InputError, match=r"weight: a builtins.list is not an array"):
        bs.ops.linear(x, [[1.0] * 8] * 16)


def test_profiled_ops_block(rng):
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    with bs.profile(label="mine") as p:
        y = bs.ops.linear(x, w, path="naive")
        bs.ops.softmax(y)
    names = {row["name"] for row in p.ops}
    assert {"linear", "softmax"} <= names
    linear = next(row for row in p.ops if row["name"] == "linear")
    assert linear["calls"] == 1 and linear["flops"] == 2 * 4 * 8 * 16 and linear["path"] == "naive"
    assert p.variants[0].label == "mine"
    assert "<html" in p.to_html().lower()
    # nothing recorded outside the block; a block inside another is refused
    with bs.profile() as outer:
        with pytest.raises(bs.InputError, match="do not nest"):
            with bs.profile():
                pass
    assert all(row["name"] == "step *" for row in outer.ops)
    # an exception inside the block keeps nothing and the next block works
    with pytest.raises(ZeroDivisionError):
        with bs.profile():
            bs.ops.softmax(x)
            1 / 0
    with bs.profile() as again:
        bs.ops.softmax(x)
    assert any(row["name"] == "softmax" for row in again.ops)
