"""torch.export programs with dynamic dims import once (Dim names kept, size expressions
such as ``batch*seq`` and ``seq - 1`` carried as rlx dim expressions) and run at many sizes."""

import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
rlx_torch = pytest.importorskip("rlx.torch")


class Mixer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        b, s, e = x.shape
        flat = self.proj(x).reshape(b * s, e)  # [batch*seq, 8]
        both = torch.cat([flat, flat[: s]], dim=0)  # [batch*seq + seq, 8]
        pos = torch.arange(s, dtype=x.dtype)  # [seq]
        shifted = x[:, 1:, :] + pos[1:, None]  # [batch, seq - 1, 8]
        return both.sum(dim=0), shifted


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_exported_dynamic_dims_run_at_many_sizes(backend):
    torch.manual_seed(0)
    model = Mixer().eval()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=3, max=64)
    g, params = rlx_torch.import_module(model, (torch.randn(2, 5, 8),), dynamic_shapes={"x": {0: batch, 1: seq}})
    x_shape = g.inputs()["x"].shape
    assert x_shape == ("batch", "seq", 8)
    assert g.node(g.output_ids[1]).shape == (x_shape[0], x_shape[1] - 1, 8)
    exe = rlx.compile(g, backend=backend, params=params)
    for b, s in [(1, 7), (2, 16), (3, 33)]:
        x = torch.randn(b, s, 8)
        with torch.no_grad():
            want = [t.numpy() for t in model(x)]
        got = exe.run({"x": x.numpy()})
        for a, w in zip(got, want):
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


def test_dim_names_and_ranges_are_kept():
    torch.manual_seed(0)
    model = Mixer().eval()
    batch, seq = torch.export.Dim("batch", max=8), torch.export.Dim("seq", min=3, max=64)
    g, params = rlx_torch.import_module(model, (torch.randn(2, 5, 8),), dynamic_shapes={"x": {0: batch, 1: seq}})
    assert g.symbol_ranges == {"batch": (1, 8), "seq": (3, 64)}  # torch's default lower bound 0 is rlx's 1
    assert "symbol seq in [3, 64]" in str(g)
    x = torch.randn(8, 3, 8)  # both at their bounds
    with torch.no_grad():
        want = [t.numpy() for t in model(x)]
    for a, w in zip(rlx.run(g, {"x": x.numpy()}, params), want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)
    for shape, match in [((9, 5, 8), r"'batch' = 9 is outside its range \[1, 8\]"),
                         ((2, 2, 8), r"'seq' = 2 is outside its range \[3, 64\]")]:
        with pytest.raises(rlx.FeedError, match=match):
            rlx.run(g, {"x": np.zeros(shape, np.float32)}, params)


class Positions(torch.nn.Module):
    """Sizes used as numbers: positions past..past+seq (a cache position) added to the values."""

    def forward(self, x, past):
        p, s = past.shape[1], x.shape[1]
        return x + torch.arange(p, p + s, dtype=x.dtype) + p


def test_symbolic_sizes_used_as_numbers():
    seq, past = torch.export.Dim("seq", max=64), torch.export.Dim("past", max=64)
    g, params = rlx_torch.import_module(Positions(), (torch.randn(2, 3), torch.randn(2, 5)),
                                        dynamic_shapes=({1: seq}, {1: past}))
    for s, p in [(1, 1), (4, 9), (7, 2)]:
        x, pa = torch.randn(2, s), torch.randn(2, p)
        (got,) = rlx.run(g, {"x": x.numpy(), "past": pa.numpy()}, params)
        np.testing.assert_allclose(got, Positions()(x, pa).numpy(), rtol=1e-6)


@pytest.mark.slow
def test_llama_with_dynamic_batch_and_seq_runs_from_one_import():
    """Done-when item of issue 17: a random-init tiny transformers Llama exported with dynamic
    batch and seq runs from one import at (1, 7), (2, 16), (3, 33) on numpy and jax, matching torch."""
    pytest.importorskip("models.zoo")  # makes transformers importable next to a CUDA-only torchvision wheel
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, ids):
            return self.lm(input_ids=ids, use_cache=False).logits

    model = Logits()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=64)
    g, params = rlx_torch.import_module(model, (torch.randint(0, 64, (2, 16)),), dynamic_shapes={"ids": {0: batch, 1: seq}})
    assert g.inputs()["ids"].shape == ("batch", "seq")
    for backend in ("numpy", "jax"):
        exe = rlx.compile(g, backend=backend, params=params)
        for b, s in [(1, 7), (2, 16), (3, 33)]:
            ids = torch.randint(0, 64, (b, s))
            with torch.no_grad():
                want = model(ids).numpy()
            np.testing.assert_allclose(exe.run({"ids": ids.numpy()})[0], want, rtol=1e-4, atol=1e-5)
