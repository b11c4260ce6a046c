"""ONNX ai.onnx.ml TreeEnsemble (opset 5): the static trees become dense tensor ops.

Every interior node's test is evaluated for every row at once (a gather of the features, the comparisons
selected per node by its mode); each root-to-leaf path is a row of a constant matrix, and a path is taken
when none of its tests disagrees (one f64 matmul counts the disagreements, exactly). The leaf weights are
then summed / averaged (a matmul) or min / max-reduced per target. The path matrix is dense
(interior nodes x paths), so the ensemble size is bounded by the importer's element budget.
"""

from __future__ import annotations

import numpy as np

from rlx.frontends.onnx.import_context import converter
from rlx.frontends.onnx.import_helpers import _cast, _reshape
from rlx.ir.dtype import DType
from rlx.ir.onnx_format import OnnxFormatError, OnnxUnsupported

_COMPARE = {0: "le", 1: "lt", 2: "ge", 3: "gt", 4: "eq", 5: "ne"}
_MEMBER = 6


def _array(v) -> np.ndarray:
    """A tensor attribute (TensorProto) or a list attribute as NumPy."""
    if hasattr(v, "dims"):
        from onnx import numpy_helper

        return numpy_helper.to_array(v)
    return np.asarray(v)


def _paths(attrs, n_nodes: int, n_leaves: int) -> list[tuple[list[tuple[int, bool]], int]]:
    """Every root-to-leaf path of every tree: ([(node, branch taken)], leaf index)."""
    true_ids, false_ids = list(attrs["nodes_truenodeids"]), list(attrs["nodes_falsenodeids"])
    true_leaf, false_leaf = list(attrs["nodes_trueleafs"]), list(attrs["nodes_falseleafs"])
    out: list[tuple[list[tuple[int, bool]], int]] = []

    def walk(node: int, is_leaf: bool, path: list[tuple[int, bool]]) -> None:
        if not 0 <= node < (n_leaves if is_leaf else n_nodes) or len(path) > n_nodes:
            raise OnnxFormatError(f"TreeEnsemble: {'leaf' if is_leaf else 'node'} {node} is out of range "
                                  f"or the trees have a cycle")
        if is_leaf:
            out.append((path, node))
            return
        walk(true_ids[node], bool(true_leaf[node]), [*path, (node, True)])
        walk(false_ids[node], bool(false_leaf[node]), [*path, (node, False)])

    for root in attrs["tree_roots"]:
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:
            walk(true_ids[root], True, [])  # a tree that is a single leaf
        else:
            walk(root, False, [])
    return out


def _member_table(attrs, modes: np.ndarray) -> np.ndarray:
    """[nodes, k] members of each BRANCH_MEMBER node (NaN-padded; NaN equals nothing)."""
    groups: list[list[float]] = [[]]
    for v in _array(attrs.get("membership_values", np.zeros(0))).astype(np.float64).reshape(-1):
        if np.isnan(v):
            groups.append([])
        else:
            groups[-1].append(float(v))
    member_nodes = np.flatnonzero(modes == _MEMBER)
    if len(groups) - 1 < len(member_nodes):
        raise OnnxFormatError(f"TreeEnsemble: {len(member_nodes)} BRANCH_MEMBER nodes, "
                              f"{len(groups) - 1} NaN-delimited membership sets")
    table = np.full((len(modes), max([len(g) for g in groups] + [1])), np.nan)
    for node, members in zip(member_nodes, groups):
        table[node, :len(members)] = members
    return table


