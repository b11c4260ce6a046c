"""rlx.save / load / to_json / from_json / fingerprint: round trips, canonical bytes, errors, back-compat."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import serialize_samples as samples

import rlx
from opcases import collect
from rlx.ir import serialize as ser

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "..", "fixtures")
CASES = collect().cases


@pytest.fixture
def probe():
    samples.probe_op()
    yield
    samples.remove_probe_op()


def assert_params_equal(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        v = np.asarray(v)
        assert got[k].dtype == v.dtype, k
        assert got[k].shape == v.shape, k
        assert got[k].tobytes() == np.ascontiguousarray(v).tobytes(), k


def roundtrip_all(obj, tmp_path, params=None):
    text = rlx.to_json(obj)
    back = rlx.from_json(text)
    assert back == obj
    assert rlx.to_json(back) == text  # canonical: equal objects, identical bytes
    assert rlx.fingerprint(back) == rlx.fingerprint(obj)
    path = tmp_path / "obj.rlx"
    rlx.save(obj, path, params=params)
    loaded = rlx.load(path)
    assert loaded == obj
    assert rlx.fingerprint(loaded) == rlx.fingerprint(obj)
    if params is not None:
        assert_params_equal(dict(loaded.params), params)
        again, p2 = rlx.load(path, with_params=True)
        assert again == obj
        assert_params_equal(p2, params)
    return loaded


# --------------------------------------------------------------------------------- every op


@pytest.mark.parametrize("op", [o.name for o in rlx.all_ops()])
def test_every_registered_op_roundtrips(op, tmp_path):
    cases = [c for c in CASES if c.op == op]
    if not cases:
        pytest.skip(f"no op case for {op!r} in tests/ops/cases_*.py yet")
    for case in cases:
        g, _ = case.graph()
        params = case.split_feed()[1]
        roundtrip_all(g, tmp_path, params=params or None)


def test_op_cases_exist():
    assert CASES, "tests/opcases.py collect() found no cases"


# --------------------------------------------------------------------------------- levels


def test_mir_with_params_bf16_fp8(tmp_path):
    g = samples.mlp()
    params = samples.mlp_params()
    loaded = roundtrip_all(g, tmp_path, params=params)
    assert loaded.params["w_bf16"].dtype == ml_dtypes.bfloat16
    assert loaded.params["w_fp8"].dtype == ml_dtypes.float8_e4m3fn
    assert set(loaded.params()) == {"w", "b", "w_bf16", "w_fp8"}  # the Graph method still works
    assert os.path.exists(str(tmp_path / "obj.rlx") + ".safetensors")


def test_hir_graph_and_module(tmp_path):
    m = samples.hir_module()
    g = m.graph
    assert g.stage is rlx.GraphStage.HIR
    assert json.loads(rlx.to_json(g))["level"] == "hir"
    back = roundtrip_all(g, tmp_path)
    assert back.stage is rlx.GraphStage.HIR
    if type(m) in ser._BY_TYPE or any(k in ser._BY_TYPE for k in type(m).__mro__):
        assert rlx.from_json(rlx.to_json(m)) == m


def test_lir_module(tmp_path):
    lir_pkg = pytest.importorskip("rlx.lir")
    g = samples.chain(30)
    lir = lir_pkg.plan(g)
    doc = json.loads(rlx.to_json(lir))
    assert doc["level"] == "lir"
    roundtrip_all(lir, tmp_path, params={"w": np.ones((64, 64), np.float32)})


def test_lir_stage_graph(tmp_path):
    g = rlx.Graph("l", rlx.GraphStage.LIR)
    g.set_outputs([g.gelu(g.input("x", (2,)))])
    assert json.loads(rlx.to_json(g))["level"] == "lir"
    roundtrip_all(g, tmp_path)


def test_nested_graphs_every_attr_kind(probe, tmp_path):
    g = samples.nested(4)
    back = roundtrip_all(g, tmp_path)
    inner = back.nodes[1].attrs["body"].nodes[1].attrs["body"]
    assert inner.name == "level1"
    attrs = back.nodes[1].attrs
    assert math.isnan(attrs["f"]) and attrs["floats"][:2] == (math.inf, -math.inf)
    assert math.copysign(1, attrs["floats"][3]) == -1
    assert attrs["s"] == "é\u2028\ud800" and attrs["dt"] is rlx.f8e5m2 and attrs["dims"] == (4, "batch")
    assert attrs["data"][4][0] is True and math.isnan(attrs["data"][4][1])


def test_non_finite_constants_bitwise(tmp_path):
    g = rlx.Graph("nf")
    vals = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0], np.float32)
    vals_bits = vals.view(np.uint32).copy()
    vals_bits[0] = 0x7FC00001  # NaN with a payload
    for dt in (np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, np.float16, np.float64):
        g.constant(vals.astype(dt))
    c = g.constant(vals_bits.view(np.float32))
    big = g.constant(np.full(4096, np.nan, ml_dtypes.bfloat16))  # payload sized
    g.set_outputs([c, big])
    back = roundtrip_all(g, tmp_path)
    assert back.nodes[c.id].attrs["value"].array.view(np.uint32)[0] == 0x7FC00001


def test_every_dtype_constant_and_param(tmp_path):
    g = rlx.Graph("dtypes")
    params = {}
    for i, dt in enumerate(rlx.DType):
        arr = (np.arange(12) % 3).astype(dt.numpy).reshape(3, 4)
        g.constant(arr, name=f"c{i}")
        g.constant(np.resize(arr, (40, 40)), name=f"big{i}")
        g.param(f"p{i}", (3, 4), dt)
        params[f"p{i}"] = arr
    g.set_outputs([0])
    roundtrip_all(g, tmp_path, params=params)


def test_zero_size_and_scalar_tensors(tmp_path):
    g = rlx.Graph("z")
    g.constant(np.zeros((0, 3), np.float32))
    g.constant(np.float32(2.5))
    g.param("e", (0,), "i64")
    g.set_outputs([0, 1])
    roundtrip_all(g, tmp_path, params={"e": np.zeros(0, np.int64)})


def test_provenance_and_names_roundtrip(tmp_path):
    g = rlx.Graph("p")
    x = g.input("x", (2,))
    g.append("activation", [x], {"kind": "gelu"}, name="act", prov=rlx.Provenance(3, "blk/act", ("fuse", "dce")))
    g.set_outputs([1])
    back = roundtrip_all(g, tmp_path)
    assert back.nodes[1].prov == rlx.Provenance(3, "blk/act", ("fuse", "dce"))


# --------------------------------------------------------------------------------- canonical form


def test_canonical_sorted_and_stable(tmp_path):
    a, b = samples.mlp(), samples.mlp()
    assert a is not b and rlx.to_json(a) == rlx.to_json(b)

    def sorted_pairs(pairs):
        keys = [k for k, _ in pairs]
        assert keys == sorted(keys)
        return dict(pairs)

    doc = json.loads(rlx.to_json(a), object_pairs_hook=sorted_pairs)
    assert doc["format"] == "rlx-ir" and doc["version"] == rlx.ir.serialize.VERSION == 2
    assert doc["level"] == "mir" and doc["kind"] == "graph"
    p1, p2 = tmp_path / "a.rlx", tmp_path / "b.rlx"
    rlx.save(a, p1, samples.mlp_params())
    rlx.save(b, p2, samples.mlp_params())
    assert p1.read_bytes().replace(b"a.rlx", b"b.rlx") == p2.read_bytes()
    assert (tmp_path / "a.rlx.safetensors").read_bytes() == (tmp_path / "b.rlx.safetensors").read_bytes()
    assert b"NaN" not in p1.read_bytes().replace(b'"NaN"', b"")  # no bare NaN tokens


def test_fingerprint_is_sha256_of_saved_document(tmp_path):
    g = samples.mlp()
    path = tmp_path / "m.rlx"
    rlx.save(g, path, samples.mlp_params())
    doc = json.loads(path.read_text())
    del doc["payload"]
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert rlx.fingerprint(g) == hashlib.sha256(canon.encode()).hexdigest()


def test_fingerprint_sensitivity(probe):
    base = samples.nested(2)
    fp = rlx.fingerprint(base)
    assert len(fp) == 64 and int(fp, 16) >= 0

    def variant(**changes):
        g = rlx.Graph(base.name)
        x = g.input("x", (2, 3), "bf16")
        attrs = dict(base.nodes[1].attrs)
        attrs.update(changes)
        g.set_outputs([g.append(samples.PROBE, [x], attrs, name="probe1")])
        return g

    assert rlx.fingerprint(variant()) == fp
    seen = {fp}
    for change in ({"i": 1}, {"f": 0.0}, {"opt": 1e-6}, {"floats": (math.inf, -math.inf, 1e-300, 0.0)}, {"s": "b"},
                   {"t": np.array([[1, 2], [3, 5]], np.int64)}, {"t": np.array([[1, 2], [3, 4]], np.int32)},
                   {"data": (None, 1, 1, "s", (True, math.nan))}, {"dims": (4, "batch2")}):
        fp2 = rlx.fingerprint(variant(**change))
        assert fp2 not in seen, change
        seen.add(fp2)
    # one byte of a payload-sized constant
    g1, g2 = rlx.Graph("c"), rlx.Graph("c")
    arr = np.zeros(100_000, np.float32)
    g1.constant(arr)
    arr[77_777] = 1e-45
    g2.constant(arr)
    assert rlx.fingerprint(g1) != rlx.fingerprint(g2)


def test_fingerprint_across_processes(tmp_path, probe):
    path = tmp_path / "m.rlx"
    rlx.save(samples.mlp(), path, samples.mlp_params())
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, os.path.join(HERE, "serialize_samples.py"), str(path)], capture_output=True,
                         text=True, env=env, check=True, timeout=120).stdout.split()
    assert out == [rlx.fingerprint(samples.mlp()), rlx.fingerprint(samples.nested()), rlx.fingerprint(samples.mlp())]


# --------------------------------------------------------------------------------- errors


def doc_of(g) -> dict:
    return json.loads(rlx.to_json(g))


def load_doc(doc) -> object:
    return rlx.from_json(json.dumps(doc))


def test_error_paths():
    g = rlx.Graph("e")
    x = g.input("x", (2, 3))
    g.set_outputs([g.softmax(x, axis=1)])
    doc = doc_of(g)
    doc["nodes"][1]["attrs"]["axis"] = "1"
    with pytest.raises(rlx.FormatError, match=r"^nodes\[1\]\.attrs\.axis: expected int, got str"):
        load_doc(doc)
    cases = [
        (lambda d: d["nodes"][1].pop("shape"), r"nodes\[1\]\.shape: missing field"),
        (lambda d: d["nodes"][1].update(extra=1), r"nodes\[1\]\.extra: unknown field"),
        (lambda d: d["nodes"][1].update(op="nope"), r"nodes\[1\]\.op: unknown op 'nope'"),
        (lambda d: d["nodes"][1].update(inputs=[1]), r"nodes\[1\]\.inputs\[0\]: expected the id of an earlier node"),
        (lambda d: d["nodes"][1].update(inputs=[-1]), r"nodes\[1\]\.inputs\[0\]"),
        (lambda d: d["nodes"][1].update(id=5), r"nodes\[1\]\.id: expected id 1"),
        (lambda d: d["nodes"][0].update(shape=[10**12, 10**12]), r"nodes\[0\]\.shape: declares a tensor"),
        (lambda d: d["nodes"][0].update(shape=[True, 3]), r"nodes\[0\]\.shape\[0\]: expected int or symbol, got bool"),
        (lambda d: d["nodes"][0].update(dtype="f128"), r"nodes\[0\]\.dtype"),
        (lambda d: d.update(outputs=[7]), r"outputs\[0\]"),
        (lambda d: d["nodes"][1]["attrs"].update(bogus=1), r"nodes\[1\]\.attrs\.bogus"),
        (lambda d: d.update(version=3), r"version: .*version 3, newer than this rlx reads"),
        (lambda d: d.update(version="1"), r"version: expected int"),
        (lambda d: d.update(format="onnx"), r"format: not an rlx-ir document"),
        (lambda d: d.update(level="xir"), r"level: expected one of"),
        (lambda d: d.update(kind="mystery"), r"kind: no codec"),
        (lambda d: d.update(name=5), r"name: expected str, got int"),
        (lambda d: d.update(stage="hir"), r"stage: graph stage 'hir' differs"),
    ]
    for mutate, pattern in cases:
        d = doc_of(g)
        mutate(d)
        with pytest.raises(rlx.FormatError, match=pattern):
            load_doc(d)


def test_verify_runs_on_load():
    g = rlx.Graph("v")
    x = g.input("x", (2, 3))
    g.set_outputs([g.gelu(x)])
    d = doc_of(g)
    d["nodes"][1]["shape"] = [3, 2]  # well-formed but wrong type
    with pytest.raises(rlx.VerifyError, match="differs from the type the op rule gives"):
        load_doc(d)


def test_nonfinite_bare_tokens_and_duplicates_rejected():
    text = rlx.to_json(samples.mlp())
    with pytest.raises(rlx.FormatError, match="bare NaN"):
        rlx.from_json(text.replace('"NaN"', "NaN", 1) if '"NaN"' in text else text[:-1] + ',"x":NaN}')
    with pytest.raises(rlx.FormatError):
        rlx.from_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(rlx.FormatError):
        rlx.from_json(b"\xff\xfe")
    with pytest.raises(rlx.FormatError, match="expected object"):
        rlx.from_json("[]")


def test_limits_configurable():
    g = samples.chain(100)
    text = rlx.to_json(g)
    with pytest.raises(rlx.FormatError, match="max_nodes=50"):
        rlx.from_json(text, rlx.LoadLimits(max_nodes=50))
    with pytest.raises(rlx.FormatError, match="max_document_bytes"):
        rlx.from_json(text, rlx.LoadLimits(max_document_bytes=100))
    with pytest.raises(rlx.FormatError, match="max_tensor_bytes"):
        rlx.from_json(text, rlx.LoadLimits(max_tensor_bytes=1000))
    with pytest.raises(rlx.FormatError, match="max_string"):
        rlx.from_json(text, rlx.LoadLimits(max_string=1))
    assert rlx.from_json(text, rlx.LoadLimits()) == g


def test_depth_limit(probe):
    text = rlx.to_json(samples.nested(6))
    with pytest.raises(rlx.FormatError, match="max_depth=4"):
        rlx.from_json(text, rlx.LoadLimits(max_depth=4))
    assert rlx.from_json(text) == samples.nested(6)


def test_payload_tampering(tmp_path):
    path = tmp_path / "m.rlx"
    side = tmp_path / "m.rlx.safetensors"
    rlx.save(samples.mlp(), path, samples.mlp_params())
    good_json, good_side = path.read_bytes(), side.read_bytes()

    def expect(json_bytes, side_bytes, pattern):
        path.write_bytes(json_bytes)
        if side_bytes is None:
            side.unlink(missing_ok=True)
        else:
            side.write_bytes(side_bytes)
        with pytest.raises(rlx.FormatError, match=pattern):
            rlx.load(path)

    flipped = bytearray(good_side)
    flipped[-1] ^= 1
    expect(good_json, bytes(flipped), "SHA-256")
    expect(good_json, good_side[:-1], "stale or truncated")
    expect(good_json, None, "cannot read")
    doc = json.loads(good_json)
    doc["payload"]["file"] = "../m.rlx.safetensors"
    expect(json.dumps(doc).encode(), good_side, "plain file name")
    doc = json.loads(good_json)
    doc["payload"]["bytes"] = 10**15
    expect(json.dumps(doc).encode(), good_side, r"payload\.bytes")
    doc = json.loads(good_json)
    doc["payload"]["params"] = ["w"]
    expect(json.dumps(doc).encode(), good_side, "payload.params")
    doc = json.loads(good_json)
    del doc["payload"]
    expect(json.dumps(doc).encode(), good_side, "no payload")
    with pytest.raises(rlx.FormatError, match=r"rlx\.load"):
        rlx.from_json(good_json)
    path.write_bytes(good_json)
    side.write_bytes(good_side)
    assert rlx.load(path) == samples.mlp()


def test_param_mismatch_rejected(tmp_path):
    with pytest.raises(rlx.FormatError, match=r"params\['w'\]"):
        rlx.save(samples.mlp(), tmp_path / "m.rlx", {"w": np.zeros((2, 2), np.float32)})
    with pytest.raises(rlx.FormatError, match="reserved"):
        rlx.save(samples.mlp(), tmp_path / "m.rlx", {"__metadata__": np.zeros(2)})


def test_sidecar_is_standard_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "m.rlx"
    params = {k: v for k, v in samples.mlp_params().items() if v.dtype in (np.float32,)}
    rlx.save(samples.mlp(), path, params)
    loaded = st.load_file(str(path) + ".safetensors")
    for k, v in params.items():
        np.testing.assert_array_equal(loaded[k], v)
    torch_st = pytest.importorskip("safetensors.torch")
    pytest.importorskip("torch")
    rlx.save(samples.mlp(), path, samples.mlp_params())
    t = torch_st.load_file(str(path) + ".safetensors")
    assert str(t["w_bf16"].dtype) == "torch.bfloat16"
    np.testing.assert_array_equal(t["w_bf16"].float().numpy(), samples.mlp_params()["w_bf16"].astype(np.float32))


def test_no_codec_for_unknown_object():
    with pytest.raises(rlx.FormatError, match="no codec"):
        rlx.to_json(object())


def test_register_codec_roundtrip(tmp_path):
    class Box:
        def __init__(self, graph, scale, table):
            self.graph, self.scale, self.table = graph, scale, table

        def __eq__(self, other):
            return self.graph == other.graph and self.scale == other.scale and np.array_equal(self.table, other.table)

    def encode(box, enc):
        return {"graph": enc.graph(box.graph), "scale": enc.float(box.scale), "table": enc.tensor(box.table)}

    def decode(doc, dec):
        dec.keys(doc, "", ("graph", "scale", "table"))
        return Box(dec.graph(doc["graph"], "graph"), dec.float(doc["scale"], "scale"), dec.tensor(doc["table"], "table"))

    ser.register_codec("mir", Box, encode, decode, kind="test_box")
    try:
        box = Box(samples.chain(10), math.inf, np.arange(5000, dtype=np.int32))
        back = roundtrip_all(box, tmp_path)
        assert back.scale == math.inf
        d = json.loads(rlx.to_json(box))
        d["graph"]["nodes"][3]["inputs"] = ["a"]
        with pytest.raises(rlx.FormatError, match=r"^graph\.nodes\[3\]\.inputs\[0\]"):
            load_doc(d)
        with pytest.raises(rlx.RlxError, match="exists"):
            ser.register_codec("mir", Box, encode, decode, kind="test_box")
    finally:
        ser._BY_TYPE.pop(Box, None)
        ser._BY_KEY.pop(("mir", "test_box"), None)


# --------------------------------------------------------------------------------- back-compat


def test_v1_fixtures_keep_loading(probe):
    g = rlx.load(os.path.join(FIXTURES, "mlp_v1.rlx"))
    rlx.verify(g)
    assert [n.op for n in g.nodes][:3] == ["input", "param", "param"]
    assert_params_equal(dict(g.params), samples.mlp_params())
    big = next(n for n in g.nodes if n.name == "big").attrs["value"].array
    np.testing.assert_array_equal(big, np.arange(2048, dtype=np.float32).reshape(256, 8) / 7)
    small = next(n for n in g.nodes if n.name == "small").attrs["value"].array
    assert np.isnan(small[0]) and small[1] == np.inf and small[2] == -np.inf

    nested = rlx.load(os.path.join(FIXTURES, "nested_v1.rlx"))
    depth, cur = 0, nested
    while cur is not None:
        depth += 1
        cur = cur.nodes[1].attrs["body"]
    assert depth == 3
    assert math.isnan(nested.nodes[1].attrs["f"])

    hir = rlx.load(os.path.join(FIXTURES, "hir_block_v1.rlx"))
    assert hir.stage is rlx.GraphStage.HIR and [n.op for n in hir.nodes][-1] == "linear"


def test_fixtures_are_canonical_for_their_version():
    for name in sorted(os.listdir(FIXTURES)):
        if name.endswith(".rlx"):
            with open(os.path.join(FIXTURES, name), encoding="ascii") as f:
                text = f.read()
            doc = json.loads(text)
            version = int(name.rsplit("_v", 1)[1].split(".")[0])  # <what>_v<version>.rlx
            assert doc["format"] == "rlx-ir" and doc["version"] == version, name
            assert text == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n", name


def test_verify_memo_does_not_hide_errors():
    """rlx.verify checks each distinct (op, attrs, types) once; True must never pass for 1."""
    g = rlx.Graph("memo")
    x = g.input("x", (2, 3))
    ok = g.reduce(x, op="sum", axes=[1], keep_dim=False)
    bad_attrs = dict(g.node(ok).attrs, axes=(True,))
    g.append("reduce", [x], bad_attrs, type=g.node(ok).type, check=False)
    g.append("reduce", [x], dict(g.node(ok).attrs), type=g.node(ok).type, check=False)
    with pytest.raises(rlx.VerifyError) as info:
        rlx.verify(g)
    assert len(info.value.errors) == 1 and "%2" in info.value.errors[0]
    # the loader shares one attrs mapping between equal nodes; all of them still verify
    back = rlx.from_json(rlx.to_json(samples.chain(31)))
    assert back.nodes[4].attrs is back.nodes[7].attrs
