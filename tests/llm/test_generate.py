"""Generation semantics on a small GGUF model: decode steps against full prefills, sampling, stop tokens, errors."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model

from rlx.ir.errors import RlxError
from rlx.llm import load_gguf
from rlx.ops.numerics import philox_f32, sample_rows

pytest.importorskip("gguf")

PROMPT = [1, 7, 42, 99]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return load_gguf(write_model(tmp_path_factory.mktemp("gen") / "m.gguf", qtype="Q4_0", seed=3))


def test_decode_steps_equal_fresh_prefills(model):
    """Each token from the cached decode graph is the argmax of a full prefill over everything before it."""
    new = model.generate(PROMPT, max_new_tokens=5, stop=[])
    seq = list(PROMPT)
    for tok in new:
        assert tok == int(np.argmax(model.logits(seq)))
        seq.append(tok)
    assert model.last_stats["decode_tokens"] == 4 and model.last_stats["prefill_ms"] > 0


def test_sampling_follows_the_sample_op_rule(model):
    """Token t is sample_rows(logits_t, Philox draw t of the seed) with the temperature / top-k / top-p given."""
    kw = {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 11}
    new = model.generate(PROMPT, max_new_tokens=6, stop=[], **kw)
    assert new == model.generate(PROMPT, max_new_tokens=6, stop=[], **kw)  # seeded: repeatable
    draws, seq = philox_f32(11, 6), list(PROMPT)
    for t, tok in enumerate(new):
        ref = sample_rows(model.logits(seq)[None, :], draws[t:t + 1], 0.9, 40, 0.95)[0]
        assert tok == ref
        seq.append(tok)
    assert model.generate(PROMPT, max_new_tokens=4, stop=[], temperature=1.0, top_k=1) == model.generate(PROMPT, 4, stop=[])


def test_stop_tokens(model):
    greedy = model.generate(PROMPT, max_new_tokens=6, stop=[])
    assert model.generate(PROMPT, max_new_tokens=6, stop=[greedy[2]]) == greedy[:3]
    assert model.generate(PROMPT, max_new_tokens=0) == []


def test_bad_ids_are_rlx_errors(model):
    with pytest.raises(RlxError, match="token ids"):
        model.logits([1, 10**6])
    with pytest.raises(RlxError, match="at least one"):
        model.generate([], 3)


def test_cache_capacity_does_not_change_tokens(model, monkeypatch):
    """The decode graph is compiled for the smallest capacity bucket that holds prompt + new tokens; masked free
    slots leave the tokens unchanged whatever the bucket."""
    import rlx.llm.model as m

    monkeypatch.setattr(m, "CAPACITY_BUCKETS", (8, 16))
    small = model.generate(PROMPT, max_new_tokens=10, stop=[])
    monkeypatch.setattr(m, "CAPACITY_BUCKETS", (256,))
    assert small == model.generate(PROMPT, max_new_tokens=10, stop=[])


def test_graphs_compile_once(tmp_path, monkeypatch):
    """One prefill and one decode graph are compiled, then reused for every token and every later call."""
    from rlx.llm.model import CAPACITY_BUCKETS, LlmModel

    model = load_gguf(write_model(tmp_path / "c.gguf", qtype="Q8_0", seed=4), backend="numpy")
    built: list[str] = []
    real = LlmModel._compile
    monkeypatch.setattr(LlmModel, "_compile", lambda self, g: (built.append(g.name), real(self, g))[1])
    model.generate(PROMPT, max_new_tokens=6, stop=[])
    model.generate([*PROMPT, 5], max_new_tokens=6, stop=[])
    assert built == ["llm_prefill", f"llm_decode_{CAPACITY_BUCKETS[0]}"]


def test_auto_backend_falls_back_to_numpy(tmp_path, monkeypatch):
    """backend='auto': a graph the preferred backend cannot compile runs on the numpy executor, with a warning."""
    import rlx.runtime.compile as rc

    pytest.importorskip("onnxruntime")
    path = write_model(tmp_path / "f.gguf", qtype="Q8_0", seed=6)
    want = load_gguf(path, backend="numpy").generate(PROMPT, max_new_tokens=4, stop=[])
    model = load_gguf(path)

    original = rc.compile

    def refuse(graph, backend="numpy", **kw):
        if backend != "numpy":
            raise RlxError("too big for this backend")
        return original(graph, backend=backend, **kw)

    monkeypatch.setattr(rc, "compile", refuse)
    with pytest.warns(RuntimeWarning, match="too big"):
        assert model.generate(PROMPT, max_new_tokens=4, stop=[]) == want
    assert model.backend == "numpy"
    with pytest.raises(RlxError, match="too big"):
        load_gguf(path, backend="onnxruntime").logits(PROMPT)
