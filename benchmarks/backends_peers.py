"""Every rlx backend vs torch eager, torch.compile, onnxruntime and jax.jit, in one run.

Run: .venv/bin/python benchmarks/backends_peers.py [--threads N] [--repeat 9] [--quick] [--only NAME] [--skip-compile]

Workloads (exec_speed_jax.WORKLOADS, float32): x[128,768] @ W + b -> gelu; layer_norm [8,128,768];
attention q, k, v [1,12,128,64]; a pre-norm transformer layer (B=1, S=128, D=768, 12 heads, FFN 3072,
causal). Contenders, all NumPy in / NumPy out:

* rlx numpy / rlx numpy jit / rlx torch / rlx torch inductor / rlx onnxruntime / rlx openvino / rlx jax / rlx auto:
  ``rlx.compile(graph, backend=..., params=...)`` then ``exe.run(inputs=...)``
  (``backend="torch", mode="inductor"`` is ``torch.compile`` of the lowered fx module; ``rlx numpy jit`` is
  ``backend="numpy", kernels="jit"``: numba's compiled kernels where one applies, left out without numba);
* torch eager / torch.compile: the same model written with ``torch.nn.functional``
  (exec_peers._torch_fns) under ``torch.inference_mode()``, and that function through ``torch.compile``;
* onnxruntime: the ``rlx.onnx.export`` model in an ``InferenceSession`` (CPU provider, default
  graph optimizations), ``sess.run`` directly; openvino: the same model compiled by OpenVINO (f32),
  ``compiled_model(inputs)``; ``rlx auto``: ``backend="auto"`` with the workload's inputs;
* jax.jit: the hand-written jax.numpy model (exec_speed_jax), jitted.

Threads: BLAS, ``torch.set_num_threads``, onnxruntime intra-op and XLA's CPU threads all get
--threads (default 1; ``--threads 0`` = all cores). Medians of interleaved rounds (order rotated
every round) of process CPU time per call (wall beside it in the spread column: min..max of the
CPU samples); ratios are contender time / torch eager time (< 1: faster than torch eager).
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exec_peers import _threads

THREADS = _threads(sys.argv) or os.cpu_count() or 1
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # before NumPy (and its BLAS) is loaded
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_cpu_multi_thread_eigen={'true' if THREADS > 1 else 'false'}"
                           f" intra_op_parallelism_threads={THREADS}").strip()

import numpy as np  # noqa: E402
from common import print_footer, print_header, print_table  # noqa: E402
from exec_peers import _torch_fns, ort_runner, peer_args, time_contenders, torch_runner  # noqa: E402
from exec_speed_jax import WORKLOADS, Workload  # noqa: E402

import rlx  # noqa: E402

RLX_BACKENDS = {"rlx numpy": ("numpy", {}), "rlx numpy jit": ("numpy", {"kernels": "jit"}),
                "rlx torch": ("torch", {}), "rlx torch inductor": ("torch", {"mode": "inductor"}),
                "rlx onnxruntime": ("onnxruntime", {"threads": THREADS}), "rlx openvino": ("openvino", {"threads": THREADS}),
                "rlx jax": ("jax", {}), "rlx auto": ("auto", {"threads": THREADS, "device": "cpu"})}


def ov_runner(w: Workload):
    """OpenVINO (f32, THREADS threads) on the ``rlx.onnx.export`` model, ``compiled_model(inputs)``; None without openvino."""
    try:
        import openvino
    except ImportError:
        return None
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(rlx.onnx.export(w.graph, w.params).SerializeToString()), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": str(THREADS)})
    return lambda: compiled(w.inputs)[0]


def contenders(key: str, w: Workload, skip_compile: bool) -> dict:
    """name -> zero-argument callable returning the first output as a NumPy array."""
    fns = {}
    for name, (backend, opts) in RLX_BACKENDS.items():
        if skip_compile and "inductor" in name:
            continue
        if backend == "auto":
            opts = {**opts, "inputs": w.inputs}
        try:
            exe = rlx.compile(w.graph, backend=backend, params=w.params, **opts)
        except rlx.RlxError as exc:  # openvino / numba not installed
            print(f"    {name}: {exc}", file=sys.stderr)
            continue
        fns[name] = lambda exe=exe: exe.run(inputs=w.inputs)[0]
    torch, torch_fns = _torch_fns()
    fn = torch_fns[key]
    compiled = None if skip_compile else torch.compile(fn)
    run_torch = torch_runner(torch, fn, w, THREADS)
    fns["torch eager"] = run_torch
    if compiled is not None:
        fns["torch.compile"] = lambda: run_torch(compiled)
    import onnxruntime as ort

    fns["onnxruntime"] = ort_runner(ort, w, THREADS)
    ov = ov_runner(w)
    if ov is not None:
        fns["openvino"] = ov
    import jax

    hand = jax.jit(lambda i, p: w.hand(i, p, jax.lax.Precision.HIGHEST))
    dev = jax.device_put(w.params)
    fns["jax.jit"] = lambda: np.asarray(hand(w.inputs, dev))
    return fns


def main() -> None:
    ap = peer_args(__doc__, "threads for every contender (0 = all cores; default 1)", repeat=9, quick_rounds=3)
    ap.add_argument("--skip-compile", action="store_true", help="leave out the torch.compile / Inductor contenders")
    args = ap.parse_args()
    repeat, sample_s = (3, 0.005) if args.quick else (args.repeat, 0.03)
    import jax
    import onnxruntime
    import torch

    torch.set_num_threads(THREADS)  # before compiling: rlx auto counts the torch backend in only at torch's thread count

    print_header("every rlx backend vs torch eager, torch.compile, onnxruntime, jax.jit (backends_peers.py)",
                 f"numpy {np.__version__}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, jax {jax.__version__}; "
                 f"threads = {THREADS}; medians of {repeat} interleaved rounds, process CPU time per call")
    rng = np.random.default_rng(0)
    ratios: dict[str, list[float]] = {}
    for make in WORKLOADS:
        w = make("f32", rng)
        if args.only and args.only not in w.name:
            continue
        t, errs = time_contenders(w, contenders(make.__name__, w, args.skip_compile), repeat, sample_s)
        base = t["torch eager"].median_cpu
        rows = []
        for k, v in t.items():
            r = v.median_cpu / base
            ratios.setdefault(k, []).append(r)
            rows.append([k, v.median_cpu * 1e3, f"{min(v.cpu) * 1e3:.3g}..{max(v.cpu) * 1e3:.3g}", v.median_wall * 1e3, r,
                         f"{errs[k]:.1e}"])
        print_table(["contender", "ms (cpu)", "spread ms", "wall ms", "/ torch eager", "max rel err vs rlx.run"], rows,
                    title=f"### {w.name}")
    geo = [[k, math.exp(sum(math.log(x) for x in v) / len(v))] for k, v in ratios.items()]
    print_table(["contender", "geomean / torch eager"], geo, title="### geometric mean over the workloads")
    best = min((g for g in geo if g[0].startswith("rlx")), key=lambda g: g[1])
    print(f"\nfastest rlx path: {best[0]} at {best[1]:.2f}x torch eager (target <= 1.0x)")
    print_footer()


if __name__ == "__main__":
    main()
