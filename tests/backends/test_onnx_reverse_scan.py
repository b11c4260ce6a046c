"""ONNX Scan with every scan input reversed and every scan output prepended imports as ONE rlx
``scan(reverse=True)``; mixed directions are unrolled. Both match onnxruntime."""

from __future__ import annotations

import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx.onnx  # noqa: E402
from backends.test_onnx_export_control_flow import _check, _close, _f32, _rnn_scan  # noqa: E402
from opcases import sub  # noqa: E402


def _computed(g):
    return [n for n in g.nodes if n.op not in ("input", "param", "constant")]


def _no_xs_scan():
    g = rlx.Graph("scan_no_xs")
    c = g.input("c", (2,))
    body = sub("step", [("c", (2,), "f32")], lambda h, c: c * 0.5 + h.cos(c))
    g.set_outputs([g.scan(c, body=body, length=4, save_trajectory=True, reverse=True)])
    return g, [{"c": _f32(2, seed=9)}], {}


def _rnn(**attrs):
    feeds = [{"h": _f32(2, 3, seed=4), "xs": _f32(5, 2, 3, seed=5), "ys": _f32(5, 3, seed=6), "b": _f32(3, seed=7)}]
    return _rnn_scan(reverse=True, **attrs), feeds, {"w": _f32(3, 3, seed=8, scale=0.5)}


@pytest.mark.parametrize("case", [_rnn, lambda: _rnn(save_trajectory=True), _no_xs_scan],
                         ids=["final", "trajectory", "no_xs_trajectory"])
def test_exported_reverse_scan_imports_as_one_reverse_scan(case):
    g, feeds, params = case()
    proto = _check(g, feeds, params, expect=["Scan"])  # ort == rlx == imported
    back, _ = rlx.onnx.import_model(proto)
    nodes = _computed(back)
    assert [n.op for n in nodes] == ["scan"], [n.op for n in nodes]
    assert nodes[0].attrs["reverse"] is True
    assert nodes[0].attrs["save_trajectory"] == g.node(g.output_ids[0]).attrs["save_trajectory"]


def _scan_model(in_dirs, out_dirs):
    """Hand-built Scan: state s [3], scan inputs a [4, 3], b [4, 3]; s' = tanh(s * a_t + b_t), stacked."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "a_t"], ["m"]), helper.make_node("Add", ["m", "b_t"], ["p"]),
         helper.make_node("Tanh", ["p"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["s_row"])],
        "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("s_in", "a_t", "b_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("s_out", "s_row")])
    scan = helper.make_node("Scan", ["s0", "a", "b"], ["s_fin", "traj"], body=body, num_scan_inputs=2,
                            scan_input_directions=in_dirs, scan_output_directions=out_dirs)
    graph = helper.make_graph(
        [scan], "scan_dirs",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [3]),
         *[helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 3]) for n in ("a", "b")]],
        [helper.make_tensor_value_info("s_fin", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("traj", TensorProto.FLOAT, [4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("in_dirs,out_dirs,structured", [
    ([1, 1], [1], True),
    ([0, 0], [0], True),
    ([1, 0], [1], False),  # mixed scan inputs
    ([1, 1], [0], False),  # reversed inputs, appended output
    ([0, 0], [1], False),  # forward inputs, prepended output
], ids=["reverse", "forward", "mixed_inputs", "rev_in_fwd_out", "fwd_in_rev_out"])
def test_hand_built_scan_directions(in_dirs, out_dirs, structured):
    model = _scan_model(in_dirs, out_dirs)
    feeds = {"s0": _f32(3, seed=1), "a": _f32(4, 3, seed=2), "b": _f32(4, 3, seed=3)}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    back, bparams = rlx.onnx.import_model(model)
    _close(rlx.run(back, feeds, bparams), sess.run(None, feeds), rtol=1e-5, atol=1e-6)
    scans = [n for n in back.nodes if n.op == "scan"]
    if structured:
        assert scans and {n.attrs["reverse"] for n in scans} == {bool(in_dirs[0])}
        assert len(_computed(back)) <= 2  # final and trajectory scans
    else:
        assert not scans and len(_computed(back)) > 8  # unrolled over the 4 steps
