"""Optimizer speed: rlx.optimize on transformer-like MIR graphs of about 2k, 20k and 100k nodes.

Run: python benchmarks/optimize_speed.py [--no-check] [--sizes 2000,20000,100000] [--repeat 3] [--quick]
Target (optimizer issue): time per node at 100k within 1.5x of the time per node at 2k.
Figures are medians of --repeat interleaved rounds (rlx and the peer alternate within a
size), process CPU time (on a shared machine wall time mostly measures the neighbours); the
median wall time is shown too.

Peer: the same graph exported with ``rlx.onnx.export`` and run through onnx-ir's generic
passes (common-subexpression elimination, identity elimination, dead-node removal), each
sample on a fresh ``onnx_ir.from_proto`` copy (the copy is not timed). onnx-ir has no
fusion or constant folding, so it does less work than rlx.optimize: the ratio is an upper
bound on rlx's overhead, not a like-for-like contest.
The graphs are FUSABLE-style (primitive chains the fusion patterns recognise) with some
repeated subexpressions, constant subgraphs and dead branches, so every pass has work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_common_args, measure, parse_sizes, print_footer, print_growth, print_header, print_table, ratio

import rlx
from rlx.opt import optimize

B, S, H, D = 2, 8, 2, 8
E = H * D


def build(layers: int) -> rlx.Graph:
    g = rlx.Graph("fusable_transformer")
    x = g.input("x", (B * S, E))
    for i in range(layers):
        p = {n: g.param(f"l{i}.{n}", shape) for n, shape in (
            ("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)), ("wo", (E, E)), ("bo", (E,)),
            ("g1", (E,)), ("b1", (E,)), ("up", (E, 2 * E)), ("gate", (E, 2 * E)), ("down", (2 * E, E)),
            ("g2", (E,)), ("b2", (E,)), ("w3", (E, E)), ("b3", (E,)))}
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]  # shared-input matmuls (QKV)
        scores = g.softmax(g.matmul(q, g.transpose(k, perm=[1, 0])) * (D**-0.5), axis=-1)
        att = g.matmul(scores, v)
        att2 = g.matmul(scores, v)  # repeated subexpression (CSE)
        o = g.add(g.matmul(att, p["wo"]), p["bo"])  # matmul + bias
        h = g.layer_norm(g.add(o, x), p["g1"], p["b1"])  # residual + layer norm
        ff = g.matmul(g.mul(g.matmul(h, p["up"]), g.silu(g.matmul(h, p["gate"]))), p["down"])  # SwiGLU
        c = g.tanh(g.constant(np.full((E,), 0.5, np.float32)) * 2.0)  # constant subgraph (folding)
        x = g.rms_norm(g.add(ff, h), p["g2"], p["b2"])  # residual + rms norm
        x = g.gelu(g.add(g.matmul(x, p["w3"]), p["b3"])) + c + att2 * 0.0  # matmul + bias + gelu
        x = g.reshape(g.reshape(x, new_shape=[B, S, E]), new_shape=[B * S, E])  # reshape of reshape
        g.exp(att)  # dead branch
    g.set_outputs([x])
    return g


def per_layer() -> int:
    return len(build(2)) - len(build(1))


def onnx_ir_peer(g: rlx.Graph):
    """(setup, run) for onnx-ir's passes on ``g`` exported to ONNX, or None without onnx-ir."""
    try:
        import onnx_ir as ir
        from onnx_ir import passes
        from onnx_ir.passes import common
    except ImportError:
        return None
    proto = rlx.onnx.export(g, {})

    def run(model):
        pm = passes.PassManager([common.CommonSubexpressionEliminationPass(), common.IdentityEliminationPass(),
                                 common.RemoveUnusedNodesPass()])
        return pm(model).model

    return len(proto.graph.node), (lambda: ir.from_proto(proto), run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true", help="skip the verifier after each pass")
    add_common_args(ap, "2000,20000,100000", 3)
    args = ap.parse_args()
    targets, repeat = parse_sizes(args.sizes), args.repeat
    if args.quick:
        targets, repeat = [2000, 20000], 2
    print_header("optimize speed (optimize_speed.py)", f"peer: onnx-ir passes on the rlx.onnx.export of the same graph; "
                 f"medians of {repeat} interleaved rounds, process CPU time; check={not args.no_check}")
    step = per_layer()
    rows, per_node = [], {}
    for t in targets:
        g = build(max(1, t // step))
        fns = {"rlx": lambda g=g: optimize(g, check=not args.no_check)}
        peer = onnx_ir_peer(g)
        if peer is not None:
            onnx_nodes, fns["onnx-ir"] = peer
        times = measure(fns, repeat)
        n, out = len(g), len(optimize(g, check=False)[0])
        cpu = times["rlx"].median_cpu
        per_node[t] = cpu / n
        peer_pn = times["onnx-ir"].median_cpu / onnx_nodes if peer is not None else float("nan")
        rows.append([n, out, cpu, times["rlx"].median_wall, 1e6 * cpu / n, onnx_nodes if peer else "n/a", 1e6 * peer_pn,
                     ratio(cpu / n, peer_pn)])
    print_table(["nodes in", "nodes out", "rlx cpu s", "rlx wall s", "rlx us/node", "onnx nodes", "onnx-ir us/node",
                 "rlx / onnx-ir (per node)"], rows)
    print_growth(per_node)
    print_footer()


if __name__ == "__main__":
    main()
