"""rlx.torch.import_module: torch.export -> rlx MIR, with torch as the oracle (float32, 1e-5)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from rlx.frontends.torch.importer import TorchImportError, UnsupportedOpError  # noqa: E402

ATOL = 1e-5


def _compile_fn():
    fn = getattr(rlx, "compile", None)
    if fn is not None:
        return fn
    try:
        from rlx.runtime.compile import compile as fn
    except ImportError:
        return None
    return fn


def _outputs(ref):
    if isinstance(ref, torch.Tensor):
        return [ref]
    return [t for t in ref]


def check_parity(module, args, kwargs=None, dynamic_shapes=None, *, run_args=None, arena=True, atol=ATOL):
    """Import, verify, run with rlx.run (and the numpy arena backend) and compare with torch."""
    kwargs = dict(kwargs or {})
    g, params = rlx.torch.import_module(module, args, dynamic_shapes, kwargs=kwargs)
    rlx.verify(g)
    run_args = args if run_args is None else run_args
    with torch.no_grad():
        expected = [t.detach().numpy() for t in _outputs(module(*run_args, **kwargs))]
    tensors = [a for a in (*run_args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    feed = {name: t.numpy() for name, t in zip(g.inputs(), tensors)}
    got = rlx.run(g, inputs=feed, params=params)
    assert len(got) == len(expected)
    errors = []
    for e, o in zip(expected, got):
        assert o.shape == e.shape and o.dtype == e.dtype
        np.testing.assert_allclose(o, e, atol=atol, rtol=0)
        errors.append(float(np.max(np.abs(o.astype(np.float64) - e))) if e.size else 0.0)
    compile_fn = _compile_fn()
    if arena and compile_fn is not None:
        exe = compile_fn(g, backend="numpy")
        for e, o in zip(expected, exe.run(inputs=feed, params=params)):
            np.testing.assert_allclose(o, e, atol=atol, rtol=0)
    return g, params, errors


# ------------------------------------------------------------------------------ models
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 8),
                                 nn.GELU(approximate="tanh"), nn.Linear(8, 4))
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return torch.softmax(self.norm(self.net(x)), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2, stride=1)
        self.gap = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 5)
        with torch.no_grad():  # non-trivial running statistics, so eval mode matters
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(x)
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.gap(self.avg(x))
        return self.fc(torch.flatten(x, 1))


class EmbeddingModel(nn.Module):
    """Token + arange positional embeddings, split / getitem, full, masked_fill, a buffer."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(11, 8)
        self.pos = nn.Embedding(16, 8)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        h = self.tok(ids) + self.pos(positions).unsqueeze(0) * self.scale
        a, b = h.split(4, dim=-1)
        bias = torch.full((1, ids.shape[1], 1), 0.25)
        pad = (ids == 0).unsqueeze(-1)
        return F.gelu(a) * b + bias, torch.softmax(a, dim=-1).masked_fill(pad, 0.0)


# ------------------------------------------------------------------------- parity tests
def test_mlp_parity():
    torch.manual_seed(0)
    g, params, errors = check_parity(MLP().eval(), (torch.randn(6, 16),))
    assert set(params) == {f"net.{i}.{k}" for i in (0, 2, 4, 6) for k in ("weight", "bias")} | {"norm.weight", "norm.bias"}
    assert set(g.params()) == set(params)
    assert max(errors) < ATOL


def _padding_mask():
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[0, 5:] = True
    mask[2, 2:] = True
    return mask


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer_with_padding_mask(norm_first, activation):
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first).eval()
    x = torch.randn(3, 7, 32)
    mask = _padding_mask()
    g, params, errors = check_parity(layer, (x,), {"src_key_padding_mask": mask})
    assert "self_attn.in_proj_weight" in params and "norm2.bias" in params
    assert any(n.op == "attention" for n in g.nodes)
    assert max(errors) < ATOL
    # torch's eval fast path (fused kernel) and the plain path agree with the import too
    if hasattr(torch.backends, "mha") and hasattr(torch.backends.mha, "set_fastpath_enabled"):
        before = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            with torch.no_grad():
                slow = layer(x, src_key_padding_mask=mask).numpy()
        finally:
            torch.backends.mha.set_fastpath_enabled(before)
        feed = {"src": x.numpy(), "src_key_padding_mask": mask.numpy()}
        np.testing.assert_allclose(rlx.run(g, inputs=feed, params=params)[0], slow, atol=ATOL, rtol=0)


def test_transformer_encoder_layer_causal_src_mask():
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    check_parity(layer, (torch.randn(2, 6, 16),), {"src_mask": causal, "is_causal": True})


