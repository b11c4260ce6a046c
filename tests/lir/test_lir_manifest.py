"""The binding manifest is read back by a program that cannot import rlx.

The reader (run in a child process with ``rlx`` blocked) checks every weight's checksum,
lays inputs and weights into a byte arena at the manifest's offsets and runs the schedule
with NumPy, writing each result at its offset: if an offset, size, view or checksum were
wrong, its outputs would not equal the NumPy formula computed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rlx
from rlx.lir.manifest import write_binding

READER = textwrap.dedent(
    r"""
    import hashlib, json, sys
    sys.modules["rlx"] = None  # the reader must not need rlx
    import numpy as np
    folder = sys.argv[1]
    doc = json.load(open(folder + "/manifest.json"))
    assert doc["format"] == "rlx-binding-manifest" and doc["version"] == 1
    blob = open(folder + "/" + doc["weights_file"], "rb").read()
    arena = np.zeros(doc["arena_size"], np.uint8)
    def view(entry_offset, dtype, shape):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return arena[entry_offset:entry_offset + n].view(dtype).reshape(shape)
    for p in doc["params"]:
        data = blob[p["file_offset"]:p["file_offset"] + p["bytes"]]
        assert hashlib.sha256(data).hexdigest() == p["sha256"], p["name"]
        view(p["offset"], "<f4", p["shape"])[...] = np.frombuffer(data, "<f4").reshape(p["shape"])
    feeds = np.load(folder + "/feeds.npz")
    for i in doc["inputs"]:
        view(i["offset"], "<f4", i["shape"])[...] = feeds[i["name"]]
    nodes = {s["node"]: s for s in doc["schedule"]}
    def read(nid):
        s = nodes[nid]
        return view(s["offset"], "<f4", s["shape"]).copy()
    for s in doc["schedule"]:
        a = [read(i) for i in s["inputs"]]
        op, attrs = s["op"], s["attrs"]
        if op in ("input", "param"):
            continue
        if op == "matmul":
            r = a[0] @ a[1]
        elif op == "binary" and attrs["op"] == "add":
            r = a[0] + a[1]
        elif op == "activation" and attrs["kind"] == "relu":
            r = np.maximum(a[0], 0)
        elif op == "reshape":
            r = a[0].reshape(s["shape"])
        else:
            raise SystemExit("reader: unknown op " + op)
        view(s["offset"], "<f4", s["shape"])[...] = r
    print(json.dumps({o["name"]: read(o["node"]).tolist() for o in doc["outputs"]}))
    """
)


def _mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", (4, 8))
    h = g.relu(g.matmul(x, g.param("l1.w", (8, 16))) + g.param("l1.b", (16,)))
    h = g.reshape(h, (4, 16))
    y = g.matmul(h, g.param("l2.w", (16, 3))) + g.param("l2.b", (3,))
    g.set_outputs([y])
    return g


def test_a_reader_without_rlx_reproduces_the_model(tmp_path):
    rng = np.random.default_rng(0)
    g = _mlp()
    params = {"l1.w": rng.standard_normal((8, 16)), "l1.b": rng.standard_normal(16),
              "l2.w": rng.standard_normal((16, 3)), "l2.b": rng.standard_normal(3)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x = rng.standard_normal((4, 8)).astype(np.float32)
    lir = rlx.plan(g, 64)
    write_binding(lir, tmp_path, params)
    np.savez(tmp_path / "feeds.npz", x=x)
    proc = subprocess.run([sys.executable, "-c", READER, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr
    (out,) = json.loads(proc.stdout).values()
    want = np.maximum(x @ params["l1.w"] + params["l1.b"], 0) @ params["l2.w"] + params["l2.b"]
    np.testing.assert_allclose(np.array(out, np.float32), want, rtol=1e-5, atol=1e-5)


def test_manifest_fields_and_weight_blocks(tmp_path):
    g = _mlp()
    lir = rlx.plan(g, 32)
    rng = np.random.default_rng(1)
    params = {name: rng.standard_normal(v.shape).astype(np.float32) for name, v in g.params().items()}
    doc = json.loads(open(write_binding(lir, tmp_path, params)).read())
    assert doc["alignment"] == 32 and doc["arena_size"] == lir.plan.arena_size
    assert [p["name"] for p in doc["params"]] == list(g.params())
    assert [b["name"] for b in doc["weight_blocks"]] == ["l1", "l2"]
    l1 = doc["weight_blocks"][0]
    starts = [p["offset"] for p in doc["params"] if p["name"].startswith("l1.")]
    assert l1["offset"] == min(starts) and l1["params"] == ["l1.w", "l1.b"]
    for p in doc["params"]:
        assert p["offset"] % 32 == 0 and p["bytes"] == params[p["name"]].nbytes
    assert doc["fingerprint"] == lir.fingerprint()
    assert lir.manifest() == {k: v for k, v in doc.items() if k != "weights_file"} | {
        "params": [{k: v for k, v in p.items() if k not in ("sha256", "file_offset")} for p in doc["params"]],
        "weight_blocks": [{k: v for k, v in b.items() if k != "sha256"} for b in doc["weight_blocks"]]}


def test_missing_or_misshapen_params_are_errors(tmp_path):
    lir = rlx.plan(_mlp(), 64)
    with pytest.raises(rlx.RlxError, match="no value for params"):
        lir.manifest({"l1.w": np.zeros((8, 16), np.float32)})
    bad = {name: np.zeros(v.shape, np.float32) for name, v in lir.graph.params().items()} | {"l2.b": np.zeros(4, np.float32)}
    with pytest.raises(rlx.RlxError, match=r"l2\.b"):
        lir.manifest(bad)
    with pytest.raises(rlx.RlxError, match="LirModule"):
        write_binding(_mlp(), tmp_path)
