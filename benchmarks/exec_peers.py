"""The numpy arena backend vs PyTorch eager and onnxruntime: same workloads, same process, same threads.

Run: .venv/bin/python benchmarks/exec_peers.py [--threads 1] [--repeat 15] [--quick] [--only NAME]

Workloads (imported from exec_speed_jax.py, where they are defined once; float32):
x[128,768] @ W[768,768] + b -> gelu; layer_norm over [8,128,768]; attention with q, k, v
[1,12,128,64]; a pre-norm transformer layer (B=1, S=128, D=768, 12 heads, FFN 3072, causal).

* rlx: ``rlx.compile(graph, backend="numpy", params=...)``, ``exe.run(inputs=...)`` (NumPy in, NumPy out);
* torch: the same model in PyTorch eager (``torch.nn.functional``: linear algebra, ``gelu``,
  ``layer_norm``, ``scaled_dot_product_attention``) under ``torch.inference_mode()``, NumPy
  inputs wrapped with ``torch.from_numpy`` and the result turned back with ``.numpy()``;
* onnxruntime: the graph exported with ``rlx.onnx.export(graph, params)`` (weights as
  initializers), an ``InferenceSession`` on the CPU provider with its default graph
  optimizations, ``sess.run(None, inputs)``.

Threads: NumPy's BLAS (OPENBLAS/OMP/MKL_NUM_THREADS, set before NumPy is imported),
``torch.set_num_threads`` and onnxruntime's intra-op threads all get --threads (default 1: on
a shared 2-core machine one thread gives the steadiest figures); inter-op threads are 1.
Each sample times a batch of calls (about 20 ms); the contenders alternate, the order rotating
every round, and the figure is the median per call of process CPU time (wall median beside it).
Ratios are rlx time / peer time (< 1: rlx is faster). The issue sets no target against these
peers; the numpy backend's own target (<= 1.2x hand NumPy) is measured by exec_speed.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable


def _threads(argv: list[str]) -> int:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


THREADS = _threads(sys.argv)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # before NumPy (and its BLAS) is loaded

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import calls_for, measure, print_footer, print_header, print_table, ratio  # noqa: E402
from exec_speed_jax import WORKLOADS, Workload  # noqa: E402

import rlx  # noqa: E402
from rlx.runtime.compile import compile as rlx_compile  # noqa: E402


def _torch_fns():
    import torch
    import torch.nn.functional as F

    def ln(x, g, b):
        return F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)

    def matmul_gelu(i, p):
        return F.gelu(i["x"] @ p["w"] + p["b"])

    def layer_norm(i, p):
        return ln(i["x"], p["g"], p["b"])

    def attention(i, p):
        return F.scaled_dot_product_attention(i["q"], i["k"], i["v"])

    def transformer(i, p):
        x = i["x"]
        b, s, d = x.shape
        h = ln(x, p["ln1_g"], p["ln1_b"])

        def split(t):
            return t.reshape(b, s, 12, d // 12).transpose(1, 2)

        q, k, v = (split(h @ p[n]) for n in ("wq", "wk", "wv"))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x1 = x + a @ p["wo"]
        f = F.gelu(ln(x1, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"])
        return x1 + f @ p["w2"] + p["b2"]

    return torch, {"matmul_gelu": matmul_gelu, "layer_norm": layer_norm, "attention": attention, "transformer": transformer}


def torch_runner(torch, fn, w: Workload, threads: int) -> Callable[..., np.ndarray]:
    """run(f=fn): f(inputs, params) under inference_mode, NumPy in and out (torch threads set here)."""
    torch.set_num_threads(threads)
    params_t = {k: torch.from_numpy(v) for k, v in w.params.items()}

    def run(f=fn):
        with torch.inference_mode():
            return f({k: torch.from_numpy(v) for k, v in w.inputs.items()}, params_t).numpy()

    return run


def ort_runner(ort, w: Workload, threads: int) -> Callable[[], np.ndarray]:
    """The rlx.onnx.export model in a CPU InferenceSession (threads intra-op, 1 inter-op); () -> first output."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
    sess = ort.InferenceSession(rlx.onnx.export(w.graph, w.params).SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, w.inputs)[0]


def contenders(key: str, w: Workload) -> dict:
    """name -> zero-argument callable returning the output as a NumPy array."""
    exe = rlx_compile(w.graph, backend="numpy", params=w.params)
    fns = {"rlx numpy": lambda: exe.run(inputs=w.inputs)[0]}
    try:
        torch, torch_fns = _torch_fns()
    except ImportError:
        torch = None
    if torch is not None:
        fns["torch eager"] = torch_runner(torch, torch_fns[key], w, THREADS)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        fns["onnxruntime"] = ort_runner(ort, w, THREADS)
    return fns


def peer_args(doc: str | None, threads_help: str, repeat: int, quick_rounds: int) -> argparse.ArgumentParser:
    """The command line the peer benchmarks share: --threads, --repeat, --quick, --only."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help=threads_help)
    ap.add_argument("--repeat", type=int, default=repeat, help=f"interleaved rounds; medians are reported (default {repeat})")
    ap.add_argument("--quick", action="store_true", help=f"{quick_rounds} rounds of about 5 ms samples")
    ap.add_argument("--only", default=None, help="substring of the workload names to run")
    return ap


def time_contenders(w: Workload, fns: dict, repeat: int, sample_s: float) -> tuple[dict, dict[str, float]]:
    """measure() of every contender on ``w`` and each one's max relative error against rlx.run."""
    ref = rlx.run(w.graph, w.inputs, w.params)[0]
    errs = {k: float(np.max(np.abs(f() - ref)) / (np.max(np.abs(ref)) + 1e-30)) for k, f in fns.items()}
    number = min(calls_for(f, sample_s) for f in fns.values())
    return measure(fns, repeat, number=number, gc_off=False, warmup=True), errs


def main() -> None:
    ap = peer_args(__doc__, "threads for NumPy's BLAS, torch and onnxruntime (default 1)", repeat=15, quick_rounds=5)
    args = ap.parse_args()
    repeat, sample_s = (5, 0.005) if args.quick else (args.repeat, 0.02)
    versions = [f"numpy {np.__version__}"]
    for mod in ("torch", "onnxruntime"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            versions.append(f"{mod} missing")
    print_header("numpy backend vs PyTorch eager and onnxruntime (exec_peers.py)",
                 f"{', '.join(versions)}; threads: BLAS = torch.set_num_threads = ORT intra-op = {THREADS}; "
                 f"medians of {repeat} interleaved rounds, process CPU time per call")
    rng = np.random.default_rng(0)
    rows = []
    for make in WORKLOADS:
        w = make("f32", rng)
        if args.only and args.only not in w.name:
            continue
        t, errs = time_contenders(w, contenders(make.__name__, w), repeat, sample_s)
        ms = {k: v.median_cpu * 1e3 for k, v in t.items()}
        nan = float("nan")
        rows.append([w.name, ms["rlx numpy"], t["rlx numpy"].median_wall * 1e3, ms.get("torch eager", nan), ms.get("onnxruntime", nan),
                     ratio(ms["rlx numpy"], ms.get("torch eager", nan)), ratio(ms["rlx numpy"], ms.get("onnxruntime", nan)),
                     f"{max(errs.values()):.1e}"])
    print_table(["workload", "rlx ms", "rlx wall ms", "torch ms", "ort ms", "rlx/torch", "rlx/ort", "max rel err vs rlx.run"], rows)
    print_footer()


if __name__ == "__main__":
    main()
