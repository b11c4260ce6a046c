"""``OpDef.kernel_into``: writing into a preallocated array computes exactly what the reference kernel returns."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import collect
from rlx.ir.opdef import all_ops, get_op
from rlx.runtime.reference import eval_node

INTO_OPS = sorted(op.name for op in all_ops() if op.kernel_into is not None)
CASES = [c for c in collect().cases if any(n.op in INTO_OPS for n in c.graph()[0].nodes)]


def _bits(a: np.ndarray) -> tuple:
    a = np.asarray(a)
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()


def test_the_common_ops_have_an_into_hook():
    assert {"activation", "attention", "binary", "layer_norm", "matmul"} <= set(INTO_OPS)
    assert {c.op for c in CASES} >= {"activation", "attention", "binary", "layer_norm", "matmul"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_into_is_bitwise_the_reference_kernel(case):
    g, _ = case.graph()
    fed = {n.id: case.feed[n.attrs["name"]] for n in g.nodes if n.op in ("input", "param")}
    values: dict[int, np.ndarray] = {}
    checked = 0
    with np.errstate(all="ignore"):
        for node in g.nodes:
            if node.id in fed:
                values[node.id] = fed[node.id]
                continue
            if node.op == "result":  # computed with its producer
                continue
            args = [values[i] for i in node.inputs]
            if node.extra_types:  # multi-result ops have no into hook (the arena copies each result)
                values.update(zip(range(node.id, node.id + node.num_results), eval_node(node, args, node.types)))
                continue
            values[node.id] = eval_node(node, args, node.type)
            opdef = get_op(node.op)
            narrow = node.dtype.is_low_precision_float or any(rlx.DType.of(a.dtype).is_low_precision_float for a in args)
            if opdef.kernel_into is None or narrow:  # the arena widens those and copies (no hook)
                continue
            ref = np.asarray(opdef.kernel(args, node.attrs, node.type)).astype(node.dtype.numpy, copy=False)
            out = np.full(tuple(node.shape), 7, node.dtype.numpy)  # garbage the hook must overwrite
            opdef.kernel_into(args, node.attrs, node.type, out)
            assert _bits(out) == _bits(ref), f"{node.op} %{node.id} {node.attrs}"
            direct = opdef.ufunc(node.attrs, [a.dtype for a in args], out.dtype) if opdef.ufunc else None
            if direct is not None:  # the arena calls the ufunc itself, out by position
                out = np.full(tuple(node.shape), 7, node.dtype.numpy)
                direct[0](*args, *direct[1], out)
                assert _bits(out) == _bits(ref), f"{node.op} %{node.id} {node.attrs} as one ufunc call"
            assert _bits(values[node.id]) == _bits(ref)
            if "elementwise" in opdef.flags:  # the planner may let an elementwise op overwrite a same-typed operand
                for j, a in enumerate(args):
                    if a.shape == ref.shape and a.dtype == ref.dtype:
                        alias = [x.copy() for x in args]
                        alias[j] = alias[j].copy()
                        opdef.kernel_into(alias, node.attrs, node.type, alias[j])
                        assert _bits(alias[j]) == _bits(ref), f"{node.op} %{node.id} written over operand {j}"
            checked += 1
    assert checked


def test_ops_with_a_ufunc_fact_have_an_into_hook_and_cases_reach_it():
    ufunc_ops = {op.name for op in all_ops() if op.ufunc is not None}
    assert {"activation", "binary"} <= ufunc_ops <= set(INTO_OPS)


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "u8", "bool"])
def test_arena_ufunc_steps_match_the_reference_in_place_and_broadcast(dtype):
    """Every binary op, and the activations that are one ufunc, on operands the arena may overwrite, against
    NumPy written out (int div / pow and the bool ops take the kernel's own path)."""
    rng = np.random.default_rng(3)
    np_dtype = rlx.DType.of(dtype).numpy
    a = (rng.standard_normal((3, 4)) * 4).astype(np_dtype)
    b = (rng.standard_normal(4) * 4 + 0.5).astype(np_dtype)
    if dtype != "bool":
        a[0, 0], b[1] = 0, 1
    ops = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    if dtype in ("f32", "f64"):
        ops.update(sub=np.subtract, div=np.divide, fmax=np.fmax, fmin=np.fmin, pow=np.power)
        a[0, 1], b[2] = np.nan, np.inf
    elif dtype != "bool":
        ops.update(sub=np.subtract)
    if dtype == "bool":
        ops.update(add=np.logical_or, mul=np.logical_and)
    g = rlx.Graph("ufuncs")
    x, y = g.input("x", a.shape, dtype), g.input("y", b.shape, dtype)
    outs, want = [], []
    for name, f in ops.items():
        h = g.binary(x, y, op=name)  # broadcast y
        outs.append(g.binary(h, x, op=name))  # h is dead after this: the planner may write over it
        with np.errstate(all="ignore"):
            want.append(f(f(a, b), a))
    if dtype in ("f32", "f64"):
        for kind, f in (("relu", lambda v: np.maximum(v, 0)), ("tanh", np.tanh), ("exp", np.exp), ("abs", np.abs)):
            outs.append(g.activation(g.binary(x, y, op="add"), kind=kind))
            want.append(f(a + b))
    g.set_outputs(outs)
    with np.errstate(all="ignore"):
        got = rlx.compile(g, backend="numpy").run({"x": a, "y": b})
    ref = rlx.run(g, {"x": a, "y": b})
    for out, w, r in zip(got, want, ref, strict=True):
        np.testing.assert_array_equal(out, w)
        assert _bits(out) == _bits(r)


def test_arena_runs_the_into_hooks_without_copies():
    g = rlx.Graph("into")
    x = g.input("x", (2, 3, 8))
    y = g.layer_norm(g.gelu(x * 2.0 + 1.0), g.param("g", (8,)), g.param("b", (8,)))
    g.set_outputs([y, g.sigmoid(y) @ g.param("w", (8, 8))])
    rng = np.random.default_rng(0)
    params = {"g": rng.standard_normal(8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32),
              "w": rng.standard_normal((8, 8)).astype(np.float32)}
    feed = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32)}
    for inputs in ("arena", "outside"):
        for outputs in ("arena", "outside"):
            exe = rlx.compile(g, params=params, inputs=inputs, outputs=outputs)
            for got, want in zip(exe.run(feed), rlx.run(g, feed, params)):
                assert _bits(got) == _bits(want)
