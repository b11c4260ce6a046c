"""The numpy arena backend vs hand-written NumPy, and its per-node dispatch overhead.

Run: .venv/bin/python benchmarks/exec_speed.py

Cases: x[128,768] @ W[768,768] + b -> gelu; layer_norm over [8,128,768]; attention with
q, k, v [1,12,128,64]; a chain of 1,000 tiny ops. Each figure is the median of 25 timed
repeats, interleaved with the other columns of its row so that load drift hits all alike;
a ratio is the median of the per-repeat ratios, with its interquartile range. "hand" is
straightforward NumPy written for the case (same formulas as the reference kernels,
temporaries where NumPy needs them); the target is arena <= 1.2x hand.
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
    return min(timings([fn], repeat, number)[0])


def timings(fns, repeat=25, number=None):
    """Per-repeat times of each function, timed in alternation so that load drift hits all alike."""
    numbers = [number or _number(f) for f in fns]
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, (f, n) in enumerate(zip(fns, numbers)):
            t0 = clock()
            for _ in range(n):
                f()
            out[i].append((clock() - t0) / n)
    return out


def interleaved(fns, repeat=25, number=None):
    """Median time of each function, timed in alternation."""
    return [float(np.median(t)) for t in timings(fns, repeat, number)]


def ratio(times, base):
    """Median and interquartile range of the per-repeat ratios times / base."""
    r = np.asarray(times) / np.asarray(base)
    q1, med, q3 = np.percentile(r, [25, 50, 75])
    return f"{med:4.2f} [{q1:4.2f}-{q3:4.2f}]"


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
        e = erf(h * inv) if erf is not None else np.vectorize(math.erf, otypes=[np.float32])(h * inv)
        return 0.5 * h * (1.0 + e)

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
    print(f"numpy {np.__version__}; BLAS threads: {threads}; median of 25 interleaved repeats, thread CPU time; times in ms")
    print("arena exe: rlx.compile(g, backend='numpy') defaults (inputs read in place, outputs written to fresh arrays);")
    print("copied inputs: the same with inputs='arena' (each run copies the inputs into their arena slots)\n")
    print("| case                         | hand NumPy | arena exe | ratio [IQR]      | copied inputs | ratio [IQR]      "
          "| rlx.run (reference) | equal |")
    print("|------------------------------|-----------:|----------:|:-----------------|--------------:|:-----------------"
          "|--------------------:|:-----:|")
    for name, build in (("x@W+b -> gelu [128,768]", case_mlp), ("layer_norm [8,128,768]", case_layer_norm),
                        ("attention [1,12,128,64]", case_attention), ("chain of 1000 tiny ops", case_chain)):
        g, feed, params, hand = build(rng)
        exe = rlx_compile(g, backend="numpy", params=params)
        exe_cp = rlx_compile(g, backend="numpy", params=params, inputs="arena")
        hs, es, cs = timings([hand, lambda exe=exe, feed=feed: exe.run(feed), lambda e=exe_cp, feed=feed: e.run(feed)])
        t_hand, t_exe, t_cp = (float(np.median(t)) for t in (hs, es, cs))
        t_ref = best(lambda g=g, feed=feed, params=params: rlx.run(g, feed, params), repeat=3)
        ref = rlx.run(g, feed, params)
        same = all(np.array_equal(a, b) for e in (exe, exe_cp) for a, b in zip(e.run(feed), ref))
        print(f"| {name:28s} | {t_hand * 1e3:10.3f} | {t_exe * 1e3:9.3f} | {ratio(es, hs):16s} | {t_cp * 1e3:13.3f} "
              f"| {ratio(cs, hs):16s} | {t_ref * 1e3:19.3f} | {same!s:^5} |", flush=True)
        if name.startswith("chain"):
            n = 1000
            frame, fed = exe._free[0], {nid: feed[name] for name, nid in exe._input_ids}

            def loop(exe=exe, frame=frame, fed=fed):  # one frame's run: the nodes, without the feed check and the frame pool
                exe._run_frame(frame, fed)

            t_call = t_exe - interleaved([loop])[0]
            print(f"\nchain: {t_exe / n * 1e6:.2f} us per node through exe.run (kernel included); "
                  f"hand NumPy {t_hand / n * 1e6:.2f} us per ufunc call; "
                  f"dispatch overhead = (arena - hand) / n = {(t_exe - t_hand) / n * 1e6:.2f} us per node; "
                  f"fixed cost per run (feed check, frame pool) {t_call * 1e6:.1f} us; "
                  f"rlx.run {t_ref / n * 1e6:.2f} us per node")


if __name__ == "__main__":
    main()
