"""Model variants and the on-disk compile cache (rlx.variants)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import rlx
import rlx.variants as variants
from rlx.variants import CompileCache, ModelVariant, buckets, build_variant, compile_variant


def _model():
    g = rlx.Graph("mlp")
    x = g.input("x", ("batch", 8))
    h = g.gelu(g.matmul(x, g.param("w", (8, 16))) + g.param("b", (16,)))
    g.set_outputs([g.sum(g.matmul(h, g.param("w2", (16, 4))), axes=[1])])
    return g


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((8, 16)).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32),
            "w2": rng.standard_normal((16, 4)).astype(np.float32)}


def _oracle(x, p):
    h = x @ p["w"] + p["b"]
    h = h * 0.5 * (1 + _erf(h / np.sqrt(2)))
    return (h @ p["w2"]).sum(axis=1)


def _erf(z):
    from math import erf

    return np.vectorize(erf)(z)


@pytest.mark.parametrize("batch", [1, 3, 5])
def test_bucket_variants_run_at_their_sizes(batch):
    (v,) = [b for b in buckets("prefill", "batch", [1, 3, 5]) if b.dims["batch"] == batch]
    exe = compile_variant(_model(), v, params=_params())
    x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
    (got,) = exe.run(inputs={"x": x})
    np.testing.assert_allclose(got, _oracle(x.astype(np.float64), {k: v.astype(np.float64) for k, v in _params().items()}),
                               rtol=1e-4, atol=1e-4)


def test_the_cache_skips_optimize_and_plan_on_a_hit(tmp_path, monkeypatch):
    v = ModelVariant("b4", {"batch": 4})
    first = build_variant(_model(), v, CompileCache(tmp_path))
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".rlx")]) == 1

    def boom(*a, **k):
        raise AssertionError("optimize ran on a cache hit")

    monkeypatch.setattr(variants, "optimize", boom)
    cache = CompileCache(tmp_path)
    again = build_variant(_model(), v, cache)
    assert cache.hits == 1 and again.fingerprint() == first.fingerprint()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "other_key", "tampered_plan"])
def test_a_bad_entry_is_ignored_removed_and_rebuilt(tmp_path, damage):
    v, other = ModelVariant("b4", {"batch": 4}), ModelVariant("b2", {"batch": 2})
    fp = rlx.fingerprint(_model())
    build_variant(_model(), v, CompileCache(tmp_path))
    build_variant(_model(), other, CompileCache(tmp_path))
    path = tmp_path / f"{v.cache_key(fp)}.rlx"
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x80\x04cos\nsystem\n(S'touch pwned'\ntR.")  # a pickle: never unpickled
    elif damage == "other_key":
        shutil.copy(tmp_path / f"{other.cache_key(fp)}.rlx", path)
    else:
        doc = json.loads(text)
        doc["plan"]["assignments"][-1][1] += 8  # misaligned / overlapping slot
        path.write_text(json.dumps(doc))
    cache = CompileCache(tmp_path)
    lir = build_variant(_model(), v, cache)
    assert cache.rejected == 1 and cache.hits == 0
    assert not os.path.exists("pwned")
    assert CompileCache(tmp_path).get(v.cache_key(fp)) is not None  # rebuilt entry is valid
    (got,) = rlx.compile(lir, params=_params()).run(inputs={"x": np.ones((4, 8), np.float32)})
    assert got.shape == (4,)


def test_cache_keys_separate_every_field(monkeypatch):
    fp = rlx.fingerprint(_model())
    base = ModelVariant("v", {"batch": 4})
    keys = {base.cache_key(fp), ModelVariant("v", {"batch": 5}).cache_key(fp),
            ModelVariant("v", {"batch": 4}, precision="auto_mixed_conservative").cache_key(fp),
            ModelVariant("v", {"batch": 4}, backend="jax").cache_key(fp), ModelVariant("w", {"batch": 4}).cache_key(fp),
            base.cache_key("0" * 64)}
    assert len(keys) == 6
    monkeypatch.setattr(variants, "_version", lambda pkg: "9.9")
    assert base.cache_key(fp) not in keys


def test_precision_variant_runs_in_half_precision_and_stays_close():
    v = ModelVariant("amp", {"batch": 2}, precision="auto_mixed_conservative")
    lir = build_variant(_model(), v)
    assert any(n.dtype == rlx.f16 for n in lir.graph.nodes)
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    (got,) = rlx.compile(lir, params=_params()).run(inputs={"x": x})
    (want,) = rlx.run(_model(), inputs={"x": x}, params=_params())
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=5e-2)


def test_bad_variants_are_errors():
    with pytest.raises(rlx.RlxError, match="variant name"):
        ModelVariant("../x")
    with pytest.raises(rlx.RlxError, match="dims"):
        ModelVariant("v", {"batch": -1})
    with pytest.raises(rlx.RlxError, match="do not occur"):
        build_variant(_model(), ModelVariant("v", {"seq": 4}))


def cache_lookup(folder: str, key: str) -> dict:
    """Run in a limited child by the test below: a hostile entry must be rejected, never run."""
    cache = CompileCache(folder)
    got = cache.get(key)
    return {"hit": got is not None, "rejected": cache.rejected}


def test_hostile_entries_are_rejected_in_a_limited_child(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "security"))
    from isolate import run_cases

    key = ModelVariant("b4", {"batch": 4}).cache_key(rlx.fingerprint(_model()))
    pickle = b"\x80\x04cposix\nsystem\n(S'touch " + str(tmp_path / "pwned").encode() + b"'\ntR."
    entries = {"pickle": pickle, "json_bomb": b"[" * 100_000, "huge_dims": json.dumps(
        {"format": "rlx-ir", "version": 1, "kind": "lir", "level": "lir", "graph": {"nodes": [{"op": "input", "attrs": {
            "name": "x", "shape": [2**60, 2**60], "dtype": "f32"}}]}}).encode()}
    cases = []
    for name, data in entries.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{key}.rlx").write_bytes(data)
        cases.append([str(folder), key])
    for outcome in run_cases(__file__, "cache_lookup", cases, memory=2 << 30, cpu=30, wall=60):
        assert outcome.exited and outcome.error is None, outcome
        assert outcome.value == {"hit": False, "rejected": 1}
    assert not (tmp_path / "pwned").exists()


# ------------------------------------------------------------------ verified entries (issue #32)


def _const_model(scale=2.0, act="gelu"):
    g = rlx.Graph("cmlp")
    x = g.input("x", ("batch", 8))
    h = g.matmul(x, g.param("w", (8, 16))) * g.constant(np.full(16, scale, np.float32), name="scale")
    g.set_outputs([g.sum(getattr(g, act)(h), axes=[1])])
    return g


def _const_oracle(x, w, scale=2.0):
    h = (x.astype(np.float64) @ w.astype(np.float64)) * scale
    return (h * 0.5 * (1 + _erf(h / np.sqrt(2)))).sum(axis=1)


def _plant(folder, key, lir):
    """An entry for ``lir`` under ``key``, written as put() would but keeping the old tag."""
    lir.options["cache_key"] = key
    rlx.save(lir, folder / f"{key}.rlx")


@pytest.mark.parametrize("tamper", ["edited_constant", "changed_op", "other_model_with_its_tag", "symlink_out", "tag_only"])
def test_a_tampered_entry_is_never_run(tmp_path, tamper):
    v = ModelVariant("b4", {"batch": 4})
    key = v.cache_key(rlx.fingerprint(_const_model()))
    folder = tmp_path / "cache"
    genuine = build_variant(_const_model(), v, CompileCache(folder))
    if tamper == "edited_constant":
        _plant(folder, key, build_variant(_const_model(scale=3.0), v))
    elif tamper == "changed_op":
        _plant(folder, key, build_variant(_const_model(act="relu"), v))
    elif tamper == "other_model_with_its_tag":
        other = build_variant(_model(), v, CompileCache(folder))
        other_key = v.cache_key(rlx.fingerprint(_model()))
        _plant(folder, key, other)
        shutil.copy(folder / f"{other_key}.mac", folder / f"{key}.mac")
    elif tamper == "symlink_out":  # the very same bytes, but read from outside the folder
        outside = tmp_path / "outside.rlx"
        shutil.copy(folder / f"{key}.rlx", outside)
        os.remove(folder / f"{key}.rlx")
        os.symlink(outside, folder / f"{key}.rlx")
    else:
        (folder / f"{key}.mac").write_text("0" * 64 + "\n")
    cache = CompileCache(folder)
    lir = build_variant(_const_model(), v, cache)
    assert cache.rejected == 1 and cache.hits == 0, tamper
    assert rlx.fingerprint(lir) == rlx.fingerprint(genuine)
    assert not os.path.islink(folder / f"{key}.rlx")
    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    (got,) = rlx.compile(lir, params={"w": w}).run(inputs={"x": x})
    np.testing.assert_allclose(got, _const_oracle(x, w), rtol=1e-4, atol=1e-4)
    again = CompileCache(folder)
    assert again.get(key) is not None and again.hits == 1  # the rebuilt entry verifies


def test_the_secret_is_private_and_a_planted_one_is_refused(tmp_path):
    folder = tmp_path / "cache"
    CompileCache(folder).secret()
    st = os.lstat(folder / CompileCache.SECRET)
    assert st.st_mode & 0o777 == 0o600 and st.st_size == 32
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(folder / CompileCache.SECRET, other / CompileCache.SECRET)
    with pytest.raises(variants.CacheError, match="cannot be opened safely"):
        CompileCache(other).secret()
    os.remove(other / CompileCache.SECRET)
    (other / CompileCache.SECRET).write_bytes(b"k" * 32)
    os.chmod(other / CompileCache.SECRET, 0o644)
    with pytest.raises(variants.CacheError, match="private"):
        CompileCache(other).secret()


_FILLER = r"""
import sys, numpy as np, rlx
from rlx.variants import CompileCache, buckets, build_variant
folder, seed = sys.argv[1], int(sys.argv[2])
g = rlx.Graph("mlp")
x = g.input("x", ("batch", 8))
g.set_outputs([g.sum(g.gelu(g.matmul(x, g.param("w", (8, 16)))), axes=[1])])
fps = []
for v in buckets("b", "batch", [1, 2, 3, 4, 5, 6])[seed % 2::1] + buckets("b", "batch", [1, 2, 3, 4, 5, 6]):
    fps.append(rlx.fingerprint(build_variant(g, v, CompileCache(folder))))
