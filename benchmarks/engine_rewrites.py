"""What each of rlx's pre-export rewrites is worth to each engine: the same model exported with and without
each rewrite, every variant run by onnxruntime and by OpenVINO (f32), interleaved, and OpenVINO's CPU
pinning on and off (the engine setting that matters on a shared machine).

Run: .venv/bin/python benchmarks/engine_rewrites.py [--threads 1] [--repeat 7] [--only NAME]

Variants (:func:`rlx.backends.ort_backend.export_for_session` applies both rewrites): ``plain`` = the ONNX
exporter alone (params as initializers); ``+conv-affine`` = inference BatchNorm chains folded into their
convolutions first (:func:`rlx.opt.fold_affine.fold_conv_affine`); ``+weights`` = weight-only subgraphs
computed once (:func:`rlx.opt.fold_weights.fold_weights`: transposed / reshaped / cast weights become
initializers); ``both`` = both rewrites; ``both+merge`` = ``both`` then
:func:`rlx.backends.engine_rewrites.merge_parallel_matmuls` (matmuls sharing an activation merged).
Process CPU time per call, medians; outputs checked against ``rlx.run`` first. Models: the resnet-ish CNN,
the ViT-ish encoder and the GPT-ish decoder of ``models_peers.py`` (one fused qkv linear each)
and its transformers BERT and Llama (separate q / k / v,
gate / up), random init.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import calls_for, measure, print_footer, print_header, print_table  # noqa: E402
from models_peers import REAL, SHAPES  # noqa: E402

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from rlx.backends.engine_rewrites import merge_parallel_matmuls  # noqa: E402
from rlx.backends.onnx import export  # noqa: E402
from rlx.ir.verify import verify  # noqa: E402
from rlx.opt.fold_affine import fold_conv_affine  # noqa: E402
from rlx.opt.fold_weights import fold_weights  # noqa: E402

MODELS = ("resnet-ish 112²", "vit 224² d192 l4", "gpt d256 l4 s128", "hf bert h256 l4 s128", "hf llama h256 l4 s128")
VARIANTS = ("+conv-affine", "+weights", "both", "both+merge")


def variants(g: rlx.Graph, params: dict) -> dict[str, bytes]:
    def affine(graph):
        folded = fold_conv_affine(graph)
        return verify(folded.graph) if folded.changed else graph

    def weights(graph):
        g2, bound = fold_weights(graph, params)
        return (verify(g2) if g2 is not graph else g2), bound

    return {"plain": export(g, params).SerializeToString(),
            "+conv-affine": export(affine(g), params).SerializeToString(),
            "+weights": export(*weights(g)).SerializeToString(),
            "both": export(*weights(affine(g))).SerializeToString(),
            "both+merge": export(*merge_parallel_matmuls(*weights(affine(g)))).SerializeToString()}


def ort_call(blob: bytes, feed: dict):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = THREADS, 3
    sess = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"])
    return lambda: sess.run(None, feed)[0]


def ov_call(blob: bytes, feed: dict, pinning: bool):
    import openvino

    core = openvino.Core()
    props = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
             "INFERENCE_NUM_THREADS": str(THREADS), "ENABLE_CPU_PINNING": "YES" if pinning else "NO"}
    compiled = core.compile_model(core.read_model(blob), "CPU", props)
    req = compiled.create_infer_request()
    tensors = {k: openvino.Tensor(np.ascontiguousarray(v), shared_memory=True) for k, v in feed.items()}

    def call():
        for k, t in tensors.items():
            req.set_tensor(k, t)
        req.infer()
        return req.get_output_tensor(0).data.copy()

    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
    import zoo  # noqa: F401  (makes torchvision, hence transformers, importable)
    print_header("pre-export rewrites per engine (engine_rewrites.py)", f"threads = {THREADS}; medians of {args.repeat} rounds, CPU time")
    rows = []
    for name in MODELS:
        if args.only and args.only not in name:
            continue
        torch.manual_seed(0)
        module, targs, kwargs = {**SHAPES, **REAL}[name]()
        g, params = rlx.torch.import_module(module.eval(), targs, kwargs=kwargs)
        feed = dict(zip(g.inputs(), [t.numpy() for t in [*targs, *kwargs.values()]]))
        want = rlx.run(g, feed, params)[0]
        fns = {}
        for vname, blob in variants(g, params).items():
            fns[f"ort {vname}"] = ort_call(blob, feed)
            fns[f"ov {vname}"] = ov_call(blob, feed, pinning=False)
            if vname == "both":
                fns["ov both, pinned"] = ov_call(blob, feed, pinning=True)
        for k, f in fns.items():
            err = float(np.max(np.abs(f() - want)) / np.max(np.abs(want)))
            assert err < 1e-3, (name, k, err)
        t = measure(fns, args.repeat, number=min(calls_for(f, 0.05) for f in fns.values()), gc_off=False, warmup=True)
        ms = {k: v.median_cpu * 1e3 for k, v in t.items()}
        for engine in ("ort", "ov"):
            plain = ms[f"{engine} plain"]
            rows.append([name, engine, plain, *(ms[f"{engine} {v}"] / plain for v in VARIANTS),
                         ms["ov both, pinned"] / ms["ov both"] if engine == "ov" else float("nan")])
        print(f"  {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in ms.items()), file=sys.stderr, flush=True)
    print_table(["model", "engine", "plain ms", *(f"{v} / plain" for v in VARIANTS), "pinned / unpinned"], rows)
    print_footer()


if __name__ == "__main__":
    main()
