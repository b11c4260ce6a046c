"""``rlx run``: run a model on ``.npy`` inputs with its saved weights on any registered
backend; ``--warmup`` / ``--repeat`` latency statistics (median, p10, p90), ``--profile``
(time per op kind and the slowest nodes, ops one at a time), ``--trace`` (Perfetto JSON),
``--compare`` against onnxruntime or torch for models that came from there (numbers and speed)."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.cli import common
from rlx.cli.output import emit_json, finite
from rlx.cli.progress import step
from rlx.ir.atomic import atomic_open
from rlx.ir.errors import RlxError
from rlx.viz.console import get_console

REFERENCE = "reference"
#: the package each framework backend runs on (checked first: a missing one is a one-line install hint)
BACKEND_PACKAGES = {"jax": "jax", "torch": "torch", "onnxruntime": "onnxruntime", "openvino": "openvino"}


def backend_names() -> list[str]:
    """Every backend registered with :func:`rlx.runtime.compile.register_backend`, plus the
    op-by-op reference interpreter."""
    from rlx.runtime.compile import BACKENDS

    return [*sorted(BACKENDS), REFERENCE]


def latency(fn: Callable[[], Any], warmup: int, repeat: int) -> dict[str, float]:
    """Seconds per call of ``fn`` after ``warmup`` untimed calls: median, p10, p90, min, mean."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    arr = np.asarray(times)
    return {"repeat": repeat, "warmup": warmup, "median_s": float(np.median(arr)), "p10_s": float(np.percentile(arr, 10)),
            "p90_s": float(np.percentile(arr, 90)), "min_s": float(arr.min()), "mean_s": float(arr.mean())}


def profile(g: Any, feed: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], backend: str,
            repeat: int) -> tuple[list[dict[str, Any]], str]:
    """Per-node seconds (mean over ``repeat`` runs) of ``backend``'s own per-op code, one node
    at a time (:func:`rlx.backends.trace.trace_run`; NumPy kernels unless the backend is
    traceable itself); also the name of the backend traced."""
    from rlx.backends.trace import TRACE_BACKENDS, trace_run
    from rlx.hir.inspect import op_kind, op_text

    traced = backend if backend in TRACE_BACKENDS else "numpy"
    total: dict[int, float] = {}
    for _ in range(repeat):
        _, doc = trace_run(g, feed, params, backend=traced, compiled_run=False)
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "node":
                nid = ev["args"]["node"]
                total[nid] = total.get(nid, 0.0) + ev["dur"] * 1e-6
    rows = [{"node": n.id, "kind": op_kind(n), "op": op_text(n), "name": n.name, "seconds": total.get(n.id, 0.0) / repeat}
            for n in g.nodes if n.op not in ("input", "param")]
    return rows, traced


