"""``rlx inspect``: a summary by default (counts, FLOPs / MACs, memory, io); ``--full`` adds
the stage's dump, ``--text`` prints only the parseable text form, ``--json`` one document."""

from __future__ import annotations

import argparse

from rlx.cli import common
from rlx.cli.output import emit_json
from rlx.cli.progress import step
from rlx.cli.summary import bytes_text, graph_summary, io_entries, kind_rows, summary_rows
from rlx.viz.console import get_console


def _io_rows(io: dict, limit: int | None) -> tuple[list[tuple[str, ...]], int]:
    rows = []
    for kind in ("inputs", "params", "outputs"):
        for e in io[kind]:
            name = e["name"] if kind != "outputs" else f"#{e['index']} %{e['id']}" + (f" {e['name']}" if e["name"] else "")
            saved = ("saved" if e["saved"] else "missing") if kind == "params" else ""
            rows.append((kind[:-1], name, str(e["shape"]), e["dtype"], saved))
    hidden = 0 if limit is None else max(0, len(rows) - limit)
    return (rows if limit is None else rows[:limit]), hidden


def run(args: argparse.Namespace) -> int:
    with step(f"reading {args.file}"):
        model = common.open_model(args)
    g, kind = model.graph, model.kind
    plan = model.obj.plan if kind == "lir" else None
    weights = sum(int(v.nbytes) for v in model.params.values())
    fp = common.fingerprint(model.obj)
    dispatch = None
    if args.dispatch:
        from rlx.runtime.dispatch import dispatch_report

        with step(f"dispatch on {args.dispatch}"):
            dispatch = dispatch_report(model.obj if kind == "lir" else common.to_mir(model, None), args.dispatch)
    if args.json:
        body = {"file": args.file, "stage": kind, "name": g.name, "nodes": len(g), "fingerprint": fp,
                "saved_weight_bytes": weights, **io_entries(g, model.params), "summary": graph_summary(g, plan)}
        if args.text:
            body["text"] = str(g)
        if dispatch is not None:
            body["dispatch"] = dispatch.to_dict()
        emit_json("inspect", body)
        return 0
    if args.text:
        print(str(g))
        return 0
    con = get_console()
    con.table(f"{args.file}", ["stage", "name", "nodes", "inputs", "params", "outputs", "saved weights", "fingerprint"],
              [(kind.upper(), g.name, len(g), len(g.inputs()), len(g.params()), len(g.outputs), bytes_text(weights), fp[:16])],
              right=["nodes", "inputs", "params", "outputs"])
    if dispatch is not None:
        con.line(str(dispatch))
    if args.brief:
        return 0
    s = graph_summary(g, plan)
    con.table(None, ["summary", "value"], summary_rows(s), right=["value"])
    con.table(f"op kinds by FLOPs (top {min(args.top, len(s['by_kind']))} of {len(s['by_kind'])})",
              ["op kind", "nodes", "FLOPs", "MACs", "share"], kind_rows(s, args.top), right=["nodes", "FLOPs", "MACs", "share"])
    rows, hidden = _io_rows(io_entries(g, model.params), None if args.full else args.top * 2)
    con.table(None, ["kind", "name", "shape", "dtype", "weights"], rows)
    if hidden:
        con.line(f"… {hidden} more inputs / params / outputs (--full lists all)")
    if args.full:
        from rlx.hir.inspect import inspect, inspect_hir

        con.line("stage dump (a summary view: ops by kind, e.g. binary{op=add} as add; --text prints the exact, parseable form):")
        con.line(inspect_hir(g, model.policy) if kind == "hir" else inspect(model.obj))
    else:
        con.line(f"({len(g)} nodes; --full for the stage dump, --text for the parseable text form, --json for scripts)")
    return 0


def add_parser(sub: argparse._SubParsersAction, common_parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, common_parent, "inspect", run, "summarize a model file (counts, FLOPs, memory, io)",
                              description="Summarize a model: nodes, parameter count, FLOPs / MACs by op kind, weight "
                                          "and activation memory, inputs / params / outputs. --full adds the stage's dump.",
                              file_help=".rlx file (Graph, GraphModule or LirModule), its text form, .onnx or .pt2")
    p.add_argument("--text", action="store_true", help="print only the parseable text form (rlx.parse reads it back)")
    p.add_argument("--full", action="store_true", help="list every input / param / output and print the stage's dump")
    p.add_argument("--brief", action="store_true", help="only the summary row")
    p.add_argument("--top", type=common.positive_int, default=10, help="op kinds to list (default 10)")
    p.add_argument("--dispatch", metavar="BACKEND", default=None,
                   help="how BACKEND runs each node: native / decomposed / host / view / leaf / refused")
    p.add_argument("--json", action="store_true", help="one JSON document (schema rlx.inspect, docs/cli.md)")
    common.dim_argument(p)

