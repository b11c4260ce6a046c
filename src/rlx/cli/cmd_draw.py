"""``rlx draw``: the graph at a stage (Graphviz SVG / PNG / PDF, DOT text, or the
self-contained interactive HTML viewer) or, with ``--plan``, the memory-plan picture."""

from __future__ import annotations

import argparse
import os

from rlx.cli import common
from rlx.cli.progress import step
from rlx.viz.console import get_console

GRAPH_SUFFIXES = (".svg", ".png", ".pdf", ".dot", ".gv", ".html")
PLAN_SUFFIXES = (".png", ".svg", ".pdf", ".html")


def run(args: argparse.Namespace) -> int:
    from rlx.viz import draw_graph, draw_plan

    out = args.output
    common.check_output_path(out, PLAN_SUFFIXES if args.plan else GRAPH_SUFFIXES,
                             "plan picture" if args.plan else "graph picture")
    with step(f"reading {args.file}"):
        model = common.open_model(args)
    stage = args.stage or ("lir" if args.plan else model.kind)
    if args.plan and stage != "lir":
        raise common.CliError("--plan draws the memory plan, which exists at the LIR stage only (drop --stage or use --stage lir)")
    with step(f"bringing {model.graph.name} to {stage.upper()}"):
        target = common.at_stage(model, stage, args.policy)
    with step(f"drawing {out}"):
        if args.plan and not out.lower().endswith(".html"):  # the viewer shows the plan beside the graph
            draw_plan(target, out)
            what = "memory plan"
        else:
            draw_graph(target, out, show_params=not args.no_params, collapse=args.collapse)
            what = f"{common.kind_of(target).upper()} graph"
    get_console().line(f"wrote {out} ({what} of {common.graph_of(target).name}, {os.path.getsize(out)} bytes)")
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(
        sub, parent, "draw", run, "draw a model's graph (Graphviz or interactive HTML) or its memory plan",
        description="Draw the graph at a stage as SVG/PNG/PDF through Graphviz dot, as .dot text, or as a "
                    "self-contained interactive .html viewer (pan / zoom, collapsible blocks, search, node details, "
                    "memory timeline). Blocks are clustered, fused ops coloured, shapes on the edges, full attributes "
                    "and provenance in tooltips; weights are drawn once per use, never fanned out. --plan: the "
                    "memory-plan picture (weights apart from activations).")
    p.add_argument("-o", "--output", required=True,
                   help="picture file: .svg .png .pdf .dot .html (graph); .png .svg .pdf .html (--plan)")
    p.add_argument("--stage", choices=common.STAGES, default=None,
                   help="hir, mir (lowered), opt (optimized MIR) or lir (optimized and planned); default: the file's stage")
    p.add_argument("--plan", action="store_true", help="draw the memory-plan timeline instead of the graph")
    p.add_argument("--no-params", action="store_true", help="leave params and constants out of the graph picture")
    p.add_argument("--collapse", choices=("auto", "none", "blocks"), default="auto",
                   help="draw each top-level block as one box (blocks), never (none), or when the graph is large (auto)")
    p.add_argument("--policy", **common.POLICY_ARG)
    common.dim_argument(p)
