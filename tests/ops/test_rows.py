"""The composite rows (rlx.ops.rows) and the overrides that replace them.

Every registry case of softmax / the norms / attention is evaluated up to the op's node; then

* the row in NumPy matches the case's own oracle (torch float64 or NumPy written in the case);
* each override — torch's library calls (torch.softmax, torch.layer_norm, F.group_norm,
  F.scaled_dot_product_attention), jax's attention with XLA precision, NumPy's in-place arena
  kernels — matches the row bound to the same namespace on the same operands.

That no backend writes a softmax / normalisation formula of its own (a backend binds the rows, or
calls a library) is checked on the parsed source by tests/core/test_architecture.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect
from rlx.ir.shape import Shape, TensorType
from rlx.ops import rows
from rlx.ops.kinds import NUMPY

OPS = ("softmax", "layer_norm", "layer_norm2d", "rms_norm", "group_norm", "attention", "cached_attention")
CASES = [c for c in collect().cases if c.op in OPS]


def _operands(case):
    """(node, operand arrays, out type, is the node the graph's only output) for the case's op node."""
    g, outs = case.graph()
    node = next(n for n in g.nodes if n.op == case.op)
    direct = len(outs) == 1 and outs[0].node.id == node.id
    g.set_outputs([g.value(i) for i in node.inputs])
    inputs, params = case.split_feed()
    args = rlx.run(g, inputs, params)
    return node, args, TensorType(Shape(tuple(args[0].shape)), node.dtype), direct


def _row(op):
    return getattr(rows, op)


def _results(r):
    """A row's results as a tuple (one array, or a multi-result row's tuple)."""
    return r if isinstance(r, tuple) else (r,)


def _close(a, b, dtype):
    tol = 1e-12 if np.dtype(dtype) == np.float64 else 2e-5
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_numpy_row_matches_the_oracle(case):
    node, args, out, direct = _operands(case)
    got = _row(case.op)(NUMPY, args, node.attrs, out)
    if direct or node.extra_types:  # a multi-result row gives every result, in the case's output order
        for a, want in zip(_results(got), case.expected()):
            np.testing.assert_allclose(np.asarray(a, np.float64), want, rtol=max(case.rtol, 1e-6), atol=max(case.atol, 1e-7))
    into = rlx.ir.opdef.get_op(case.op).kernel_into
    if into is not None and not out.dtype.is_low_precision_float:
        slot = np.empty(tuple(out.shape), out.dtype.numpy)
        into(args, node.attrs, out, slot)
        _close(slot, got, out.dtype.numpy)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_torch_overrides_equal_the_row(case):
    torch = pytest.importorskip("torch")
    from rlx.backends.torch_backend.lowering import LOWERINGS, TORCH, compute_dtype

    node, args, out, _ = _operands(case)
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in args]
    tensors = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors]
    got = LOWERINGS[case.op](tensors, node.attrs, out)
    want = _row(case.op)(TORCH, tensors, node.attrs, out)
    for a, w in zip(_results(got), _results(want), strict=True):
        assert a.dtype == w.dtype == compute_dtype(out.dtype)
        _close(a.numpy(), w.numpy(), a.numpy().dtype)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64")
@pytest.mark.parametrize("case", [c for c in CASES if c.op == "attention"], ids=lambda c: c.id)
def test_jax_attention_override_equals_the_row(case):
    jnp = pytest.importorskip("jax.numpy")
    from rlx.backends.jax.lowering import JNP, LOWERINGS

    node, args, out, _ = _operands(case)
    arrays = [jnp.asarray(a.astype(np.float32) if a.dtype.kind == "f" and a.itemsize < 4 else a) for a in args]
    got = LOWERINGS["attention"](arrays, node.attrs, out)
    want = rows.attention(JNP, arrays, node.attrs, out)
    _close(np.asarray(got), np.asarray(want), np.asarray(got).dtype)


def _softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_family_rows_against_float64_formulas():
    x = np.random.default_rng(0).standard_normal((3, 5, 4))
    for axis in (0, 1, 2):
        np.testing.assert_allclose(rows.softmax_of(NUMPY, x, axis), _softmax64(x, axis), rtol=1e-13)
        np.testing.assert_allclose(rows.log_softmax_of(NUMPY, x, axis), np.log(_softmax64(x, axis)), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(rows.log_sum_exp(NUMPY, x, axis), np.log(np.exp(x).sum(axis=axis)), rtol=1e-13)
    big = np.array([[1000.0, 999.0, -np.inf]])
    np.testing.assert_allclose(rows.softmax_of(NUMPY, big, 1), [[1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0.0]])
    with np.errstate(invalid="ignore"):
        assert np.isnan(rows.softmax_of(NUMPY, np.full((1, 3), -np.inf), 1)).all()  # as NumPy / torch


def test_norm_input_gradients_against_finite_differences():
    rng = np.random.default_rng(1)
    x, gy = rng.standard_normal((2, 6)), rng.standard_normal((2, 6))
    for center in (True, False):
        def f(v, center=center):
            xhat, _ = rows.norm_stats(NUMPY, v, 1, 1e-3, center=center)
            return float((xhat * gy).sum())

        xhat, r = rows.norm_stats(NUMPY, x, 1, 1e-3, center=center)
        grad = rows.norm_input_grad(NUMPY, xhat, r, gy, 1, center=center)
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = 1e-6
            fd[i] = (f(x + e) - f(x - e)) / 2e-6
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_one_mask_builder():
    keep = rows.position_keep(NUMPY, "sliding_window", 2, 4, 1)
    np.testing.assert_array_equal(keep, [[0, 1, 1, 0], [0, 0, 1, 1]])
    np.testing.assert_array_equal(rows.position_keep(NUMPY, "causal", 2, 3, None), [[1, 1, 0], [1, 1, 1]])
    custom = rows.keep_mask(NUMPY, {"mask_kind": "custom", "window": None}, 1, 3, np.array([[0.4, 0.5, 1.0]]), None)
    np.testing.assert_array_equal(custom.reshape(-1), [False, True, True])
    assert rows.keep_mask(NUMPY, {"mask_kind": "bias", "window": None}, 1, 3, None, None) is None


def test_index_bounds_row():
    idx = np.array([0, -3, 2])
    np.testing.assert_array_equal(rows.checked_index(NUMPY, idx, 3, "gather", axis=0), [0, 0, 2])
    with pytest.raises(rlx.RlxError, match="gather: index 3 is out of range for axis 1 of size 3"):
        rows.checked_index(NUMPY, np.array([1, 3]), 3, "gather", axis=1)
    with pytest.raises(rlx.RlxError, match="index -1"):
        rows.checked_index(NUMPY, np.array([-1]), 3, "labels", wrap=False)


ELEMENTWISE_ROWS = ("binary", "cast", "compare", "where", "unary_math")


def test_jax_and_torch_bind_the_elementwise_rows():
    """No backend keeps its own copy of these ops' formulas: both tables hold the row itself."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    from rlx.backends.jax.lowering import LOWERINGS as JAX
    from rlx.backends.torch_backend.lowering import LOWERINGS as TORCH_LOWERINGS

    for name in ELEMENTWISE_ROWS:
        assert JAX[name].row is rows.ROWS[name] and TORCH_LOWERINGS[name].row is rows.ROWS[name], name


