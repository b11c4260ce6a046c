"""One pattern object per fusion (rlx.opt.fusion.PATTERNS): the pass applies exactly the sites the
report would flag as applicable, and a site the pass refuses is reported with the reason it
was refused. Every reported pattern has a graph below; a pattern without one fails the walk."""

from __future__ import annotations

import pytest

import rlx
from opt.opt_util import assert_same_outputs, op_counts
from rlx.opt import DCE, PATTERN_PASSES, FusionReport, run_passes
from rlx.opt.fusion import PATTERNS
from rlx.opt.report import scan


def _linear(g):
    x = g.input("x", (2, 4))
    return g.gelu(g.add(g.matmul(x, g.param("w", (4, 8))), g.param("b", (8,))))


def _conv(g):
    x = g.input("x", (1, 3, 6, 6))
    return g.relu(g.add(g.conv2d(x, g.param("w", (4, 3, 3, 3)), padding=[1, 1]), g.param("b", (4, 1, 1))))


def _residual(norm):
    def build(g):
        x, r = g.input("x", (3, 8)), g.input("r", (3, 8))
        return getattr(g, norm)(g.add(x, r), g.param("gamma", (8,)), g.param("beta", (8,)), axis=-1)
    return build


def _swiglu_dual(g):
    x = g.input("x", (2, 8))
    return g.mul(g.matmul(x, g.param("up", (8, 16))), g.silu(g.matmul(x, g.param("gate", (8, 16)))))


def _shared(g):
    x = g.input("x", (3, 4))
    return g.add(g.matmul(x, g.param("wa", (4, 4))), g.matmul(x, g.param("wb", (4, 4))))


def _swiglu_narrows(g):
    p = g.input("p", (2, 8))
    return g.mul(g.narrow(p, 1, 0, 4), g.silu(g.narrow(p, 1, 4, 4)))


#: pass name -> a graph with one applicable site of its pattern
APPLICABLE = {
    "fuse_matmul_bias_act": _linear,
    "fuse_conv_bias_act": _conv,
    "fuse_residual_layer_norm": _residual("layer_norm"),
    "fuse_residual_rms_norm": _residual("rms_norm"),
    "fuse_swiglu_dual_matmul": _swiglu_dual,
    "fuse_shared_input_matmul": _shared,
    "fuse_swiglu": _swiglu_narrows,
}


def _graph(build):
    g = rlx.Graph("p")
    g.set_outputs([build(g)])
    return g


def test_every_pattern_is_a_pipeline_pass():
    assert [p.as_pass.name for p in PATTERNS] == [p.name for p in PATTERN_PASSES]
    assert [p.as_pass.produces for p in PATTERNS] == [p.produces for p in PATTERN_PASSES]
    assert {p.pass_name for p in PATTERNS if p.reported} == set(APPLICABLE)


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if p.reported], ids=lambda p: p.pass_name)
def test_the_pass_applies_what_the_report_flags(pattern):
    g = _graph(APPLICABLE[pattern.pass_name])
    sites = pattern.sites(g)
    assert len(sites) == 1 and sites[0].match is not None and sites[0].reason is None
    missed = [m for m in scan(g, ran=[]) if m.pattern == pattern.name]
    assert len(missed) == 1 and f"pass {pattern.pass_name} did not run" in missed[0].reason
    assert missed[0].node == sites[0].node.id
    fused = run_passes(g, [pattern.as_pass, DCE]).graph
    assert_same_outputs(g, fused)
    assert all(op_counts(fused).get(op, 0) >= 1 for op in pattern.produces)
    assert not pattern.sites(fused)
    assert not [m for m in FusionReport.analyze(g, fused).missed if m.pattern == pattern.name]


def test_a_refused_site_is_reported_with_the_refusal():
    g = rlx.Graph("p")
    x = g.input("x", (2, 4))
    mm = g.matmul(x, g.param("w", (4, 8)))
    g.set_outputs([g.add(mm, g.param("b", (8,))), mm])  # the matmul escapes: the pass may not swallow it
    (site,) = [s for p in PATTERNS for s in p.sites(g)]
    assert site.match is None and site.reason == "the matmul is also a graph output"
    res = run_passes(g, [p for p in PATTERN_PASSES if p.name == "fuse_matmul_bias_act"])
    assert op_counts(res.graph) == op_counts(g)
    (miss,) = FusionReport.analyze(g, res.graph).missed
    assert (miss.pattern, miss.reason, miss.hint) == ("matmul_bias_act", site.reason, "give the matmul a single consumer")
