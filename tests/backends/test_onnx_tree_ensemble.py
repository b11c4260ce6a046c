"""ai.onnx.ml TreeEnsemble (opset 5) against onnxruntime and onnx's reference evaluator on random forests."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402


def _forest(rng, n_trees, depth, n_feat, n_targets, modes, members, decimals):
    """Random full-ish trees in TreeEnsemble's flat encoding (some branches stop early at a leaf)."""
    a = {k: [] for k in ("splits", "feat", "modes", "tid", "fid", "tleaf", "fleaf", "miss")}
    leaves_w, leaves_t, roots, member_vals = [], [], [], []

    def leaf():
        leaves_w.append(float(rng.normal()))
        leaves_t.append(int(rng.integers(n_targets)))
        return len(leaves_w) - 1

    def node(d):
        j = len(a["splits"])
        for k in a:
            a[k].append(0)
        mode = int(rng.choice(modes))
        a["modes"][j], a["feat"][j] = mode, int(rng.integers(n_feat))
        a["splits"][j] = float(np.round(rng.normal() * 10**-decimals + 1.5 * (decimals == 0), decimals))
        a["miss"][j] = int(rng.integers(2))
        if mode == 6:
            member_vals.extend([*rng.choice(members, 2, replace=False).tolist(), np.nan])
        for side in ("t", "f"):
            if d + 1 >= depth or rng.random() < 0.2:
                a[side + "id"][j], a[side + "leaf"][j] = leaf(), 1
            else:
                a[side + "id"][j], a[side + "leaf"][j] = node(d + 1), 0
        return j

    for _ in range(n_trees):
        roots.append(node(0))
    return a, leaves_w, leaves_t, roots, member_vals


def _model(rng, n_feat, n_targets, agg, post=0, modes=(0, 1, 2, 3), members=(1.0, 2.0, 3.0, 5.0), n_trees=4, depth=4, decimals=1):
    a, w, t, roots, mv = _forest(rng, n_trees, depth, n_feat, n_targets, modes, members, decimals)
    f32 = lambda v: helper.make_tensor("t", TensorProto.FLOAT, [len(v)], v)
    kw = {"membership_values": f32(mv)} if mv else {}
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=n_targets, aggregate_function=agg,
        post_transform=post, tree_roots=roots, nodes_splits=f32(a["splits"]), nodes_featureids=a["feat"],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(a["modes"])], a["modes"]),
        nodes_truenodeids=a["tid"], nodes_falsenodeids=a["fid"], nodes_trueleafs=a["tleaf"],
        nodes_falseleafs=a["fleaf"], nodes_missing_value_tracks_true=a["miss"], leaf_targetids=t,
        leaf_weights=f32(w), **kw)
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, n_feat])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)],
                             ir_version=10)


def _x(rng, n, n_feat, discrete=False):
    x = (rng.integers(0, 4, (n, n_feat)) if discrete else np.round(rng.normal(size=(n, n_feat)), 1)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan  # missing values follow nodes_missing_value_tracks_true
    return x


def _rlx(model, x):
    g, params = import_model(model)
    (got,) = rlx.run(g, {"x": x}, params)
    return got


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_tree_ensemble_matches_onnxruntime_and_reference(agg, seed):
    rng = np.random.default_rng(seed)
    model = _model(rng, n_feat=5, n_targets=3, agg=agg)
    x = _x(rng, 64, 5)  # splits and features on a 0.1 grid: ties hit every <= / < / >= / > boundary
    got = _rlx(model, x)
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert got.shape == (64, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    reached = np.abs(ref) < 1e38  # for MIN / MAX a target no leaf reached is 0 in onnxruntime, +-max in the reference
    np.testing.assert_allclose(got[reached], want[reached], rtol=1e-5, atol=1e-5)
    assert len(np.unique(got)) > 8


def test_tree_ensemble_equality_and_set_membership():
    rng = np.random.default_rng(3)
    # members exclude 0.0: the reference evaluator ends a membership set at a 0.0 as if it were the NaN
    model = _model(rng, n_feat=3, n_targets=2, agg=1, modes=(4, 5, 6, 0), decimals=0)
    x = _x(rng, 64, 3, discrete=True)
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x})
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = _rlx(model, x)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(np.unique(got)) > 4


@pytest.mark.parametrize("post", [1, 2])
def test_tree_ensemble_post_transform_follows_the_spec_enum(post):
    """post_transform 1 is SOFTMAX and 2 LOGISTIC (the opset-5 schema); onnxruntime 1.32 applies them the
    other way round, and the reference evaluator ignores post_transform, so the oracle is its raw score
    through the transform written here."""
    rng = np.random.default_rng(5)
    model = _model(rng, n_feat=4, n_targets=3, agg=1, post=post)
    x = _x(rng, 32, 4)
    (raw,) = ReferenceEvaluator(model).run(None, {"x": x})
    raw = raw.astype(np.float64)
    expect = np.exp(raw) / np.exp(raw).sum(1, keepdims=True) if post == 1 else 1 / (1 + np.exp(-raw))
    np.testing.assert_allclose(_rlx(model, x), expect, rtol=1e-5, atol=1e-6)


def test_tree_ensemble_refuses_a_leaf_out_of_range():
    model = _model(np.random.default_rng(0), n_feat=2, n_targets=1, agg=1)
    for a in model.graph.node[0].attribute:
        if a.name == "nodes_truenodeids":
            a.ints[0] = 10_000
    with pytest.raises(rlx.RlxError, match="out of range"):
        import_model(model)
