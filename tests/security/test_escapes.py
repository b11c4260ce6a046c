"""Issue #32's escapes: a hostile node name must not blank the HTML viewer, an ONNX LpNormalization of a
scalar and a JAX gather from an empty axis are RlxErrors (not numpy.AxisError / IndexError)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import rlx

HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>", "<!--", "-->", "</SCRIPT >", "<script>x</script>-->"]


def _script_end(page: str, i: int) -> int:
    """Where the script element whose content starts at ``i`` ends, by the HTML tokenizer's script data
    states (data, escaped after ``<!--``, double escaped after ``<!--<script>``); -1 if it never does."""
    state = "data"
    while i < len(page):
        rest = page[i:i + 10]
        if state == "data" and rest.startswith("<!--"):
            state, i = "escaped", i + 4
            continue
        if state in ("data", "escaped") and re.match(r"</script[\s/>]", rest, re.I):
            return i
        if state in ("escaped", "double") and rest.startswith("-->"):
            state, i = "data", i + 3
            continue
        if state == "escaped" and re.match(r"<script[\s/>]", rest, re.I):
            state, i = "double", i + 7
            continue
        if state == "double" and re.match(r"</script[\s/>]", rest, re.I):
            state, i = "escaped", i + 8
            continue
        i += 1
    return -1


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_do_not_break_the_viewer_page(name):
    from rlx.viz.html import to_html

    g = rlx.Graph(name)
    x = g.input(name, (2,))
    g.set_outputs([g.relu(x)])
    page = to_html(g)
    opener = '<script id="rlx-data" type="application/json">'
    start = page.index(opener) + len(opener)
    end = _script_end(page, start)
    assert end > 0, "the data island never closes: the viewer script would not run"
    data = json.loads(page[start:end])
    assert data["name"] == name and data["nodes"][0]["label"].startswith(name)  # the name arrives intact
    tail = "</script>\n</body></html>\n"
    rest = page[end:]
    assert rest.startswith("</script>\n<script>\n") and rest.endswith(tail)
    js_start = end + len("</script>\n<script>")
    assert _script_end(page, js_start) == len(page) - len(tail)  # the viewer script is its own element, closed last


def test_lp_normalization_of_a_scalar_is_a_format_error():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import rlx.onnx

    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=-1, p=2)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert onnx.checker.check_model(model) is None
    with pytest.raises(rlx.RlxError, match="rank 0"):
        rlx.onnx.import_model(model)


@pytest.mark.parametrize("op", ["gather", "gather_elements"])
def test_jax_gather_from_an_empty_axis_is_the_references_error(op):
    pytest.importorskip("jax")
    g = rlx.Graph("g")
    x = g.input("x", (0, 3))
    if op == "gather":
        i = g.input("i", (2,), "i64")
        g.set_outputs([g.gather(x, i, axis=0)])
        feed = {"x": np.zeros((0, 3), np.float32), "i": np.array([0, 1])}
    else:
        i = g.input("i", (2, 3), "i64")
        g.set_outputs([g.gather_elements(x, i, axis=0)])
        feed = {"x": np.zeros((0, 3), np.float32), "i": np.zeros((2, 3), np.int64)}
    with pytest.raises(rlx.RlxError) as ref:
        rlx.run(g, feed)
    with pytest.raises(rlx.RlxError) as got:
        rlx.compile(g, backend="jax").run(feed)
    for e in (ref.value, got.value):
        assert str(e).startswith(op + ": index 0 is out of range") and "size 0" in str(e)
