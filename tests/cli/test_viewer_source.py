"""The viewer speaks the source model's language: every imported node keeps the ONNX op type and
node name (or the torch aten op, FX node and module path) it came from, through passes (merged
on fusion); control-flow bodies open in place; a large graph opens collapsed by module path with
an overview; search finds a node by its ONNX name. Headless Chromium checks the page through its
DOM (the page's ``#q=`` / ``#open=`` address drives search and opening); screenshots go to tmp_path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.ir.graph import Origin
from rlx.viz.html import viewer_data

from .conftest import run_cli
from .test_viewer_html import _chromium, _embedded, needs_chromium
from .viewer_models import control_flow_onnx, transformer_onnx

onnx = pytest.importorskip("onnx")
import rlx.onnx  # noqa: E402


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("viewer") / "encoder.onnx"
    onnx.save(transformer_onnx(), str(path))
    return path


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    path = tmp_path_factory.mktemp("viewer") / "control.onnx"
    onnx.save(control_flow_onnx(), str(path))
    return path


def _origins(node):
    return node.prov.origins if node.prov is not None else ()


def test_onnx_origins_survive_passes_and_merge_on_fusion(encoder):
    proto = onnx.load(str(encoder))
    by_name = {n.name: n.op_type for n in proto.graph.node}
    g, _ = rlx.onnx.import_model(proto)
    stamped = [o for n in g.nodes for o in _origins(n)]
    assert stamped and all(o.framework == "onnx" and by_name[o.name] == o.op for o in stamped)
    assert {o.name for o in stamped} == set(by_name)  # every ONNX node is named by some rlx node
    opt, _ = rlx.optimize(g)
    assert all(_origins(n) for n in opt.nodes if n.op not in ("input", "param", "constant", "result"))
    fused = [n for n in opt.nodes if len(_origins(n)) > 1]
    assert fused, "no fused node carries the ONNX nodes it replaced"
    for n in fused:
        assert all(by_name[o.name] == o.op for o in _origins(n))


def test_torch_origins_name_aten_op_fx_node_and_module():
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    net = torch.nn.Sequential(Block(), Block()).eval()
    g, _ = rlx.torch.import_module(net, (torch.randn(2, 4),))
    got = {(o.op, o.name, o.module) for n in g.nodes for o in _origins(n)}
    assert got == {("aten.linear.default", "linear", "0.fc"), ("aten.relu.default", "relu", "0"),
                   ("aten.linear.default", "linear_1", "1.fc"), ("aten.relu.default", "relu_1", "1")}
    opt, _ = rlx.optimize(g)
    fused = [[(o.name, o.module) for o in _origins(n)] for n in opt.nodes if n.op.startswith("fused")]
    assert fused == [[("linear", "0.fc"), ("relu", "0")], [("linear_1", "1.fc"), ("relu_1", "1")]]


def test_origins_take_no_part_in_equality():
    a = rlx.Provenance(label="x", origins=(Origin("onnx", "Relu", "r"),))
    assert a == rlx.Provenance(label="x") and a.with_pass("p").origins == a.origins


def test_viewer_data_groups_by_module_path_and_names_sources(encoder):
    g, _ = rlx.onnx.import_model(str(encoder))
    assert len(g) >= 1000
    data = viewer_data(g)
    assert data["collapsed"] and data["blocks"] == [f"layers.{i}" for i in range(24)]
    soft = next(d for d in data["nodes"] if "softmax" in d["search"] and "layers.3/" in d["search"])
    rows = dict(map(tuple, soft["details"]))
    assert rows["source"].startswith('ONNX Softmax "/layers.3/self_attn/Softmax_')
    assert "‹Softmax›" in soft["label"]


def test_control_flow_bodies_are_in_the_data(control):
    g, _ = rlx.onnx.import_model(str(control))
    data = viewer_data(g)
    branch = next(d for d in data["nodes"] if d.get("bodies") and "if" in d["search"])
    titles = [b["title"] for b in branch["bodies"]]
    assert sorted(titles) == ["branch_on_c: else_branch", "branch_on_c: then_branch"]
    then = next(b for b in branch["bodies"] if b["title"].endswith("then_branch"))
    sources = [r[1] for n in then["nodes"] for r in n["details"] if r[0] == "source"]
    assert 'ONNX Relu "then_relu"' in sources and 'ONNX Add "then_double"' in sources
    assert all(n["key"].startswith(f"{branch['key']}/then_branch/") for n in then["nodes"])


def test_draw_page_shows_source_op_types(encoder, tmp_path):
    page = tmp_path / "g.html"
    res = run_cli("draw", encoder, "-o", page)
    assert res.rc == 0, res.err
    html = page.read_text()
    for op in ("ONNX Softmax", "ONNX LayerNormalization", "ONNX MatMul", "ONNX Transpose"):
        assert op in html
    data = _embedded(html)
    assert json.dumps(data)  # the payload parses back


def _dom(page, tmp_path, fragment: str = "") -> str:
    proc = _chromium(["--dump-dom", page.as_uri() + fragment], tmp_path)
    if "<body" not in proc.stdout:
        pytest.skip(f"headless Chromium printed no DOM: {proc.stderr[-500:]}")
    assert re.search(r'data-rendered="\d+"', proc.stdout), "the viewer's script did not run"
    return proc.stdout


def _attr(dom: str, name: str) -> str:
    m = re.search(rf'<body[^>]* {name}="([^"]*)"', dom)
    assert m, name
    return m.group(1)


def _screenshot(page, tmp_path, name: str, fragment: str = "") -> None:
    _chromium([f"--screenshot={tmp_path / name}", "--window-size=1280,800", page.as_uri() + fragment], tmp_path)


@needs_chromium
def test_chromium_large_model_opens_collapsed_and_search_finds_onnx_name(encoder, tmp_path):
    page = tmp_path / "encoder.html"
    assert run_cli("draw", encoder, "-o", page).rc == 0
    data = _embedded(page.read_text())
    assert data["node_count"] >= 1000
    dom = _dom(page, tmp_path)
    assert int(_attr(dom, "data-rendered")) == 1 + 24  # the input and one box per layer
    assert len(re.findall(r'<g class="node block"', dom)) == 24
    assert 'id="ov-view"' in dom and dom.count('class="ov-block"') == 24  # the overview
    _screenshot(page, tmp_path, "collapsed.png")
    name = "/layers.17/self_attn/Softmax_"
    want = next(d for d in data["nodes"] if any(r[0] == "source" and name in r[1] for r in d["details"]))
    dom = _dom(page, tmp_path, "#q=" + name)
    assert '<span id="hits">1 match</span>' in dom
    assert re.search(rf'<div id="details" data-node="{want["key"]}">', dom)
    assert f'data-key="n:{want["key"]}"' in dom and "ONNX Softmax" in dom.split('id="details"')[1]
    assert int(_attr(dom, "data-rendered")) > 1 + 24  # its layer expanded, the others still boxes
    _screenshot(page, tmp_path, "found.png", "#q=" + name)


@needs_chromium
def test_chromium_control_flow_bodies_expand(control, tmp_path):
    page = tmp_path / "control.html"
    assert run_cli("draw", control, "-o", page).rc == 0
    data = _embedded(page.read_text())
    branch = next(d for d in data["nodes"] if d.get("bodies") and "if" in d["search"])
    dom = _dom(page, tmp_path)
    assert _attr(dom, "data-open") == "0" and re.search(r'class="node[^"]* has-body', dom)
    dom = _dom(page, tmp_path, f"#open={branch['key']}")
    assert _attr(dom, "data-open") == "2"  # then and else, in place
    assert dom.count(f'data-owner="{branch["key"]}"') == 2
    assert "then_relu" in dom and "else_neg" in dom
    dom = _dom(page, tmp_path, "#q=scan_add")  # a node inside the Scan body, found by its ONNX name
    assert _attr(dom, "data-open") == "1"
    m = re.search(r'<div id="details" data-node="([^"]+)">', dom)
    assert m and "/body/" in m.group(1) and 'ONNX Add "scan_add"' in dom
    _screenshot(page, tmp_path, "bodies.png", f"#open={branch['key']}")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    g, p = rlx.onnx.import_model(str(control))
    got = rlx.run(g, {"x": x, "c": np.array(False), "s0": np.zeros(3, np.float32)}, p)
    np.testing.assert_array_equal(got[0], -x)  # the model drawn is the model that runs
    np.testing.assert_array_equal(got[2], np.cumsum(x, axis=0))


LIGHT_DENSENET = None
try:
    import onnx.backend.test as _onnx_tests

    _light = Path(_onnx_tests.__file__).parent / "data" / "light" / "light_densenet121.onnx"
    LIGHT_DENSENET = _light if _light.is_file() else None
except ImportError:  # pragma: no cover
    pass


@needs_chromium
@pytest.mark.skipif(LIGHT_DENSENET is None, reason="the onnx package ships no light_densenet121.onnx")
def test_chromium_shipped_densenet_opens_readable(tmp_path):
    """DenseNet-121 as the onnx package ships it (onnx-caffe2 export, unnamed nodes n0..., weights as inputs):
    2,739 rlx nodes open as runs of ops, every input drawn inside the runs that read it; search by node name."""
    page = tmp_path / "densenet.html"
    assert run_cli("draw", LIGHT_DENSENET, "-o", page).rc == 0
    data = _embedded(page.read_text())
    assert data["node_count"] >= 1000 and data["collapsed"]
    dom = _dom(page, tmp_path)
    assert len(re.findall(r'<g class="node block"', dom)) == len(data["blocks"]) <= 30
    assert int(_attr(dom, "data-rendered")) - len(data["blocks"]) <= 2  # of its 600 inputs, the unread ones
    _screenshot(page, tmp_path, "densenet.png")
    proto = onnx.load(str(LIGHT_DENSENET), load_external_data=False)
    target = next(n for n in proto.graph.node if n.op_type == "Concat" and n.name)
    dom = _dom(page, tmp_path, "#q=" + f'"{target.name}"')
    m = re.search(r'<div id="details" data-node="([^"]+)">', dom)
    assert m, "search did not select the node"
    assert f'ONNX Concat "{target.name}"' in dom and '<span id="hits">1 match</span>' in dom
    assert int(_attr(dom, "data-rendered")) > len(data["blocks"])  # its run expanded in place


def test_torch_onnx_namespace_gives_the_module_path(tmp_path):
    """torch.onnx (dynamo) records each node's module scopes as metadata ``namespace``; the innermost
    module (not the aten op after it) is the node's module path, and the viewer groups by it."""
    from onnx import TensorProto, helper

    nodes = []
    x = "x"
    for i in range(8):
        for j, (op, fx) in enumerate([("MatMul", "linear"), ("Relu", "relu")]):
            node = helper.make_node(op, [x, "w"] if op == "MatMul" else [x], [f"t{i}_{j}"], name=f"node_{fx}_{i}")
            scope = f": M/layers.{i}: Layer/layers.{i}.fc: torch.nn.Linear" if op == "MatMul" else f": M/layers.{i}: Layer"
            entry = node.metadata_props.add()
            entry.key, entry.value = "namespace", f"{scope}/{fx}_{i}: aten.{fx}.default"
            nodes.append(node)
            x = f"t{i}_{j}"
    w = np.eye(4, dtype=np.float32)
    model = helper.make_model(helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                                                [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 4])],
                                                initializer=[helper.make_tensor("w", TensorProto.FLOAT, [4, 4], w.ravel())]))
    g, _ = rlx.onnx.import_model(model)
    modules = {o.name: o.module for n in g.nodes for o in _origins(n)}
    assert modules["node_linear_3"] == "layers.3.fc" and modules["node_relu_5"] == "layers.5"
    data = viewer_data(g, collapse="blocks")
    assert data["blocks"] == [f"layers.{i}" for i in range(8)]


@pytest.mark.slow
def test_torch_onnx_export_of_a_transformer_groups_by_layer(tmp_path):
    """A real torch.onnx (dynamo) export: nn.TransformerEncoder, 6 layers, random init."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    path = tmp_path / "encoder.onnx"
    torch.onnx.export(net, (torch.randn(1, 8, 16),), str(path), dynamo=True)
    g, params = rlx.onnx.import_model(str(path))
    data = viewer_data(g, collapse="blocks")
    assert data["blocks"] == [f"layers.{i}" for i in range(6)]
    x = np.random.default_rng(0).standard_normal((1, 8, 16)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(rlx.run(g, {next(iter(g.inputs())): x}, params)[0], want, rtol=1e-4, atol=1e-4)