def test_small_cnn_eval_parity():
    torch.manual_seed(3)
    g, params, errors = check_parity(SmallCNN().eval(), (torch.randn(2, 3, 16, 16),))
    assert {"bn1.running_mean", "bn1.running_var", "bn2.weight", "conv1.bias"} <= set(params)
    assert "bn1.num_batches_tracked" not in params  # unused in eval mode: left out
    assert {"conv2d", "pool2d"} <= {n.op for n in g.nodes}
    assert max(errors) < ATOL


def test_embedding_arange_split_getitem():
    torch.manual_seed(4)
    ids = torch.randint(0, 11, (2, 9))
    ids[0, -2:] = 0
    g, params, _ = check_parity(EmbeddingModel(), (ids,))
    assert g.inputs()["ids"].dtype is rlx.i64
    assert set(params) == {"tok.weight", "pos.weight", "scale"}


def test_dynamic_batch_dim():
    torch.manual_seed(5)
    batch = torch.export.Dim("batch", min=1, max=64)
    model = MLP().eval()
    g, _, _ = check_parity(model, (torch.randn(4, 16),), dynamic_shapes=({0: batch},), run_args=(torch.randn(9, 16),))
    assert g.inputs()["x"].shape == ("batch", 16)
    assert g.outputs[0].shape == ("batch", 4)
    cnn = SmallCNN().eval()
    g, _, _ = check_parity(cnn, (torch.randn(2, 3, 16, 16),), dynamic_shapes={"x": {0: batch}}, run_args=(torch.randn(5, 3, 16, 16),))
    assert g.inputs()["x"].shape == ("batch", 3, 16, 16)


# ------------------------------------------------------------------------------ op zoo
class SdpaModel(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, q, k, v, mask):
        if self.mode == "bool":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if self.mode == "float":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.float() * -2.0)
        if self.mode == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("mode", ["none", "bool", "float", "causal"])
def test_sdpa_masks(mode):
    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = torch.rand(2, 1, 5, 5) > 0.3
    mask[..., 0] = True  # no fully masked row
    check_parity(SdpaModel(mode), (q, k, v, mask))


def test_sdpa_causal_rectangular_is_top_left_aligned():
    torch.manual_seed(7)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    check_parity(SdpaModel("causal"), (q, k, v, torch.ones(1)))


class ShapeZoo(nn.Module):
    def forward(self, x, y):
        a = x.view(2, 3, 4, 5).permute(0, 2, 1, 3).reshape(2, 4, 15)  # [2, 4, 15]
        b = a.transpose(1, 2).contiguous()  # [2, 15, 4]
        c = b[:, 1:13:3, :] + b[:, -4:, :].flip(1).flip(1)  # strided slice -> gather
        d = y.unsqueeze(1).expand(2, 4, 4) * c.select(1, 2).unsqueeze(1)
        e, f2, g2 = torch.chunk(d, 3, dim=-1)[0], *torch.unbind(d[:, :2], dim=1)
        h = torch.cat([e.sum(-1), f2[:, :2], torch.stack([g2.amax(-1), g2.mean(-1)], -1)], dim=-1).unsqueeze(1)
        z = torch.tril(torch.ones(4, 4)) @ d
        return h.squeeze(1), torch.log_softmax(z, dim=1), F.leaky_relu(z.t() if z.dim() == 2 else z.mT, 0.1).clamp(-1.0, 2.0)


def test_shape_and_reduction_zoo():
    torch.manual_seed(8)
    check_parity(ShapeZoo(), (torch.randn(120), torch.randn(2, 4)))


class ConvZoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 6, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding="same", dilation=2, groups=4)
        self.gn = nn.GroupNorm(2, 4)
        self.ln = nn.LayerNorm([7, 7])

    def forward(self, x, s):
        a = self.c1(s).relu()
        b = self.ln(self.gn(self.c2(x)))
        p = F.adaptive_avg_pool2d(b, (3, 2))  # non-divisible windows
        q = F.avg_pool2d(b, 3, stride=2, padding=1, count_include_pad=False)
        r = F.max_pool2d(b, 3, stride=2, padding=1)
        up = F.interpolate(r, scale_factor=2, mode="nearest")
        return a, p, q + r, F.adaptive_avg_pool2d(b, 1).flatten(1), up


def test_conv_pool_norm_zoo():
    torch.manual_seed(9)
    check_parity(ConvZoo().eval(), (torch.randn(2, 4, 7, 7), torch.randn(2, 4, 10)))


