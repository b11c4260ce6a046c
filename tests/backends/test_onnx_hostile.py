"""Hostile ONNX models: external data outside the model's folder, models that crash onnx's C++
shape inference, and tiny files that ask for unbounded work. Each import runs in a child
process with a CPU-time and memory limit, so a crash or a hang fails the test, not the suite;
the only acceptable outcomes are a graph or an ``rlx.RlxError`` naming what it refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import rlx  # noqa: E402
from rlx.frontends.onnx import import_model  # noqa: E402

CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (30, 30))
import rlx
from rlx.frontends.onnx import import_model
data = open(sys.argv[1], "rb").read()
kw = json.loads(sys.argv[2])
if "limits" in kw:
    kw["limits"] = rlx.LoadLimits(**kw["limits"])
try:
    g, _ = import_model(data, **kw)
    print(json.dumps({"outcome": "imported", "ops": sorted({n.op for n in g.nodes})}))
except rlx.RlxError as exc:
    print(json.dumps({"outcome": "rlx_error", "type": type(exc).__name__, "message": str(exc)}))
except BaseException as exc:
    print(json.dumps({"outcome": "other", "type": type(exc).__name__, "message": str(exc)[:500]}))
"""


def isolated_import(tmp_path, model, **kw) -> dict:
    """Import ``model`` in a child process (3 GiB, 30 s CPU); its outcome as a dict."""
    path = tmp_path / "model.bin"
    path.write_bytes(model.SerializeToString() if hasattr(model, "SerializeToString") else model)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), json.dumps(kw)], capture_output=True, text=True,
                          timeout=240, env=env)
    assert proc.returncode == 0, f"child died with {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def refused(result: dict, *words: str) -> None:
    assert result["outcome"] == "rlx_error", result
    for w in words:
        assert w in result["message"], (w, result["message"])


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def model_of(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


# ------------------------------------------------------------------------------ external data
WEIGHTS = np.arange(6, dtype=np.float32).reshape(2, 3)


def external_model(location: str, offset: int = 0, length: int | None = None):
    t = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], vals=[0.0] * 6)
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", None if length is None else str(length))):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, value
    node = helper.make_node("Add", ["x", "w"], ["y"])
    return model_of([node], [vi("x", [2, 3])], [vi("y", [2, 3])], [t])


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "w.bin").write_bytes(b"\0" * 8 + WEIGHTS.tobytes())
    (tmp_path / "outside.bin").write_bytes(b"\0" * 8 + np.full(6, 7, np.float32).tobytes())
    return d


def test_external_data_inside_the_folder_is_read(model_dir):
    m = external_model("w.bin", offset=8, length=24)
    (model_dir / "m.onnx").write_bytes(m.SerializeToString())
    for source, kw in ((str(model_dir / "m.onnx"), {}), (m.SerializeToString(), {"base_dir": model_dir}), (m, {"base_dir": model_dir})):
        g, params = import_model(source, **kw)
        x = np.ones((2, 3), np.float32)
        (y,) = rlx.run(g, {"x": x}, params)
        np.testing.assert_array_equal(y, x + WEIGHTS)
    assert m.graph.initializer[0].data_location == TensorProto.EXTERNAL  # the caller's proto is left as it was


@pytest.mark.parametrize("location", ["../outside.bin", "sub/../../outside.bin", "link_out", "/etc/passwd", "", "a\x00b",
                                      "fifo", "subdir", "missing.bin", "C:\\outside.bin"])
def test_external_data_outside_the_folder_or_not_a_file_is_refused(tmp_path, model_dir, location):
    os.symlink(tmp_path / "outside.bin", model_dir / "link_out")
    os.mkfifo(model_dir / "fifo")
    (model_dir / "subdir").mkdir()
    (model_dir / "sub").mkdir()
    result = isolated_import(tmp_path, external_model(location, offset=8, length=24), base_dir=str(model_dir))
    assert result["outcome"] == "rlx_error" and result["type"] == "OnnxFormatError", result


@pytest.mark.parametrize("offset,length,why", [(8, 12, "differs"), (100, 24, "past its end"), (8, 99999999999, "differs"),
                                               ("-1", 24, "non-negative"), ("1e3", 24, "non-negative")])
def test_external_data_region_is_checked_before_reading(model_dir, offset, length, why):
    with pytest.raises(rlx.FormatError, match=why):
        import_model(external_model("w.bin", offset=offset, length=length), base_dir=model_dir)


def test_bytes_or_proto_with_external_data_need_a_base_dir(model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)  # the data file is in the working directory: it must not be used
    m = external_model("w.bin", offset=8, length=24)
    for source in (m, m.SerializeToString()):
        with pytest.raises(rlx.FormatError, match="base_dir"):
            import_model(source)


def test_a_symlinked_model_folder_is_followed_but_data_links_out_are_not(tmp_path, model_dir):
    link = tmp_path / "alias"
    os.symlink(model_dir, link)
    _g, params = import_model(external_model("w.bin", offset=8, length=24), base_dir=link)
    assert params


