"""The numpy arena backend vs hand-written NumPy, and its per-node dispatch overhead.

Run: .venv/bin/python benchmarks/exec_speed.py

Cases: x[128,768] @ W[768,768] + b -> gelu; layer_norm over [8,128,768]; attention with
q, k, v [1,12,128,64]; a chain of 1,000 tiny ops. Each figure is the best of several
timed repeats. "hand" is straightforward NumPy written for the case (same formulas as the
reference kernels, temporaries where NumPy needs them); the target is arena <= 1.2x hand.
"""

from __future__ import annotations

import math
import os
import sys
import time

if "--all-threads" not in sys.argv:  # one BLAS thread: steadier figures on a shared machine
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np

import rlx
from rlx.runtime.compile import compile as rlx_compile

try:
    from scipy.special import erf
except ImportError:  # pragma: no cover
    erf = None


# CPU time of this thread (not wall time): a busy shared machine then costs us cache misses, not
# the time other processes hold the core. BLAS runs on this thread (one BLAS thread, see above).
clock = time.thread_time if "--all-threads" not in sys.argv else time.perf_counter


def _number(fn) -> int:
    fn()
    t0 = clock()
    fn()
    return max(1, int(0.02 / max(clock() - t0, 1e-6)))


def best(fn, repeat=7, number=None):
    return interleaved([fn], repeat, number)[0]


def interleaved(fns, repeat=25, number=None):
    """Best time of each function, timed in alternation so that load drift hits all alike."""
    numbers = [number or _number(f) for f in fns]
    out = [math.inf] * len(fns)
    for _ in range(repeat):
        for i, (f, n) in enumerate(zip(fns, numbers)):
            t0 = clock()
            for _ in range(n):
                f()
            out[i] = min(out[i], (clock() - t0) / n)
    return out


def case_mlp(rng):
    g = rlx.Graph("linear_gelu")
    x = g.input("x", (128, 768))
    w = g.param("w", (768, 768))
    b = g.param("b", (768,))
    g.set_outputs([g.gelu(x @ w + b)])
    X = rng.standard_normal((128, 768)).astype(np.float32)
    W = (rng.standard_normal((768, 768)) * 0.03).astype(np.float32)
    B = rng.standard_normal(768).astype(np.float32)
    inv = 1.0 / math.sqrt(2.0)

    def hand():
        h = X @ W
        h += B
        e = erf(h * inv) if erf is not None else np.vectorize(math.erf)(h * inv)
        return 0.5 * h * (1.0 + e.astype(np.float32))

    return g, {"x": X}, {"w": W, "b": B}, hand


def case_layer_norm(rng):
    g = rlx.Graph("layer_norm")
    x = g.input("x", (8, 128, 768))
    gamma, beta = g.param("g", (768,)), g.param("b", (768,))
    g.set_outputs([g.layer_norm(x, gamma, beta, axis=-1, eps=1e-5)])
    X = rng.standard_normal((8, 128, 768)).astype(np.float32)
    G, B = rng.standard_normal(768).astype(np.float32), rng.standard_normal(768).astype(np.float32)

    def hand():
        mu = X.mean(axis=-1, keepdims=True)
        d = X - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        d /= np.sqrt(var + 1e-5)
        d *= G
        d += B
        return d

    return g, {"x": X}, {"g": G, "b": B}, hand


def case_attention(rng):
    g = rlx.Graph("attention")
    q, k, v = (g.input(n, (1, 12, 128, 64)) for n in "qkv")
    g.set_outputs([g.attention(q, k, v, num_heads=12, head_dim=64)])
    Q, K, V = (rng.standard_normal((1, 12, 128, 64)).astype(np.float32) for _ in range(3))
    scale = np.float32(64**-0.5)

    def hand():
        s = np.matmul(Q, K.swapaxes(-1, -2))
        s *= scale
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return s @ V

    return g, {"q": Q, "k": K, "v": V}, {}, hand


def case_chain(rng, n=1000):
    g = rlx.Graph("chain")
    x = g.input("x", (4,))
    one = g.constant(np.float32(1.0))
    h = x
    for i in range(n):
        h = h + one if i % 2 == 0 else h * one
    g.set_outputs([h])
    X = rng.standard_normal(4).astype(np.float32)
    ONE = np.float32(1.0)

    def hand():
        h = X.copy()
        for i in range(n):
            if i % 2 == 0:
                np.add(h, ONE, out=h)
            else:
                np.multiply(h, ONE, out=h)
        return h

    return g, {"x": X}, {}, hand


def main() -> None:
    rng = np.random.default_rng(0)
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "all")
    print(f"numpy {np.__version__}; BLAS threads: {threads}; best of 25 interleaved, thread CPU time; times in ms")
    print("arena exe: rlx.compile(g, backend='numpy') defaults (inputs copied into the arena, outputs written to fresh arrays);")
    print("in-place inputs: the same with inputs='outside' (the caller's input arrays are read where they are)\n")
    print("| case                         | hand NumPy | arena exe | ratio | in-place inputs | ratio | rlx.run (reference) | equal |")
    print("|------------------------------|-----------:|----------:|------:|----------------:|------:|--------------------:|:-----:|")
    for name, build in (("x@W+b -> gelu [128,768]", case_mlp), ("layer_norm [8,128,768]", case_layer_norm),
                        ("attention [1,12,128,64]", case_attention), ("chain of 1000 tiny ops", case_chain)):
        g, feed, params, hand = build(rng)
        exe = rlx_compile(g, backend="numpy", params=params)
        exe_in = rlx_compile(g, backend="numpy", params=params, inputs="outside")
        t_hand, t_exe, t_in = interleaved([hand, lambda exe=exe, feed=feed: exe.run(feed), lambda e=exe_in, feed=feed: e.run(feed)])
        t_ref = best(lambda g=g, feed=feed, params=params: rlx.run(g, feed, params), repeat=3)
        ref = rlx.run(g, feed, params)
        same = all(np.array_equal(a, b) for e in (exe, exe_in) for a, b in zip(e.run(feed), ref))
        print(f"| {name:28s} | {t_hand * 1e3:10.3f} | {t_exe * 1e3:9.3f} | {t_exe / t_hand:5.2f} | {t_in * 1e3:15.3f} "
              f"| {t_in / t_hand:5.2f} | {t_ref * 1e3:19.3f} | {same!s:^5} |", flush=True)
        if name.startswith("chain"):
            n = 1000
            steps = exe._steps

            def loop(steps=steps):
                for s in steps:
                    s()

            t_call = t_exe - interleaved([loop])[0]
            print(f"\nchain: {t_exe / n * 1e6:.2f} us per node through exe.run (kernel included); "
                  f"hand NumPy {t_hand / n * 1e6:.2f} us per ufunc call; "
                  f"dispatch overhead = (arena - hand) / n = {(t_exe - t_hand) / n * 1e6:.2f} us per node; "
                  f"fixed cost per run (feed check, copies) {t_call * 1e6:.1f} us; "
                  f"rlx.run {t_ref / n * 1e6:.2f} us per node")


if __name__ == "__main__":
    main()
