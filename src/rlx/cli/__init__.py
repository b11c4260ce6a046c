"""The ``rlx`` command line (one module per command, ``docs/cli.md`` and the README document it).

    rlx inspect FILE                       summary: counts, FLOPs / MACs, memory, io (--full, --text, --json)
    rlx optimize FILE -o OUT               lower (HIR) and optimize; prints the fusion report
    rlx plan FILE [-o OUT]                 buffer plan: arena against the lower bound, largest buffers
    rlx run FILE --input NAME=X.npy ...    run with the file's saved weights (--repeat, --profile, --compare)
    rlx convert MODEL.onnx|MODEL.pt2|UPSTREAM.json -o OUT.rlx
    rlx draw FILE -o PICTURE.svg|.html     graph picture (Graphviz or interactive HTML); --plan: memory plan
    rlx conformance [-k PATTERN]           the ONNX backend-test node cases through rlx
    rlx demo                               the whole pipeline on a small transformer

FILE is an ``.rlx`` file (any object :func:`rlx.save` writes: Graph, GraphModule, LirModule),
its text form, an ``.onnx`` model or a ``.pt2`` exported program (both converted on the fly).
Every ``.rlx`` a command writes is read back and checked. Exit status: 0 success, 1 error
(one line on stderr, prefixed ``rlx: error:``; ``--debug`` prints the traceback too), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from rlx.cli import cmd_conformance, cmd_convert, cmd_demo, cmd_draw, cmd_generate, cmd_inspect, cmd_optimize, cmd_plan, cmd_run
from rlx.cli.common import OPTIONAL_PACKAGES, CliError, MissingDependency, UsageError
from rlx.ir.errors import RlxError

__all__ = ["CliError", "build_parser", "main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
COMMANDS = (cmd_inspect, cmd_optimize, cmd_plan, cmd_run, cmd_convert, cmd_draw, cmd_conformance, cmd_demo, cmd_generate)


def build_parser() -> argparse.ArgumentParser:
    from rlx import __version__

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks of errors")
    common.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress indication (it is shown only on a terminal anyway)")
    parser = argparse.ArgumentParser(
        prog="rlx", description="rlx: inspect, optimize, plan, run, convert and draw rlx IR files.",
        epilog="Exit status: 0 success, 1 error (one line on stderr; --debug for the traceback), 2 usage error.")
    parser.add_argument("--version", action="version", version=f"rlx {__version__}")
    parser.add_argument("--debug", action="store_true", default=False, help="print tracebacks of errors")
    parser.add_argument("--quiet", "-q", action="store_true", default=False, help="no progress indication")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub, common)
    return parser


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    parts = [s.strip() for s in text.splitlines() if s.strip()]
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    from rlx.cli.progress import set_quiet

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help / --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    set_quiet(bool(getattr(args, "quiet", False)))
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        args.parser.print_usage(sys.stderr)
        print(f"rlx {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # parser.error() inside a command
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("rlx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rlx demo | head`: stop quietly, as other command-line tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except ImportError as exc:
        missing = _optional_missing(exc)
        if missing is None:
            return _internal(exc, debug)
        if debug:
            traceback.print_exc()
        print(f"rlx: error: {MissingDependency(_feature(args, missing), missing)}", file=sys.stderr)
        return EXIT_ERROR
    except (RlxError, OSError) as exc:
        if debug:
            traceback.print_exc()
        print(f"rlx: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        return _internal(exc, debug)


def _internal(exc: BaseException, debug: bool) -> int:
    """A bug in rlx: not bad input, not a missing optional package."""
    if debug:
        traceback.print_exc()
    print(f"rlx: internal error: {type(exc).__name__}: {_one_line(exc)} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return EXIT_ERROR


def _optional_missing(exc: ImportError) -> str | None:
    """The optional package whose absence raised ``exc`` (``None``: some other import failure)."""
    name = (exc.name or "").split(".")[0]
    return name if name in OPTIONAL_PACKAGES else None


def _feature(args: argparse.Namespace, module: str) -> str:
    """What the command was doing that needs ``module``, for the one-line message."""
    backend = getattr(args, "backend", None)
    if backend and backend not in ("numpy", "reference") and module.startswith(("jax", "torch", "onnxruntime", "openvino")):
        return f"rlx {args.command} --backend {backend}"
    return f"rlx {args.command}"
