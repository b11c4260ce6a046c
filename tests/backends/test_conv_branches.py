"""merge_conv_branches: re-parameterizable blocks as trained (parallel conv branches and a BatchNorm of the
input, summed) reach the engines as one conv. Oracle: the torch module itself (eager); the merged graph
passes the verifier; the engine runs the number of Convs the deployed (re-parameterized) block has."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.backends.conv_branches import merge_conv_branches
from rlx.backends.ort_backend import export_for_session

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _bn(c: int) -> torch.nn.BatchNorm2d:
    bn = torch.nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, dilation: int = 1,
             padding: int | None = None) -> torch.nn.Sequential:
    pad = dilation * (k - 1) // 2 if padding is None else padding
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, groups=groups, bias=False),
                               _bn(cout))


class MobileOneBlock(torch.nn.Module):
    """MobileOne / RepVGG as trained: ``branches`` kxk conv+BN, a 1x1 conv+BN, the input's BatchNorm, ReLU."""

    def __init__(self, c: int, k: int, groups: int, branches: int, stride: int = 1):
        super().__init__()
        self.kxk = torch.nn.ModuleList(_conv_bn(c, c, k, stride, groups) for _ in range(branches))
        self.scale = _conv_bn(c, c, 1, stride, groups)
        self.identity = _bn(c) if stride == 1 else None

    def forward(self, x):
        out = self.scale(x) + (self.identity(x) if self.identity is not None else 0)
        for conv in self.kxk:
            out = out + conv(x)
        return torch.relu(out)


class RepGhostModule(torch.nn.Module):
    """RepGhost's fusion branch: BN(depthwise conv(x1)) + BN(x1), x1 a ReLU read by both."""

    def __init__(self, cin: int, c: int):
        super().__init__()
        self.primary = torch.nn.Sequential(_conv_bn(cin, c, 1), torch.nn.ReLU())
        self.cheap = _conv_bn(c, c, 3, groups=c)
        self.fusion = _bn(c)

    def forward(self, x):
        x1 = self.primary(x)
        return torch.relu(self.cheap(x1) + self.fusion(x1))


class RepVggDw(torch.nn.Module):
    """RepViT's token mixer: dw 3x3 conv+BN + dw 1x1 conv (with a bias) + the input itself [, then a BatchNorm]."""

    def __init__(self, c: int, bn: bool):
        super().__init__()
        self.conv = _conv_bn(c, c, 3, groups=c)
        self.conv1 = torch.nn.Conv2d(c, c, 1, groups=c)
        self.bn = _bn(c) if bn else torch.nn.Identity()

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x) + self.conv1(x) + x))


def _session_convs(module: torch.nn.Module, x: torch.Tensor) -> tuple[int, object, dict, list]:
    torch.manual_seed(1)
    module = module.eval()
    g, params = rlx.torch.import_module(module, (x,))
    proto = export_for_session(g, params)  # verifies the graph after each rewrite
    onnx.checker.check_model(proto, full_check=True)
    return sum(n.op_type == "Conv" for n in proto.graph.node), g, params, [x.numpy()]


def _check_engines(module: torch.nn.Module, g, params, feed_values: list, rtol: float = 1e-4) -> None:
    with torch.inference_mode():
        want = module(torch.from_numpy(feed_values[0])).numpy()
    feed = dict(zip(g.inputs(), feed_values))
    for backend in ("onnxruntime", "openvino"):
        if backend == "openvino":
            pytest.importorskip("openvino")
        got = rlx.compile(g, backend=backend, params=params, threads=1).run(feed)[0]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("k, groups, branches, stride", [(3, 1, 1, 1), (3, 8, 4, 1), (3, 8, 2, 2), (1, 1, 1, 1)])
def test_mobileone_block_runs_as_one_conv(k, groups, branches, stride):
    torch.manual_seed(0)
    block = MobileOneBlock(8, k, groups, branches, stride).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 8, 9, 9))
    assert convs == 1
    _check_engines(block, g, params, feed)


def test_repghost_fusion_branch_merges_into_the_depthwise_conv(tmp_path):
    """The input's BatchNorm reads a ReLU that the depthwise conv reads too: it folds (no Sub of the mean
    left) and joins the conv: two convs in all, the 1x1 primary and the merged depthwise one."""
    torch.manual_seed(0)
    block = RepGhostModule(4, 8).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 4, 7, 7))
    assert convs == 2
    proto = export_for_session(g, params)
    assert not {n.op_type for n in proto.graph.node} & {"Sub", "Mul", "BatchNormalization"}
    _check_engines(block, g, params, feed)


