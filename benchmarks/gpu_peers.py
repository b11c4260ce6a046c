"""The GPU half of issue #22 in one prepared script: the torch backend vs torch eager and torch.compile,
then the JAX backend vs jax.jit (jax_gpu.py), on one NVIDIA GPU.

Run on a CUDA machine (its own python with torch and jax; rlx needs only numpy and ml_dtypes besides):

    PYTHONPATH=src python3 benchmarks/gpu_peers.py [--repeats 31] [--json gpu.json] [--skip-jax] [--skip-parity] [--skip-compile]

``--allow-cpu`` runs it end to end on the CPU when no GPU is visible (a dry run of the script).

torch part, in f32 and bf16, on the exec_speed_jax workloads (x[128,768] @ W + b -> gelu; layer_norm
[8,128,768]; attention [1,12,128,64]; a pre-norm transformer layer at batch 1 and 8): ``rlx torch`` is
``rlx.compile(graph, backend="torch", device="cuda")`` and ``rlx inductor`` the same with
``mode="inductor"``, both fed device tensors and read with ``exe.run_device`` (inputs and weights stay on
the GPU); ``torch eager`` is the model written with ``torch.nn.functional`` (exec_peers) under
``inference_mode`` on the same device tensors, ``torch.compile`` that function compiled. Each sample
times a batch of calls (about 20 ms) closed by ``torch.cuda.synchronize()``; contenders alternate, the
order rotating every round; figures are medians per call. In f32 TF32 is off for every contender
(``--precision default`` turns it on for all). Targets: rlx torch <= 1.05x torch eager, or rlx inductor
faster than torch eager; the JAX part's rlx / jax.jit <= 1.05 (``--target``).

Exit status 0 when every target is met (and jax parity holds), 1 when one is missed, 2 with no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import torch
from exec_peers import _torch_fns
from exec_speed_jax import WORKLOADS, Workload, transformer

import rlx
from rlx.backends.torch_backend.executable import to_torch

CASES = [*((m.__name__, m) for m in WORKLOADS), ("transformer", lambda dtype, rng: transformer(dtype, rng, batch=8))]


def _sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _per_call(fn: Callable[[], Any], n: int, sync: Callable[[], None]) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int, sync: Callable[[], None]) -> dict[str, float]:
    """Median seconds per call of each contender, samples of ~20 ms alternating in a rotating order."""
    once = min(_per_call(f, 3, sync) for f in fns.values())
    n = max(1, min(2000, math.ceil(0.02 / max(once, 1e-7))))
    for f in fns.values():  # warm caches and clocks
        _per_call(f, n, sync)
    names, samples = list(fns), {k: [] for k in fns}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            samples[k].append(_per_call(fns[k], n, sync))
    return {k: statistics.median(v) for k, v in samples.items()}


def torch_contenders(key: str, w: Workload, device: torch.device, skip_compile: bool) -> dict[str, Callable[[], torch.Tensor]]:
    dtypes = {v.name: v.node.dtype for v in [*w.graph.inputs().values(), *w.graph.params().values()]}
    feed = {k: to_torch(v, dtypes[k], device) for k, v in w.inputs.items()}
    params = {k: to_torch(v, dtypes[k], device) for k, v in w.params.items()}
    fns: dict[str, Callable[[], torch.Tensor]] = {}
    modes = {"rlx torch": "eager"} if skip_compile else {"rlx torch": "eager", "rlx inductor": "inductor"}
    for name, mode in modes.items():
        exe = rlx.compile(w.graph, backend="torch", device=str(device), mode=mode, params=w.params)
        fns[name] = lambda exe=exe: exe.run_device(feed)[0]
    _, hand = _torch_fns()
    fn = hand[key]

    def eager(f=fn):
        with torch.inference_mode():
            return f(feed, params)

    fns["torch eager"] = eager
    if not skip_compile:
        compiled = torch.compile(fn)
        fns["torch.compile"] = lambda: eager(compiled)
    return fns


def run_torch(device: torch.device, repeats: int, skip_compile: bool) -> tuple[list[dict], bool]:
    rng = np.random.default_rng(0)
    sync, results, ok = _sync(device), [], True
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}")
    print(f"{'dtype':5s} {'workload':42s} {'contender':14s} {'ms':>9s} {'/ eager':>8s} {'/ compile':>9s} {'rel err':>8s}")
    for dtype in ("f32", "bf16"):
        for key, make in CASES:
            w = make(dtype, rng)
            fns = torch_contenders(key, w, device, skip_compile)
            ref = fns["torch eager"]().float()
            errs = {k: float((f().float() - ref).abs().max() / (ref.abs().max() + 1e-30)) for k, f in fns.items()}
            t = interleaved(fns, repeats, sync)
            eager_ratio = t["rlx torch"] / t["torch eager"]
            inductor_ratio = t["rlx inductor"] / t["torch eager"] if "rlx inductor" in t else math.inf
            met = eager_ratio <= 1.05 or inductor_ratio < 1.0
            ok &= met
            for k, s in t.items():
                vs_compile = s / t["torch.compile"] if "torch.compile" in t else math.nan
                print(f"{dtype:5s} {w.name:42s} {k:14s} {s * 1e3:9.4f} {s / t['torch eager']:8.3f} {vs_compile:9.3f} {errs[k]:8.1e}")
            print(f"{'':48s} target (rlx torch <= 1.05x eager, or inductor < 1.0x): {'met' if met else 'MISSED'}")
            results.append({"dtype": dtype, "workload": w.name, "ms": {k: s * 1e3 for k, s in t.items()}, "rel_err": errs,
                            "rlx_torch_vs_eager": eager_ratio, "rlx_inductor_vs_eager": inductor_ratio, "met": met})
    return results, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--precision", default="highest", choices=["highest", "default"])
    ap.add_argument("--json", default=None, help="write every figure here")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-parity", action="store_true", help="leave out jax_gpu.py's op parity sweep")
    ap.add_argument("--skip-compile", action="store_true", help="leave out Inductor and torch.compile")
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU when no GPU is visible (a dry run)")
    ap.add_argument("--target", type=float, default=1.05, help="rlx / jax.jit target of the JAX part")
    args = ap.parse_args(argv)
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif args.allow_cpu:
        device = torch.device("cpu")
    else:
        print("no CUDA device visible to torch; pass --allow-cpu for a dry run on the CPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.precision == "default"
    report: dict[str, Any] = {"device": str(device), "torch": torch.__version__}
    report["torch_results"], ok = run_torch(device, args.repeats, args.skip_compile)
    status = 0 if ok else 1
    if not args.skip_jax:
        import jax_gpu

        jax_argv = ["--repeats", str(args.repeats), "--precision", args.precision, "--target", str(args.target)]
        jax_argv += ["--allow-cpu"] if args.allow_cpu else []
        jax_argv += ["--skip-parity"] if args.skip_parity else []
        jax_argv += ["--json", args.json + ".jax.json"] if args.json else []
        jax_status = jax_gpu.main(jax_argv)
        report["jax_status"] = jax_status
        status = max(status, jax_status)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
