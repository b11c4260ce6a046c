"""rlx on JAX vs hand-written ``jax.jit``: the same computation, the same device, the same process.

Run: .venv/bin/python benchmarks/exec_speed_jax.py [--dtype f32|bf16] [--repeats 31] [--json out.json]

Workloads: x[128,768] @ W[768,768] + b -> gelu; layer_norm over [8,128,768]; attention
with q, k, v [1,12,128,64]; a pre-norm transformer layer (B=1, S=128, D=768, 12 heads,
FFN 3072, causal). "rlx" is ``rlx.compile(graph, backend="jax")`` with params bound on the
device, called with NumPy inputs and returning NumPy outputs; "jax" is the same model
written by hand with ``jax.numpy`` under ``jax.jit``, params on the device, called with the
same NumPy inputs and converted with ``np.asarray``. Both use the same matmul precision.
Each sample times a batch of calls (about 20 ms); rlx and jax samples alternate (the
order flips every round) and the figure is the median per call. Target: rlx/jax <= 1.1.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import rlx
from rlx.runtime.compile import compile as rlx_compile

_NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


@dataclass
class Workload:
    name: str
    graph: rlx.Graph
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    hand: Callable[..., Any]  # hand(inputs, params, precision) -> output array(s)


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(_NP[dtype])


# ------------------------------------------------------------------------ hand-written jax
def _ln(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    d = x - mu
    return d / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + eps) * g + b


def _mm(a, b, precision):
    if a.dtype == jnp.bfloat16:
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)
    return jnp.matmul(a, b, precision=precision)


def _attn(q, k, v, precision, causal=False):
    """q, k, v [B, H, S, D] -> [B, H, S, D]."""
    s = _mm(q, jnp.swapaxes(k, -1, -2), precision) * (q.shape[-1] ** -0.5)
    if causal:
        n = s.shape[-1]
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -1e9)
    return _mm(jax.nn.softmax(s, axis=-1), v, precision)


def _layer(x, p, precision, heads):
    b, s, d = x.shape
    h = _ln(x, p["ln1_g"], p["ln1_b"])

    def split(t):
        return jnp.swapaxes(t.reshape(b, s, heads, d // heads), 1, 2)

    q, k, v = (split(_mm(h, p[n], precision)) for n in ("wq", "wk", "wv"))
    a = jnp.swapaxes(_attn(q, k, v, precision, causal=True), 1, 2).reshape(b, s, d)
    x1 = x + _mm(a, p["wo"], precision)
    h2 = _ln(x1, p["ln2_g"], p["ln2_b"])
    f = jax.nn.gelu(_mm(h2, p["w1"], precision) + p["b1"], approximate=False)
    return x1 + _mm(f, p["w2"], precision) + p["b2"]


# ------------------------------------------------------------------------------ workloads
def matmul_gelu(dtype: str, rng) -> Workload:
    g = rlx.Graph("matmul_bias_gelu")
    x, w, b = g.input("x", (128, 768), dtype), g.param("w", (768, 768), dtype), g.param("b", (768,), dtype)
    g.set_outputs([g.gelu(g.matmul(x, w) + b)])
    return Workload("x@W+b->gelu [128,768]x[768,768]", g, {"x": _rand(rng, (128, 768), dtype)},
                    {"w": _rand(rng, (768, 768), dtype, 0.03), "b": _rand(rng, (768,), dtype)},
                    lambda i, p, prec: jax.nn.gelu(_mm(i["x"], p["w"], prec) + p["b"], approximate=False))


def layer_norm(dtype: str, rng) -> Workload:
    g = rlx.Graph("layer_norm")
    x = g.input("x", (8, 128, 768), dtype)
    g.set_outputs([g.layer_norm(x, g.param("g", (768,), dtype), g.param("b", (768,), dtype), axis=-1, eps=1e-5)])
    return Workload("layer_norm [8,128,768]", g, {"x": _rand(rng, (8, 128, 768), dtype)},
                    {"g": _rand(rng, (768,), dtype), "b": _rand(rng, (768,), dtype)},
                    lambda i, p, prec: _ln(i["x"], p["g"], p["b"]))


def attention(dtype: str, rng) -> Workload:
    g = rlx.Graph("attention")
    q, k, v = (g.input(n, (1, 12, 128, 64), dtype) for n in "qkv")
    g.set_outputs([g.attention(q, k, v, num_heads=12, head_dim=64)])
    return Workload("attention q,k,v [1,12,128,64]", g, {n: _rand(rng, (1, 12, 128, 64), dtype) for n in "qkv"}, {},
                    lambda i, p, prec: _attn(i["q"], i["k"], i["v"], prec))


LAYER_PARAMS = {"ln1_g": (768,), "ln1_b": (768,), "wq": (768, 768), "wk": (768, 768), "wv": (768, 768), "wo": (768, 768),
                "ln2_g": (768,), "ln2_b": (768,), "w1": (768, 3072), "b1": (3072,), "w2": (3072, 768), "b2": (768,)}


def transformer_graph(dtype: str, batch: int = 1, seq: int = 128, d: int = 768, heads: int = 12) -> rlx.Graph:
    """A pre-norm transformer layer from MIR primitives (the hand-written ``_layer``, op for op)."""
    g = rlx.Graph("transformer_layer")
    x = g.input("x", (batch, seq, d), dtype)
    p = {n: g.param(n, s, dtype) for n, s in LAYER_PARAMS.items()}
    h = g.layer_norm(x, p["ln1_g"], p["ln1_b"])
    a = g.attention(h @ p["wq"], h @ p["wk"], h @ p["wv"], num_heads=heads, head_dim=d // heads, mask_kind="causal")
    x1 = x + a @ p["wo"]
    h2 = g.layer_norm(x1, p["ln2_g"], p["ln2_b"])
    g.set_outputs([x1 + g.gelu(h2 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]])
    return g


def transformer(dtype: str, rng, batch: int = 1) -> Workload:
    params = {}
    for n, s in LAYER_PARAMS.items():
        value = _rand(rng, s, dtype, 0.02) if len(s) == 2 else _rand(rng, s, dtype, 0.1) + (1 if n.endswith("_g") else 0)
        params[n] = value.astype(_NP[dtype])
    return Workload(f"transformer layer [{batch},128,768] h12 ffn3072", transformer_graph(dtype, batch),
                    {"x": _rand(rng, (batch, 128, 768), dtype)}, params,
                    lambda i, p, prec: _layer(i["x"], p, prec, 12))


WORKLOADS = (matmul_gelu, layer_norm, attention, transformer)


# -------------------------------------------------------------------------------- timing
def _per_call(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def compare(w: Workload, repeats: int, precision: str | None, device: Any = None) -> dict[str, Any]:
    prec = {"highest": jax.lax.Precision.HIGHEST, None: None, "default": None}[precision]
    exe = rlx_compile(w.graph, backend="jax", params=w.params, precision=precision, device=device)
    dev_params = jax.device_put(w.params, device) if device is not None else jax.device_put(w.params)
    hand = jax.jit(lambda i, p: w.hand(i, p, prec))

    def run_rlx():
        return exe.run(inputs=w.inputs)[0]

    def run_jax():
        return np.asarray(hand(w.inputs, dev_params))

    a, b = run_rlx(), run_jax()  # compile both
    err = float(np.max(np.abs(a.astype(np.float32) - b.astype(np.float32))) / (np.max(np.abs(b.astype(np.float32))) + 1e-30))
    once = min(_per_call(run_rlx, 3), _per_call(run_jax, 3))
    n = max(1, min(2000, math.ceil(0.02 / max(once, 1e-7))))
    for _ in range(2):
        _per_call(run_rlx, n), _per_call(run_jax, n)
    rs, js = [], []
    for r in range(repeats):
        if r % 2:
            js.append(_per_call(run_jax, n))
            rs.append(_per_call(run_rlx, n))
        else:
            rs.append(_per_call(run_rlx, n))
            js.append(_per_call(run_jax, n))
    rlx_t, jax_t = statistics.median(rs), statistics.median(js)
    ratios = [x / y for x, y in zip(rs, js)]
    return {"workload": w.name, "rlx_ms": rlx_t * 1e3, "jax_ms": jax_t * 1e3, "ratio": rlx_t / jax_t,
            "ratio_of_pairs": statistics.median(ratios), "calls_per_sample": n, "rel_err": err}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="f32", choices=sorted(_NP))
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--precision", default="highest", choices=["highest", "default"])
    ap.add_argument("--only", default=None, help="substring of the workload names to run")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--target", type=float, default=1.1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.device_kind} ({jax.default_backend()}), dtype {args.dtype}, precision {args.precision}")
    print(f"{'workload':42s} {'rlx ms':>9s} {'jax ms':>9s} {'rlx/jax':>8s} {'rel err':>9s}")
    results, ok = [], True
    for make in WORKLOADS:
        w = make(args.dtype, rng)
        if args.only and args.only not in w.name:
            continue
        r = compare(w, args.repeats, args.precision)
        r["dtype"] = args.dtype
        results.append(r)
        flag = "ok" if r["ratio"] <= args.target else "SLOW"
        ok &= flag == "ok"
        print(f"{r['workload']:42s} {r['rlx_ms']:9.3f} {r['jax_ms']:9.3f} {r['ratio']:8.3f} {r['rel_err']:9.1e}  {flag}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(jax.devices()[0]), "results": results}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