@pytest.mark.parametrize("bn", [False, True])
def test_the_input_itself_is_an_identity_branch(bn):
    """... and a BatchNorm after the sum scales the merged kernel and the shift: one conv either way."""
    torch.manual_seed(0)
    block = RepVggDw(8, bn).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 8, 6, 6))
    assert convs == 1
    _check_engines(block, g, params, feed)


class TwoBranches(torch.nn.Module):
    def __init__(self, a: torch.nn.Module, b: torch.nn.Module):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return self.a(x) + self.b(x)


def test_a_depthwise_kernel_is_not_widened_into_a_dense_one():
    """dw 3x3 + dense 1x1 as one dense 3x3 would take 9x the 1x1's multiply-adds: both stay."""
    torch.manual_seed(0)
    block = TwoBranches(_conv_bn(16, 16, 3, groups=16), _conv_bn(16, 16, 1)).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 16, 6, 6))
    assert convs == 2
    _check_engines(block, g, params, feed)


def test_grouped_and_depthwise_kernels_merge_block_diagonally():
    """A grouped 3x3 (4 groups) + a depthwise 3x3: the depthwise kernel sits inside its channel's group."""
    torch.manual_seed(0)
    block = TwoBranches(_conv_bn(8, 8, 3, groups=4), _conv_bn(8, 8, 3, groups=8)).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 8, 6, 6))
    assert convs == 1
    _check_engines(block, g, params, feed)


def test_kernels_that_cannot_share_a_frame_stay_apart():
    """A 2x2 conv dilated by 2 (padding 1: taps at -1 and +1) and a 1x1 (tap 0) give the same shape, but no
    dilated 2-frame holds tap 0: two convs. Different strides or inputs never merge."""
    torch.manual_seed(0)
    block = TwoBranches(_conv_bn(4, 4, 2, dilation=2, padding=1), _conv_bn(4, 4, 1)).eval()
    convs, g, params, feed = _session_convs(block, torch.randn(2, 4, 7, 7))
    assert convs == 2
    _check_engines(block, g, params, feed)


def test_merged_graph_passes_the_verifier_and_keeps_its_signature():
    torch.manual_seed(0)
    block = MobileOneBlock(8, 3, 8, 3).eval()
    x = torch.randn(1, 8, 5, 5)
    g, params = rlx.torch.import_module(block, (x,))
    from rlx.opt.fold_affine import fold_conv_affine
    from rlx.opt.fold_weights import fold_weights

    g2, bound = fold_weights(rlx.verify(fold_conv_affine(g, depthwise=True).graph), params)
    merged, merged_params = merge_conv_branches(g2, bound)
    rlx.verify(merged)
    assert list(merged.inputs()) == list(g.inputs()) == ["x"]
    assert sum(n.op == "conv2d" for n in merged.nodes) == 1
    assert {n.attrs["name"] for n in merged.nodes if n.op == "param"} == set(merged_params)  # no dead weights
    np.testing.assert_allclose(rlx.run(merged, {"x": x.numpy()}, merged_params)[0],
                               rlx.run(g, {"x": x.numpy()}, params)[0], rtol=1e-5, atol=1e-5)
    assert merge_conv_branches(merged, merged_params)[0] is merged  # nothing left to merge


def test_a_symbolic_batch_still_merges():
    """Files as shipped have a symbolic batch: channels and spatial dims are what the merge needs."""
    from torch.export import Dim

    torch.manual_seed(0)
    block = MobileOneBlock(8, 3, 8, 2).eval()
    x = torch.randn(2, 8, 6, 6)
    g, params = rlx.torch.import_module(block, (x,), {"x": {0: Dim("b", min=1, max=64)}})
    assert not next(iter(g.inputs().values())).node.shape.is_static
    proto = export_for_session(g, params)
    assert sum(n.op_type == "Conv" for n in proto.graph.node) == 1
    assert not {n.op_type for n in proto.graph.node} & {"Sub", "Mul"}  # the input's BatchNorm folded and merged
    _check_engines(block, g, params, [torch.randn(3, 8, 6, 6).numpy()])
