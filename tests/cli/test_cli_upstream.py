"""rlx convert UPSTREAM.json: upstream rlx-ir serde JSON (rlx.from_upstream_json) to .rlx, then run and inspect."""

from __future__ import annotations

import json
import os

import numpy as np

import rlx

from .conftest import assert_one_line_error, run_cli

UPSTREAM = os.path.join(os.path.dirname(__file__), "..", "fixtures", "upstream")


def test_convert_upstream_lir_then_run(tmp_path):
    dst = tmp_path / "tanh_sum.rlx"
    res = run_cli("convert", os.path.join(UPSTREAM, "tanh_sum_lir.json"), "-o", dst, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert f"wrote {dst}" in res.out
    lir = rlx.load(dst)
    assert isinstance(lir, rlx.LirModule) and lir.graph.name == "tanh_sum"
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert run_cli("run", dst, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "y.npz").rc == 0
    with np.load(tmp_path / "y.npz") as z:
        np.testing.assert_allclose(z["output_0"], np.tanh(x).sum(axis=1), rtol=1e-6)


def test_convert_upstream_hir_keeps_the_hir_graph(tmp_path):
    dst = tmp_path / "block.rlx"
    assert run_cli("convert", os.path.join(UPSTREAM, "block_hir.json"), "-o", dst).rc == 0
    g = rlx.load(dst)
    assert g.stage is rlx.GraphStage.HIR and "linear" in {n.op for n in g.nodes}
    res = run_cli("inspect", "--brief", dst)
    assert res.rc == 0 and "block" in res.out


def test_convert_bad_upstream_document_names_the_field(tmp_path):
    with open(os.path.join(UPSTREAM, "mlp_mir.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["inner"]["nodes"][4]["op"] = {"Binary": "Foo"}
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc))
    assert_one_line_error(run_cli("convert", src, "-o", tmp_path / "o.rlx"), 'inner.nodes[4].op.Binary: unknown variant "Foo"')
    assert_one_line_error(run_cli("convert", tmp_path / "missing.json", "-o", tmp_path / "o.rlx"), "no such file")


def test_convert_to_upstream_json_round_trips(tmp_path):
    g = rlx.Graph("mlp")
    x, w = g.input("x", (2, 3)), g.param("w", (3, 4))
    g.set_outputs([g.activation(x @ w, "tanh")])
    w_arr = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    rlx.save(g, tmp_path / "mlp.rlx", params={"w": w_arr})
    dst = tmp_path / "mlp.json"
    res = run_cli("convert", tmp_path / "mlp.rlx", "--to", "upstream-json", "-o", dst, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert f"wrote {dst}" in res.out
    doc = json.loads(dst.read_text())
    assert [n["op"] for n in doc["inner"]["nodes"]][2:] == ["MatMul", {"Activation": "Tanh"}]
    back = rlx.from_upstream_json(dst.read_text())
    assert back == g
    xv = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(rlx.run(back, {"x": xv}, {"w": w_arr})[0], np.tanh(xv @ w_arr), rtol=1e-6)


def test_convert_to_upstream_json_names_the_node_without_a_form(tmp_path):
    g = rlx.Graph("s")
    g.set_outputs([g.unary_math(g.input("x", (2,)), "erf")])
    rlx.save(g, tmp_path / "s.rlx")
    assert_one_line_error(run_cli("convert", tmp_path / "s.rlx", "--to", "upstream-json", "-o", tmp_path / "s.json"),
                          "node %1 (unary_math): no upstream rlx-ir 0.2.1 form")
