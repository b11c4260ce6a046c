"""Shared helpers of the JAX backend tests: op cases in float32, comparison, the compile entry point."""

from __future__ import annotations

import numpy as np

import rlx
from opcases import OpCase


def compile_fn():
    """``rlx.compile`` (the public entry point), or the runtime's while the top-level export is pending."""
    fn = getattr(rlx, "compile", None)
    if fn is None:
        from rlx.runtime.compile import compile as fn
    return fn


def f32_variant(case: OpCase) -> tuple[rlx.Graph, dict, dict]:
    """The case's graph and feed with float64 feed arrays made float32 (the case as written if that does not build).

    Most op cases feed float64 (their torch / NumPy oracles want it); the JAX parity target is
    float32, so each case is rebuilt from a float32 feed. Integer and bool operands are kept.
    """
    feed32 = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in case.feed.items()}
    variant = OpCase(case.op, case.name, case.build, feed32, case.oracle, params=case.params)
    try:
        g, _ = variant.graph()
        rlx.verify(g)
        inputs, params = variant.split_feed()
    except rlx.RlxError:
        g, _ = case.graph()
        inputs, params = case.split_feed()
    return g, inputs, params


def assert_close(got: list[np.ndarray], want: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, f"output {i}: dtype {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"output {i}: shape {a.shape} vs {b.shape}"
        if a.dtype.kind in "fcV" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            kind = np.complex128 if a.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(a.astype(kind), b.astype(kind), rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"output {i}")


def merge(graphs: list[rlx.Graph], name: str = "merged") -> tuple[rlx.Graph, list[dict[str, str]], list[slice]]:
    """One graph holding every graph of ``graphs`` side by side (leaves renamed ``g<k>_<name>``).

    Returns the merged graph, per graph the map from its leaf names to the merged names, and
    per graph the slice of the merged outputs that are its outputs. Compiling one merged graph
    costs one XLA compilation instead of one per case.
    """
    m = rlx.Graph(name)
    renames: list[dict[str, str]] = []
    spans: list[slice] = []
    outs: list[int] = []
    for k, g in enumerate(graphs):
        ids: dict[int, int] = {}
        names: dict[str, str] = {}
        for node in g.nodes:
            if node.op in ("input", "param"):
                new = f"g{k}_{node.attrs['name']}"
                declare = m.input if node.op == "input" else m.param
                ids[node.id] = declare(new, node.shape, node.dtype).id
                names[node.attrs["name"]] = new
            else:
                ids[node.id] = m.append(node.op, [ids[i] for i in node.inputs], dict(node.attrs), type=node.types, check=False).id
        renames.append(names)
        spans.append(slice(len(outs), len(outs) + len(g.output_ids)))
        outs.extend(ids[o] for o in g.output_ids)
    m.set_outputs(outs)
    return m, renames, spans
