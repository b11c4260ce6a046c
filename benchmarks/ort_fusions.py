"""Which onnxruntime graph fusions make the CPU slower: each one turned off alone, timed against the default session.

Run: .venv/bin/python benchmarks/ort_fusions.py [--threads N] [--repeat 15] [--only NAME] [--source rlx|file]

For every real model of models_peers.py (timm and transformers, random init), the ONNX model the rlx
onnxruntime backend runs (``rlx.onnx.import_model`` of torch's ONNX file, then ``export_for_session``;
``--source file``: torch's file itself) is loaded once per fusion in FUSIONS with that fusion in
``disabled_optimizers``. A fusion *fires* on a model when its optimized graph (``optimized_model_filepath``)
differs from the default session's; only those are timed: default session vs fusion-off session,
interleaved rounds, medians of process CPU time. ratio = fusion off / default: below 1 means the fusion
slows the model down on this CPU. ``rlx.backends.ort_backend.SLOW_CPU_FUSIONS`` is what this finds;
rerun after an onnxruntime upgrade (the names are onnxruntime's graph-transformer names).
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or os.cpu_count() or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from common import REPO_DIR, calls_for, measure, print_footer, print_header, print_table  # noqa: E402
from exec_peers import peer_args  # noqa: E402
from models_peers import REAL, _onnx_file  # noqa: E402

import rlx  # noqa: E402
import rlx.onnx  # noqa: E402
from rlx.backends.ort_backend import export_for_session  # noqa: E402

# onnxruntime 1.32's CPU graph transformers that rewrite float models (its level 1-3 fusions).
FUSIONS = ("AttentionFusion", "BiasGeluFusion", "BiasSoftmaxFusion", "ConvActivationFusion", "ConvAddActivationFusion",
           "ConvAddFusion", "ConvBNFusion", "ConvMulFusion", "DivMulFusion", "EmbedLayerNormFusion", "FastGeluFusion",
           "GeluFusion", "GemmActivationFusion", "LayerNormFusion", "MatMulActivationFusion", "MatMulAddFusion",
           "MatMulScaleFusion", "MatmulTransposeFusion", "NchwcTransformer", "QuickGeluFusion", "ReshapeFusion",
           "SimplifiedLayerNormFusion", "SkipLayerNormFusion", "TransposeOptimizer")


def session(blob: bytes, disabled: tuple[str, ...], optimized: str | None = None) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = THREADS, 1, 3
    if optimized:
        opts.optimized_model_filepath = optimized
    return ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled))


def op_histogram(blob: bytes, disabled: tuple[str, ...], folder: str) -> collections.Counter:
    path = os.path.join(folder, "optimized.onnx")
    session(blob, disabled, path)
    return collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)


def change(default: collections.Counter, off: collections.Counter) -> str:
    """What turning the fusion off brings back, e.g. ``-SkipLayerNormalization x8 +Add x8``."""
    parts = [f"-{k} x{default[k] - off[k]}" for k in sorted(default) if default[k] > off[k]]
    parts += [f"+{k} x{off[k] - default[k]}" for k in sorted(off) if off[k] > default[k]]
    return " ".join(parts)


def model_blob(make, source: str) -> bytes | None:
    module, args, kwargs = make()
    blob = _onnx_file(module.eval(), args, kwargs)
    if blob is None or source == "file":
        return blob
    g, params = rlx.onnx.import_model(blob)
    return export_for_session(g, params).SerializeToString()


def feed_for(sess: ort.InferenceSession, make) -> dict:
    _, args, kwargs = make()
    return {i.name: t.numpy() for i, t in zip(sess.get_inputs(), [*args, *kwargs.values()])}


def main() -> None:
    ap = peer_args(__doc__, "onnxruntime intra-op threads (0 = all cores; default 1)", repeat=15, quick_rounds=5)
    ap.add_argument("--source", choices=("rlx", "file"), default="rlx", help="the rlx backend's model, or torch's ONNX file")
    args = ap.parse_args()
    rounds = 5 if args.quick else args.repeat
    torch.set_num_threads(THREADS)
    sys.path.insert(0, os.path.join(REPO_DIR, "tests", "models"))
    import zoo  # noqa: F401  (makes torchvision, hence timm and transformers, importable)

    print_header("onnxruntime fusions one at a time: fusion off / default (ort_fusions.py)",
                 f"onnxruntime {ort.__version__}; threads = {THREADS}; source = {args.source}; "
                 f"medians of {rounds} interleaved rounds, process CPU time per call")
    rows, worst = [], collections.defaultdict(list)
    for name, make in REAL.items():
        if args.only and args.only not in name:
            continue
        torch.manual_seed(0)
        blob = model_blob(make, args.source)
        if blob is None:
            continue
        with tempfile.TemporaryDirectory() as folder:
            default = op_histogram(blob, (), folder)
            fired = {f: change(default, off) for f in FUSIONS if (off := op_histogram(blob, (f,), folder)) != default}
        base = session(blob, ())
        feed = feed_for(base, make)
        sessions = {"default": base} | {f: session(blob, (f,)) for f in fired}
        fns = {k: (lambda s=s, feed=feed: s.run(None, feed)) for k, s in sessions.items()}
        number = min(calls_for(fn, 0.05) for fn in fns.values())
        t = measure(fns, rounds, number=number, gc_off=False, warmup=True)
        base_ms = t["default"].median_cpu * 1e3
        for f, what in fired.items():
            r = t[f].median_cpu * 1e3 / base_ms
            worst[f].append(r)
            rows.append([name, base_ms, f, what[:90], t[f].median_cpu * 1e3, r])
        print(f"  {name}: {len(fired)} fusions fire", file=sys.stderr, flush=True)
    print_table(["model", "default ms", "fusion turned off", "what comes back", "off ms", "off / default"], rows)
    slower = sorted(f for f, rs in worst.items() if max(rs) <= 1.0 and min(rs) < 0.97)
    print(f"\nfusions that never help and cost 3% or more somewhere (off / default <= 1.0 wherever they fire, < 0.97 once): "
          f"{slower or 'none'}")
    print_footer()


if __name__ == "__main__":
    main()
