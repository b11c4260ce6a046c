"""``rlx optimize``: lower (HIR) and optimize; print the fusion report; write the result
(read back and checked)."""

from __future__ import annotations

import argparse
import contextlib

from rlx.cli import common
from rlx.cli.output import emit_json
from rlx.cli.progress import step
from rlx.cli.summary import graph_summary
from rlx.viz.console import get_console


def precision_policies() -> tuple[str, ...]:
    from rlx.opt.precision import POLICIES

    return tuple(sorted(POLICIES))


def _dumping(folder: str | None) -> contextlib.AbstractContextManager:
    """Stage texts and per-pass diffs into ``folder`` (rlx.ir.dump), or nothing."""
    if folder is None:
        return contextlib.nullcontext()
    from rlx.ir.dump import dump_to

    return dump_to(folder)


def run(args: argparse.Namespace) -> int:
    import rlx

    common.check_output_path(args.output)
    with step(f"reading {args.file}"):
        model = common.open_model(args)
    with _dumping(args.dump_dir):
        mir = common.to_mir(model, args.policy)
        with step(f"optimizing {len(mir)} nodes"):
            opt, report = rlx.optimize(mir, backend=args.backend, fold=not args.no_fold, precision=args.precision)
    with step(f"writing {args.output}"):
        common.save_checked(opt, args.output, model.params)
    fp = rlx.fingerprint(opt)
    if args.json:
        emit_json("optimize", {
            "file": args.file, "output": args.output, "backend": args.backend or "cpu", "precision": args.precision,
            "nodes_before": len(mir), "nodes_after": len(opt), "fingerprint": fp,
            "passes": [{"pass": name, "stats": dict(stats)} for name, stats in report.applied.items()],
            "fused": dict(report.fused), "missed": [{"pattern": m.pattern, "node": m.node, "reason": m.reason,
                                                     "context": m.context, "hint": m.hint} for m in report.all_missed],
            "summary": graph_summary(opt),
        })
        return 0
    con = get_console()
    rows = [(name, ", ".join(f"{k}={v}" for k, v in stats.items())) for name, stats in report.applied.items()]
    con.table(f"optimize {args.file} ({model.kind.upper()} -> optimized MIR, backend {args.backend or 'cpu'})",
              ["pass", "effect"], rows or [("(none)", "nothing to do")])
    con.line(str(report))
    con.line(f"wrote {args.output} (read back and checked): {len(mir)} -> {len(opt)} nodes, fingerprint {fp[:16]}")
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "optimize", run, "lower and optimize a model; print the fusion report; save it")
    p.add_argument("-o", "--output", required=True, help="output .rlx file (weights in OUTPUT.safetensors)")
    p.add_argument("--policy", **common.POLICY_ARG)
    p.add_argument("--backend", default=None, help="backend whose fusions to apply: cpu (default), cuda, metal, tpu, jax …")
    p.add_argument("--no-fold", action="store_true", help="do not fold constants")
    p.add_argument("--precision", default=None, choices=precision_policies(),
                   help="automatic mixed precision policy (e.g. auto_mixed_conservative: f16 compute, f32 reductions)")
    p.add_argument("--dump-dir", metavar="DIR", default=None,
                   help="write every stage's text and each pass's before / after diff into DIR (index.txt lists them)")
    p.add_argument("--json", action="store_true", help="one JSON document (schema rlx.optimize, docs/cli.md)")
    common.dim_argument(p)
