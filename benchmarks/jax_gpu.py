"""The JAX backend on a CUDA GPU: op parity on the device, then rlx-on-jax vs hand-written jax.jit.

Run (on a machine where ``jax.devices("gpu")`` is not empty; needs ``jax[cuda12]``):

    .venv/bin/python benchmarks/jax_gpu.py [--repeats 51] [--json gpu.json] [--skip-parity]

1. Parity: every op case of tests/ops (rebuilt in float32, as tests/backends/test_jax_parity.py
   does) is compiled for the GPU and compared with ``rlx.run`` on the host; mismatches beyond
   rtol = atol = 1e-4 are listed (GPU transcendental functions differ from NumPy's in the last
   bits; matmuls use precision "highest", so no TF32).
2. Speed, in f32 and bf16: x[128,768] @ W[768,768] + b -> gelu; layer_norm over [8,128,768];
   attention q, k, v [1,12,128,64]; a pre-norm transformer layer at batch 1 and batch 8
   (S=128, D=768, 12 heads, FFN 3072). Same timing rules as exec_speed_jax.py: interleaved
   samples, median per call, target rlx/jax <= 1.1. In f32 both sides use matmul precision
   "highest" (pass --precision default to let both use the platform default, e.g. TF32).

Exit status 0 when every ratio meets the target and parity holds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

import jax
import numpy as np
from exec_speed_jax import WORKLOADS, compare, transformer

import rlx
from rlx.runtime.compile import compile as rlx_compile


def gpu_device():
    try:
        devices = jax.devices("gpu")
    except RuntimeError:
        devices = []
    return devices[0] if devices else None


def parity(device, rtol: float = 1e-4, atol: float = 1e-4, batch: int = 40) -> list[str]:
    """Op cases (float32) compiled for ``device`` vs rlx.run; returns the mismatching case ids with the error."""
    from backends.jax_cases import f32_variant, merge
    from opcases import collect

    cases = collect().cases
    failures: list[str] = []
    for start in range(0, len(cases), batch):
        chunk = cases[start : start + batch]
        built = [(c, *f32_variant(c)) for c in chunk]
        merged, renames, spans = merge([b[1] for b in built], name="gpu_parity")
        inputs, params = {}, {}
        for (_, _, ins, ps), names in zip(built, renames):
            inputs.update({names[k]: v for k, v in ins.items()})
            params.update({names[k]: v for k, v in ps.items()})
        try:
            got = rlx_compile(merged, backend="jax", device=device).run(inputs=inputs, params=params)
        except Exception as exc:  # report and go on: one bad lowering must not hide the others
            failures.append(f"batch {chunk[0].id}..{chunk[-1].id}: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        for (case, g, ins, ps), span in zip(built, spans):
            for a, b in zip(got[span], rlx.run(g, ins, ps)):
                if a.dtype != b.dtype or a.shape != b.shape:
                    failures.append(f"{case.id}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
                elif a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
                    kind = np.complex128 if a.dtype.kind == "c" else np.float64
                    x, y = a.astype(kind), b.astype(kind)
                    bad = ~np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
                    if bad.any():
                        failures.append(f"{case.id}: {int(bad.sum())} of {bad.size} differ, max |diff| {np.nanmax(np.abs(x - y)):.3g}")
                elif not np.array_equal(a, b):
                    failures.append(f"{case.id}: integer / bool results differ")
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=51)
    ap.add_argument("--precision", default="highest", choices=["highest", "default"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-parity", action="store_true")
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no GPU (a dry run of this script)")
    ap.add_argument("--target", type=float, default=1.1)
    args = ap.parse_args(argv)
    device = gpu_device()
    if device is None:
        if not args.allow_cpu:
            print("no GPU visible to jax (jax.devices('gpu') is empty); install jax[cuda12] or pass --allow-cpu", file=sys.stderr)
            return 2
        device = jax.devices("cpu")[0]
    print(f"jax {jax.__version__}, device {device} ({device.device_kind})")
    report: dict = {"device": str(device), "device_kind": device.device_kind, "jax": jax.__version__}
    ok = True
    if not args.skip_parity:
        t0 = time.perf_counter()
        failures = parity(device)
        report["parity_failures"] = failures
        print(f"parity: {len(failures)} mismatching op case(s) ({time.perf_counter() - t0:.1f} s)")
        for f in failures:
            print("  ", f)
        ok &= not failures
    rng = np.random.default_rng(0)
    results = []
    print(f"{'dtype':5s} {'workload':42s} {'rlx ms':>9s} {'jax ms':>9s} {'rlx/jax':>8s} {'rel err':>9s}")
    for dtype in ("f32", "bf16"):
        makers = [*WORKLOADS, lambda d, r: transformer(d, r, batch=8)]
        for make in makers:
            w = make(dtype, rng)
            r = compare(w, args.repeats, args.precision, device=device)
            r["dtype"] = dtype
            results.append(r)
            flag = "ok" if r["ratio"] <= args.target else "SLOW"
            ok &= flag == "ok"
            print(f"{dtype:5s} {r['workload']:42s} {r['rlx_ms']:9.3f} {r['jax_ms']:9.3f} {r['ratio']:8.3f} {r['rel_err']:9.1e}  {flag}")
    report["results"] = results
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