def _by_kind(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds: dict[str, dict[str, Any]] = {}
    for r in rows:
        k = kinds.setdefault(r["kind"], {"kind": r["kind"], "count": 0, "seconds": 0.0})
        k["count"] += 1
        k["seconds"] += r["seconds"]
    return sorted(kinds.values(), key=lambda k: -k["seconds"])


# ------------------------------------------------------------------------------ peers


def _peer_onnxruntime(path: str, feed: Mapping[str, np.ndarray]) -> tuple[Callable[[], list[np.ndarray]], str]:
    ort = common.require("onnxruntime", "--compare onnxruntime")
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own refusal of the model
        raise common.CliError(f"--compare onnxruntime: onnxruntime cannot load {path}: {exc}") from None
    names = [i.name for i in sess.get_inputs()]
    args = {n: feed[n] for n in names if n in feed}

    def call() -> list[np.ndarray]:
        try:
            return [np.asarray(o) for o in sess.run(None, args)]
        except Exception as exc:  # onnxruntime's own refusal of the feed: not an rlx bug
            raise common.CliError(f"--compare onnxruntime: onnxruntime failed to run {path}: {exc}") from None

    return call, f"onnxruntime {ort.__version__}"


def _peer_torch(path: str, feed: Mapping[str, np.ndarray]) -> tuple[Callable[[], list[np.ndarray]], str]:
    torch = common.require("torch", "--compare torch")
    import rlx.torch

    ep = rlx.torch.load_program(path)  # the checked reader: nothing in the archive runs
    args = [torch.from_numpy(np.ascontiguousarray(feed[n])) for n in ep.graph_signature.user_inputs]
    module = ep.module()

    def call() -> list[np.ndarray]:
        with torch.no_grad():
            out = module(*args)
        outs = out if isinstance(out, (tuple, list)) else [out]
        return [o.detach().numpy() for o in outs]

    return call, f"torch {torch.__version__}"


PEERS = {"onnxruntime": (".onnx", _peer_onnxruntime), "torch": (".pt2", _peer_torch)}


def _compare(spec: str, model: common.Model, feed: Mapping[str, np.ndarray], outs: list[np.ndarray],
             args: argparse.Namespace, ours: dict[str, float] | None) -> dict[str, Any]:
    kind, _, path = spec.partition("=")
    suffix, make = PEERS[kind]
    path = path or model.path
    if not path.lower().endswith(suffix):
        raise common.CliError(f"--compare {kind}: needs the model it came from ({suffix}); give it as "
                              f"--compare {kind}=MODEL{suffix} when FILE is a converted .rlx")
    call, version = make(path, feed)
    theirs = call()
    if len(theirs) != len(outs):
        raise common.CliError(f"--compare {kind}: {version} returns {len(theirs)} outputs, rlx {len(outs)}")
    rows = []
    for i, (a, b) in enumerate(zip(outs, theirs)):
        same_shape = tuple(a.shape) == tuple(b.shape)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if same_shape and a.size else np.zeros(0)
        scale = np.abs(b.astype(np.float64)).max() if same_shape and b.size else 0.0
        rows.append({"output": i, "shape_equal": same_shape, "max_abs_diff": finite(diff.max()) if diff.size else 0.0,
                     "max_rel_diff": finite(diff.max() / scale) if diff.size and scale else 0.0})
    out: dict[str, Any] = {"peer": kind, "version": version, "file": path, "outputs": rows}
    if ours is not None:
        out["latency"] = latency(call, args.warmup, args.repeat)
        out["speedup"] = out["latency"]["median_s"] / ours["median_s"] if ours["median_s"] else None
    return out


# ------------------------------------------------------------------------------ command


def _output_rows(g: Any, outs: list[np.ndarray]) -> list[dict[str, Any]]:
    rows = []
    for i, (v, arr) in enumerate(zip(g.outputs, outs)):
        row: dict[str, Any] = {"output": f"output_{i}", "id": v.id, "name": g.node(v.id).name, "shape": list(arr.shape),
                               "dtype": str(arr.dtype), "min": None, "max": None, "mean": None, "non_finite": None}
        if arr.size and np.issubdtype(arr.dtype, np.number) and not np.iscomplexobj(arr):
            a64 = arr.astype(np.float64)
            row.update(min=finite(a64.min()), max=finite(a64.max()), mean=finite(a64.mean()),
                       non_finite=int(np.count_nonzero(~np.isfinite(a64))))
        rows.append(row)
    return rows


def _prepare(args: argparse.Namespace
             ) -> tuple[common.Model, Any, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The model, its MIR graph, the feed of its inputs, its weights, and every array given (the source
    model's feed: an ONNX input whose value was folded in is not an input of the graph)."""
    inputs_spec = common.parse_assignments(args.input, "--input")
    params_spec = common.parse_assignments(args.param, "--param")
    feed = {n: common.load_npy(p, f"--input {n}") for n, p in inputs_spec.items()}
    onnx = args.file.lower().endswith(".onnx")
    proto = None
    if onnx and os.path.isfile(args.file):
        with step(f"reading {args.file}"):
            proto = common.read_onnx(args.file)
        declared = common.onnx_inputs(proto)
        _check_feed(args.file, feed, {n: common.shape_text(d) for n, d in declared.items()})
    with step(f"importing {args.file}" if onnx else f"reading {args.file}"):
        model = _open_specialised(args, feed, proto) if onnx else common.open_model(args)
    declared_inputs = common.graph_of(model.obj).inputs()
    fed = dict(feed)
    feed = {n: a for n, a in feed.items() if n in declared_inputs or not onnx}  # the values folded in are inputs no more
    _check_feed(args.file, feed, {n: str(list(v.shape)) + f" {v.dtype}" for n, v in declared_inputs.items()})
    common.bind_dims(model, common.dims_from_inputs(model.graph, feed), what="--input")
    g = common.to_mir(model, args.policy)
    declared_params = g.params()
    for name in params_spec:
        if name not in declared_params:
            raise common.CliError(f"--param {name}: the model has no param {name!r}; its params are "
                                  f"{sorted(declared_params) or 'none'}")
    weights = {**common.params_for(g, model.params), **{n: common.load_npy(p, f"--param {n}") for n, p in params_spec.items()}}
    absent = [f"{n} {list(v.shape)}" for n, v in declared_params.items() if n not in weights]
    if absent:
        raise common.CliError(f"{args.file} holds no weights for param(s) " + ", ".join(absent)
                              + " (give each as --param NAME=FILE.npy)")
    return model, g, feed, weights, fed


def _open_specialised(args: argparse.Namespace, feed: Mapping[str, np.ndarray], proto: Any) -> common.Model:
    """An ONNX model imported with the fed shapes and, where its graph needs them, the fed values
    of the inputs that shape it (what ``rlx.onnx.import_runnable`` does, for one feed)."""
    from rlx.frontends.onnx.import_context import NeedsStatic

    static: dict[str, np.ndarray] = {}
    while True:
        try:
            return common.load_model(args.file, dims=common.parse_dims(args.dim), proto=proto, values=static,
                                     input_shapes={**{n: a.shape for n, a in feed.items()},
                                                   **common.parse_input_shapes(args.input_shape)})
        except NeedsStatic as exc:
            new = set(exc.inputs) - set(static)
            if not new or not new <= set(feed):
                raise
            static.update({n: feed[n] for n in new})


def _check_feed(path: str, feed: Mapping[str, np.ndarray], declared: Mapping[str, str]) -> None:
    """Every ``--input`` names an input of the model and every input is given."""
    listing = ", ".join(f"{n} {d}" for n, d in declared.items()) or "none"
    for name in feed:
        if name not in declared:
            raise common.CliError(f"--input {name}: {path} has no input {name!r}; its inputs are {listing}")
    missing = [f"{n} {d}" for n, d in declared.items() if n not in feed]
    if missing:
        raise common.CliError(f"{path}: missing input(s) " + ", ".join(missing) + " (give each as --input NAME=FILE.npy)")


def _as_shipped(args: argparse.Namespace) -> tuple[common.Model, Callable[[], list[np.ndarray]], dict[str, np.ndarray]]:
    """An ONNX model run as shipped (:func:`rlx.onnx.import_runnable`): inputs whose values shape
    the graph are specialised on the values fed; the call and the (last imported) model."""
    import rlx.onnx

    feed = {n: common.load_npy(p, f"--input {n}") for n, p in common.parse_assignments(args.input, "--input").items()}
    with step(f"reading {args.file}"):
        proto = common.read_onnx(args.file)
    declared = common.onnx_inputs(proto)
    _check_feed(args.file, feed, {n: common.shape_text(d) for n, d in declared.items()})
    shapes, used = common.onnx_import_shapes(proto, common.parse_dims(args.dim), {
        **{n: list(a.shape) for n, a in feed.items()}, **common.parse_input_shapes(args.input_shape)})
    with step(f"importing {args.file} for {args.backend}"):
        try:
            runnable = rlx.onnx.OnnxRunnable(proto, backend=args.backend, input_shapes=shapes,
                                             base_dir=os.path.dirname(os.path.abspath(args.file)))
        except RlxError as exc:
            raise common.prefixed(exc, args.file) from None

    def call() -> list[np.ndarray]:
        try:
            return runnable.run(feed)
        except RlxError as exc:
            raise common.prefixed(exc, args.file) from None

    call()  # imports the value-specialised graph where the model needs one
    model = common.Model(runnable.graph, dict(runnable.params), args.file, source="onnx")
    model.binding.update({k: v for k, v in common.parse_dims(args.dim).items() if k in used})
    return model, call, feed


def run(args: argparse.Namespace) -> int:
    import rlx

    if args.backend not in backend_names():
        raise common.UsageError(f"--backend: unknown backend {args.backend!r}; registered: {', '.join(backend_names())}")
    if args.compare and args.compare.partition("=")[0] not in PEERS:
        raise common.UsageError(f"--compare: expected one of {', '.join(PEERS)} (optionally =MODEL), got {args.compare!r}")
    if args.warmup < 0 or args.repeat < 0:
        raise common.UsageError("--warmup and --repeat expect counts >= 0")
    if args.backend in BACKEND_PACKAGES:
        common.require(BACKEND_PACKAGES[args.backend], f"rlx run --backend {args.backend}")
    t0 = time.perf_counter()
    if args.file.lower().endswith(".onnx") and args.backend != REFERENCE and not args.param and os.path.isfile(args.file):
        model, call, fed = _as_shipped(args)
        g, weights = model.graph, model.params
        feed = {n: a for n, a in fed.items() if n in g.inputs()}  # the values folded in are inputs no more
    elif args.backend == REFERENCE:
        model, g, feed, weights, fed = _prepare(args)

        def call() -> list[np.ndarray]:
            return rlx.run(g, feed, weights)
    else:
        model, g, feed, weights, fed = _prepare(args)
        with step(f"compiling for {args.backend}"):
            exe = rlx.compile(model.obj if model.kind == "lir" and args.backend == "numpy" else g, backend=args.backend)

        def call() -> list[np.ndarray]:
            return exe.run(inputs=feed, params=weights)
    with step(f"running on {args.backend}"):
        outs = [np.asarray(o) for o in call()]
    first = time.perf_counter() - t0
    timing = None
    if args.repeat:
        with step(f"timing {args.repeat} runs"):
            timing = latency(call, args.warmup, args.repeat)
    prof, traced, trace_note = None, None, ""
    if args.profile:
        with step("profiling op by op"):
            prof, traced = profile(g, feed, weights, args.backend, max(1, args.repeat or 1))
    if args.trace:
        from rlx.backends.trace import trace_run, write_trace

        common.check_output_path(args.trace, (".json",), "trace")
        with step(f"tracing into {args.trace}"):
            _, doc = trace_run(model.obj if model.kind == "lir" else g, feed, weights, backend=args.backend)
            trace_note = ("per-node trace" if doc["metadata"]["per_node"] else "whole-graph trace (no per-node runner)")
            write_trace(doc, args.trace)
    compared = None
    if args.compare:
        with step(f"comparing against {args.compare.partition('=')[0]}"):
            compared = _compare(args.compare, model, fed, outs, args, timing)
    out_path = None
    if args.output:
        out_path = args.output if args.output.lower().endswith(".npz") else args.output + ".npz"
        common.check_output_path(out_path)
        with atomic_open(out_path, "wb") as f:  # a file object: savez adds no suffix
            np.savez(f, **{f"output_{i}": a for i, a in enumerate(outs)})
    rows = _output_rows(g, outs)
    if args.json:
        body: dict[str, Any] = {"file": args.file, "backend": args.backend, "first_call_s": first, "outputs": rows,
                                "binding": model.binding, "latency": timing, "written": out_path}
        if prof is not None:
            body["profile"] = {"backend": traced, "by_kind": _by_kind(prof),
                               "nodes": sorted(prof, key=lambda r: -r["seconds"])[: args.top]}
        if compared is not None:
            body["compare"] = compared
        body["trace"] = args.trace
        emit_json("run", body)
        return 0
    _print(args, g, rows, first, timing, prof, compared, out_path)
    if args.trace:
        get_console().line(f"wrote {args.trace} ({trace_note}; open it in Perfetto or chrome://tracing)")
    return 0


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def _print(args: argparse.Namespace, g: Any, rows: list[dict[str, Any]], first: float, timing: dict[str, float] | None,
           prof: list[dict[str, Any]] | None, compared: dict[str, Any] | None, out_path: str | None) -> None:
    con = get_console()

    def fmt(v: Any) -> str:
        return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))

    con.table(f"{g.name}: {len(rows)} output(s), backend {args.backend}, first call {first * 1e3:.1f} ms",
              ["output", "node", "shape", "dtype", "min", "max", "mean", "non-finite"],
              [(r["output"], f"%{r['id']}" + (f" {r['name']}" if r["name"] else ""), str(r["shape"]), r["dtype"],
                fmt(r["min"]), fmt(r["max"]), fmt(r["mean"]), fmt(r["non_finite"])) for r in rows],
              right=["min", "max", "mean", "non-finite"])
    if timing is not None:
        con.table(f"latency over {timing['repeat']} runs after {timing['warmup']} warm-up",
                  ["median", "p10", "p90", "min", "mean"],
                  [tuple(_ms(timing[k]) for k in ("median_s", "p10_s", "p90_s", "min_s", "mean_s"))],
                  right=["median", "p10", "p90", "min", "mean"])
    if prof is not None:
        total = sum(r["seconds"] for r in prof) or 1.0
        con.table("time by op kind (ops one at a time)", ["op kind", "nodes", "time", "share"],
                  [(k["kind"], k["count"], _ms(k["seconds"]), f"{100 * k['seconds'] / total:.1f}%")
                   for k in _by_kind(prof)[: args.top]], right=["nodes", "time", "share"])
        slow = sorted(prof, key=lambda r: -r["seconds"])[: args.top]
        con.table(f"slowest nodes (top {len(slow)} of {len(prof)})", ["node", "op", "time", "share"],
                  [(f"%{r['node']}" + (f" {r['name']}" if r["name"] else ""), r["op"], _ms(r["seconds"]),
                    f"{100 * r['seconds'] / total:.1f}%") for r in slow], right=["time", "share"])
    if compared is not None:
        con.table(f"against {compared['version']} ({compared['file']})", ["output", "same shape", "max |diff|", "max rel diff"],
                  [(f"output_{r['output']}", r["shape_equal"], fmt(r["max_abs_diff"]), fmt(r["max_rel_diff"]))
                   for r in compared["outputs"]], right=["max |diff|", "max rel diff"])
        if "latency" in compared:
            lat = compared["latency"]
            speed = f"; rlx {args.backend} runs at {compared['speedup']:.2f}x its speed" if compared["speedup"] else ""
            con.line(f"{compared['peer']}: median {_ms(lat['median_s'])} (p10 {_ms(lat['p10_s'])}, "
                     f"p90 {_ms(lat['p90_s'])}){speed}")
    if out_path:
        con.line(f"wrote {out_path} ({', '.join(r['output'] for r in rows)})")


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    p = common.command_parser(sub, parent, "run", run, "run a model on inputs from .npy files with its saved weights")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input (repeat for each); symbolic dims take its sizes")
    p.add_argument("--param", action="append", default=[], metavar="NAME=FILE.npy", help="a weight, overriding the saved one")
    p.add_argument("-o", "--output", help="write the outputs to OUTPUT.npz (keys output_0, output_1 …)")
    p.add_argument("--backend", default="numpy", metavar="NAME",
                   help="a registered backend (" + ", ".join(backend_names()) + "); numpy: the planned arena "
                        "executor (default); reference: op by op")
    p.add_argument("--policy", **common.POLICY_ARG)
    p.add_argument("--warmup", type=int, default=1, metavar="N", help="untimed calls before --repeat (default 1)")
    p.add_argument("--repeat", type=int, default=0, metavar="N", help="timed calls: median / p10 / p90 latency")
    p.add_argument("--profile", action="store_true",
                   help="time per op kind and the slowest nodes, ops run one at a time (numpy kernels or jax lowerings)")
    p.add_argument("--trace", metavar="FILE.json", default=None,
                   help="write a per-node timing trace with the arena track (Chrome / Perfetto JSON)")
    p.add_argument("--top", type=common.positive_int, default=10, help="rows of the profile tables (default 10)")
    p.add_argument("--compare", metavar="onnxruntime|torch[=MODEL]", default=None,
                   help="run the source model in onnxruntime (.onnx) or torch (.pt2) too: output differences and, "
                        "with --repeat, speed")
    p.add_argument("--json", action="store_true", help="one JSON document (schema rlx.run, docs/cli.md)")
    common.dim_argument(p, values=False)