class ElementwiseZoo(nn.Module):
    def forward(self, x, n):
        y = (x * 2 - 1).abs().sqrt() + torch.rsqrt(x.abs() + 1) - torch.exp(-x) / (1 + x ** 2)
        y = torch.where(x > 0, y, torch.sigmoid(y)) + torch.maximum(x, y) - torch.minimum(x, 0.5 * y)
        m = (n % 2 == 0) | (n > 3)
        cnt = n.float() / 3 + (n + 1) + torch.remainder(n - 7, 3) + torch.div(n - 7, 4, rounding_mode="floor")
        cnt = cnt + torch.div(n - 7, 4, rounding_mode="trunc") + torch.fmod(n - 7, -3)
        return y.masked_fill(~m, -1.0), cnt, torch.zeros_like(x) + torch.ones_like(n) + torch.full_like(x, 3.0), 1 - x.tanh()


def test_elementwise_zoo():
    torch.manual_seed(10)
    x = torch.randn(3, 5)
    n = torch.arange(15).reshape(3, 5)
    check_parity(ElementwiseZoo(), (x, n))


# ------------------------------------------------------------------------------- errors
class Unsupported(nn.Module):
    def forward(self, x, i):
        # samplers rlx has no converter for (random draws from torch's generator)
        return torch.poisson(x.abs()) + torch.poisson(2 * x.abs()) + torch._standard_gamma(x.abs() + 1) + i.sum()


def test_unsupported_ops_listed_at_once_with_counts():
    with pytest.raises(UnsupportedOpError) as info:
        rlx.torch.import_module(Unsupported(), (torch.randn(4), torch.tensor([1, 2, 2])))
    err = info.value
    assert isinstance(err, rlx.RlxError) and isinstance(err, TorchImportError)
    assert err.ops == {"aten.poisson.default": 2, "aten._standard_gamma.default": 1}
    text = str(err)
    assert "2 unsupported" in text and "aten.poisson.default (x2)" in text and "aten._standard_gamma.default (x1)" in text


# ---------------------------------------------- erf / floor / ceil / scans / arg / topk / scatter
class MathScanZoo(nn.Module):
    def forward(self, x, n):
        y = torch.erf(x) + torch.floor(3 * x) - torch.ceil(2 * x) + torch.cumsum(x, 1) + torch.cumsum(x, -2)
        return y, torch.cumprod(x, 0), torch.cumsum(n, 1), torch.floor(n) + torch.ceil(n), torch.erf(n)


def test_erf_floor_ceil_cumsum_cumprod():
    torch.manual_seed(20)
    check_parity(MathScanZoo(), (torch.randn(3, 5), torch.arange(-7, 8, dtype=torch.int32).reshape(3, 5)))


class ArgZoo(nn.Module):
    def forward(self, x):
        return (torch.argmax(x, 1), torch.argmin(x, 0, keepdim=True), torch.argmax(x), torch.argmin(x, dim=-1),
                torch.argmax(x, keepdim=True))


def test_argmax_argmin_first_index_on_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, -2.0, 5.0, 5.0], [4.0, 4.0, -2.0, 1.0]])
    check_parity(ArgZoo(), (x,))
    torch.manual_seed(21)
    check_parity(ArgZoo(), (torch.randn(4, 6),))


class TopKZoo(nn.Module):
    def __init__(self, k, dim, largest):
        super().__init__()
        self.k, self.dim, self.largest = k, dim, largest

    def forward(self, x):
        values, indices = torch.topk(x, self.k, dim=self.dim, largest=self.largest)
        return values * 2, indices


@pytest.mark.parametrize("k,dim,largest", [(3, -1, True), (2, 0, False), (1, 1, True), (5, 1, False)])
def test_topk_values_and_indices(k, dim, largest):
    torch.manual_seed(22)
    g, _ = rlx.torch.import_module(TopKZoo(k, dim, largest), (torch.randn(4, 5),))
    assert [n.attrs["output"] for n in g.nodes if n.op == "top_k"] == ["both"]  # one node, two results
    check_parity(TopKZoo(k, dim, largest), (torch.randn(4, 5),))


class TopKInt(nn.Module):
    def forward(self, n):
        return torch.topk(n, 2)


def test_topk_integers():
    check_parity(TopKInt(), (torch.tensor([[5, -3, 9, 7], [0, 1, 2, 3]], dtype=torch.int64),))


