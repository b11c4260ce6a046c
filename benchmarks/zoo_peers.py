"""Every model of the test zoo (tests/models/zoo.py, ~90 real architectures, random init, small configs) against
the best engine a user could pick, one JSON row per model, resumable (issue #38's >= 30-model table).

Run (one thread, then all threads; each call appends to its ``--out`` file and skips the models already in it;
``--set heldout-timm`` or ``--set heldout-hf`` runs a held-out-style set of ``heldout_sets.py`` instead of the zoo):

    .venv/bin/python benchmarks/zoo_peers.py --threads 1 --out /tmp/zoo_t1.jsonl [--models gpt2,bert] [--skip-compile]
    .venv/bin/python benchmarks/zoo_peers.py --threads 0 --out /tmp/zoo_t0.jsonl
    .venv/bin/python benchmarks/zoo_peers.py --report /tmp/zoo_t1.jsonl /tmp/zoo_t0.jsonl   # the tables, the geomeans

Per model, NumPy in / NumPy out, outputs checked against ``rlx.run`` before any timing (a contender that fails or
differs by more than 1e-3 relative is left out, with the reason in the row): the rlx backends ``numpy``, ``torch``,
``onnxruntime``, ``openvino`` and ``auto`` (``--jax`` adds ``jax``), each compiled with ``threads``; the peers: the
module itself under ``torch.inference_mode()`` (``torch eager``), ``torch.compile`` of it (``--skip-compile`` leaves it
out: its compilation takes most of a model's time on 2 cores), and torch's ONNX file (TorchScript exporter, float
outputs flattened, the zoo row's keywords as inputs) in onnxruntime and in OpenVINO at f32. Timing as in
``models_peers.py``: medians of ``--repeat`` interleaved rounds of every contender, then the fastest rlx path, the best
engine, ``rlx auto`` and the rlx backend auto chose measured alone (``--trio-rounds`` rounds, ``--trio-seconds``
(0.1) of calls per sample after a fifth of that in untimed calls: longer samples where the thread pools of
consecutive engines disturb each other, at all threads; auto returns the chosen backend's executable, so "its row
/ fastest" judges the choice and "auto / fastest" adds the noise of measuring the same call twice);
process CPU time per call at 1 thread (robust to neighbours on a shared machine). ``--threads 0`` means all cores for
every contender, judged on wall time (the latency a user buys threads for; CPU time would charge an engine for every
thread it runs, spinning included, and rank engines by work instead of latency): run it on a quiet machine. Both
clocks are recorded (``ms`` / ``trio_ms`` on the judging clock, ``wall_ms`` / ``cpu_ms`` / ``trio_wall_ms`` /
``trio_cpu_ms`` beside them); ``--clock`` overrides the choice.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models_peers as mp
import numpy as np
import torch
from common import REPO_DIR, calls_for, load_average, measure, print_table
from heldout_sets import SETS

import rlx

THREADS = mp.THREADS
ENGINES = mp.ENGINES
RLX = ("rlx numpy", "rlx torch", "rlx onnxruntime", "rlx openvino", "rlx jax")
TOL = 1e-3


def _zoo():
    sys.path.insert(0, os.path.join(REPO_DIR, "tests"))
    from models import zoo

    return zoo


def _tensor_inputs(args: tuple, kwargs: dict) -> tuple[list[str], list[torch.Tensor], dict]:
    """Keyword names of the tensor inputs, all tensor inputs in order, and the non-tensor keywords."""
    names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    tensors = [*args, *(kwargs[k] for k in names)]
    extra = {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}
    return names, tensors, extra


def _onnx_blob(module, args: tuple, kwargs: dict) -> bytes:
    """torch's ONNX file of the module (TorchScript exporter), fed the zoo row's tensors positionally."""
    import inspect
    import io
    import warnings

    from models.zoo_onnx import Flat

    names, tensors, extra = _tensor_inputs(args, kwargs)
    if "input_ids" in names and "attention_mask" not in names and "attention_mask" in inspect.signature(module.forward).parameters:
        names, tensors = [*names, "attention_mask"], [*tensors, torch.ones_like(kwargs["input_ids"])]  # without a mask
    flat = Flat(module, names, extra).eval()  # transformers traces aten::diff, which TorchScript cannot export
    buf, input_names = io.BytesIO(), [f"in{i}" for i in range(len(tensors))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(flat, tuple(tensors), buf, dynamo=False, opset_version=18, input_names=input_names)
        except Exception:  # the TorchScript exporter refuses some ops (aten::diff): torch's dynamo exporter then
            return torch.onnx.export(flat, tuple(tensors), dynamo=True, verbose=False,
                                     input_names=input_names).model_proto.SerializeToString()
    return buf.getvalue()


def contenders(entry, skip_compile: bool, jax: bool, failed: dict[str, str]):
    """name -> zero-argument callable returning all outputs (a list of arrays); the graph; the reference outputs."""
    from torch.utils._pytree import tree_leaves

    module, args, kwargs = entry.build()
    module = module.eval()
    g, params = rlx.torch.import_module(module, args, kwargs=kwargs)
    _, tensors, _ = _tensor_inputs(args, kwargs)
    feed = {n: t.numpy() for n, t in zip(g.inputs(), tensors)}
    ref = rlx.run(g, feed, params)

    def build(name, make):
        try:
            return make()
        except Exception as exc:  # any framework's failure type: the contender is left out, the reason kept
            failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
            return None

    exes = {
        "rlx numpy": build("rlx numpy", lambda: rlx.compile(g, params=params, threads=THREADS)),  # BLAS too
        "rlx torch": build("rlx torch", lambda: rlx.compile(g, backend="torch", params=params)),
        "rlx onnxruntime": build("rlx onnxruntime", lambda: rlx.compile(g, backend="onnxruntime", params=params, threads=THREADS)),
        "rlx openvino": build("rlx openvino", lambda: rlx.compile(g, backend="openvino", params=params, threads=THREADS)),
        "rlx jax": build("rlx jax", lambda: rlx.compile(g, backend="jax", params=params)) if jax else None,
        "rlx auto": build("rlx auto", lambda: rlx.compile(g, backend="auto", params=params, threads=THREADS, inputs=feed,
                                                          device="cpu")),
    }
    fns = {k: (lambda e=e: e.run(feed)) for k, e in exes.items() if e is not None}

    def call(fn):
        with torch.inference_mode():
            out = fn(*args, **kwargs)
        return [t.numpy() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]

    fns["torch eager"] = lambda: call(module)
    if not skip_compile:
        compiled = torch.compile(module)
        fns["torch.compile"] = lambda: call(compiled)
    blob = build("torch.onnx.export", lambda: _onnx_blob(module, args, kwargs))
    if blob is not None:
        import onnxruntime as ort

        def ort_session():
            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = THREADS, 1, 3
            sess = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])
            by_name = {f"in{i}": a for i, a in enumerate(feed.values())}  # inputs the file dropped are left out,
            ones = np.ones_like(next(iter(feed.values())))  # the all-ones mask added for export is the extra one
            onnx_feed = {i.name: by_name.get(i.name, ones) for i in sess.get_inputs()}
            return lambda: sess.run(None, onnx_feed)

        fn = build("ort (onnx file)", ort_session)
        if fn is not None:
            fns["ort (onnx file)"] = fn
        fn = build("ov (onnx file)", lambda: _openvino_all(blob, list(feed.values())))
        if fn is not None:
            fns["ov (onnx file)"] = fn
    return fns, g, exes.get("rlx auto"), ref


def _openvino_all(blob: bytes, feed_values: list[np.ndarray]):
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(core.read_model(blob), "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                                 "INFERENCE_NUM_THREADS": str(THREADS)})
    by_name = {f"in{i}": a for i, a in enumerate(feed_values)}
    name = [next((n for n in port.get_names() if n in by_name), None) for port in compiled.inputs]
    ov_feed = {i: by_name[n] if n else np.ones_like(feed_values[0]) for i, n in enumerate(name)}
    return lambda: list(compiled(ov_feed).values())


def _rel_err(got: list, ref: list[np.ndarray]) -> float:
    """The first float output's max|a - b| / max|b| (every contender returns the model's outputs in order; the ONNX
    file keeps the float ones only, so the first float output is the one compared)."""
    want = next(r for r in ref if r.dtype.kind == "f")
    have = next(np.asarray(o) for o in got if np.asarray(o).dtype.kind == "f")
    if have.shape != want.shape:
        raise ValueError(f"shape {have.shape} vs {want.shape}")
    return float(np.max(np.abs(have.astype(np.float64) - want)) / (np.max(np.abs(want)) + 1e-30))


def measure_model(entry, args) -> dict:
    failed: dict[str, str] = {}
    t0 = time.perf_counter()
    torch.manual_seed(0)
    row: dict = {"model": entry.name, "threads": THREADS, "time": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
                 "load_start": load_average()}
    try:
        fns, g, auto, ref = contenders(entry, args.skip_compile, args.jax, failed)
    except Exception as exc:  # the import itself failed: the row says why
        row.update(error=f"{type(exc).__name__}: {str(exc)[:300]}", seconds=round(time.perf_counter() - t0, 1))
        return row
    row["nodes"] = len(g)
    if auto is not None:
        row["auto_chose"] = auto.backend + (" jit" if getattr(auto, "kernels", None) == "jit" else "")
    errs = {}
    for k, f in list(fns.items()):  # the first call also compiles (Inductor): a failure drops the contender
        try:
            errs[k] = _rel_err(f(), ref)
            if not errs[k] <= TOL:
                raise ValueError(f"relative error {errs[k]:.2e} > {TOL}")
        except Exception as exc:  # any framework's failure type
            failed[k] = f"{type(exc).__name__}: {str(exc)[:300]}"
            del fns[k]
    number = min(calls_for(f, 0.05) for f in fns.values())
    t = measure(fns, args.repeat, number=number, gc_off=False, warmup=True)
    ms = {k: v.get(args.clock) * 1e3 for k, v in t.items()}
    rlx_paths = [k for k in ms if k in RLX]
    engines = [k for k in ENGINES if k in ms]
    if rlx_paths and engines:
        # the two fastest rlx backends, the two fastest engines and rlx auto measured again alone (warm, ~0.1 s of
        # calls per sample): in the round of all contenders a sample follows a slow contender, cold caches included
        # (at all threads every engine: in the round of all contenders the engines' thread pools disturb each other's
        # first calls, torch eager's most, so that round cannot be trusted to rank them)
        picked = f"rlx {row['auto_chose']}" if "auto_chose" in row else None
        top = [*sorted(rlx_paths, key=ms.get)[:2], *sorted(engines, key=ms.get)[:2 if THREADS == 1 else None], picked, "rlx auto"]
        trio = {k: fns[k] for k in dict.fromkeys(top) if k in fns}
        number = min(calls_for(f, args.trio_seconds) for f in trio.values())
        tt = measure(trio, args.trio_rounds, number=number, gc_off=False, warmup=True, warm_calls=max(1, number // 5))
        trio_ms = {k: v.get(args.clock) * 1e3 for k, v in tt.items()}
        row.update(clock=args.clock, trio_wall_ms={k: v.median_wall * 1e3 for k, v in tt.items()},
                   trio_cpu_ms={k: v.median_cpu * 1e3 for k, v in tt.items()})
        fastest = min((k for k in trio_ms if k in RLX), key=trio_ms.get)
        best = min((k for k in trio_ms if k in ENGINES), key=trio_ms.get)
        row.update(fastest=fastest, best=best, trio_ms=trio_ms, fastest_vs_best=trio_ms[fastest] / trio_ms[best])
        if "rlx auto" in trio_ms:
            row["auto_vs_fastest"] = trio_ms["rlx auto"] / trio_ms[fastest]
        if picked in trio_ms:
            row["pick_vs_fastest"] = trio_ms[picked] / trio_ms[fastest]
    row.update(ms=ms, wall_ms={k: v.median_wall * 1e3 for k, v in t.items()}, cpu_ms={k: v.median_cpu * 1e3 for k, v in t.items()},
               err=errs, failed=failed, load_end=load_average(), seconds=round(time.perf_counter() - t0, 1))
    return row


def _done(path: str) -> set[str]:
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {json.loads(line)["model"] for line in f if line.strip()}


def report(paths: list[str]) -> None:
    """The Markdown table and the geomeans of each results file."""
    cols = ["rlx numpy", "rlx torch", "rlx onnxruntime", "rlx openvino", "rlx auto", *ENGINES]
    for path in paths:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        ok = [r for r in rows if "fastest_vs_best" in r]
        if not ok:
            print(f"{path}: no measured rows")
            continue
        threads = ok[0]["threads"]
        table = [[r["model"], r["nodes"], *(r["ms"].get(k, float("nan")) for k in cols), r["best"], r["fastest"],
                  r["fastest_vs_best"], r.get("auto_vs_fastest", float("nan")), r.get("auto_chose", ""),
                  r.get("pick_vs_fastest", float("nan"))] for r in ok]
        print_table(["model", "nodes", *(f"{k} ms" for k in cols), "best engine", "fastest rlx", "fastest / best",
                     "auto / fastest", "auto chose", "its row / fastest"], table,
                    title=f"{path}: {threads} thread(s), {ok[0].get('clock', 'cpu')} time, {ok[0]['time']} .. {ok[-1]['time']} UTC, "
                          f"load {ok[0]['load_start']} .. "
                          f"{ok[-1]['load_end']}")
        vs = [r["fastest_vs_best"] for r in ok]
        av = [r["auto_vs_fastest"] for r in ok if "auto_vs_fastest" in r]
        print(f"\n{len(ok)} models measured: fastest rlx / best engine geomean {mp.geomean(vs):.3g}, max {max(vs):.3g} "
              f"({sum(v > 1.1 for v in vs)} above 1.1); rlx auto / fastest rlx geomean {mp.geomean(av):.3g}, max {max(av):.3g} "
              f"({sum(v > 1.05 for v in av)} above 1.05)")
        pv = [r["pick_vs_fastest"] for r in ok if "pick_vs_fastest" in r]
        if pv:  # auto returns the chosen backend's executable: its own trio row is the same call measured apart
            print(f"auto's pick (the chosen backend's trio row) / fastest rlx over {len(pv)}: geomean {mp.geomean(pv):.3g}, "
                  f"max {max(pv):.3g} ({sum(v > 1.05 for v in pv)} above 1.05)")
        for k in cols:
            ratios = [r["ms"][k] / r["ms"]["torch eager"] for r in ok if k in r["ms"] and "torch eager" in r["ms"]]
            if ratios:
                print(f"  {k} / torch eager: geomean {mp.geomean(ratios):.3g} over {len(ratios)}")
        failures = [(r["model"], k, v) for r in rows for k, v in r.get("failed", {}).items()]
        failures += [(r["model"], "import", r["error"]) for r in rows if "error" in r]
        if failures:
            print("\nleft out (model, contender, reason):")
            for model, k, v in failures:
                print(f"  {model} | {k} | {v[:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="threads for every contender (0 = all cores)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds of every contender")
    ap.add_argument("--trio-rounds", type=int, default=21, help="rounds of the fastest rlx path, best engine and auto alone")
    ap.add_argument("--trio-seconds", type=float, default=0.1,
                    help="length of each of those samples (after a fifth of it in untimed calls)")
    ap.add_argument("--models", default=None, help="zoo names to run, comma-separated (default: all)")
    ap.add_argument("--set", default="zoo", choices=("zoo", "heldout-timm", "heldout-hf"),
                    help="the test zoo (default) or a held-out-style set of heldout_sets.py")
    ap.add_argument("--skip-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--jax", action="store_true", help="add the rlx jax backend")
    ap.add_argument("--out", default=None, help="JSON lines file: rows appended as models finish, models in it skipped")
    ap.add_argument("--report", nargs="+", default=None, help="print the tables of these results files and exit")
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="the clock that ranks contenders (default: cpu at 1 thread, wall at all threads)")
    args = ap.parse_args()
    args.clock = args.clock or ("cpu" if THREADS == 1 else "wall")
    if args.report:
        report(args.report)
        return
    torch.set_num_threads(THREADS)
    zoo = _zoo()
    models = zoo.ZOO if args.set == "zoo" else SETS[args.set](zoo)
    wanted = set(args.models.split(",")) if args.models else None
    done = _done(args.out) if args.out else set()
    entries = [e for e in models if (wanted is None or e.name in wanted) and e.name not in done]
    print(f"zoo_peers: {len(entries)} models, threads {THREADS}, load {load_average()}", file=sys.stderr, flush=True)
    for entry in entries:
        row = measure_model(entry, args)
        line = json.dumps(row)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
        summary = (f"{row['fastest']} / {row['best']} {row['fastest_vs_best']:.3g}" if "fastest_vs_best" in row
                   else row.get("error", "not measured"))
        print(f"  {entry.name} ({row['seconds']} s): {summary}; left out: {sorted(row.get('failed', {}))}", file=sys.stderr,
              flush=True)
    if args.out:
        report([args.out])


if __name__ == "__main__":
    main()