def test_malformed_protobuf_and_sources_are_format_errors(tmp_path):
    for bad in (b"\xff\xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f", b"\x08" * 3):
        with pytest.raises(rlx.FormatError):
            import_model(bad)
    for bad in (tmp_path, tmp_path / "missing.onnx"):
        with pytest.raises(rlx.FormatError):
            import_model(bad)
    os.mkfifo(tmp_path / "pipe.onnx")
    with pytest.raises(rlx.FormatError, match="regular file"):
        import_model(tmp_path / "pipe.onnx")
    with pytest.raises(rlx.FormatError):
        import_model(12345)


def test_mis_sized_tensor_data_is_a_format_error():
    t = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], vals=np.zeros(6, np.float32).tobytes(), raw=True)
    t.raw_data = t.raw_data[:-4]
    m = model_of([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])], [t])
    with pytest.raises(rlx.FormatError, match="raw_data holds 20 bytes"):
        import_model(m)


# ------------------------------------------------------------------------------ no process crash
def crashers():
    """Models that crash onnx 1.23's C++ shape inference (SIGSEGV / SIGABRT) when it is run on them."""
    ln = model_of([helper.make_node("LayerNormalization", ["x", "s"], ["y", "m", "r"], axis=2**63 - 1)],
                  [vi("x", [2, 3]), vi("s", [3])], [vi("y", None)], opset=17)
    split = model_of([helper.make_node("Split", ["x"], ["a", "b"], num_outputs=1, axis=0)], [vi("x", [6])],
                     [vi("a", None), vi("b", None)])
    eye = model_of([helper.make_node("EyeLike", [""], ["y"])], [], [vi("y", None)])
    gnd = model_of([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=-5)],
                   [vi("x", [2, 2]), vi("i", [2, 1], TensorProto.INT64)], [vi("y", None)])
    return {"layernorm_axis": (ln, "axis"), "split_num_outputs": (split, "num_outputs"), "eyelike_empty_input": (eye, "required"),
            "gathernd_batch_dims": (gnd, "batch_dims")}


@pytest.mark.parametrize("name", sorted(crashers()))
def test_models_that_crash_onnx_shape_inference_are_refused_cleanly(tmp_path, name):
    model, word = crashers()[name]
    refused(isolated_import(tmp_path, model), word)


# ------------------------------------------------------------------------------ bounded work
def const_node(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value, dtype), name))


def huge_loop(trip: int):
    body = helper.make_graph([helper.make_node("Add", ["s", "one"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [vi("i", [], TensorProto.INT64), vi("c", [], TensorProto.BOOL), vi("s", [2])],
                             [vi("c2", [], TensorProto.BOOL), vi("s2", [2])],
                             [onnx.numpy_helper.from_array(np.ones(2, np.float32), "one")])
    nodes = [const_node("trip", trip), const_node("cond", True, np.bool_),
             helper.make_node("Loop", ["trip", "cond", "x"], ["y"], body=body)]
    return model_of(nodes, [vi("x", [2])], [vi("y", [2])])


def test_a_loop_of_1e18_iterations_stays_a_loop(tmp_path):
    result = isolated_import(tmp_path, huge_loop(10**18))
    assert result["outcome"] == "imported" and "while_" in result["ops"], result


def test_a_long_loop_stays_structured_and_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    m = huge_loop(300)
    g, params = import_model(m, limits=rlx.LoadLimits(max_unroll=100))
    assert any(n.op == "while_" for n in g.nodes)
    x = np.array([1.0, -2.0], np.float32)
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(rlx.run(g, {"x": x}, params)[0], want)


def scan_model(length: int, per_step_output: bool):
    """Scan with two states (no rlx ``scan`` form) or one state (a prefix sum), over ``length`` steps."""
    if per_step_output:
        body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Mul", ["s2", "x"], ["o"])],
                                 "body", [vi("s", [2]), vi("x", [2])], [vi("s2", [2]), vi("o", [2])])
        outs = ["final", "stack"]
    else:
        body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
                                 "body", [vi("s", [2]), vi("x", [2])], [vi("s2", [2]), vi("o", [2])])
        outs = ["final", "stack"]
    node = helper.make_node("Scan", ["s0", "xs"], outs, body=body, num_scan_inputs=1)
    return model_of([node], [vi("s0", [2]), vi("xs", [length, 2])], [vi(o, None) for o in outs])


def test_a_scan_over_1e9_steps_is_structured_or_refused_by_the_unroll_limit(tmp_path):
    result = isolated_import(tmp_path, scan_model(10**9, per_step_output=False))
    assert result["outcome"] == "imported" and "scan" in result["ops"], result
    refused(isolated_import(tmp_path, scan_model(10**9, per_step_output=True)), "Scan node", "max_unroll")


def test_the_unroll_limit_is_the_callers():
    with pytest.raises(rlx.RlxError, match=r"Scan node 'final'.*LoadLimits.max_unroll=10"):
        import_model(scan_model(20, per_step_output=True), limits=rlx.LoadLimits(max_unroll=10))
    g, _ = import_model(scan_model(20, per_step_output=True))
    assert g.outputs


def shape_op_model(op: str, n: float):
    if op == "Range":
        nodes = [const_node("a", 0), const_node("b", int(n)), const_node("d", 1), helper.make_node("Range", ["a", "b", "d"], ["y"])]
        return model_of(nodes, [], [vi("y", None, TensorProto.INT64)])
    if op == "ConstantOfShape":
        nodes = [const_node("s", [int(n)]), helper.make_node("ConstantOfShape", ["s"], ["y"])]
        return model_of(nodes, [], [vi("y", None)])
    if op == "Expand":
        nodes = [const_node("s", [int(n), 1]), helper.make_node("Expand", ["x", "s"], ["y"])]
        return model_of(nodes, [vi("x", [1, 4])], [vi("y", None)])
    if op == "Tile":
        nodes = [const_node("r", [int(n), 1]), helper.make_node("Tile", ["x", "r"], ["y"])]
        return model_of(nodes, [vi("x", [1, 4])], [vi("y", None)])
    if op == "Split":
        node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=int(n))
        return model_of([node], [vi("x", [6])], [vi("a", None), vi("b", None)])
    if op == "Col2Im":
        nodes = [const_node("img", [int(n), int(n)]), const_node("blk", [1, 1]), helper.make_node("Col2Im", ["x", "img", "blk"], ["y"])]
        return model_of(nodes, [vi("x", [1, 1, int(n) * int(n)])], [vi("y", None)])
    raise AssertionError(op)