class ScatterZoo(nn.Module):
    def forward(self, x, i1, i0, src):
        a = torch.scatter(x, 1, i1, src) + torch.scatter(x, 1, i1, 2.5)
        b = torch.scatter_add(x, 0, i0, src) + torch.scatter_add(x, 1, i1, src)
        c = x.scatter_reduce(0, i0, src, reduce="amax") + x.scatter_reduce(1, i1, src, reduce="prod")
        d = x.scatter_reduce(0, i0, src, reduce="sum") - x.scatter_reduce(1, i1, src, reduce="amin")
        return a, b, c, d


def test_scatter_scatter_add_scatter_reduce():
    torch.manual_seed(23)
    x, src = torch.randn(3, 5), torch.randn(2, 4)  # src larger than the index: torch reads src[:2, :3]
    i1 = torch.tensor([[0, 4, 2], [1, 3, 0]])  # unique per row: scatter without a reduction is exact
    i0 = torch.tensor([[2, 2, 0], [2, 1, 0]])  # duplicates along dim 0: only the reductions see them
    check_parity(ScatterZoo(), (x, i1, i0, src))


class ScatterMean(nn.Module):
    def forward(self, x, idx, src):
        return x.scatter_reduce(0, idx, src, reduce="mean")


def test_scatter_reduce_mean_matches_torch():  # rlx.ops.scatter_reduce; every reduction: tests/frontends/torch
    args = (torch.randn(3, 4), torch.tensor([[0, 1], [2, 0]]), torch.randn(2, 2))
    g, params = rlx.torch.import_module(ScatterMean(), args)
    got = rlx.run(g, dict(zip(g.inputs(), [a.numpy() for a in args])), params)[0]
    np.testing.assert_allclose(got, ScatterMean()(*args).numpy(), rtol=1e-6, atol=1e-6)


def test_bad_input_errors_are_typed():
    with pytest.raises(TorchImportError, match=r"torch\.nn\.Module"):
        rlx.torch.import_module(lambda x: x, (torch.randn(2),))

    class TrainDropout(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.5, training=True)

    with pytest.raises(TorchImportError):
        rlx.torch.import_module(TrainDropout(), (torch.randn(4),))



def test_symbol_products_import_and_run_at_several_sizes():
    """Size expressions (b*c, torch MultiheadAttention's batch*heads) are rlx dim expressions."""

    class SymbolProduct(nn.Module):
        def forward(self, x):
            return x.reshape(-1)

    g, _ = rlx.torch.import_module(SymbolProduct(), (torch.randn(3, 4),), ({0: torch.export.Dim("b"), 1: torch.export.Dim("c")},))
    assert g.node(g.output_ids[0]).shape == ("b*c",)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    g, params = rlx.torch.import_module(layer, (torch.randn(2, 5, 16),), ({0: torch.export.Dim("batch")},))
    for b in (1, 3):
        x = torch.randn(b, 5, 16)
        with torch.no_grad():
            want = layer(x).numpy()
        np.testing.assert_allclose(rlx.run(g, {"src": x.numpy()}, params)[0], want, rtol=1e-4, atol=1e-5)


def test_stacked_encoder_keeps_fully_qualified_names():
    torch.manual_seed(12)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    g, params, _ = check_parity(encoder, (torch.randn(2, 5, 16),), {"src_key_padding_mask": mask})
    assert {"layers.0.self_attn.in_proj_weight", "layers.1.norm2.weight"} <= set(params)
    assert set(g.params()) == set(params)
    assert list(g.inputs()) == ["src", "src_key_padding_mask"]


def test_import_rlx_does_not_import_torch():
    code = "import sys, rlx, rlx.torch; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_lifted_constant_and_nonpersistent_buffer():
    class WithConsts(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("shift", torch.arange(4.0), persistent=False)
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x + self.shift) * torch.tensor([1.0, -1.0, 2.0, 0.5])

    torch.manual_seed(11)
    _, params, _ = check_parity(WithConsts(), (torch.randn(3, 4),))
    assert set(params) == {"shift", "lin.weight", "lin.bias"}


class DecomposedOps(nn.Module):
    """Ops without a converter of their own (einsum, baddbmm) reach rlx through torch's decompositions."""

    def forward(self, x, idx):
        a = torch.einsum("bij,bjk->bik", x, x.transpose(1, 2))
        return a[:, idx], x[idx], torch.baddbmm(a, x, x.mT, beta=0.5, alpha=2.0)


def test_decomposed_ops_and_integer_indexing():
    torch.manual_seed(13)
    g, _, _ = check_parity(DecomposedOps(), (torch.randn(3, 4, 4), torch.tensor([2, 0, 1])))
    assert rlx.parse(str(g)) == g
