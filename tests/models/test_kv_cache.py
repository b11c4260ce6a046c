"""A decoder generation step with past key/value inputs (a KV-cache step as transformers runs it):
imported once and checked against torch eager, logits and the updated cache."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models.zoo import VOCAB, _hf  # noqa: E402  (first: makes torchvision importable, see zoo.py)

pytest.importorskip("transformers")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from models.zoo_check import RUN_TOL, rel_error  # noqa: E402

LAYERS, KV_HEADS, HEAD_DIM, PAST = 2, 2, 16, 5


class DecoderStep(torch.nn.Module):
    """One step: new tokens plus the past keys / values stacked [layers, batch, kv_heads, past, head_dim]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, past_keys, past_values):
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=[(past_keys[i], past_values[i]) for i in range(LAYERS)])
        out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True)
        keys = torch.stack([layer.keys for layer in out.past_key_values.layers])
        values = torch.stack([layer.values for layer in out.past_key_values.layers])
        return out.logits, keys, values


def _llama():
    return _hf("LlamaConfig", "LlamaForCausalLM", vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
               num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=KV_HEADS, max_position_embeddings=64)


def _step_inputs(gen, batch, seq, past):
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)
    return (ids, *(torch.randn(LAYERS, batch, KV_HEADS, past, HEAD_DIM, generator=gen) for _ in range(2)))


def test_llama_kv_cache_step_matches_torch():
    model = _llama()
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(0, VOCAB, (2, 1), generator=gen)
    past = [torch.randn(LAYERS, 2, KV_HEADS, PAST, HEAD_DIM, generator=gen) for _ in range(2)]
    step = DecoderStep(model).eval()
    g, params = rlx.torch.import_module(step, (ids, *past))
    rlx.verify(g)
    cache = (LAYERS, 2, KV_HEADS, PAST + 1, HEAD_DIM)
    assert [tuple(o.shape) for o in g.outputs] == [(2, 1, VOCAB), cache, cache]
    with torch.no_grad():
        want = [t.numpy() for t in step(ids, *past)]
    feed = dict(zip(g.inputs(), [ids.numpy(), *(p.numpy() for p in past)]))
    got = rlx.run(g, feed, params)
    for o, w in zip(got, want):
        assert rel_error(o, w) <= RUN_TOL
    np.testing.assert_array_equal(got[1][:, :, :, :PAST], past[0].numpy())  # the cache is appended to, not rewritten
    keys_name = list(g.inputs())[1]
    other = rlx.run(g, {**feed, keys_name: feed[keys_name] * 2}, params)
    assert rel_error(other[0], got[0]) > 1e-3  # the logits read the past keys


@pytest.mark.slow
def test_llama_kv_cache_step_runs_at_many_lengths_from_one_import():
    """Issue 20's generation graph with issue 17's symbols: one import with dynamic new-token and past
    lengths (the cache position ``past + i`` is a symbolic size used as a number), run at several
    (seq, past) through rlx.run and optimize -> plan -> compile(numpy), against torch."""
    step = DecoderStep(_llama()).eval()
    gen = torch.Generator().manual_seed(5)
    seq, past = torch.export.Dim("seq", max=32), torch.export.Dim("past", max=32)
    g, params = rlx.torch.import_module(step, _step_inputs(gen, 2, 3, 5), dynamic_shapes=({1: seq}, {3: past}, {3: past}))
    rlx.verify(g)
    assert g.symbol_ranges == {"seq": (1, 32), "past": (1, 32)}
    cache = (LAYERS, 2, KV_HEADS, "past + seq", HEAD_DIM)
    assert [tuple(o.shape) for o in g.outputs] == [(2, "seq", VOCAB), cache, cache]
    optimized, _ = rlx.optimize(g)
    exe = rlx.compile(rlx.plan(optimized), backend="numpy", params=params)
    for n_new, n_past in [(1, 5), (3, 8), (1, 17), (4, 2)]:
        args = _step_inputs(gen, 2, n_new, n_past)
        with torch.no_grad():
            want = [t.numpy() for t in step(*args)]
        feed = dict(zip(g.inputs(), [a.numpy() for a in args]))
        for got in (rlx.run(g, feed, params), exe.run(feed)):
            assert [o.shape for o in got] == [w.shape for w in want]
            for o, w in zip(got, want):
                assert rel_error(o, w) <= RUN_TOL, (n_new, n_past)
        np.testing.assert_array_equal(got[1][:, :, :, :n_past], feed[list(g.inputs())[1]])
    with pytest.raises(rlx.FeedError, match=r"'past' = 33 is outside its range \[1, 32\]"):
        rlx.run(g, dict(zip(g.inputs(), [a.numpy() for a in _step_inputs(gen, 2, 1, 33)])), params)
