"""rlx.from_upstream_json: upstream rlx-ir 0.2.1's serde JSON (docs/pipeline.md#upstream-json) imported, verified and run.

The fixtures in tests/fixtures/upstream/ are written by hand in upstream's encoding; each test
runs the imported model and compares it with the same model written in NumPy here.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random

import numpy as np
import pytest

import rlx
from rlx.frontends.upstream import reader as up
from rlx.ir.shape import Shape, TensorType

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "upstream")
ERF = np.vectorize(math.erf, otypes=[np.float64])


def fixture(name: str) -> dict:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def load(doc: dict, **kw) -> object:
    return rlx.from_upstream_json(json.dumps(doc), **kw)


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


def shape(*dims, dtype="F32") -> dict:
    return {"dims": [{"Static": d} if isinstance(d, int) else {"Dynamic": d[0]} for d in dims], "dtype": dtype}


def node(i: int, op, inputs, shp, name=None) -> dict:
    return {"id": i, "op": op, "inputs": inputs, "shape": shp, "name": name, "origin": None}


# ------------------------------------------------------------------------------------ fixtures


def test_mlp_mir_module():
    g = load(fixture("mlp_mir.json"))
    assert isinstance(g, rlx.Graph) and g.stage is rlx.GraphStage.MIR and g.name == "mlp"
    assert [n.op for n in g.nodes] == ["input", "param", "constant", "matmul", "binary", "activation", "param", "matmul"]
    assert g.nodes[5].prov == rlx.Provenance(3, "linear", ())
    assert g.nodes[7].prov.passes == ("LowerControlFlow",)
    assert g.nodes[0].prov is None and set(g.params()) == {"w1", "w2"}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w1 = rng.standard_normal((3, 4)).astype(np.float32)
    w2 = rng.standard_normal((4, 2)).astype(np.float32)
    (got,) = rlx.run(g, {"x": x}, {"w1": w1, "w2": w2})
    b1 = np.array([0.5, -1.0, 2.0, 0.0])  # the constant's bytes in the fixture
    np.testing.assert_allclose(got, gelu(x @ w1 + b1) @ w2, rtol=1e-5, atol=1e-6)


def test_bare_graph_document_is_the_same_graph():
    doc = fixture("mlp_mir.json")
    assert load(doc["inner"]) == load(doc)


def test_hir_module_with_linear_block():
    m = load(fixture("block_hir.json"))
    assert isinstance(m, rlx.GraphModule) and m.stage is rlx.GraphStage.HIR
    assert m.fusion_policy is rlx.FusionPolicy.FUSABLE
    assert [n.op for n in m.graph.nodes if n.op not in ("input", "param", "constant")] == ["linear", "rms_norm", "activation"]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("w", (3, 4)), ("b", (4,)), ("gamma", (4,)))}
    h = gelu(x @ params["w"] + params["b"])
    want = np.tanh(h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-5) * params["gamma"])
    mir = m.lower_to_mir()
    assert "fused_matmul_bias_act" not in {n.op for n in mir.nodes}  # FUSABLE lowering: primitive chain
    for graph in (m.graph, mir):
        (got,) = rlx.run(graph, {"x": x}, params)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_llama_block_operands_are_reordered():
    """Upstream passes x, ln1_g, ln1_b, q, k, v, o, ln2_g, ln2_b, gate, up, down, cos, sin; rlx puts cos, sin after o."""
    dims = {"x": (1, 2, 8), "ln1_g": (8,), "ln1_b": (8,), "q_w": (8, 8), "k_w": (8, 4), "v_w": (8, 4), "o_w": (8, 8),
            "ln2_g": (8,), "ln2_b": (8,), "gate_w": (8, 6), "up_w": (8, 6), "down_w": (6, 8), "cos": (2, 2), "sin": (2, 2)}
    nodes = [{"id": i, "op": {"Input" if n == "x" else "Param": {"name": n}}, "inputs": [], "shape": shape(*d), "name": None}
             for i, (n, d) in enumerate(dims.items())]
    block = {"LlamaDecoderBlock": {"num_heads": 2, "head_dim": 4, "num_kv_heads": 1, "eps": 1e-5, "mask": "Causal"}}
    nodes.append({"id": 14, "op": block, "inputs": list(range(14)), "shape": shape(1, 2, 8), "name": "llama_decoder_block"})
    m = load({"name": "llama", "nodes": nodes, "outputs": [14], "fusion_policy": "Direct"})
    assert m.fusion_policy is rlx.FusionPolicy.DIRECT

    def build(h):
        v = {n: (h.input if n == "x" else h.param)(n, d) for n, d in dims.items()}
        order = ["x", "ln1_g", "ln1_b", "q_w", "k_w", "v_w", "o_w", "cos", "sin", "ln2_g", "ln2_b", "gate_w", "up_w", "down_w"]
        return h.llama_decoder_block(*[v[n] for n in order], num_heads=2, head_dim=4, num_kv_heads=1, mask_kind="causal")

    rng = np.random.default_rng(7)
    feed = {n: rng.standard_normal(d).astype(np.float32) * 0.5 for n, d in dims.items()}
    params = {n: a for n, a in feed.items() if n != "x"}
    (got,) = rlx.run(m.graph, {"x": feed["x"]}, params)
    (want,) = rlx.run(rlx.define("llama", build).graph, {"x": feed["x"]}, params)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_control_flow_with_nested_bodies():
    g = load(fixture("control_flow_mir.json"))
    assert [n.op for n in g.nodes] == ["input", "input", "scan", "input", "if_"]
    assert g.nodes[2].attrs["body"].name == "body" and g.nodes[4].attrs["then_branch"].name == "then"
    rng = np.random.default_rng(2)
    init = rng.standard_normal(2).astype(np.float32)
    xs = rng.standard_normal((3, 2)).astype(np.float32)
    c = init.astype(np.float64)
    for t in range(3):
        c = 0.5 * c + xs[t]
    for flag, want in ((True, -c), (False, np.abs(c))):
        (got,) = rlx.run(g, {"init": init, "xs": xs, "flag": np.array(flag)})
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_dynamic_dims_become_named_symbols():
    g = load(fixture("dynamic_mir.json"))
    ins = g.inputs()
    assert ins["x"].shape == ("batch", 3) and ins["ids"].shape == ("seq",) and ins["z"].shape == ("d7", 2)
    assert [up.symbol_name(k) for k in range(5)] == ["batch", "seq", "rows", "past_seq", "d4"]
    cast = next(n for n in g.nodes if n.op == "cast")  # upstream's float indices -> i64 for gather
    assert cast.type.dtype is rlx.i64
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    ids = np.array([4.0, 0.0, 2.0, 2.0], np.float32)
    z = rng.standard_normal((3, 2)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    table = rng.standard_normal((5, 3)).astype(np.float32)
    got = rlx.run(g, {"x": x, "ids": ids, "z": z}, {"w": w, "table": table})
    want = [np.maximum(x @ w, 0).sum(axis=1), table[ids.astype(int)], np.exp(z)]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lir_module_is_replanned():
    lir = load(fixture("tanh_sum_lir.json"))
    assert isinstance(lir, rlx.LirModule) and lir.graph.name == "tanh_sum"
    assert lir.plan.arena_size > 0 and len(lir.plan.schedule) == 3  # rlx's own plan, not the document's
    x = np.random.default_rng(4).standard_normal((2, 4)).astype(np.float32)
    (got,) = rlx.compile(lir).run(inputs={"x": x})
    np.testing.assert_allclose(got, np.tanh(x).sum(axis=1), rtol=1e-6)


def test_bytes_input_and_whitespace_free_text():
    doc = fixture("mlp_mir.json")
    text = json.dumps(doc, separators=(",", ":"))
    assert rlx.from_upstream_json(text.encode()) == rlx.from_upstream_json(text)


# ------------------------------------------------------------------------------------ adaptors


def _small(op, out_shape, *, x_dtype="F32", x_shape=(2, 4)) -> dict:
    return {"name": "t", "nodes": [node(0, {"Input": {"name": "x"}}, [], shape(*x_shape, dtype=x_dtype), "x"),
                                   node(1, op, [0], out_shape)], "outputs": [1]}


def test_float_index_outputs_keep_the_declared_dtype():
    g = load(_small({"TopK": {"k": 2}}, shape(2, 2)))
    assert [n.op for n in g.nodes] == ["input", "top_k", "cast"] and g.nodes[-1].type.dtype is rlx.f32
    x = np.array([[1, 5, 3, 4], [9, 0, 8, 2]], np.float32)
    (got,) = rlx.run(g, {"x": x})
    np.testing.assert_array_equal(got, np.array([[1, 3], [0, 2]], np.float32))


def test_one_element_declared_shapes_are_reshaped():
    g = load(_small({"Reduce": {"op": "Sum", "axes": [0, 1], "keep_dim": False}}, shape(1)))
    assert g.nodes[-1].op == "reshape" and g.nodes[-1].type == TensorType(Shape((1,)), rlx.f32)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(rlx.run(g, {"x": x})[0], [28.0])


def test_rank4_attention_layout_follows_upstream_guess():
    doc = {"name": "a", "nodes": [node(i, {"Input": {"name": n}}, [], shape(1, 3, 2, 4), n) for i, n in enumerate("qkv")]
           + [node(3, {"Attention": {"num_heads": 2, "head_dim": 4, "mask_kind": {"SlidingWindow": 1},
                                     "score_scale": None, "attn_logit_softcap": None}}, [0, 1, 2], shape(1, 3, 2, 4))],
           "outputs": [3]}
    attrs = load(doc).nodes[3].attrs
    assert (attrs["layout"], attrs["mask_kind"], attrs["window"]) == ("bshd", "sliding_window", 1)


def test_custom_ops_map_only_to_registered_custom_ops():
    doc = _small({"Custom": {"name": "upstream_twice", "num_inputs": 1, "attrs": []}}, shape(2, 4))
    with pytest.raises(rlx.FormatError, match=r"nodes\[1\]\.op\.Custom\.name: 'upstream_twice' is not a custom op"):
        load(doc)
    rlx.custom_op("upstream_twice", infer=lambda ins, attrs: ins[0], kernel=lambda args, attrs, out: args[0] * 2)
    try:
        x = np.ones((2, 4), np.float32)
        np.testing.assert_array_equal(rlx.run(load(doc), {"x": x})[0], 2 * x)
        doc["nodes"][1]["op"]["Custom"]["attrs"] = [1, 2]
        with pytest.raises(rlx.FormatError, match=r"Custom\.attrs: 2 opaque attribute bytes"):
            load(doc)
    finally:
        rlx.unregister_custom_op("upstream_twice")


def _silu(x):
    return x / (1 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _conv3x3_pad1(x, w):
    p = np.pad(x[0, 0], 1)
    return np.array([[(p[i:i + 3, j:j + 3] * w[0, 0]).sum() for j in range(3)] for i in range(3)])[None, None]


def _fake_quant(x):
    s = max(np.abs(x).max() / 127, 1e-12)
    return np.clip(np.sign(x / s) * np.floor(np.abs(x / s) + 0.5), -127, 127) * s


def _scatter_rows(updates, rows):
    out = np.zeros((4, 2))
    np.add.at(out, rows.astype(int), updates)
    return out


_REGION = {"chain": [{"Binary": ["Mul", {"Input": 0}, {"Input": 1}]}, {"Activation": ["Relu", {"Step": 0}]}],
           "num_inputs": 2, "scalar_input_mask": 0, "input_modulus": [0] * 16}
F, B = "F32", "Bool"
#: (upstream op, operand (dims, dtype), declared (dims, dtype), NumPy model of the op)
ZOO = [
    ({"Cast": {"to": "F16"}}, [((2, 3), F)], ((2, 3), "F16"), lambda x: x.astype(np.float16)),
    ({"Compare": "Lt"}, [((2, 3), F), ((2, 3), F)], ((2, 3), B), lambda x, y: x < y),
    ("Where", [((2, 3), B), ((2, 3), F), ((2, 3), F)], ((2, 3), F), np.where),
    ({"Softmax": {"axis": -1}}, [((2, 5), F)], ((2, 5), F), _softmax),
    ({"LayerNorm": {"axis": -1, "eps": 1e-5}}, [((2, 4), F), ((4,), F), ((4,), F)], ((2, 4), F),
     lambda x, g, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b),
    ({"Transpose": {"perm": [1, 0]}}, [((2, 3), F)], ((3, 2), F), np.transpose),
    ({"Reshape": {"new_shape": [3, -1]}}, [((2, 3), F)], ((3, 2), F), lambda x: x.reshape(3, 2)),
    ({"Narrow": {"axis": 1, "start": 1, "len": 2}}, [((2, 4), F)], ((2, 2), F), lambda x: x[:, 1:3]),
    ({"Concat": {"axis": 0}}, [((2, 3), F), ((1, 3), F)], ((3, 3), F), lambda x, y: np.concatenate([x, y])),
    ({"Expand": {"target_shape": [2, -1]}}, [((1, 3), F)], ((2, 3), F), lambda x: np.broadcast_to(x, (2, 3))),
    ({"Cumsum": {"axis": -1, "exclusive": True}}, [((2, 4), F)], ((2, 4), F), lambda x: np.cumsum(x, -1) - x),
    ({"CumsumBackward": {"axis": -1, "exclusive": False}}, [((2, 4), F)], ((2, 4), F),
     lambda x: np.cumsum(x[:, ::-1], -1)[:, ::-1]),
    ({"ElementwiseRegion": _REGION}, [((2, 3), F), ((3,), F)], ((2, 3), F), lambda x, y: np.maximum(x * y, 0)),
    ({"FusedMatMulBiasAct": {"activation": "Relu"}}, [((2, 3), F), ((3, 4), F), ((4,), F)], ((2, 4), F),
     lambda x, w, b: np.maximum(x @ w + b, 0)),
    ({"FusedSwiGLU": {"cast_to": None, "gate_first": False}}, [((2, 4), F)], ((2, 2), F),
     lambda x: x[:, :2] * _silu(x[:, 2:])),
    ({"Pool": {"kind": "Max", "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}}, [((1, 1, 4, 4), F)],
     ((1, 1, 2, 2), F), lambda x: x.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5))),
    ({"Conv": {"kernel_size": [], "stride": [], "padding": [1, 1], "dilation": [], "groups": 1}},  # empty: defaults
     [((1, 1, 3, 3), F), ((1, 1, 3, 3), F)], ((1, 1, 3, 3), F), _conv3x3_pad1),
    ({"FakeQuantize": {"bits": 8, "axis": None, "ste": "ClippedIdentity", "scale_mode": "PerBatch"}}, [((2, 3), F)],
     ((2, 3), F), _fake_quant),
    ({"Quantize": {"axis": None, "scales": [0.25], "zero_points": [3]}}, [((2, 3), F)], ((2, 3), "I8"),
     lambda x: np.clip(np.sign(x * 4) * np.floor(np.abs(x * 4) + 0.5) + 3, -128, 127).astype(np.int8)),
    ("ScatterAdd", [((3, 2), F), ((3,), F)], ((4, 2), F), _scatter_rows),
    ({"Binary": "Add"}, [((2, 3), "F16"), ((2, 3), F)], ((2, 3), "F16"), lambda x, y: (x + y).astype(np.float16)),
]


@pytest.mark.parametrize(("op", "operands", "out", "model"), ZOO, ids=[json.dumps(z[0])[:40] for z in ZOO])
def test_op_zoo_runs_like_numpy(op, operands, out, model):
    rng = np.random.default_rng(5)
    nodes = [node(i, {"Input": {"name": f"x{i}"}}, [], shape(*d, dtype=t), f"x{i}") for i, (d, t) in enumerate(operands)]
    n = len(nodes)
    g = load({"name": "zoo", "nodes": [*nodes, node(n, op, list(range(n)), shape(*out[0], dtype=out[1]))], "outputs": [n]})
    feed = {f"x{i}": rng.standard_normal(d) > 0 if t == B else rng.standard_normal(d).astype(np.float16 if t == "F16" else np.float32)
            for i, (d, t) in enumerate(operands)}
    if model is _scatter_rows:  # upstream's float row indices
        feed["x1"] = np.array([3.0, 0.0, 3.0], np.float32)
    (got,) = rlx.run(g, feed)
    want = model(*feed.values())
    assert got.dtype == want.dtype if out[1] != F else got.dtype == np.float32
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=2e-3 if "F16" in str(out) else 1e-5,
                               atol=1e-5)


# ------------------------------------------------------------------------------------ the tables


def test_every_table_entry_targets_a_registered_op():
    for table in (up.MIR_OPS, up.HIR_OPS):
        for variant, spec in table.items():
            assert spec.variant == variant
            if spec.build != "custom":
                opdef = rlx.get_op(spec.op)
                assert table is up.HIR_OPS or opdef.level != "hir", variant
    assert not set(up.MIR_OPS) & set(up.REFUSED_MIR) and not set(up.HIR_OPS) & set(up.REFUSED_HIR)
    assert len(up.MIR_OPS) + 2 == 92  # docs/semantics.md#vocabulary: 92 kinds; ScanBackward, ScanBackwardXs are refused
    assert {"ScanBackward", "ScanBackwardXs"} <= set(up.REFUSED_MIR) and "Fft" in up.MIR_OPS  # Fft: 0.2.2's C64 form


def test_every_registered_op_is_mapped_or_explained():
    mapped = {s.op for t in (up.MIR_OPS, up.HIR_OPS) for s in t.values()}
    for opdef in rlx.all_ops():
        if opdef.family == "test" or opdef.name in rlx.custom_ops():
            continue
        assert opdef.name in mapped or opdef.name in up.RLX_ONLY, f"{opdef.name}: neither mapped nor listed in RLX_ONLY"
    assert not mapped & set(up.RLX_ONLY)
    assert all(rlx.get_op(name) for name in up.RLX_ONLY)


def test_enum_tables_match_the_rlx_attribute_choices():
    assert set(up.ACTIVATIONS.values()) == set(rlx.get_op("activation").attrs["kind"].choices)
    nan_propagating = {"max", "min"}  # upstream's Max / Min are f32::max / min, NaN-ignoring: rlx's fmax / fmin
    assert set(up.BINARY_OPS.values()) == set(rlx.get_op("binary").attrs["op"].choices) - nan_propagating
    assert set(up.COMPARE_OPS.values()) == set(rlx.get_op("compare").attrs["op"].choices)
    assert set(up.REDUCE_OPS.values()) == set(rlx.get_op("reduce").attrs["op"].choices) - nan_propagating
    assert set(up.STE_KINDS.values()) == set(rlx.get_op("fake_quantize").attrs["ste"].choices)
    assert set(up.ATTENTION_WRT.values()) == set(rlx.get_op("attention_backward").attrs["wrt"].choices)
    assert {*up.MASK_KINDS.values(), "sliding_window"} == set(rlx.get_op("attention").attrs["mask_kind"].choices)
    assert {*up.SCALE_MODES.values(), "ema"} == set(rlx.get_op("fake_quantize").attrs["scale_mode"].choices)
    schemes = {*up.QUANT_SCHEMES.values(), *up.BLOCK_SCHEMES.values()}
    from rlx.ops.dequant import LEGACY_BLOCKS  # rlx's extra GGUF block types (Q4_1 / Q5_0 / Q5_1), not upstream schemes

    assert schemes | set(LEGACY_BLOCKS) == set(rlx.get_op("dequant_matmul").attrs["scheme"].choices)


_SAMPLES = {
    "u8": 8, "u32": 1, "usize": 1, "u64": 7, "i32": -1, "i64": 3, "f32": 0.5, "bool": False, "str": "s", "bytes": b"",
    "usizes": (1, 1), "i64s": (2, -1), "i32s": (0,), "f32s": (1.0,), "modulus": (0,) * 16, "dtype": rlx.f16,
    "activation": "relu", "binary": "add", "compare": "lt", "reduce": "sum", "ste": "identity", "wrt": "key",
    "rope_style": False, "prologue": None, "mask": ("causal", None), "scale_mode": ("ema", 0.9),
    "scheme": ("gguf_q4_k", None), "chain": (("activation", "relu", ("in", 0)),), "fft_norm": "Ortho",
}
_BY_NAME = {"slot": 0, "axes": (1,), "perm": (1, 0, 2, 3), "num_inputs": 1}


def test_every_translator_gives_attributes_the_op_accepts():
    body = rlx.Graph("body")
    body.set_outputs([body.input("c", (2,))])
    declared = TensorType(Shape((2, 3, 4, 5)), rlx.f32)
    for table in (up.MIR_OPS, up.HIR_OPS):
        for spec in table.values():
            if spec.build is not None:
                continue
            fields = {}
            for name, kind, _ in spec.fields or ():
                base = kind.removeprefix("opt_")
                fields[name] = body if base == "graph" else _BY_NAME.get(name, _SAMPLES[base])
            dtype = rlx.c64 if spec.op == "fft" else rlx.f32  # upstream's Fft is read on C64 only
            ctx = up._Ctx([TensorType(Shape((2, 3, 4, 5)), dtype)], declared, spec.variant)
            attrs = spec.rlx_attrs(fields, ctx)
            rlx.get_op(spec.op).check_attrs(attrs, spec.variant)  # raises AttributeSchemaError on a bad translation


# ------------------------------------------------------------------------------------ hostile documents


def _mlp() -> dict:
    return copy.deepcopy(fixture("mlp_mir.json")["inner"])


def _set(doc: dict, path: tuple, value) -> dict:
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


_DELETE = object()

HOSTILE = [
    (("nodes", 3, "op"), "Foo", r"^nodes\[3\]\.op: unknown variant \"Foo\" of Op"),
    (("nodes", 4, "op"), {"Binary": "Foo"}, r"^nodes\[4\]\.op\.Binary: unknown variant \"Foo\" of BinaryOp"),
    (("nodes", 4, "op"), {"Binary": ["Add"]}, r"^nodes\[4\]\.op\.Binary: expected an enum variant"),
    (("nodes", 3, "op"), {"MatMul": None}, r"^nodes\[3\]\.op\.MatMul: MatMul is a unit variant"),
    (("nodes", 3, "op"), "ScanBackward", r"^nodes\[3\]\.op: upstream op ScanBackward is not imported"),
    (("nodes", 3, "op"), {"Reduce": {"op": "Sum", "axes": [1]}}, r"^nodes\[3\]\.op\.Reduce\.keep_dim: missing field"),
    (("nodes", 3, "op"), {"Reduce": {"op": "Sum", "axes": [1], "keep_dim": 0}}, r"\.Reduce\.keep_dim: expected a bool"),
    (("nodes", 3, "op"), {"Reduce": {"op": "Sum", "axes": [1], "keep_dim": False, "x": 1}}, r"\.Reduce\.x: unknown field"),
    (("nodes", 3, "op"), {"Reduce": {"op": "Sum", "axes": [-1], "keep_dim": False}}, r"\.Reduce\.axes\[0\]: -1 is outside"),
    (("nodes", 5, "op"), {"LayerNorm": {"axis": -1, "eps": None}}, r"^nodes\[5\]\.op\.LayerNorm\.eps: null: upstream writes NaN"),
    (("nodes", 3, "inputs"), "0,1", r"^nodes\[3\]\.inputs: expected a list, got str"),
    (("nodes", 3, "inputs"), [0, 5], r"^nodes\[3\]\.inputs\[1\]: expected the id of an earlier node \(0\.\.2\), got 5"),
    (("nodes", 3, "inputs"), [0, 3], r"^nodes\[3\]\.inputs\[1\]: expected the id of an earlier node"),
    (("nodes", 3, "inputs"), [0, True], r"^nodes\[3\]\.inputs\[1\]: expected the id of an earlier node"),
    (("nodes", 3, "id"), 4, r"^nodes\[3\]\.id: expected 3"),
    (("nodes", 3, "shape"), _DELETE, r"^nodes\[3\]: missing field|^nodes\[3\]\.shape: missing field"),
    (("nodes", 3, "op"), _DELETE, r"^nodes\[3\]\.op: missing field"),
    (("nodes", 3, "origin", "hir"), "3", r"^nodes\[3\]\.origin\.hir: expected an integer"),
    (("nodes", 3, "extra"), 1, r"^nodes\[3\]\.extra: unknown field"),
    (("nodes", 0, "shape", "dims", 0), {"Static": 2**60}, r"^nodes\[0\]\.shape\.dims\[0\]\.Static: 1152921504606846976 is outside"),
    (("nodes", 0, "shape", "dims"), [{"Static": 2**40}] * 2, r"^nodes\[0\]\.shape\.dims: declares a tensor of"),
    (("nodes", 0, "shape", "dims", 0), {"Static": True}, r"\.dims\[0\]\.Static: expected an integer, got bool"),
    (("nodes", 0, "shape", "dims", 0), {"Dynamic": -1}, r"\.dims\[0\]\.Dynamic: -1 is outside"),
    (("nodes", 0, "shape", "dims", 0), {"Ragged": 2}, r"\.dims\[0\]: unknown variant \"Ragged\" of Dim"),
    (("nodes", 0, "shape", "dtype"), "F128", r"^nodes\[0\]\.shape\.dtype: unknown DType 'F128'"),
    (("nodes", 2, "op", "Constant", "data", 1), 256, r"^nodes\[2\]\.op\.Constant\.data\[1\]: expected a byte"),
    (("nodes", 2, "op", "Constant", "data", 1), 1.0, r"^nodes\[2\]\.op\.Constant\.data\[1\]: expected a byte"),
    (("nodes", 2, "op", "Constant", "data"), [0, 0, 0], r"^nodes\[2\]\.op\.Constant\.data: 3 bytes cannot hold"),
    (("nodes", 6, "op", "Param", "name"), "w1", r"^nodes\[6\]: .*already has an input or param named 'w1'"),
    (("outputs",), [8], r"^outputs\[0\]: expected the id of a node \(0\.\.7\), got 8"),
    (("name",), None, r"^name: expected a string"),
    (("nodes",), {}, r"^nodes: expected a list, got object"),
]


@pytest.mark.parametrize(("path", "value", "pattern"), HOSTILE, ids=[p for _, _, p in HOSTILE])
def test_hostile_documents_name_the_field(path, value, pattern):
    with pytest.raises(rlx.FormatError, match=pattern):
        load(_set(_mlp(), path, value))


def test_wrong_declared_type_is_a_verify_error():
    doc = _set(_mlp(), ("nodes", 3, "shape"), shape(2, 5))
    with pytest.raises(rlx.VerifyError, match=r"nodes\[3\]: upstream MatMul declares \[2, 5\] f32; rlx's rule for it gives"):
        load(doc)
    with pytest.raises(rlx.VerifyError):  # an operand count the op rejects
        load(_set(_mlp(), ("nodes", 3, "inputs"), [0]))


@pytest.mark.parametrize(("limits", "pattern"), [
    (rlx.LoadLimits(max_nodes=5), r"^nodes: 8 nodes exceed max_nodes=5"),
    (rlx.LoadLimits(max_items=2), r"entries exceed max_items=2"),
    (rlx.LoadLimits(max_string=1), r"^name: 3 characters exceed max_string=1"),
    (rlx.LoadLimits(max_rank=1), r"^nodes\[0\]\.shape\.dims: rank 2 exceeds max_rank=1"),
    (rlx.LoadLimits(max_dim=2), r"^nodes\[0\]\.shape\.dims\[1\]\.Static: 3 is outside \[0, 2\]"),
    (rlx.LoadLimits(max_tensor_bytes=16), r"^nodes\[0\]\.shape\.dims: declares a tensor of 24 bytes"),
    (rlx.LoadLimits(max_inline_bytes=8), r"^nodes\[2\]\.op\.Constant\.data: 16 bytes exceed"),
    (rlx.LoadLimits(max_document_bytes=100), r"document of \d+ characters exceeds max_document_bytes=100"),
])
def test_limits_are_respected(limits, pattern):
    with pytest.raises(rlx.FormatError, match=pattern):
        load(_mlp(), limits=limits)


def test_nesting_depth_limit_and_nested_paths():
    doc = fixture("control_flow_mir.json")
    with pytest.raises(rlx.FormatError, match=r"^nodes\[2\]\.op\.Scan\.body: graphs nested deeper than max_depth=1"):
        load(doc, limits=rlx.LoadLimits(max_depth=1))
    _set(doc, ("nodes", 2, "op", "Scan", "body", "nodes", 4, "inputs"), [3, 9])
    with pytest.raises(rlx.FormatError, match=r"^nodes\[2\]\.op\.Scan\.body\.nodes\[4\]\.inputs\[1\]: expected the id"):
        load(doc)


@pytest.mark.parametrize(("text", "pattern"), [
    ("[1, 2]", r"expected object, got list"),
    ("{", r"not valid JSON"),
    ('{"name": "g", "nodes": [], "outputs": [], "x": NaN}', r"bare NaN is not JSON"),
    ('{"weights": []}', r"^<document>: not an upstream rlx-ir document"),
    ('{"mir": {"inner": 1}, "buffers": {}}', r"^mir\.inner: expected an object, got int"),
    ('{"name": "h", "nodes": [], "outputs": [], "fusion_policy": "Eager"}', r"^fusion_policy: unknown variant \"Eager\""),
    (b"\xff\xfe", r"not UTF-8"),
])
def test_not_a_document(text, pattern):
    with pytest.raises(rlx.FormatError, match=pattern):
        rlx.from_upstream_json(text)


def test_versioned_documents_point_to_from_json():
    with pytest.raises(rlx.FormatError, match=r"^format: a versioned rlx-ir document: read it with rlx.from_json"):
        rlx.from_upstream_json(rlx.to_json(load(_mlp())))


def test_lir_buffers_are_checked_not_trusted():
    doc = fixture("tanh_sum_lir.json")
    doc["buffers"]["assignments"] = {"0": {"offset": 10**12, "size": 1}}  # nonsense, ignored: rlx plans again
    assert load(doc).plan.arena_size < 1024
    for key, value, pattern in (("alignment", 48, r"^buffers\.alignment: 48 is not a power of two"),
                                ("schedule", {}, r"^buffers\.schedule: expected list, got object"),
                                ("phases", _DELETE, r"^buffers\.phases: missing field")):
        with pytest.raises(rlx.FormatError, match=pattern):
            load(_set(copy.deepcopy(doc), ("buffers", key), value))


def test_refused_hir_and_newer_variants():
    hir = fixture("block_hir.json")
    hir["nodes"][3]["op"] = {"Lstm": {}}
    with pytest.raises(rlx.FormatError, match=r"^nodes\[3\]\.op: upstream op Lstm is not imported"):
        load(hir)
    hir["nodes"][3]["op"] = {"Mir": {"ArgMax": {"axis": 0, "keep_dim": False}}}
    with pytest.raises(rlx.FormatError, match=r"^nodes\[3\]\.op\.Mir: upstream op ArgMax is not imported: added to upstream"):
        load(hir)


def test_random_corruptions_raise_only_format_or_verify_errors():
    """Mutate the fixtures at random: each document either loads (and verifies) or raises one of the two errors."""
    rng = random.Random(0)
    docs = [fixture(n) for n in sorted(os.listdir(FIXTURES))]
    junk = [None, True, -1, 0, 2**70, 0.5, "", "Static", [], {}, {"Static": 1}, {"Dynamic": 2}, [0], "MatMul"]

    def spots(v, path=()):
        yield path
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            yield from spots(x, (*path, k))

    for _ in range(300):
        doc = copy.deepcopy(rng.choice(docs))
        path = rng.choice([p for p in spots(doc) if p])
        _set(doc, path, _DELETE if rng.random() < 0.2 else rng.choice(junk))
        try:
            load(doc)
        except (rlx.FormatError, rlx.VerifyError):
            pass
