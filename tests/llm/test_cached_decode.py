"""The cached decode step (rlx.llm.graphs.build_decode_cached: rope, cache append and attention as one
``cached_attention`` node per layer; onnxruntime runs it as GroupQueryAttention appending into the caller's cache)
against the masked decode step, both on the numpy reference executor, and through generate on onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model
from test_gguf_parity import GEMMA2_CAPS

import rlx
from rlx.ir.verify import verify
from rlx.llm import load_gguf
from rlx.llm.graphs import build_decode, build_decode_cached, cached_decode_applies, kv_lanes, rope_rows
from rlx.llm.model import rope_tables

pytest.importorskip("gguf")

PROMPT = [1, 5, 9, 200, 17, 33, 120]
CAP = 16


def _feeds(model, pos: int, rng) -> tuple[dict, dict]:
    """Equal inputs for the masked step (caches [KV, hd, C] / [KV, C, hd], bias, rope rows) and the cached one
    (caches [1, KV, C, hd], pos, rope tables): slots < pos filled with random keys / values, the rest garbage that
    the masks must hide."""
    c = model.config
    x = rng.standard_normal((1, c.d_model)).astype(np.float32)
    cos, sin = rope_tables(c, CAP)
    cos_rows, sin_rows = rope_rows(c, cos, sin, c.n_heads + c.n_kv_heads)
    bias = np.where(np.arange(CAP) < pos, 0.0, -1e30).astype(np.float32)[None]
    masked = {"x": x, "cos": cos_rows[pos:pos + 1], "sin": sin_rows[pos:pos + 1], "bias": bias}
    cached = {"x": x, "pos": np.array([pos]), "cos": cos, "sin": sin}
    for i in range(c.n_layers):
        k = rng.standard_normal((c.n_kv_heads, CAP, c.head_dim)).astype(np.float32)
        v = rng.standard_normal((c.n_kv_heads, CAP, c.head_dim)).astype(np.float32)
        masked[f"k{i}"], masked[f"v{i}"] = np.ascontiguousarray(k.transpose(0, 2, 1)), v
        cached[f"k{i}"], cached[f"v{i}"] = k[None].copy(), v[None].copy()
    return masked, cached


@pytest.mark.parametrize("arch,qtype,pos", [("llama", "F32", 5), ("llama", "Q4_0", 0), ("qwen2", "Q8_0", CAP - 1)])
def test_cached_step_equals_masked_step(tmp_path, arch, qtype, pos):
    """Same logits as the masked step (numpy executor, both graphs verified); the new caches are the old ones with
    slot pos replaced by the masked step's new key / value rows (llama's interleaved rope and qwen2's NeoX one;
    the first and the last slot)."""
    model = load_gguf(write_model(tmp_path / "m.gguf", arch=arch, qtype=qtype, seed=5), backend="numpy")
    c, w = model.config, model.weights
    assert cached_decode_applies(c, w)
    masked_g, cached_g = verify(build_decode(c, w, CAP)), verify(build_decode_cached(c, w, CAP))
    params = lambda g: {k: v for k, v in w.arrays.items() if k in set(g.params())}
    masked, cached = _feeds(model, pos, np.random.default_rng(pos))
    want = rlx.compile(masked_g, backend="numpy", params=params(masked_g)).run(inputs=masked)
    got = rlx.compile(cached_g, backend="numpy", params=params(cached_g)).run(inputs=cached)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4 * np.abs(want[0]).max())
    keys, values = kv_lanes(want[1], c), kv_lanes(want[2], c)
    for i in range(c.n_layers):
        k_new, v_new = cached[f"k{i}"].copy(), cached[f"v{i}"].copy()
        k_new[0, :, pos], v_new[0, :, pos] = keys[i], values[i]
        np.testing.assert_allclose(got[1 + 2 * i], k_new, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[2 + 2 * i], v_new, rtol=1e-5, atol=1e-5)


def test_onnxruntime_step_appends_into_the_callers_cache(tmp_path):
    """On onnxruntime the step's new caches are the input arrays themselves, slot pos written in place and the other
    slots untouched; logits equal to the numpy executor's."""
    pytest.importorskip("onnxruntime")
    path = write_model(tmp_path / "m.gguf", qtype="Q8_0", seed=2)
    ort_model = load_gguf(path, backend="onnxruntime")
    assert ort_model.cached
    exe = ort_model.decode_executable(CAP)
    _, cached = _feeds(ort_model, 6, np.random.default_rng(1))
    before = {k: a.copy() for k, a in cached.items()}
    ref = rlx.compile(exe.graph, backend="numpy", params={k: v for k, v in ort_model.weights.arrays.items()
                                                         if k in set(exe.graph.params())}).run(inputs=before)
    got = exe.run(inputs=cached)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-4 * np.abs(ref[0]).max())
    for i in range(ort_model.config.n_layers):
        for j, kind in enumerate("kv"):
            name = f"{kind}{i}"
            assert got[1 + 2 * i + j] is cached[name]
            np.testing.assert_allclose(cached[name], ref[1 + 2 * i + j], rtol=1e-5, atol=1e-5)
            untouched = np.delete(np.arange(CAP), 6)
            np.testing.assert_array_equal(cached[name][:, :, untouched], before[name][:, :, untouched])


@pytest.mark.parametrize("arch,qtype,int8", [("llama", "Q4_0", False), ("llama", "Q4_0", True), ("qwen2", "F16", False)])
def test_generate_on_onnxruntime_equals_the_numpy_executor(tmp_path, arch, qtype, int8):
    """Greedy tokens through the cached step on onnxruntime equal the masked step's on the numpy executor, twice
    (the second generate reuses the step's buffers), with no cache copy per token."""
    pytest.importorskip("onnxruntime")
    path = write_model(tmp_path / "m.gguf", arch=arch, qtype=qtype, seed=7)
    ort_model, ref = load_gguf(path, backend="onnxruntime", int8_activations=int8), load_gguf(path, backend="numpy", int8_activations=int8)
    want = ref.generate(PROMPT, max_new_tokens=12, stop=[])
    assert ort_model.generate(PROMPT, max_new_tokens=12, stop=[]) == want
    assert ort_model.generate(PROMPT[:3], max_new_tokens=12, stop=[]) == ref.generate(PROMPT[:3], max_new_tokens=12, stop=[])
    (step,) = ort_model._local.steps.values()
    outs = step.call()
    assert all(new is buf for new, buf in zip(outs[1:], step.caches))


@pytest.mark.parametrize("arch", ["qwen3", "gemma2"])
def test_models_the_cached_step_cannot_express_keep_the_masked_one(tmp_path, arch):
    """qwen3's per-head q / k norms sit between the matmul and the rope, gemma2 has sliding windows and soft-caps:
    their onnxruntime decode step is the masked one."""
    pytest.importorskip("onnxruntime")
    extra = GEMMA2_CAPS if arch == "gemma2" else None
    model = load_gguf(write_model(tmp_path / "m.gguf", arch=arch, seed=1, extra=extra), backend="onnxruntime")
    assert not model.cached