print("OK", len(set(fps)))
"""


def test_processes_filling_one_cache_concurrently_never_fail(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    folder = str(tmp_path / "cache")
    procs = [subprocess.Popen([sys.executable, "-c", _FILLER, folder, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "OK 6", err[-2000:]
    names = os.listdir(folder)
    assert sorted(n for n in names if n.endswith(".rlx")) and not [n for n in names if ".tmp-" in n], names
    cache = CompileCache(folder)
    assert all(cache.get(n[:-4]) is not None for n in names if n.endswith(".rlx")) and cache.rejected == 0


def test_a_planted_folder_is_never_run_and_the_build_is_an_error(tmp_path):
    v = ModelVariant("b4", {"batch": 4})
    key = v.cache_key(rlx.fingerprint(_model()))
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / f"{key}.rlx").mkdir()  # not a regular file: refused, and it cannot be replaced
    cache = CompileCache(folder)
    assert cache.get(key) is None and cache.rejected == 1
    with pytest.raises(variants.CacheError, match="cannot write the entry"):
        build_variant(_model(), v, cache)


def test_threads_sharing_one_cache_build_a_key_once(tmp_path, monkeypatch):
    import threading

    builds = []
    real = variants._build

    def counted(graph, variant):
        builds.append(variant.name)
        return real(graph, variant)

    monkeypatch.setattr(variants, "_build", counted)
    cache, v, results, errors = CompileCache(tmp_path), ModelVariant("b3", {"batch": 3}), [], []

    def worker():
        try:
            results.append(rlx.fingerprint(build_variant(_model(), v, cache)))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and len(results) == 4
    assert builds == ["b3"]  # the others waited on the key's lock, then hit
