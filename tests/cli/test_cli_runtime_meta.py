"""rlx optimize --dump-dir, rlx plan --manifest, rlx inspect --dispatch."""

from __future__ import annotations

import json

import numpy as np

from .conftest import mlp_graph


def test_optimize_dump_dir_writes_stages_and_diffs(cli, files, tmp_path):
    dump = tmp_path / "dumps"
    res = cli("optimize", files["hir"], "-o", tmp_path / "opt.rlx", "--policy", "fusable", "--dump-dir", dump)
    assert res.rc == 0, res.err
    names = sorted(p.name for p in dump.iterdir())
    assert names[0] == "00-hir.txt" and "index.txt" in names
    assert any(n.endswith(".diff") for n in names) and any(n.endswith("-optimized.txt") for n in names)


def test_plan_manifest_has_weights_with_checksums(cli, files, tmp_path):
    folder = tmp_path / "bind"
    res = cli("plan", files["mlp"], "--manifest", folder, "--json")
    assert res.rc == 0, res.err
    doc = json.loads((folder / "manifest.json").read_text())
    blob = (folder / doc["weights_file"]).read_bytes()
    for p in doc["params"]:
        got = np.frombuffer(blob[p["file_offset"]:p["file_offset"] + p["bytes"]], "<f4").reshape(p["shape"])
        np.testing.assert_array_equal(got, files["params"][p["name"]])
    assert json.loads(res.out)["manifest"] == str(folder / "manifest.json")


def test_inspect_dispatch_lists_every_node(cli, files):
    res = cli("inspect", files["mlp"], "--dispatch", "numpy", "--json")
    assert res.rc == 0, res.err
    rows = json.loads(res.out)["dispatch"]["nodes"]
    assert len(rows) == len(mlp_graph().nodes) and {r["kind"] for r in rows} <= {"native", "leaf", "view"}
    res = cli("inspect", files["mlp"], "--dispatch", "nonexistent")
    assert res.rc == 1 and "no dispatch information" in res.err
