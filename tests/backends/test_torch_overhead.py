"""The torch backend's per-call path: direct calls (rlx.backends.torch_backend.direct) equal the lowerings
they replace value for value, edge values included; eager modules take them; the shape checks still run
on the first run; graphs of them match the NumPy reference, symbolic sizes included."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
from backends.jax_cases import assert_close  # noqa: E402
from rlx.backends.torch_backend import direct as D  # noqa: E402
from rlx.backends.torch_backend import lowering as L  # noqa: E402
from rlx.ir.dtype import DType  # noqa: E402
from rlx.ir.shape import Shape, TensorType  # noqa: E402

_EDGES = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 1e-40, 0.5, -2.5, 1.0, -1.0, 3.0, 0.999, -0.999]


def _float(rng, shape, dtype: DType) -> torch.Tensor:
    a = rng.standard_normal(int(np.prod(shape))) * 3
    a[: len(_EDGES)] = _EDGES[: a.size]
    return torch.from_numpy(a.reshape(shape).astype(np.float64)).to(L.torch_dtype(dtype))


def _int(rng, shape, dtype: DType) -> torch.Tensor:
    info = np.iinfo(dtype.numpy)
    a = rng.integers(info.min, int(info.max) + 1, size=int(np.prod(shape)), dtype=np.int64)
    a[:4] = [info.min, info.max, 0, -1 if info.min < 0 else 1][: a.size]
    return torch.from_numpy(a.reshape(shape).astype(dtype.numpy))


def _operand(rng, shape, dtype: DType) -> torch.Tensor:
    return _float(rng, shape, dtype) if dtype.is_float else _int(rng, shape, dtype)


def _same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal dtype, shape, values and NaN positions (not zero signs or NaN payloads: torch.maximum's own
    differ between its scalar and vector paths)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = (t.float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.numpy() for t in (got, want))
    np.testing.assert_array_equal(g, w)


def _check(op: str, attrs: dict, operands: list[torch.Tensor], out: TensorType) -> None:
    in_types = [TensorType(Shape(tuple(a.shape)), L._rlx_dtype(a)) for a in operands]
    call = D.direct_call(op, operands, attrs, in_types, out)
    assert call is not None, (op, attrs, [t.dtype for t in in_types])
    want = L.LOWERINGS[op](list(operands), attrs, out)
    want = want.to(L.torch_dtype(out.dtype))  # the wrapper's cast (a no-op where a direct call applies)
    _same_bits(_made(call), want)


def _made(call: D.Call) -> torch.Tensor:
    """What the fx node of ``call`` computes (its argument calls first)."""
    return call.target(*(_made(a) if isinstance(a, D.Call) else a for a in call.args), **call.kwargs)


def _tt(shape, dtype: DType) -> TensorType:
    return TensorType(Shape(tuple(shape)), dtype)


FLOATS = [DType.F32, DType.F64]


@pytest.mark.parametrize("dtype", [*FLOATS, DType.I8, DType.I32, DType.I64, DType.U8])
def test_binary_direct_calls_equal_the_lowering(dtype):
    rng = np.random.default_rng(0)
    ops = D._FLOAT_BINARY if dtype.is_float else D._INT_BINARY
    for op in ops:
        a, b = _operand(rng, (3, 5), dtype), _operand(rng, (5,), dtype)  # broadcasting
        if op == "pow" and dtype.is_float:
            b = torch.cat([b[:2], torch.tensor([0.5, -1.0, 2.0], dtype=b.dtype)])  # fractional powers of negatives: NaN
        _check("binary", {"op": op}, [a, b], _tt((3, 5), dtype))
        _check("binary", {"op": op}, [b, a], _tt((3, 5), dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_activation_and_unary_math_direct_calls_equal_the_lowering(dtype):
    rng = np.random.default_rng(1)
    x = _float(rng, (4, 6), dtype)
    for kind in [*D._ACTIVATIONS, "rsqrt"]:
        _check("activation", {"kind": kind}, [x], _tt((4, 6), dtype))
    for kind in D._UNARY_MATH:
        _check("unary_math", {"kind": kind}, [x], _tt((4, 6), dtype))


@pytest.mark.parametrize("dtype", [*FLOATS, DType.F16, DType.BF16])
def test_matmul_direct_call_equals_the_lowering(dtype):
    rng = np.random.default_rng(2)
    a, b = (torch.from_numpy(rng.standard_normal(s)).to(L.torch_dtype(dtype)) for s in ((2, 3, 4), (4, 5)))
    _check("matmul", {}, [a, b], _tt((2, 3, 5), dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_and_shape_direct_calls_equal_the_lowering(dtype):
    rng = np.random.default_rng(3)
    x, gamma, beta = _float(rng, (2, 3, 8), dtype), _float(rng, (8,), dtype), _float(rng, (8,), dtype)
    x[1] = torch.from_numpy(rng.standard_normal((3, 8))).to(x.dtype)  # a batch of finite rows beside the edge values
    for axis in (-1, 2):
        _check("layer_norm", {"axis": axis, "eps": 1e-5}, [x, gamma, beta], _tt((2, 3, 8), dtype))
    _check("reshape", {"new_shape": (6, 8)}, [x], _tt((6, 8), dtype))
    _check("transpose", {"perm": (2, 0, 1)}, [x], _tt((8, 2, 3), dtype))
    _check("transpose", {"perm": None}, [x], _tt((8, 3, 2), dtype))
    _check("expand", {"target_shape": (4, 8)}, [gamma], _tt((4, 8), dtype))
    _check("narrow", {"axis": -1, "start": 2, "length": 5}, [x], _tt((2, 3, 5), dtype))
    _check("narrow", {"axis": 1, "start": 0, "length": 0}, [x], _tt((2, 0, 8), dtype))


@pytest.mark.parametrize("dtype", [*FLOATS, DType.I32, DType.U8])
def test_compare_where_and_concat_direct_calls_equal_the_lowering(dtype):
    rng = np.random.default_rng(6)
    a, b = _operand(rng, (3, 4), dtype), _operand(rng, (4,), dtype)
    b[1] = a[0, 1]  # some ties
    for op in D._COMPARE:
        _check("compare", {"op": op}, [a, b], _tt((3, 4), DType.BOOL))
    cond = torch.from_numpy(rng.random((3, 1)) < 0.5)
    _check("where", {}, [cond, a, b], _tt((3, 4), dtype))
    _check("concat", {"axis": -2}, [a, b.reshape(1, 4), a], _tt((7, 4), dtype))

    m = torch.from_numpy(rng.random((2, 3, 4)) < 0.5)  # bool: the shape ops move it as it is
    _check("reshape", {"new_shape": (6, 4)}, [m], _tt((6, 4), DType.BOOL))
    _check("transpose", {"perm": (2, 0, 1)}, [m], _tt((4, 2, 3), DType.BOOL))
    _check("narrow", {"axis": 2, "start": 1, "length": 2}, [m], _tt((2, 3, 2), DType.BOOL))
    _check("expand", {"target_shape": (5, 2, 3, 4)}, [m], _tt((5, 2, 3, 4), DType.BOOL))
    _check("concat", {"axis": 0}, [m, m], _tt((4, 3, 4), DType.BOOL))


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv_and_reduce_direct_calls_equal_the_lowering(dtype):
    rng = np.random.default_rng(5)
    x = _float(rng, (1, 4, 7, 6), dtype)
    w, b = (torch.from_numpy(rng.standard_normal(s)).to(x.dtype) for s in ((4, 2, 3, 3), (4,)))
    geo = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2}
    for act in (None, "relu", "gelu", "silu", "tanh", "sigmoid"):
        for operands in ([x, w, b], [x, w]):
            attrs = {**geo, "activation": act, "has_bias": len(operands) == 3}
            _check("fused_conv2d_bias_act", attrs, operands, _tt((1, 4, 4, 2), dtype))
    y = _float(rng, (2, 3, 4), dtype)
    for op in ("sum", "mean"):
        for axes, keep, shape in (((1, 2), True, (2, 1, 1)), ((-1,), False, (2, 3)), (None, False, ())):
            _check("reduce", {"op": op, "axes": axes, "keep_dim": keep}, [y], _tt(shape, dtype))
        _check("reduce", {"op": op, "axes": (1,), "keep_dim": False}, [y[:, :0]], _tt((2, 4), dtype))  # empty: 0 / NaN


def test_no_direct_call_where_the_lowering_widens_casts_or_was_replaced(monkeypatch):
    f16, f32, i32 = _tt((4,), DType.F16), _tt((4,), DType.F32), _tt((4,), DType.I32)
    assert D.direct_call("binary", [0, 1], {"op": "add"}, [f16, f16], f16) is None  # widened to f32 first
    assert D.direct_call("binary", [0, 1], {"op": "add"}, [f32, i32], f32) is None  # a cast first
    assert D.direct_call("binary", [0, 1], {"op": "div"}, [i32, i32], i32) is None  # integer division's own rule
    assert D.direct_call("activation", [0], {"kind": "round"}, [f32], f32) is None  # the row's formula
    assert D.direct_call("layer_norm", [0, 1, 2], {"axis": 0, "eps": 1e-5}, [_tt((4, 4), DType.F32), f32, f32],
                         _tt((4, 4), DType.F32)) is None
    assert D.direct_call("binary", [0, 1], {"op": "add"}, [f32, f32], f32) is not None
    wide = _tt((2, 6), DType.F32)
    assert D.direct_call("narrow", [0], {"axis": 1, "start": 4, "length": 3}, [wide], _tt((2, 3), DType.F32)) is None  # raises
    monkeypatch.setitem(L.LOWERINGS, "binary", lambda args, attrs, out: args[0])
    assert D.direct_call("binary", [0, 1], {"op": "add"}, [f32, f32], f32) is None


def _tiny() -> tuple[rlx.Graph, dict, dict]:
    g = rlx.Graph("tiny")
    x = g.input("x", (1, 8))
    g.set_outputs([g.relu(x * g.param("s", (8,)))])
    rng = np.random.default_rng(0)
    return g, {"x": rng.standard_normal((1, 8)).astype(np.float32)}, {"s": rng.standard_normal(8).astype(np.float32)}


def test_the_eager_module_calls_torch_directly_and_matches_the_reference():
    g, feed, params = _tiny()
    exe = rlx.compile(g, backend="torch", params=params)
    targets = [n.target for n in exe.module.graph.nodes if n.op == "call_function"]
    assert targets == [torch.mul, torch.relu]
    feed["x"][0, :3] = [np.nan, -np.inf, -0.0]
    want = rlx.run(g, feed, params)
    first = exe.run(feed)
    assert_close(first, want, rtol=0, atol=0)
    kept = first[0].copy()
    second = exe.run({"x": feed["x"] * 2})  # a later run never writes into an earlier run's arrays
    np.testing.assert_array_equal(first[0], kept)
    assert_close(second, rlx.run(g, {"x": feed["x"] * 2}, params), rtol=0, atol=0)


def test_a_graph_of_direct_calls_matches_the_reference_at_every_symbolic_size():
    g = rlx.Graph("sym")
    x = g.input("x", ("batch", 4, 8))
    gamma, beta, w = g.param("g", (8,)), g.param("b", (8,)), g.param("w", (8, 8))
    h = g.layer_norm(x, gamma, beta)
    h = g.activation(g.matmul(h, w) + beta, "gelu")
    y = g.reshape(g.transpose(g.unary_math(h, "erf") - x, (0, 2, 1)), ("batch", 32))
    g.set_outputs([y, g.activation(y, "tanh")])
    rng = np.random.default_rng(4)
    params = {"g": rng.standard_normal(8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32),
              "w": rng.standard_normal((8, 8)).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", params=params)
    for batch in (1, 3, 2, 3):
        feed = {"x": rng.standard_normal((batch, 4, 8)).astype(np.float32)}
        assert_close(exe.run(feed), rlx.run(g, feed, params), rtol=1e-5, atol=1e-5)
    wrapped = [n for n in exe.module.graph.nodes if n.op == "call_function" and n.target.__module__.startswith("rlx.")]
    assert not wrapped  # every node is its torch call


def test_a_direct_call_giving_the_wrong_shape_is_caught_until_a_run_succeeds(monkeypatch):
    """The first run checks every direct call's result shape as it does the lowerings' (a failing run
    leaves the checks on)."""
    lowering, maker = D.DIRECT["activation"]

    def flat(args, attrs, in_types, out):
        return torch.flatten, (args[0],), {}

    monkeypatch.setitem(D.DIRECT, "activation", (lowering, flat))
    g = rlx.Graph("t")
    x = g.input("x", (3, 4))
    g.set_outputs([g.relu(x)])
    feed = {"x": np.arange(-6, 6, dtype=np.float32).reshape(3, 4)}
    exe = rlx.compile(g, backend="torch")
    for _ in range(2):
        with pytest.raises(rlx.RlxError, match=r"torch lowering of 'activation' .* gave shape \[12\], expected \[3, 4\]") as err:
            exe.run(feed)
        assert str(err.value).endswith("expected [3, 4]")  # the message as raised, nothing appended
    monkeypatch.setitem(D.DIRECT, "activation", (lowering, maker))
    fixed = rlx.compile(g, backend="torch")
    for _ in range(3):
        assert_close(fixed.run(feed), rlx.run(g, feed), rtol=0, atol=0)


def test_direct_views_of_inputs_and_params_leave_as_the_callers_own_arrays():
    """torch.reshape / permute / narrow / broadcast_to of a fed or bound array are views of it: the outputs
    are copies, which neither a later run nor writing to the feed changes."""
    g = rlx.Graph("views")
    x, p = g.input("x", (2, 6)), g.param("p", (6,))
    g.set_outputs([g.reshape(x, (3, 4)), g.transpose(x, (1, 0)), g.narrow(x, 1, 2, 3), g.expand(p, (2, 6))])
    rng = np.random.default_rng(7)
    params = {"p": rng.standard_normal(6).astype(np.float32)}
    exe = rlx.compile(g, backend="torch", params=params)
    assert all(not n.target.__module__.startswith("rlx.") for n in exe.module.graph.nodes if n.op == "call_function")
    x0 = rng.standard_normal((2, 6)).astype(np.float32)
    want = [np.array(w, copy=True) for w in rlx.run(g, {"x": x0.copy()}, params)]
    for _ in range(2):  # the first run (checked) and a bare one
        feed = {"x": x0.copy()}
        got = exe.run(feed)
        feed["x"] += 1.0
        params["p"] += 1.0  # the executable holds its own copy
        exe.run({"x": x0 * 3})
        assert_close(got, want, rtol=0, atol=0)
