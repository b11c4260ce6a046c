"""``rlx demo``: the whole pipeline on a small transformer (:mod:`rlx.demo`)."""

from __future__ import annotations

import argparse

from rlx.cli import common


def run(args: argparse.Namespace) -> int:
    from rlx import demo

    return demo.main(args.out, steps=args.steps, pictures=not args.no_pictures)


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "demo", run, "build, lower, optimize, plan, run, train, save and draw a small transformer",
                              file_help=None)
    p.add_argument("--out", default="rlx-demo", help="directory for the files and pictures (default ./rlx-demo)")
    p.add_argument("--steps", type=common.positive_int, default=200, help="training steps of the MLP (default 200)")
    p.add_argument("--no-pictures", action="store_true", help="skip the pictures")
