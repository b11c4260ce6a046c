"""FLOPs / MACs against torch's own counter (torch.utils.flop_counter) on imported models,
and the documented rules by hand."""

from __future__ import annotations

import pytest

import rlx
from rlx.cli.summary import count_text, graph_summary


def test_conv_and_linear_macs_match_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from rlx.torch import import_module

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2, groups=2),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 7 * 7, 10)).eval()
    x = torch.randn(2, 3, 16, 16)
    with FlopCounterMode(display=False) as counter:
        net(x)
    g, _ = import_module(net, (x,))
    s = graph_summary(g)
    contraction = sum(r["macs"] for r in s["by_kind"])
    assert 2 * contraction == counter.get_total_flops()
    assert s["parameters"] == sum(p.numel() for p in net.parameters())


def test_attention_and_dot_general_by_hand():
    g = rlx.Graph("attn")
    q, k, v = (g.input(n, (2, 4, 6, 8)) for n in "qkv")
    g.set_outputs([g.attention(q, k, v, num_heads=4, head_dim=8)])
    s = graph_summary(g)
    assert s["macs"] == 2 * (2 * 4 * 6 * 8) * 6  # q·kᵀ and p·v, each B·H·S·S·D
    d = rlx.Graph("dg")
    a, b = d.input("a", (3, 5, 7)), d.input("b", (3, 7, 2))
    d.set_outputs([d.dot_general(a, b, lhs_contracting=[2], rhs_contracting=[1], lhs_batch=[0], rhs_batch=[0])])
    assert graph_summary(d)["macs"] == 3 * 5 * 2 * 7


def test_symbolic_shapes_are_unknown_not_guessed():
    g = rlx.Graph("dyn")
    g.set_outputs([g.input("x", ("n", 4)) @ g.param("w", (4, 3))])
    s = graph_summary(g)
    assert s["flops"] is None and s["macs"] is None and s["parameters"] == 12 and s["activation_bytes"] is None
    assert count_text(None) == "?" and count_text(1_500_000) == "1.50 M"


def test_every_contraction_op_states_its_cost_facts():
    """The cost model reads ``OpDef.macs`` / ``OpDef.work``: an op the precision pass calls a contraction
    ("compute") must say how many MACs it does, and every op names a known work class."""
    from rlx.ir.opdef import WORK_CLASSES, all_ops

    ops = all_ops()
    assert not [o.name for o in ops if o.precision == "compute" and o.macs is None]
    assert all(o.work in WORK_CLASSES for o in ops)
    assert not [o.name for o in ops if o.macs is not None and o.work == "none"]  # a contraction moves no data only


def test_fused_conv_counts_the_macs_of_its_conv():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from rlx.opt.fusion import fuse_conv_bias_act
    from rlx.opt.manager import run_passes
    from rlx.torch import import_module

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 9, 9)
    with FlopCounterMode(display=False) as counter:
        net(x)
    g, _ = import_module(net, (x,))
    fused = run_passes(g, (fuse_conv_bias_act,)).graph
    assert "fused_conv2d_bias_act" in {n.op for n in fused.nodes}
    assert 2 * graph_summary(fused)["macs"] == counter.get_total_flops()


def test_transposed_conv_macs_match_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from rlx.torch import import_module

    net = torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1), torch.nn.Flatten(),
                              torch.nn.Linear(6 * 9 * 9, 3)).eval()
    x = torch.randn(2, 4, 5, 5)
    with FlopCounterMode(display=False) as counter:
        net(x)
    g, _ = import_module(net, (x,))
    assert "conv_transpose2d" in {n.op for n in g.nodes}
    assert 2 * graph_summary(g)["macs"] == counter.get_total_flops()