def _node_tests(cx, x, attrs, modes: np.ndarray):
    """[N, nodes] f64: 1 where a row takes a node's true branch."""
    feats = _array(attrs["nodes_featureids"]).astype(np.int64)
    xg = cx.g.gather(_cast(cx, x, DType.F64), cx.const(feats), axis=1)
    splits = cx.const(_array(attrs["nodes_splits"]).astype(np.float64).reshape(-1))
    cond = None
    for mode in sorted(set(modes.tolist()) - {_MEMBER}):
        if mode not in _COMPARE:
            raise OnnxFormatError(f"TreeEnsemble: node mode {mode} is not one of 0..6")
        r = cx.g.compare(xg, splits, op=_COMPARE[mode])
        cond = r if cond is None else cx.g.where(cx.const(modes == mode), r, cond)
    if (modes == _MEMBER).any():
        table = cx.const(_member_table(attrs, modes))
        hit = cx.g.compare(_reshape(cx, xg, [*xg.shape, 1]), table, op="eq")
        member = cx.g.gt(cx.g.max(_cast(cx, hit, DType.F64), axes=[2]), cx.scalar(0.0, xg))
        cond = member if cond is None else cx.g.where(cx.const(modes == _MEMBER), member, cond)
    c = _cast(cx, cond, DType.F64)
    missing = attrs.get("nodes_missing_value_tracks_true")
    if missing is not None and any(missing):  # NaN takes the true branch there (NaN != split already does)
        nan = _cast(cx, cx.g.ne(xg, xg), DType.F64)
        c = cx.g.maximum(c, nan * cx.const(np.asarray(missing, np.float64)))
    return c


@converter("ai.onnx.ml.TreeEnsemble")
def _tree_ensemble(cx, node, ins, attrs):
    x = ins[0]
    if len(x.shape) != 2:
        raise OnnxFormatError(f"TreeEnsemble X must be [N, F], got {list(x.shape)}")
    post = attrs.get("post_transform", 0)
    if post not in (0, 1, 2):
        raise OnnxUnsupported(f"TreeEnsemble post_transform {post} (SOFTMAX_ZERO / PROBIT)")
    modes = _array(attrs["nodes_modes"]).astype(np.int64).reshape(-1)
    weights = _array(attrs["leaf_weights"]).astype(np.float64).reshape(-1)
    targets = np.asarray(attrs["leaf_targetids"], np.int64)
    n_targets, agg = int(attrs["n_targets"]), attrs.get("aggregate_function", 1)
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        raise OnnxFormatError(f"TreeEnsemble: leaf_targetids outside [0, {n_targets})")
    paths = _paths(attrs, len(modes), len(weights))
    cx.check_elements(len(modes) * len(paths), "the TreeEnsemble path matrix")
    # disagreements of path p = (#true-branch tests on p) + c @ (false - true incidence)
    inc = np.zeros((len(modes), len(paths)))
    need = np.zeros(len(paths))
    for p, (steps, _) in enumerate(paths):
        for j, branch in steps:
            inc[j, p] += -1.0 if branch else 1.0
            need[p] += 1.0 if branch else 0.0
    c = _node_tests(cx, x, attrs, modes)
    taken = cx.g.eq(cx.g.matmul(c, cx.const(inc)) + cx.const(need), cx.scalar(0.0, c))  # [N, paths]
    w, t = weights[[leaf for _, leaf in paths]], targets[[leaf for _, leaf in paths]]
    onehot = np.arange(n_targets)[None, :] == t[:, None]  # [paths, targets]
    if agg in (0, 1):
        scale = 1.0 / len(attrs["tree_roots"]) if agg == 0 else 1.0
        y = cx.g.matmul(_cast(cx, taken, DType.F64), cx.const(np.where(onehot, w[:, None] * scale, 0.0)))
    elif agg in (2, 3):
        big = float(np.finfo(x.dtype.numpy).max)
        init = big if agg == 2 else -big
        sel = cx.g.where(_reshape(cx, taken, [*taken.shape, 1]), cx.const(np.where(onehot, w[:, None], init)),
                         cx.scalar(init, c))
        y = cx.g.min(sel, axes=[1]) if agg == 2 else cx.g.max(sel, axes=[1])
    else:
        raise OnnxFormatError(f"TreeEnsemble aggregate_function {agg} is not one of 0..3")
    if post == 1:
        y = cx.g.softmax(y, axis=1)
    elif post == 2:
        y = cx.g.sigmoid(y)
    return _cast(cx, y, x.dtype)
