"""The onnxruntime backend on graphs with symbolic dims (issue #34): the ONNX export writes them as
dim_params and computes reshape targets, attention masks and arange lengths at run time, so one
session serves every size. Checked against torch at two sizes, plain and optimized (fused attention)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
import rlx.torch

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln(self.lin(x)).view(b, t, 2, 4).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(h, h, h, is_causal=True)
        return a.transpose(1, 2).reshape(b, t, d) + torch.arange(t)[None, :, None]


@pytest.mark.parametrize("optimized", [False, True])
def test_torch_graph_with_symbolic_batch_and_sequence_on_onnxruntime(optimized):
    from torch.export import Dim

    torch.manual_seed(0)
    module = _Block().eval()
    g, params = rlx.torch.import_module(module, (torch.randn(2, 5, 8),),
                                        dynamic_shapes={"x": {0: Dim("b", min=1, max=64), 1: Dim("t", min=2, max=64)}})
    if optimized:
        g, _ = rlx.optimize(g)
    exe = rlx.compile(g, backend="onnxruntime")
    for shape in [(1, 3, 8), (3, 7, 8)]:
        x = torch.randn(*shape)
        got = np.asarray(exe.run({"x": x.numpy()}, params)[0])
        np.testing.assert_allclose(got, module(x).detach().numpy(), rtol=1e-5, atol=2e-6)


def test_scatter_add_and_narrow_on_symbolic_sizes_on_onnxruntime():
    """Zeros of a symbolic shape (scatter_add's accumulator) and a narrow by a symbolic length are computed at run time."""
    g = rlx.Graph("sym")
    upd = g.input("upd", (5, "k"), "f32")
    idx = g.input("idx", (5,), "i64")
    x = g.input("x", ("n", "k"), "f32")
    acc = g.scatter_add(upd, idx, num_rows=4)
    g.set_outputs([acc, g.narrow(x, axis=0, start=1, length=x.shape[0] - 1)])
    exe = rlx.compile(g, backend="onnxruntime")
    rng = np.random.default_rng(0)
    for n, k in [(3, 2), (6, 5)]:
        feed = {"upd": rng.standard_normal((5, k)).astype(np.float32), "idx": np.array([0, 3, 3, -1, 1]),
                "x": rng.standard_normal((n, k)).astype(np.float32)}
        want = np.zeros((4, k), np.float32)
        np.add.at(want, feed["idx"] % 4, feed["upd"])
        got = exe.run(feed, {})
        np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(got[1]), feed["x"][1:])