@pytest.mark.parametrize("op,n,words", [("Range", 2e8, ["Range node", "max_constant_elements"]),
                                        ("ConstantOfShape", 1e12, ["ConstantOfShape node", "max_tensor_bytes"]),
                                        ("Expand", 1e12, ["Expand node", "max_tensor_bytes"]),
                                        ("Tile", 1e12, ["Tile node", "max_tensor_bytes"]),
                                        ("Split", 2**62, ["Split node", "num_outputs"]),
                                        ("Col2Im", 3e4, ["Col2Im node", "max_constant_elements"])])
def test_huge_shape_derived_values_are_refused_naming_the_node_and_limit(tmp_path, op, n, words):
    refused(isolated_import(tmp_path, shape_op_model(op, n)), *words)


def test_deep_nesting_is_bounded(tmp_path):
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [], [vi("y", [1])])
    inner = leaf
    for _ in range(12):  # one nested branch per level keeps the model linear in size (protobuf parses ~30 levels)
        node = helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], "b", [], [vi("y", [1])])
    m = model_of(inner.node, [vi("c", [], TensorProto.BOOL), vi("x", [1])], [vi("y", [1])])
    refused(isolated_import(tmp_path, m, limits={"max_depth": 8}), "max_depth")


def test_fold_budget_is_the_callers():
    m = shape_op_model("Range", 1000)
    g, _ = import_model(m)
    assert g.outputs[0].shape == (1000,)
    with pytest.raises(rlx.RlxError, match="max_constant_elements=100"):
        import_model(m, limits=rlx.LoadLimits(max_constant_elements=100))


def test_a_huge_rnn_hidden_size_is_refused_before_its_zero_state_is_built(tmp_path):
    """Fuzz case 16029: RNN hidden_size 1e9 allocated a [1, 1e9] zero state at import (MemoryError)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 4, 3], np.zeros(12, np.float32))
    r = helper.make_tensor("r", TensorProto.FLOAT, [1, 4, 4], np.zeros(16, np.float32))
    node = helper.make_node("RNN", ["x", "w", "r"], ["y", "h"], hidden_size=10**9)
    refused(isolated_import(tmp_path, model_of([node], [vi("x", [2, 1, 3])], [vi("h", None)], [w, r])),
            "RNN", "max_constant_elements")


def test_non_max_suppression_work_is_bounded_not_only_its_output(tmp_path):
    """200k constant boxes kept one by one would run 4e10 overlap tests at import: refused by the element budget."""
    n = 200_000
    corners = np.arange(n, dtype=np.float32)[:, None] * 2 + np.array([0, 0, 1, 1], np.float32)  # disjoint boxes
    nodes = [const_node("boxes", corners[None], np.float32), const_node("scores", np.linspace(1, 0, n)[None, None], np.float32),
             const_node("keep", [n]), helper.make_node("NonMaxSuppression", ["boxes", "scores", "keep"], ["sel"])]
    m = model_of(nodes, [], [vi("sel", None, TensorProto.INT64)])
    refused(isolated_import(tmp_path, m), "NonMaxSuppression", "overlap tests", "max_constant_elements")


@pytest.mark.parametrize("index,words", [(10**12, ["column map", "max_constant_elements"]), (-3, ["ngram_indexes", ">= 0"])])
def test_tfidf_column_indexes_are_checked_before_the_map_is_built(tmp_path, index, words):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                            max_skip_count=0, ngram_counts=[0], ngram_indexes=[index], pool_int64s=[7])
    m = model_of([node], [vi("x", [4], TensorProto.INT64)], [vi("y", None)], opset=9)
    refused(isolated_import(tmp_path, m), "TfIdfVectorizer", *words)
