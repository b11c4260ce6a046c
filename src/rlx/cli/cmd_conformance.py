"""``rlx conformance``: the ONNX backend-test node cases through the importer and the
reference runtime (:mod:`rlx.frontends.onnx.conformance`), with a progress bar."""

from __future__ import annotations

import argparse
from collections import Counter

from rlx.cli import common
from rlx.cli.output import emit_json
from rlx.cli.progress import step, track
from rlx.viz.console import get_console


def run(args: argparse.Namespace) -> int:
    common.require("onnx", "rlx conformance")
    from rlx.frontends.onnx.conformance import load_cases, run_case

    with step("loading the ONNX backend-test cases"):
        cases = load_cases(args.pattern)
    if not cases:
        raise common.CliError(f"no ONNX backend-test case matches {args.pattern!r}")
    results = [run_case(c) for c in track(cases, "conformance")]
    counts = Counter(r.status for r in results)
    failed = [r for r in results if r.status != "passed"]
    if args.json:
        emit_json("conformance", {"pattern": args.pattern, "cases": len(results), "passed": counts["passed"],
                                  "failed": counts["failed"], "unsupported": counts["unsupported"],
                                  "not_passed": [{"name": r.name, "op_type": r.op_type, "status": r.status,
                                                  "reason": r.reason} for r in failed]})
        return 0
    con = get_console()
    con.table(f"ONNX node conformance ({len(results)} cases)", ["passed", "failed", "unsupported"],
              [(counts["passed"], counts["failed"], counts["unsupported"])], right=["passed", "failed", "unsupported"])
    if failed:
        con.table(f"not passed (top {min(args.top, len(failed))} of {len(failed)})", ["case", "op type", "status", "reason"],
                  [(r.name, r.op_type, r.status, r.reason[:120]) for r in failed[: args.top]])
    return 0


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "conformance", run,
                              "run the ONNX backend-test node cases through rlx (importer + reference runtime)",
                              file_help=None)
    p.add_argument("-k", dest="pattern", default=None, help="only cases whose name matches this regex")
    p.add_argument("--top", type=common.positive_int, default=20, help="cases not passed to list (default 20)")
    p.add_argument("--json", action="store_true", help="one JSON document (schema rlx.conformance, docs/cli.md)")
