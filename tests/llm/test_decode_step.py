"""The decode loop's reused buffers (rlx.llm.model.DecodeStep) and OpenVINO's bound request: tokens equal to the
numpy reference executor's, buffers reused across generate calls and fresh for a nested one."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model
from test_gguf_parity import GEMMA2_CAPS

from rlx.llm import load_gguf
from rlx.llm.graphs import build_decode, kv_lanes

pytest.importorskip("gguf")

PROMPT = [1, 5, 9, 200, 17, 33, 120]


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    """gemma2 with a window of 4 (shorter than the prompt: the local mask binds) and soft-caps; F32 weights."""
    return write_model(tmp_path_factory.mktemp("ds") / "g.gguf", arch="gemma2", tie=True, extra=GEMMA2_CAPS, embed_std=0.05)


def test_openvino_bound_step_equals_numpy(gemma2):
    """OpenVINO's decode through a request bound once to the step's buffers gives the numpy executor's tokens,
    again on a second, shorter prompt (the same buffers, reset: stale slots masked and zeroed)."""
    pytest.importorskip("openvino")
    ref, ov = load_gguf(gemma2, backend="numpy"), load_gguf(gemma2, backend="openvino")
    for prompt in (PROMPT, PROMPT[:3]):
        assert ov.generate(prompt, max_new_tokens=8, stop=[]) == ref.generate(prompt, max_new_tokens=8, stop=[])
    (step,) = ov._local.steps.values()
    assert type(step.call).__name__ == "BoundRequest"


def test_buffers_reused_and_nested_generate(gemma2):
    """A second generate reuses the first one's buffers; a generate called from on_token (same thread, same
    capacity) gets its own and leaves the outer one's tokens unchanged."""
    model = load_gguf(gemma2, backend="numpy")
    want = model.generate(PROMPT, max_new_tokens=6, stop=[])
    first = model._step(128)
    assert model.generate(PROMPT, max_new_tokens=6, stop=[]) == want and model._step(128) is first
    model.generate(PROMPT, max_new_tokens=200, stop=[])  # another capacity (256): the 128 one is dropped
    assert list(model._local.steps) == [256]
    assert model.generate(PROMPT, max_new_tokens=6, stop=[]) == want
    inner: list[list[int]] = []
    got = model.generate(PROMPT, max_new_tokens=6, stop=[],
                         on_token=lambda t: inner.append(model.generate(PROMPT[:4], max_new_tokens=3, stop=[])) if not inner else None)
    assert got == want
    assert inner == [load_gguf(gemma2, backend="numpy").generate(PROMPT[:4], max_new_tokens=3, stop=[])]


def test_query_scale_folded_into_the_rope_multiply(tmp_path):
    """With q / k / v merged, the decode step scales q in the rope's elementwise chain (no separate multiply per
    layer), and its outputs equal the separate form's bit for bit (rope then scale, the same products); the keys
    come out as the rope's rows (q lanes, then k's), read by kv_lanes."""
    import rlx

    path = write_model(tmp_path / "l.gguf", qtype="F32", seed=3)
    model = load_gguf(path, backend="numpy")
    c, w = model.config, model.weights
    rng = np.random.default_rng(0)
    g = build_decode(c, w, 128)
    feed = {n: rng.standard_normal(v.node.shape).astype(np.float32) for n, v in g.inputs().items()}
    params = {n: w.arrays[n] for n in g.params()}
    folded = rlx.compile(g, backend="numpy", params=params).run(inputs=feed)
    g2 = build_decode(c, w, 128, fold_query_scale=False)
    separate = rlx.compile(g2, backend="numpy", params=params).run(inputs=feed)
    def q_source(gr):  # the op that produced the q operand of the first q·K matmul ([KV, rep, C] scores)
        mm = next(n for n in gr.nodes if n.op == "matmul" and tuple(n.shape) == (c.n_kv_heads, c.group, 128))
        return gr.node(gr.node(mm.inputs[0]).inputs[0])

    assert q_source(g).op == "narrow"  # q straight from the rope's (scaled) output
    assert (q_source(g2).op, q_source(g2).attrs.get("op")) == ("binary", "mul")
    np.testing.assert_array_equal(np.asarray(folded[0]), np.asarray(separate[0]))  # logits
    np.testing.assert_array_equal(kv_lanes(np.asarray(folded[1]), c), kv_lanes(np.asarray(separate[1]), c))
    np.testing.assert_array_equal(kv_lanes(np.asarray(folded[2]), c), kv_lanes(np.asarray(separate[2]), c))  # values


def test_layers_merged_and_not(tmp_path):
    """A file whose layers differ in whether q / k / v merge (mixed weight types, e.g. a Q4_K_M file's Q6_K attn_v):
    the decode step's keys still stack, and equal those of the all-separate form."""
    import rlx
    from rlx.frontends.gguf import read_gguf
    from rlx.llm.config import config_from_gguf
    from rlx.llm.graphs import MERGED, _merge, load_weights

    path = write_model(tmp_path / "m.gguf", qtype="Q8_0", layers=3, seed=4)
    f = read_gguf(path)
    c = config_from_gguf(f)
    separate, mixed = load_weights(f, c, merge=False), load_weights(f, c, merge=False)
    _merge(mixed, "blk.1.attn_qkv", tuple(f"blk.1.{p}" for p in MERGED["attn_qkv"]))  # layer 1 merged only
    rng = np.random.default_rng(0)
    feed = {n: rng.standard_normal(v.node.shape).astype(np.float32) for n, v in build_decode(c, separate, 128).inputs().items()}
    for t in ("cos", "sin"):  # rope rows are the same for every head (tiled), as the model feeds them
        feed[t] = np.tile(feed[t][:, :c.head_dim], (1, c.n_heads + c.n_kv_heads))
    outs = []
    for w in (separate, mixed):
        g = build_decode(c, w, 128)
        outs.append(rlx.compile(g, backend="numpy", params={n: w.arrays[n] for n in g.params()}).run(inputs=feed))
    (a, ka, va), (b, kb, vb) = outs
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5 * np.abs(a).max())
    np.testing.assert_allclose(kv_lanes(np.asarray(kb), c), kv_lanes(np.asarray(ka), c), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kv_lanes(np.asarray(vb), c), kv_lanes(np.asarray(va), c), rtol=1e-5, atol=1e-5)
