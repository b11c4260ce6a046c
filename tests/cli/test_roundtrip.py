"""Every dtype × rank 0–4 survives save/load as a param and as a constant, bit for bit.

The shapes and values are checked against the NumPy arrays that went in (the 0-d case used
to come back as shape [1], which load then refused).
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.ir.dtype import DType

SHAPES = [(), (3,), (2, 3), (2, 1, 3), (1, 2, 0, 3)]


def _array(dtype: DType, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 4
    if dtype.value == "bool":
        return values > 0
    if dtype.value == "c64":
        return (values + 1j * rng.standard_normal(shape)).astype(dtype.numpy)
    if dtype.value.startswith(("u",)):
        values = np.abs(values)
    return values.astype(dtype.numpy)


def _dtypes() -> list[DType]:
    out = []
    for d in DType:
        try:
            d.numpy  # noqa: B018 - bf16 / fp8 need ml_dtypes
        except Exception:
            continue
        out.append(d)
    return out


@pytest.mark.parametrize("dtype", _dtypes(), ids=lambda d: d.value)
def test_param_and_constant_round_trip_every_rank(tmp_path, dtype):
    g = rlx.Graph("rt")
    params, outs = {}, []
    for rank, shape in enumerate(SHAPES):
        arr = _array(dtype, shape, rank)
        params[f"p{rank}"] = arr
        outs.append(g.param(f"p{rank}", shape, dtype.value))
        big = _array(dtype, shape, 10 + rank)
        outs.append(g.constant(big))
    g.set_outputs(outs)
    path = tmp_path / "rt.rlx"
    rlx.save(g, path, params=params)
    again, loaded = rlx.load(path, with_params=True)
    assert rlx.fingerprint(again) == rlx.fingerprint(g)
    assert sorted(loaded) == sorted(params)
    for name, want in params.items():
        got = loaded[name]
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
        assert got.tobytes() == want.tobytes()
    for a, b in zip(again.nodes, g.nodes):
        if b.op == "constant":
            assert a.attrs["value"].array.shape == b.attrs["value"].array.shape
            assert a.attrs["value"].array.tobytes() == b.attrs["value"].array.tobytes()


def test_scalar_param_bigger_than_inline_limit_and_numpy_scalar(tmp_path):
    """A NumPy scalar (np.float32(2)) is a 0-d weight too."""
    g = rlx.Graph("s")
    x = g.input("x", (3,))
    g.set_outputs([x * g.param("s", ())])
    rlx.save(g, tmp_path / "s.rlx", params={"s": np.float32(2.5)})
    again, p = rlx.load(tmp_path / "s.rlx", with_params=True)
    assert p["s"].shape == () and p["s"] == np.float32(2.5)
    (y,) = rlx.run(again, {"x": np.arange(3, dtype=np.float32)}, p)
    np.testing.assert_array_equal(y, np.arange(3, dtype=np.float32) * np.float32(2.5))
