"""The ``rlx`` command line.

    rlx inspect FILE                       summary, inputs/params/outputs, the stage's dump
    rlx optimize FILE -o OUT               lower (HIR) and optimize (--precision: mixed precision); prints the fusion report
    rlx plan FILE [-o OUT]                 buffer plan: arena against the lower bound, largest slots
    rlx run FILE --input NAME=X.npy ...    run with the file's saved weights; -o OUT.npz
    rlx convert MODEL.onnx|MODEL.pt2|UPSTREAM.json -o OUT.rlx
    rlx draw FILE -o PICTURE.svg           graph picture (Graphviz); --plan: memory-plan timeline (PNG)
    rlx demo                               the whole pipeline on a small transformer

FILE is an ``.rlx`` file (``rlx.save``), an ``.onnx`` model or a ``.pt2`` exported program
(both converted on the fly). Exit status: 0 success, 1 error (one line on stderr, prefixed
``rlx: error:``; ``--debug`` prints the traceback too), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx.ir.errors import RlxError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
STAGES = ("hir", "mir", "opt", "lir")


class CliError(RlxError):
    """A user mistake the command line reports in one line."""


# ---------------------------------------------------------------------------- loading


def _console() -> Any:
    from rlx.viz.console import get_console

    return get_console()


def load_model(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    """``(object, params)`` from an ``.rlx`` file, an ONNX model or a torch ``.pt2`` program."""
    import rlx

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a model file")
    lower = path.lower()
    if lower.endswith(".onnx"):
        return _import_onnx(path)
    if lower.endswith(".pt2"):
        return _import_pt2(path)
    obj, params = rlx.load(path, with_params=True)
    return obj, dict(params)


def _import_onnx(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise CliError("reading ONNX needs the onnx package: pip install 'rlx[onnx]'") from None
    import rlx.onnx

    try:
        g, params = rlx.onnx.import_model(path)
    except RlxError:
        raise
    except Exception as exc:  # the onnx library's own parse errors
        raise CliError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    return g, dict(params)


def _import_pt2(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise CliError("reading .pt2 programs needs torch: pip install 'rlx[torch]'")
    import rlx.torch

    ep = rlx.torch.load_program(path)  # checked: nothing in the archive runs
    name = os.path.splitext(os.path.basename(path))[0] or "torch_module"
    g, params = rlx.torch.import_program(ep, name=name)
    return g, dict(params)


def _import_upstream(path: str) -> tuple[Any, dict[str, np.ndarray]]:
    """An upstream rlx-ir JSON document (rlx.from_upstream_json); a HIR module becomes its HIR graph."""
    import rlx

    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file")
    with open(path, "rb") as f:
        obj = rlx.from_upstream_json(f.read())
    return (obj.graph if isinstance(obj, rlx.GraphModule) else obj), {}


def _kind(obj: Any) -> str:
    import rlx

    if isinstance(obj, rlx.LirModule):
        return "lir"
    if isinstance(obj, rlx.Graph):
        return obj.stage.value
    raise CliError(f"unsupported object in file: {type(obj).__name__}")


def _graph_of(obj: Any) -> Any:
    return obj.graph if _kind(obj) == "lir" else obj


def to_mir(obj: Any, policy: str | None = None) -> Any:
    """The MIR graph of a HIR graph (lowered under ``policy``), a MIR graph or an LIR module."""
    from rlx.hir import lower_to_mir

    kind = _kind(obj)
    if kind == "hir":
        return lower_to_mir(obj, policy or "direct")
    return obj.graph if kind == "lir" else obj


def at_stage(obj: Any, stage: str, policy: str | None = None, backend: str | None = None) -> Any:
    """``obj`` brought to ``stage`` (hir / mir / opt / lir); a later stage cannot go back."""
    import rlx

    kind = _kind(obj)
    if stage == kind or (stage == "opt" and kind == "lir"):
        return obj
    if stage == "hir" or (stage == "mir" and kind == "lir"):
        raise CliError(f"the file is at stage {kind.upper()}; it cannot be shown at the earlier stage {stage.upper()}")
    mir = to_mir(obj, policy)
    if stage == "mir":
        return mir
    opt, _ = rlx.optimize(mir, backend=backend)
    return opt if stage == "opt" else rlx.plan(opt)


def _params_for(g: Any, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    declared = set(g.params())
    return {k: v for k, v in params.items() if k in declared}


def _save(obj: Any, path: str, params: dict[str, np.ndarray]) -> None:
    import rlx

    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CliError(f"{path}: directory {parent} does not exist")
    keep = _params_for(_graph_of(obj), params)
    rlx.save(obj, path, params=keep or None)


def _short(fp: str) -> str:
    return fp[:16]


def _fmt_bytes(n: int) -> str:
    from rlx.hir.inspect import format_bytes

    return format_bytes(n)


def _io_rows(g: Any, params: dict[str, np.ndarray]) -> list[tuple[str, ...]]:
    rows = []
    for name, v in g.inputs().items():
        rows.append(("input", name, str(list(v.shape)), str(v.dtype), ""))
    for name, v in g.params().items():
        rows.append(("param", name, str(list(v.shape)), str(v.dtype), "saved" if name in params else "missing"))
    for i, v in enumerate(g.outputs):
        node = g.node(v.id)
        rows.append(("output", f"#{i} %{v.id}" + (f" {node.name}" if node.name else ""), str(list(v.shape)), str(v.dtype), ""))
    return rows


# ---------------------------------------------------------------------------- commands


def cmd_inspect(args: argparse.Namespace) -> int:
    import rlx
    from rlx.hir.inspect import inspect, inspect_hir

    obj, params = load_model(args.file)
    kind, g = _kind(obj), _graph_of(obj)
    con = _console()
    weights = sum(int(np.asarray(v).nbytes) for v in params.values())
    fp = obj.fingerprint() if kind == "lir" else rlx.fingerprint(obj)
    con.table(f"{args.file}", ["stage", "name", "nodes", "inputs", "params", "outputs", "weights", "fingerprint"],
              [(kind.upper(), g.name, len(g), len(g.inputs()), len(g.params()), len(g.outputs), _fmt_bytes(weights), _short(fp))],
              right=["nodes", "inputs", "params", "outputs"])
    if not args.brief:
        con.table(None, ["kind", "name", "shape", "dtype", "weights"], _io_rows(g, params))
    if args.text:
        con.line(str(g))
    elif not args.brief:
        con.line(inspect_hir(obj) if kind == "hir" else inspect(obj))
    return EXIT_OK


def rlx_precision_policies() -> tuple[str, ...]:
    from rlx.opt.precision import POLICIES

    return tuple(POLICIES)


def cmd_optimize(args: argparse.Namespace) -> int:
    import rlx

    obj, params = load_model(args.file)
    mir = to_mir(obj, args.policy)
    opt, report = rlx.optimize(mir, backend=args.backend, fold=not args.no_fold, precision=args.precision)
    con = _console()
    rows = [(name, ", ".join(f"{k}={v}" for k, v in stats.items())) for name, stats in report.applied.items()]
    con.table(f"optimize {args.file} ({_kind(obj).upper()} -> optimized MIR, backend {args.backend or 'cpu'})",
              ["pass", "effect"], rows or [("(none)", "nothing to do")])
    con.line(str(report))
    _save(opt, args.output, params)
    con.line(f"wrote {args.output}: {len(mir)} -> {len(opt)} nodes, fingerprint {_short(rlx.fingerprint(opt))}")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    import rlx

    obj, params = load_model(args.file)
    if _kind(obj) == "lir":
        lir = obj
        if args.optimize or args.alignment is not None:
            raise CliError("the file is already planned (LIR); --optimize and --alignment apply to HIR/MIR files")
    else:
        mir = to_mir(obj, args.policy)
        if args.optimize:
            mir, _ = rlx.optimize(mir)
        lir = rlx.plan(mir, alignment=64 if args.alignment is None else args.alignment)
    lir.check()
    p, g = lir.plan, lir.graph
    con = _console()
    con.table(f"plan of {g.name} ({len(g)} nodes, {len(p.schedule)} steps, alignment {p.alignment})",
              ["arena", "lower bound", "ratio", "no reuse", "saved", "views", "in place", "heuristic"],
              [(_fmt_bytes(p.arena_size), _fmt_bytes(p.lower_bound), f"{p.ratio:.3f}x", _fmt_bytes(p.total_unshared_bytes),
                _fmt_bytes(p.bytes_saved), len(p.view_aliases), len(p.inplace), p.heuristic)],
              right=["ratio", "views", "in place"])
    roots = [(nid, s) for nid, s in p.assignments.items() if nid not in p.view_aliases]
    roots.sort(key=lambda kv: (-kv[1].size, kv[0]))
    rows = []
    for nid, slot in roots[: args.top]:
        node = g.node(nid)
        birth, death = p.lifetimes.get(nid, ("", ""))
        what = node.op + (f" {node.attrs['name']}" if node.op in ("input", "param") else (f" {node.name}" if node.name else ""))
        rows.append((f"%{nid}", what, slot.offset, slot.size, f"{birth}..{death}"))
    if rows:
        con.table(f"largest buffers (top {len(rows)} of {len(roots)})", ["node", "op", "offset", "bytes", "live steps"], rows,
                  right=["offset", "bytes"])
    con.line(f"arena: {p.arena_size} B, lower bound: {p.lower_bound} B ({p.ratio:.3f}x); plan checked; "
             f"fingerprint {_short(lir.fingerprint())}")
    if args.output:
        _save(lir, args.output, params)
        con.line(f"wrote {args.output}")
    return EXIT_OK


def _parse_assignments(items: Sequence[str], what: str, parser: argparse.ArgumentParser) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"{what} expects NAME=FILE.npy, got {item!r}")
        if name in out:
            parser.error(f"{what} {name!r} given twice")
        out[name] = path
    return out


def load_npy(path: str, what: str) -> np.ndarray:
    """An array from a ``.npy`` file; never unpickles."""
    if not os.path.exists(path):
        raise CliError(f"{what}: {path}: no such file")
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CliError(f"{what}: {path}: not a plain .npy array ({exc})") from None
    except OSError as exc:
        raise CliError(f"{what}: {path}: cannot read ({exc})") from None
    if not isinstance(arr, np.ndarray):
        if hasattr(arr, "close"):
            arr.close()
        raise CliError(f"{what}: {path}: expected one .npy array, got an .npz archive")
    return arr


def cmd_run(args: argparse.Namespace) -> int:
    import rlx

    inputs_spec = _parse_assignments(args.input, "--input", args.parser)
    params_spec = _parse_assignments(args.param, "--param", args.parser)
    obj, params = load_model(args.file)
    g = to_mir(obj, args.policy)
    declared_inputs, declared_params = g.inputs(), g.params()
    for name in inputs_spec:
        if name not in declared_inputs:
            raise CliError(f"--input {name}: the model has no input {name!r}; its inputs are {sorted(declared_inputs) or 'none'}")
    for name in params_spec:
        if name not in declared_params:
            raise CliError(f"--param {name}: the model has no param {name!r}; its params are {sorted(declared_params) or 'none'}")
    missing = [f"{n} {list(v.shape)} {v.dtype}" for n, v in declared_inputs.items() if n not in inputs_spec]
    if missing:
        raise CliError("missing input(s): " + ", ".join(missing) + " (give each as --input NAME=FILE.npy)")
    feed = {n: load_npy(p, f"--input {n}") for n, p in inputs_spec.items()}
    weights = {**_params_for(g, params), **{n: load_npy(p, f"--param {n}") for n, p in params_spec.items()}}
    absent = [f"{n} {list(v.shape)}" for n, v in declared_params.items() if n not in weights]
    if absent:
        raise CliError(f"{args.file} holds no weights for param(s) " + ", ".join(absent) + " (give each as --param NAME=FILE.npy)")
    t0 = time.perf_counter()
    if args.backend == "reference":
        outs = rlx.run(g, feed, weights)
    else:
        exe = rlx.compile(obj if _kind(obj) == "lir" and args.backend == "numpy" else g, backend=args.backend)
        outs = exe.run(inputs=feed, params=weights)
    elapsed = time.perf_counter() - t0
    outs = [np.asarray(o) for o in outs]
    rows = []
    for i, (v, arr) in enumerate(zip(g.outputs, outs)):
        node = g.node(v.id)
        if arr.size and np.issubdtype(arr.dtype, np.number) and not np.iscomplexobj(arr):
            a64 = arr.astype(np.float64)
            stats = (f"{a64.min():.6g}", f"{a64.max():.6g}", f"{a64.mean():.6g}", int(np.count_nonzero(~np.isfinite(a64))))
        else:
            stats = ("", "", "", "")
        rows.append((f"output_{i}", f"%{v.id}" + (f" {node.name}" if node.name else ""), str(list(arr.shape)), str(arr.dtype), *stats))
    con = _console()
    con.table(f"{g.name}: {len(outs)} output(s), backend {args.backend}, {elapsed * 1e3:.1f} ms",
              ["output", "node", "shape", "dtype", "min", "max", "mean", "non-finite"], rows,
              right=["min", "max", "mean", "non-finite"])
    if args.output:
        out_path = args.output if args.output.lower().endswith(".npz") else args.output + ".npz"
        np.savez(out_path, **{f"output_{i}": a for i, a in enumerate(outs)})
        con.line(f"wrote {out_path} ({', '.join(f'output_{i}' for i in range(len(outs)))})")
    return EXIT_OK


def cmd_convert(args: argparse.Namespace) -> int:
    import rlx

    src = args.model
    if not src.lower().endswith((".onnx", ".pt2", ".json")):
        raise CliError(f"{src}: convert reads ONNX models (.onnx), torch.export programs (.pt2, from torch.export.save) "
                       "and upstream rlx-ir JSON documents (.json)")
    obj, params = _import_upstream(src) if src.lower().endswith(".json") else load_model(src)
    _save(obj, args.output, params)
    g = _graph_of(obj)
    con = _console()
    weights = sum(int(np.asarray(v).nbytes) for v in params.values())
    con.table(f"converted {src}", ["name", "nodes", "inputs", "params", "outputs", "weights", "fingerprint"],
              [(g.name, len(g), len(g.inputs()), len(g.params()), len(g.outputs), _fmt_bytes(weights), _short(rlx.fingerprint(g)))],
              right=["nodes", "inputs", "params", "outputs"])
    con.line(f"wrote {args.output}" + (f" (+ {os.path.basename(args.output)}.safetensors)" if params else ""))
    return EXIT_OK


_GRAPH_SUFFIXES = (".svg", ".png", ".pdf", ".dot", ".gv")
_PLAN_SUFFIXES = (".png", ".svg", ".pdf")


def cmd_draw(args: argparse.Namespace) -> int:
    from rlx.viz import draw_graph, draw_plan

    out = args.output
    suffixes = _PLAN_SUFFIXES if args.plan else _GRAPH_SUFFIXES
    if not out.lower().endswith(suffixes):
        raise CliError(f"{out}: a {'plan' if args.plan else 'graph'} picture is written as " + " / ".join(suffixes))
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CliError(f"{out}: directory {parent} does not exist")
    obj, _ = load_model(args.file)
    stage = args.stage or ("lir" if args.plan else _kind(obj))
    if args.plan and stage != "lir":
        raise CliError("--plan draws the memory plan, which exists at the LIR stage only (drop --stage or use --stage lir)")
    target = at_stage(obj, stage, args.policy)
    if args.plan:
        draw_plan(target, out)
        what = "memory plan"
    else:
        draw_graph(target, out, show_params=not args.no_params)
        what = f"{_kind(target).upper()} graph"
    _console().line(f"wrote {out} ({what} of {_graph_of(target).name}, {os.path.getsize(out)} bytes)")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from rlx import demo

    return demo.main(args.out, steps=args.steps, pictures=not args.no_pictures)


# ------------------------------------------------------------------------------ parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from rlx import __version__

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks of errors")
    parser = argparse.ArgumentParser(
        prog="rlx", description="rlx: inspect, optimize, plan, run, convert and draw rlx IR files.",
        epilog="Exit status: 0 success, 1 error (one line on stderr; --debug for the traceback), 2 usage error.")
    parser.add_argument("--version", action="version", version=f"rlx {__version__}")
    parser.add_argument("--debug", action="store_true", default=False, help="print tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Any, help: str, description: str | None = None) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=description or help, parents=[common])
        p.set_defaults(func=func, parser=p)
        return p

    policy = dict(choices=("direct", "fusable"), default=None, help="fusion policy used to lower a HIR file (default: direct)")

    p = add("inspect", cmd_inspect, "summarize a model file and print the dump of its stage")
    p.add_argument("file", help=".rlx file, .onnx model or .pt2 exported program")
    p.add_argument("--text", action="store_true", help="print the parseable text form instead of the dump")
    p.add_argument("--brief", action="store_true", help="only the summary row")

    p = add("optimize", cmd_optimize, "lower and optimize a model; print the fusion report; save the result")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True, help="output .rlx file (weights in OUTPUT.safetensors)")
    p.add_argument("--policy", **policy)
    p.add_argument("--backend", default=None, help="backend whose fusions to apply: cpu (default), cuda, metal, tpu, jax …")
    p.add_argument("--no-fold", action="store_true", help="do not fold constants")
    p.add_argument("--precision", default=None, choices=sorted(rlx_precision_policies()),
                   help="automatic mixed precision policy (e.g. auto_mixed_conservative: f16 compute, f32 reductions)")

    p = add("plan", cmd_plan, "plan the memory arena of a model and report it")
    p.add_argument("file")
    p.add_argument("-o", "--output", help="save the planned LIR module (.rlx)")
    p.add_argument("--alignment", type=_positive_int, default=None, help="buffer alignment in bytes (default 64)")
    p.add_argument("--optimize", action="store_true", help="optimize a HIR/MIR file before planning")
    p.add_argument("--policy", **policy)
    p.add_argument("--top", type=_positive_int, default=10, help="how many of the largest buffers to list (default 10)")

    p = add("run", cmd_run, "run a model on inputs from .npy files with its saved weights")
    p.add_argument("file")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy", help="an input (repeat for each)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=FILE.npy", help="a weight, overriding the saved one")
    p.add_argument("-o", "--output", help="write the outputs to OUTPUT.npz (keys output_0, output_1 …)")
    p.add_argument("--backend", choices=("numpy", "reference", "jax"), default="numpy",
                   help="numpy: the planned arena executor (default); reference: op by op; jax: XLA")
    p.add_argument("--policy", **policy)

    p = add("convert", cmd_convert, "convert an ONNX model, a torch.export program (.pt2) or upstream rlx-ir JSON to .rlx")
    p.add_argument("model", help="model.onnx, model.pt2 written by torch.export.save, or an upstream rlx-ir .json document")
    p.add_argument("-o", "--output", required=True, help="output .rlx file (weights in OUTPUT.safetensors)")

    p = add("draw", cmd_draw, "draw a model's graph (Graphviz) or its memory plan",
            "Draw the graph at a stage as SVG/PNG/PDF through Graphviz dot (or .dot text), fused ops grouped and "
            "coloured, shapes on the edges, provenance in tooltips; with --plan, the memory-plan timeline (PNG/SVG).")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True, help="picture file: .svg .png .pdf .dot (graph); .png .svg .pdf (--plan)")
    p.add_argument("--stage", choices=STAGES, default=None,
                   help="hir, mir (lowered), opt (optimized MIR) or lir (optimized and planned); default: the file's stage")
    p.add_argument("--plan", action="store_true", help="draw the memory-plan timeline instead of the graph")
    p.add_argument("--no-params", action="store_true", help="leave params and constants out of the graph picture")
    p.add_argument("--policy", **policy)

    p = add("demo", cmd_demo, "build, lower, optimize, plan, run, train, save and draw a small transformer")
    p.add_argument("--out", default="rlx-demo", help="directory for the files and pictures (default ./rlx-demo)")
    p.add_argument("--steps", type=_positive_int, default=200, help="training steps of the MLP (default 200)")
    p.add_argument("--no-pictures", action="store_true", help="skip the pictures")
    return parser


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    parts = [s.strip() for s in text.splitlines() if s.strip()]
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help / --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.func(args) or 0)
    except SystemExit as exc:  # parser.error() inside a command
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        print("rlx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rlx demo | head`: stop quietly, as other command-line tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (RlxError, OSError) as exc:
        if debug:
            traceback.print_exc()
        print(f"rlx: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(f"rlx: internal error: {type(exc).__name__}: {_one_line(exc)} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
