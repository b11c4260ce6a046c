"""Views per result: a split's pieces alias its operand's buffer when NumPy's would be contiguous.

Checked independently of the planner: liveness is re-derived here from the schedule and the
graph (a view keeps its root alive; outputs live to the end), no two buffers live at the same
step may share a byte unless one overwrites the other in place as it dies, each view's offset
equals the byte offset NumPy gives the same piece of a C-contiguous array, and the arena
executor's numbers equal NumPy's.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rlx


def _intervals(g: rlx.Graph, p) -> dict[int, list[int]]:
    """[first step, last step] of each node, from the schedule and the graph alone."""
    step = {nid: t for t, nid in enumerate(p.schedule)}
    end = len(p.schedule)
    live = {nid: [t, t] for nid, t in step.items()}
    for node in g.nodes:
        for i in node.inputs:
            live[i][1] = max(live[i][1], step[node.id])
        if node.op == "result":  # a result is written by its producer's step
            live[node.id][0] = step[node.id - node.attrs["index"]]
    for o in g.output_ids:
        live[o][1] = end
    return live


def _roots(p) -> dict[int, int]:
    return {v: a.root for v, a in p.view_aliases.items()}


def check_plan(g: rlx.Graph, lir) -> None:
    p = lir.plan
    live = _intervals(g, p)
    roots = _roots(p)
    for v, r in roots.items():  # a view keeps its root alive
        live[r][1] = max(live[r][1], live[v][1])
        live[r][0] = min(live[r][0], live[v][0])
    bufs = {nid: s for nid, s in p.assignments.items() if nid not in roots and s.size > 0}
    for (a, sa), (b, sb) in itertools.combinations(sorted(bufs.items()), 2):
        bytes_overlap = sa.offset < sb.offset + sb.size and sb.offset < sa.offset + sa.size
        (a0, a1), (b0, b1) = live[a], live[b]
        time_overlap = a0 <= b1 and b0 <= a1
        if bytes_overlap and time_overlap:
            inplace = (p.inplace.get(b) == a and a1 == b0) or (p.inplace.get(a) == b and b1 == a0)
            assert inplace, f"%{a} {sa} live {live[a]} and %{b} {sb} live {live[b]} share bytes"
    for v, alias in p.view_aliases.items():
        root = p.assignments[alias.root]
        assert p.assignments[v].offset == root.offset + alias.byte_offset
        assert alias.byte_offset + p.assignments[v].size <= root.size


def _split_case(shape, axis, sizes, dtype=np.float32):
    g = rlx.Graph("split_views")
    x = g.input("x", shape, rlx.DType.of(np.dtype(dtype)))
    y = g.exp(x)
    pieces = g.split(y, sizes, axis=axis)
    pieces = pieces if isinstance(pieces, tuple) else (pieces,)
    outs = [p * 2.0 if k % 2 else p for k, p in enumerate(pieces)]  # some pieces are outputs as they are (views)
    g.set_outputs(outs)
    return g, y, pieces


CASES = [((1, 10, 3), 1, [2, 3, 5]), ((10, 3), 0, [4, 6]), ((2, 10), 1, [5, 5]), ((1, 1, 8), 2, [1, 3, 4]),
         ((4, 6), 0, [0, 4]), ((6,), 0, [6]), ((3, 4, 2), 2, [1, 1])]


@pytest.mark.parametrize(("shape", "axis", "sizes"), CASES, ids=[f"{s}-ax{a}-{z}" for s, a, z in CASES])
def test_split_pieces_are_views_exactly_where_numpy_pieces_are_contiguous(shape, axis, sizes):
    g, y, pieces = _split_case(shape, axis, sizes)
    lir = rlx.plan(g)
    check_plan(g, lir)
    arr = np.empty(shape, np.float32)
    cuts = np.cumsum(sizes)[:-1]
    for value, piece in zip(pieces, np.split(arr, cuts, axis=axis)):
        alias = lir.plan.view_aliases.get(value.id)
        if piece.size and piece.flags.c_contiguous:
            assert alias is not None, f"piece %{value.id} should be a view"
            root_alias = lir.plan.view_aliases.get(y.id)
            base = (root_alias.root, root_alias.byte_offset) if root_alias else (y.id, 0)
            assert (alias.root, alias.byte_offset) == (base[0], base[1] + piece.ctypes.data - arr.ctypes.data)
        elif piece.size:
            assert alias is None, f"piece %{value.id} is not contiguous in its operand, so it cannot be a view"
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    got = rlx.compile(lir).run(inputs={"x": x})
    want = [p * 2.0 if k % 2 else p for k, p in enumerate(np.split(np.exp(x), cuts, axis=axis))]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b.astype(np.float32))


def test_views_of_pieces_chain_to_the_root_and_keep_it_alive():
    g = rlx.Graph("chain")
    x = g.input("x", (1, 12))
    y = g.tanh(x)
    a, b = g.split(g.reshape(y, (12,)), [4, 8], axis=0)
    c = g.reshape(b, (2, 4))  # a view of a view
    late = g.exp(a)  # `a` is read after `c` is made; both keep y's buffer alive
    g.set_outputs([late, c * 3.0])
    lir = rlx.plan(g)
    check_plan(g, lir)
    va, vc = lir.plan.view_aliases[a.id], lir.plan.view_aliases[c.id]
    assert va.root == vc.root == y.id and (va.byte_offset, vc.byte_offset) == (0, 16)
    xv = np.linspace(-2, 2, 12, dtype=np.float32).reshape(1, 12)
    got = rlx.compile(lir).run(inputs={"x": xv})
    t = np.tanh(xv).reshape(12)
    np.testing.assert_array_equal(got[0], np.exp(t[:4]))
    np.testing.assert_array_equal(got[1], (t[4:] * 3.0).reshape(2, 4))


def test_random_graphs_with_splits_pass_the_independent_check():
    rng = np.random.default_rng(11)
    for trial in range(12):
        rows, cols = int(rng.integers(1, 4)), int(rng.integers(2, 9))
        axis = int(rng.integers(0, 2))
        n = (rows, cols)[axis]
        cut = sorted(rng.choice(np.arange(1, n), size=min(int(rng.integers(1, 3)), n - 1), replace=False)) if n > 1 else []
        sizes = [int(s) for s in np.diff([0, *cut, n])]
        g = rlx.Graph(f"r{trial}")
        x = g.input("x", (rows, cols))
        y = g.exp(x) + 1.0
        parts = g.split(y, sizes, axis=axis)
        parts = parts if isinstance(parts, tuple) else (parts,)
        outs = [g.relu(p - 1.5) if k % 2 else p for k, p in enumerate(parts)]
        g.set_outputs([*outs, g.reduce(y, "sum", axes=(0, 1))])
        lir = rlx.plan(g)
        check_plan(g, lir)
        xv = rng.standard_normal((rows, cols)).astype(np.float32)
        got = rlx.compile(lir).run(inputs={"x": xv})
        yv = np.exp(xv) + np.float32(1.0)
        pieces = np.split(yv, np.cumsum(sizes)[:-1], axis=axis)
        want = [np.maximum(p - np.float32(1.5), 0) if k % 2 else p for k, p in enumerate(pieces)] + [yv.sum()]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)