def _namespace(backend):
    """(the backend's array namespace, numpy array -> its array)."""
    if backend == "numpy":
        return NUMPY, np.asarray
    if backend == "torch":
        torch = pytest.importorskip("torch")
        from rlx.backends.torch_backend.lowering import TORCH

        return TORCH, torch.from_numpy
    jnp = pytest.importorskip("jax.numpy")
    from rlx.backends.jax.lowering import JNP

    return JNP, jnp.asarray


def _int_div_oracle(a: int, b: int, bits: int) -> int:
    """Truncating division in Python integers, x / 0 = 0, wrapped to a signed ``bits``-bit int."""
    q = 0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return (q + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


def _int_pow_oracle(a: int, b: int, bits: int) -> int:
    r = (1 if abs(a) == 1 and b % 2 == 0 else a if abs(a) == 1 else 0) if b < 0 else a ** b
    return (r + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_integer_div_and_pow_rows_against_python_ints(backend):
    lo = np.iinfo(np.int8).min
    a = np.array([7, -7, 7, -7, 5, lo, lo, 3, -1, 1, 2, -2, 0], np.int8)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0, -3, -4, 7, 3, 5], np.int8)
    xp, wrap = _namespace(backend)
    out = TensorType(Shape(a.shape), rlx.DType.I8)
    with np.errstate(over="ignore"):
        div = np.asarray(rows.binary(xp, [wrap(a), wrap(b)], {"op": "div"}, out))
        exps = np.abs(b) % 4 * np.sign(b)
        pw = np.asarray(rows.binary(xp, [wrap(a), wrap(exps)], {"op": "pow"}, out))
    assert div.tolist() == [_int_div_oracle(int(x), int(y), 8) for x, y in zip(a, b)]
    assert pw.tolist() == [_int_pow_oracle(int(x), int(e), 8) for x, e in zip(a, exps)]


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_fmax_row_ignores_nan_as_numpy(backend):
    a = np.array([np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([3.0, np.nan, np.nan, 5.0], np.float32)
    xp, wrap = _namespace(backend)
    out = TensorType(Shape(a.shape), rlx.DType.F32)
    for op, oracle in (("fmax", np.fmax), ("fmin", np.fmin), ("max", np.maximum), ("min", np.minimum)):
        got = np.asarray(rows.binary(xp, [wrap(a), wrap(b)], {"op": op}, out))
        np.testing.assert_array_equal(got, oracle(a, b))
