"""One compiled numpy executable shared by many threads: every caller gets its own answer.

The oracle is ``rlx.run`` evaluated serially beforehand on each thread's distinct input (and,
where the thread passes them, its distinct params); runs overlap because NumPy's matmul and
large ufuncs release the GIL.
"""

from __future__ import annotations

import threading

import numpy as np

import rlx
from rlx.runtime.compile import compile as rlx_compile
from runtime.hammer import hammer as run_threads

THREADS, RUNS = 8, 25


def mlp(n: int | str = 64):
    g = rlx.Graph("mlp_threads")
    x = g.input("x", (n, 128))
    h = g.gelu(x @ g.param("w1", (128, 256)) + g.param("b1", (256,)))
    y = g.softmax(h @ g.param("w2", (256, 64)), axis=-1)
    g.set_outputs([y, g.sum(h, axes=[1])])
    return g


def weights(rng):
    return {"w1": rng.standard_normal((128, 256)).astype(np.float32) * 0.1, "b1": rng.standard_normal(256).astype(np.float32),
            "w2": rng.standard_normal((256, 64)).astype(np.float32) * 0.1}


def same(got, want) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(got, want))


def hammer(run_one, cases):
    """Each thread's ``run_one(case) -> (got, want)`` RUNS times; the wrong answers seen."""
    return run_threads(lambda c: same(*run_one(c)), cases, RUNS)


def test_shared_executable_threads_times_runs_all_correct():
    rng = np.random.default_rng(0)
    g, params = mlp(), weights(rng)
    exe = rlx_compile(g, params=params)
    cases = []
    for _ in range(THREADS):
        feed = {"x": rng.standard_normal((64, 128)).astype(np.float32)}
        cases.append((feed, rlx.run(g, feed, params)))
    wrong = hammer(lambda c: (exe.run(c[0]), c[1]), cases)
    assert wrong == [], f"{len(wrong)} wrong of {THREADS * RUNS}"
    assert 1 <= exe.frames <= THREADS


def test_each_call_uses_its_own_params():
    rng = np.random.default_rng(1)
    g = mlp()
    exe = rlx_compile(g, params=weights(rng))
    cases = []
    for _ in range(THREADS):
        feed, params = {"x": rng.standard_normal((64, 128)).astype(np.float32)}, weights(rng)
        cases.append((feed, params, rlx.run(g, feed, params)))
    wrong = hammer(lambda c: (exe.run(c[0], c[1]), c[2]), cases)
    assert wrong == [], f"{len(wrong)} wrong of {THREADS * RUNS}"


def test_params_bound_later_reach_every_frame():
    rng = np.random.default_rng(2)
    g = mlp()
    exe = rlx_compile(g, params=weights(rng))
    feed = {"x": rng.standard_normal((64, 128)).astype(np.float32)}
    first = rlx.run(g, feed, exe._params)
    hammer(lambda c: (exe.run(c), first), [feed] * 4)  # builds several frames
    new = weights(rng)
    exe.set_params(new)
    want = rlx.run(g, feed, new)
    wrong = hammer(lambda c: (exe.run(c), want), [feed] * 4)
    assert wrong == []


def test_symbolic_batch_specializes_safely_from_threads():
    rng = np.random.default_rng(3)
    g, params = mlp("batch"), weights(rng)
    exe = rlx_compile(g, params=params)
    cases = []
    for t in range(THREADS):
        feed = {"x": rng.standard_normal((8 + t % 3, 128)).astype(np.float32)}
        cases.append((feed, rlx.run(g, feed, params)))
    assert hammer(lambda c: (exe.run(c[0]), c[1]), cases) == []
    assert len(exe._special) == 3


def test_control_flow_bodies_from_threads():
    """The body executors (built on first use, each with its own frame pool) are shared by the threads."""
    g = rlx.Graph("if_threads")
    x, w = g.input("x", (32, 32)), g.param("w", (32, 32))
    then_b, else_b = rlx.Graph("then"), rlx.Graph("else")
    for sub, fn in ((then_b, "tanh"), (else_b, "sigmoid")):
        a, b = sub.input("a", (32, 32)), sub.input("b", (32, 32))
        sub.set_outputs([getattr(sub, fn)(a @ b)])
    g.set_outputs([g.if_([g.input("p", (), "bool"), x, w], then_branch=then_b, else_branch=else_b)])
    rng = np.random.default_rng(4)
    W = rng.standard_normal((32, 32)).astype(np.float32)
    exe = rlx_compile(g, params={"w": W})
    cases = []
    for t in range(THREADS):
        feed = {"x": rng.standard_normal((32, 32)).astype(np.float32), "p": np.array(t % 2 == 0)}
        cases.append((feed, rlx.run(g, feed, {"w": W})))
    assert hammer(lambda c: (exe.run(c[0]), c[1]), cases) == []
    assert len(exe.body_plans) == 2


def test_optimize_plan_and_compile_in_threads_match_serial():
    rng = np.random.default_rng(5)
    graphs = [mlp(16 * (t + 1)) for t in range(4)]
    serial = [rlx.fingerprint(rlx.optimize(g)[0]) for g in graphs]
    feeds = [{"x": rng.standard_normal((16 * (t + 1), 128)).astype(np.float32)} for t in range(4)]
    params = weights(rng)
    results: dict[int, tuple[str, list[np.ndarray]]] = {}

    def build(t: int) -> None:
        opt, _ = rlx.optimize(graphs[t])
        results[t] = (rlx.fingerprint(opt), rlx_compile(rlx.plan(opt), params=params).run(feeds[t]))

    threads = [threading.Thread(target=build, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(4):
        fp, outs = results[t]
        assert fp == serial[t]
        for got, want in zip(outs, rlx.run(graphs[t], feeds[t], params)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
