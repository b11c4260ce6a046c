"""``rlx plan``: the memory arena of a model against its liveness lower bound, the largest
buffers, weights apart from activations; ``-o`` writes the planned LIR module."""

from __future__ import annotations

import argparse

from rlx.cli import common
from rlx.cli.output import emit_json
from rlx.cli.progress import step
from rlx.cli.summary import bytes_text, graph_summary
from rlx.viz.console import get_console


def _buffers(lir: object) -> list[dict]:
    p, g = lir.plan, lir.graph  # type: ignore[attr-defined]
    out = []
    for nid, slot in p.assignments.items():
        if nid in p.view_aliases:
            continue
        node = g.node(nid)
        birth, death = p.lifetimes.get(nid, (None, None))
        out.append({"node": nid, "op": node.op, "name": node.attrs["name"] if node.op in ("input", "param") else node.name,
                    "kind": "weight" if node.op in ("param", "constant") else "activation",
                    "offset": int(slot.offset), "bytes": int(slot.size), "birth": birth, "death": death})
    out.sort(key=lambda b: (-b["bytes"], b["node"]))
    return out


def run(args: argparse.Namespace) -> int:
    import rlx

    if args.output:
        common.check_output_path(args.output)
    with step(f"reading {args.file}"):
        model = common.open_model(args)
    if model.kind == "lir" and (args.optimize or args.alignment is not None):
        raise common.CliError("the file is already planned (LIR); --optimize and --alignment apply to HIR/MIR files")
    if model.kind == "lir":
        lir = model.obj
    else:
        mir = common.to_mir(model, args.policy)
        if args.optimize:
            with step(f"optimizing {len(mir)} nodes"):
                mir, _ = rlx.optimize(mir)
        with step(f"planning {len(mir)} nodes"):
            lir = rlx.plan(mir, alignment=64 if args.alignment is None else args.alignment)
    with step("checking the plan"):
        lir.check()
    if args.output:
        with step(f"writing {args.output}"):
            common.save_checked(lir, args.output, model.params)
    manifest = None
    if args.manifest:
        from rlx.lir.manifest import write_binding

        with step(f"writing the binding manifest into {args.manifest}"):
            manifest = write_binding(lir, args.manifest, model.params if model.params else None)
    p, g = lir.plan, lir.graph
    buffers = _buffers(lir)
    weight_bytes = sum(b["bytes"] for b in buffers if b["kind"] == "weight")
    fp = lir.fingerprint()
    if args.json:
        emit_json("plan", {
            "file": args.file, "output": args.output, "name": g.name, "nodes": len(g), "steps": len(p.schedule),
            "alignment": p.alignment, "arena_bytes": p.arena_size, "lower_bound_bytes": p.lower_bound,
            "ratio": p.ratio, "unshared_bytes": p.total_unshared_bytes, "saved_bytes": p.bytes_saved,
            "weight_slot_bytes": weight_bytes, "views": len(p.view_aliases), "in_place": len(p.inplace),
            "heuristic": p.heuristic, "fingerprint": fp, "buffers": buffers[: args.top],
            "buffer_count": len(buffers), "summary": graph_summary(g, p), "manifest": manifest,
        })
        return 0
    con = get_console()
    con.table(f"plan of {g.name} ({len(g)} nodes, {len(p.schedule)} steps, alignment {p.alignment})",
              ["arena", "lower bound", "ratio", "no reuse", "saved", "weights in arena", "views", "in place", "heuristic"],
              [(bytes_text(p.arena_size), bytes_text(p.lower_bound), f"{p.ratio:.3f}x", bytes_text(p.total_unshared_bytes),
                bytes_text(p.bytes_saved), bytes_text(weight_bytes), len(p.view_aliases), len(p.inplace), p.heuristic)],
              right=["ratio", "views", "in place"])
    rows = [(f"%{b['node']}", b["op"] + (f" {b['name']}" if b["name"] else ""), b["kind"], b["offset"], b["bytes"],
             f"{b['birth']}..{b['death']}") for b in buffers[: args.top]]
    if rows:
        con.table(f"largest buffers (top {len(rows)} of {len(buffers)})", ["node", "op", "kind", "offset", "bytes", "live steps"],
                  rows, right=["offset", "bytes"])
    con.line(f"arena: {p.arena_size} B, lower bound: {p.lower_bound} B ({p.ratio:.3f}x); plan checked; fingerprint {fp[:16]}")
    if args.output:
        con.line(f"wrote {args.output} (read back and checked)")
    if manifest:
        con.line(f"wrote {manifest}" + (" and its weights file" if model.params else " (no weights saved in the file)"))
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "plan", run, "plan the memory arena of a model and report it")
    p.add_argument("-o", "--output", help="save the planned LIR module (.rlx)")
    p.add_argument("--alignment", type=common.positive_int, default=None, help="buffer alignment in bytes (default 64)")
    p.add_argument("--optimize", action="store_true", help="optimize a HIR/MIR file before planning")
    p.add_argument("--policy", **common.POLICY_ARG)
    p.add_argument("--top", type=common.positive_int, default=10, help="how many of the largest buffers to list (default 10)")
    p.add_argument("--manifest", metavar="DIR", default=None,
                   help="write DIR/manifest.json (+ its weights-<hash>.bin): the binding manifest for a C / C++ / Rust host")
    p.add_argument("--json", action="store_true", help="one JSON document (schema rlx.plan, docs/cli.md)")
    common.dim_argument(p)
