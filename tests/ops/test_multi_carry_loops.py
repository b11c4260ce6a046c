"""``while_`` and ``scan`` with several carries as ONE multi-result node: the body runs once per
iteration (counted through a custom op whose kernel counts its calls), on the reference
interpreter, the arena executor and after the optimizer; results match a Python loop;
gradients match central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from opcases import sub

CALLS = [0]


@pytest.fixture
def counter():
    """A custom identity op ``count_calls`` whose kernel counts its executions."""

    def kernel(args, attrs, out):
        CALLS[0] += 1
        return args[0]

    rlx.custom_op("count_calls", operands=("x",), infer=lambda ins, attrs: ins[0], kernel=kernel,
                  vjp=lambda ctx, node, ct: [ct], jvp=lambda ctx, node, t: t[0], batch="elementwise",
                  doc="identity that counts its kernel calls (tests)")
    CALLS[0] = 0
    yield CALLS
    rlx.unregister_custom_op("count_calls")


pytestmark = pytest.mark.usefixtures("counter")  # every graph here calls count_calls

SIG = [("i", (), "i32"), ("a", (3,), "f64"), ("b", (3,), "f64")]


def _loop_graph(max_iterations=None) -> rlx.Graph:
    cond = sub("cond", SIG, lambda h, i, a, b: h.lt(i, h.scalar(5, rlx.i32)))
    body = sub("body", SIG, lambda h, i, a, b: [i + 1, h.count_calls(a * 0.5 + b), h.sin(b) + a])
    g = rlx.Graph("three_carries")
    i0 = g.constant(np.array(0, np.int32))
    a, b = g.input("a", (3,), "f64"), g.input("b", (3,), "f64")
    i, fa, fb = g.while_([i0, a, b], cond=cond, body=body, max_iterations=max_iterations, output=None)
    g.set_outputs([i, fa, fb])
    return g


def _python_loop(a, b):
    i = 0
    while i < 5:
        i, a, b = i + 1, a * 0.5 + b, np.sin(b) + a
    return i, a, b


A = np.array([0.3, -1.2, 2.0])
B = np.array([1.0, 0.5, -0.7])


def test_while_three_carries_is_one_node_and_runs_its_body_once_per_iteration(counter):
    g = _loop_graph()
    assert [n.op for n in g.nodes].count("while_") == 1 and g.nodes[3].num_results == 3
    want = _python_loop(A, B)
    for name, run in (("reference", lambda: rlx.run(g, {"a": A, "b": B})),
                      ("arena", lambda: rlx.compile(g).run({"a": A, "b": B})),
                      ("optimized", lambda: rlx.run(rlx.optimize(g)[0], {"a": A, "b": B}))):
        counter[0] = 0
        got = run()
        assert counter[0] == 5, f"{name}: the body ran {counter[0]} times for 5 iterations"
        assert int(got[0]) == want[0]
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12)


def test_while_text_and_json_round_trip():
    g = _loop_graph()
    assert rlx.parse(str(g)) == g
    assert rlx.from_json(rlx.to_json(g)) == g


def test_while_one_output_still_selects_a_carry():
    g = _loop_graph()
    node = g.nodes[3]
    h = rlx.Graph("one")
    i0 = h.constant(np.array(0, np.int32))
    a, b = h.input("a", (3,), "f64"), h.input("b", (3,), "f64")
    fb = h.while_([i0, a, b], cond=node.attrs["cond"], body=node.attrs["body"], output=2)
    h.set_outputs([fb])
    np.testing.assert_allclose(rlx.run(h, {"a": A, "b": B})[0], _python_loop(A, B)[2], rtol=1e-12)


def _fd(g, feed, name, eps=1e-6):
    grad = np.zeros_like(feed[name])
    for idx in np.ndindex(grad.shape):
        hi, lo = dict(feed), dict(feed)
        hi[name], lo[name] = feed[name].copy(), feed[name].copy()
        hi[name][idx] += eps
        lo[name][idx] -= eps
        grad[idx] = (rlx.run(g, hi)[0] - rlx.run(g, lo)[0]) / (2 * eps)
    return grad


def test_while_gradient_through_two_of_three_results(counter):
    loop = _loop_graph(max_iterations=8)
    g = rlx.Graph("loss")
    a, b = g.input("a", (3,), "f64"), g.input("b", (3,), "f64")
    node = loop.nodes[3]
    _, fa, fb = g.while_([g.constant(np.array(0, np.int32)), a, b], cond=node.attrs["cond"], body=node.attrs["body"],
                         max_iterations=8, output=None)
    g.set_outputs([g.sum(fa * fa) + g.sum(g.cos(fb))])
    bwd = rlx.grad(g, ["a", "b"])
    rlx.verify(bwd)
    da, db = rlx.run(bwd, {"a": A, "b": B, "d_output": np.array(1.0)})
    np.testing.assert_allclose(da, _fd(g, {"a": A, "b": B}, "a"), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, _fd(g, {"a": A, "b": B}, "b"), rtol=1e-6, atol=1e-8)
    fwd = rlx.jvp(g, ["a"])
    t = np.array([1.0, -2.0, 0.5])
    _, tan = rlx.run(fwd, {"a": A, "b": B, "t_a": t})
    np.testing.assert_allclose(tan, np.sum(_fd(g, {"a": A, "b": B}, "a") * t), rtol=1e-6)


def test_while_vmap_matches_a_loop():
    g = _loop_graph()
    batched = rlx.vmap(g, {"a": 0, "b": 0}, batch_size=2)
    As, Bs = np.stack([A, -A]), np.stack([B, 2 * B])
    got = rlx.run(batched, {"a": As, "b": Bs})
    for k in range(2):
        want = _python_loop(As[k], Bs[k])
        np.testing.assert_allclose(got[1][k], want[1], rtol=1e-12)
        np.testing.assert_allclose(got[2][k], want[2], rtol=1e-12)


# ----------------------------------------------------------------------------------- scan
XS = np.random.default_rng(3).standard_normal((4, 3))
W = np.array([0.5, -0.3, 0.8])
H0 = np.array([0.1, 0.2, -0.1])


def _scan_graph(save_trajectory=False) -> rlx.Graph:
    step = [("h", (3,), "f64"), ("c", (3,), "f64"), ("w", (3,), "f64"), ("x", (3,), "f64")]
    body = sub("step", step, lambda s, h, c, w, x: [s.tanh(s.count_calls(h) * w + x), c + h * x])
    g = rlx.Graph("two_carries")
    h0, w, xs = g.input("h0", (3,), "f64"), g.input("w", (3,), "f64"), g.input("xs", (4, 3), "f64")
    c0 = g.constant(np.zeros(3))
    h, c = g.scan(h0, c0, w, xs, body=body, length=4, num_carries=2, num_bcast=1, num_xs=1, save_trajectory=save_trajectory)
    g.set_outputs([h, c])
    return g


def _python_scan(h, w, xs):
    c = np.zeros(3)
    hs, cs = [], []
    for x in xs:
        h, c = np.tanh(h * w + x), c + h * x
        hs.append(h)
        cs.append(c)
    return h, c, np.stack(hs), np.stack(cs)


def test_scan_two_carries_is_one_node_and_runs_its_body_once_per_step(counter):
    h, c, hs, cs = _python_scan(H0, W, XS)
    feed = {"h0": H0, "w": W, "xs": XS}
    for save, want in ((False, (h, c)), (True, (hs, cs))):
        g = _scan_graph(save)
        assert [n.op for n in g.nodes].count("scan") == 1
        assert rlx.parse(str(g)) == g and rlx.from_json(rlx.to_json(g)) == g
        for run in (lambda g=g: rlx.run(g, feed), lambda g=g: rlx.compile(g).run(feed)):
            counter[0] = 0
            got = run()
            assert counter[0] == 4
            for o, w in zip(got, want):
                np.testing.assert_allclose(o, w, rtol=1e-12)


def test_scan_two_carries_gradient(counter):
    g0 = _scan_graph(True)
    g = rlx.Graph("scan_loss")
    h0, w, xs = g.input("h0", (3,), "f64"), g.input("w", (3,), "f64"), g.input("xs", (4, 3), "f64")
    node = g0.nodes[4]
    hs, cs = g.scan(h0, g.constant(np.zeros(3)), w, xs, **dict(node.attrs))
    g.set_outputs([g.sum(hs * hs) + g.sum(g.sin(cs))])
    feed = {"h0": H0, "w": W, "xs": XS}
    grads = rlx.run(rlx.grad(g, ["h0", "w", "xs"]), {**feed, "d_output": np.array(1.0)})
    for name, got in zip(("h0", "w", "xs"), grads):
        np.testing.assert_allclose(got, _fd(g, feed, name), rtol=1e-6, atol=1e-8, err_msg=name)
