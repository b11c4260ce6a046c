"""Upstream rlx-ir 0.2.2's ``Fft{inverse, norm}`` on C64 (interleaved complex) in both directions of the
upstream-JSON interop: documents written in upstream's encoding import and run against NumPy's FFT with
upstream's scaling (its ``FftNorm`` names are not NumPy's), and rlx graphs export and read back the same."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx

N = 8
RNG = np.random.default_rng(0)
X = (RNG.standard_normal((3, N)) + 1j * RNG.standard_normal((3, N))).astype(np.complex64)


def _doc(inverse: bool, norm: str | None, dtype: str = "C64", last: int = N) -> str:
    shape = {"dims": [{"Static": 3}, {"Static": last}], "dtype": dtype}
    fft = {"inverse": inverse} if norm is None else {"inverse": inverse, "norm": norm}
    nodes = [{"id": 0, "op": {"Input": {"name": "x"}}, "inputs": [], "shape": shape, "name": "x", "origin": None},
             {"id": 1, "op": {"Fft": fft}, "inputs": [0], "shape": shape, "name": "y", "origin": None}]
    return json.dumps({"name": "fft", "nodes": nodes, "outputs": [1]})


def _upstream(x: np.ndarray, inverse: bool, norm: str) -> np.ndarray:
    """Upstream's definition: unscaled sums (ifft with +), then Forward scales the inverse by 1/N, Ortho both by 1/sqrt(N)."""
    n = x.shape[-1]
    sums = np.fft.ifft(x.astype(np.complex128), axis=-1) * n if inverse else np.fft.fft(x.astype(np.complex128), axis=-1)
    scale = {"Backward": 1.0, "Forward": 1.0 / n if inverse else 1.0, "Ortho": 1.0 / np.sqrt(n)}[norm]
    return sums * scale


CASES = [(inv, norm) for inv in (False, True) for norm in ("Backward", "Forward", "Ortho")]


@pytest.mark.parametrize(("inverse", "norm"), CASES)
def test_upstream_fft_imports_with_its_scaling(inverse, norm):
    g = rlx.from_upstream_json(_doc(inverse, norm))
    (got,) = rlx.run(g, {"x": X})
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, _upstream(X, inverse, norm), rtol=1e-5, atol=1e-5)
    # and back: the written document reads as the same transform
    text = rlx.to_upstream_json(g)
    assert json.loads(text)["inner"]["nodes"][1]["op"] == {"Fft": {"inverse": inverse, "norm": norm if inverse else
                                                                   ("Ortho" if norm == "Ortho" else "Backward")}}
    (again,) = rlx.run(rlx.from_upstream_json(text), {"x": X})
    np.testing.assert_array_equal(again, got)


def test_a_document_without_norm_is_unscaled_both_ways():
    """0.2.1-style documents have no norm field: upstream's default Backward (ifft(fft(x)) = N·x)."""
    fwd, inv = (rlx.from_upstream_json(_doc(i, None)) for i in (False, True))
    (y,) = rlx.run(fwd, {"x": X})
    (back,) = rlx.run(inv, {"x": y})
    np.testing.assert_allclose(back, N * X, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("norm", "inverse", "want"), [
    ("backward", False, "Backward"), ("backward", True, "Forward"), ("forward", True, "Backward"),
    ("ortho", False, "Ortho"), ("ortho", True, "Ortho")])
def test_rlx_fft_exports_and_reads_back(norm, inverse, want):
    g = rlx.Graph("rlx_fft")
    x = g.input("x", (3, N), "c64")
    g.set_outputs([g.fft(x, inverse=inverse, norm=norm)])
    text = rlx.to_upstream_json(g)
    assert json.loads(text)["inner"]["nodes"][1]["op"] == {"Fft": {"inverse": inverse, "norm": want}}
    (got,) = rlx.run(rlx.from_upstream_json(text), {"x": X})
    fn = np.fft.ifft if inverse else np.fft.fft
    np.testing.assert_allclose(got, fn(X.astype(np.complex128), axis=-1, norm=norm), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("attrs", "pattern"), [
    ({"inverse": False, "norm": "forward"}, "no upstream FftNorm"),
    ({"inverse": False, "norm": "backward", "axis": 0}, "last axis"),
])
def test_rlx_ffts_upstream_cannot_express_are_refused(attrs, pattern):
    g = rlx.Graph("rlx_fft")
    x = g.input("x", (3, N), "c64")
    g.set_outputs([g.fft(x, **attrs)])
    with pytest.raises(rlx.ExportError, match=pattern):
        rlx.to_upstream_json(g)


def test_block_layout_and_unknown_norms_are_format_errors():
    with pytest.raises(rlx.FormatError, match=r"nodes\[1\].*block layout"):
        rlx.from_upstream_json(_doc(False, "Backward", dtype="F32", last=2 * N))
    with pytest.raises(rlx.FormatError, match="FftNorm"):
        rlx.from_upstream_json(_doc(False, "Orthonormal"))
