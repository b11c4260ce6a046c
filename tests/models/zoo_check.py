"""The checks every zoo model goes through, with torch eager as the oracle.

* import through ``rlx.torch.import_module`` (verified);
* ``rlx.run`` and optimize → plan → compile(numpy) against torch: max|a − b| / max|b| per output;
* outputs vary across inputs (so parity is not met by a constant);
* ``grad_with_loss`` of ``sum(output · R)`` (R fixed random) against ``torch.autograd`` for every
  parameter the graph reads; each parameter's error is relative to its gradient's largest entry, or to
  1e-3 of the largest gradient entry of the model when that is larger (gradients that are zero in exact
  arithmetic, such as a key bias under softmax, hold only rounding noise).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

import rlx
import rlx.torch

RUN_TOL = 1e-4
GRAD_TOL = 1e-3


@dataclass
class Imported:
    graph: rlx.Graph
    params: dict[str, np.ndarray]
    feed: dict[str, np.ndarray]
    module: torch.nn.Module
    args: tuple
    kwargs: dict
    seconds: float
    report: dict = field(default_factory=dict)


def rel_error(got: np.ndarray, want: np.ndarray, floor: float = 0.0) -> float:
    """max|got − want| / max|want| (the scale at least ``floor``)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, floor)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    return err / scale if scale else err


def _float_leaves(out) -> list[torch.Tensor]:
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def import_entry(entry) -> Imported:
    module, args, kwargs = entry.build()
    start = time.perf_counter()
    g, params = rlx.torch.import_module(module, args, kwargs=kwargs)
    seconds = time.perf_counter() - start
    rlx.verify(g)
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    feed = {name: t.numpy() for name, t in zip(g.inputs(), tensors)}
    return Imported(g, params, feed, module, args, kwargs, seconds)


def torch_outputs(m: Imported) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in _float_leaves(m.module(*m.args, **m.kwargs))]


def _other_feed(feed: dict[str, np.ndarray], vocab: int) -> dict[str, np.ndarray]:
    """A second input: floats shifted by noise, token ids remapped, masks kept."""
    rng = np.random.default_rng(5)
    out = {}
    for name, a in feed.items():
        if a.dtype.kind == "f":
            out[name] = (a + rng.standard_normal(a.shape)).astype(a.dtype)
        elif "mask" in name or a.dtype == np.bool_:
            out[name] = a
        else:
            out[name] = (a * 7 + 3) % vocab
    return out


def check_forward(m: Imported, vocab: int) -> None:
    """rlx.run and the compiled NumPy plan against torch; outputs depend on the input."""
    want = torch_outputs(m)
    got = rlx.run(m.graph, m.feed, m.params)
    assert len(got) == len(want), f"{len(got)} outputs, torch gives {len(want)}"
    for o, w in zip(got, want):
        assert o.shape == w.shape and o.dtype == w.dtype, (o.shape, o.dtype, w.shape, w.dtype)
    m.report["run"] = max(rel_error(o, w) for o, w in zip(got, want))
    assert m.report["run"] <= RUN_TOL, m.report
    optimized, _ = rlx.optimize(m.graph)
    exe = rlx.compile(rlx.plan(optimized), backend="numpy")
    compiled = exe.run(inputs=m.feed, params=m.params)
    m.report["compiled"] = max(rel_error(o, w) for o, w in zip(compiled, want))
    assert m.report["compiled"] <= RUN_TOL, m.report
    other = rlx.run(m.graph, _other_feed(m.feed, vocab), m.params)
    moved = [rel_error(a, b) for a, b, w in zip(other, got, want) if w.dtype.kind == "f"]
    assert moved and max(moved) > 1e-3, f"outputs do not depend on the input ({moved})"


def check_gradients(m: Imported) -> None:
    """d/dθ sum_k <out_k, R_k> for every parameter the graph reads, against torch.autograd."""
    rng = np.random.default_rng(11)
    g = m.graph
    outs = [v for v in g.outputs if v.dtype.is_float]
    weights = [rng.standard_normal(tuple(v.shape)).astype(v.dtype.numpy) for v in outs]
    loss = None
    for v, w in zip(outs, weights):
        term = g.reduce(v * g.constant(w), op="sum", axes=list(range(len(v.shape))), keep_dim=False)
        loss = term if loss is None else loss + term
    g.set_outputs([loss])
    trainable = {n: p for n, p in m.module.named_parameters() if p.requires_grad}  # frozen tables (sinusoids): none
    names = [n for n in g.params() if n in trainable]
    bwd = rlx.grad_with_loss(g, wrt=names)
    rlx.verify(bwd)
    got = rlx.run(bwd, {**m.feed, "d_output": np.array(1.0, np.float32)}, m.params)
    m.module.zero_grad()
    torch_out = [t for t in _float_leaves(m.module(*m.args, **m.kwargs)) if t.is_floating_point()]
    torch_loss = sum((t * torch.from_numpy(w)).sum() for t, w in zip(torch_out, weights))
    torch_loss.backward()
    assert rel_error(got[0], torch_loss.detach().numpy()) <= RUN_TOL
    wants = {n: np.zeros_like(gr) if trainable[n].grad is None else trainable[n].grad.numpy() for n, gr in zip(names, got[1:])}
    floor = 1e-3 * max(float(np.max(np.abs(w))) for w in wants.values())  # analytically zero grads (a key bias
    errors = {n: rel_error(gr, wants[n], floor) for n, gr in zip(names, got[1:])}  # under softmax) are rounding noise
    m.report["grad"] = max(errors.values())
    m.report["grad_params"] = len(names)
    worst = sorted(errors.items(), key=lambda kv: -kv[1])[:3]
    assert m.report["grad"] <= GRAD_TOL, worst


#: the backends every row runs on besides rlx.run / compiled numpy (each compiles the imported graph)
BACKENDS = ("jax", "torch")


def check_backends(m: Imported) -> None:
    """The imported graph on the jax and torch backends, and exported by rlx to ONNX (checker, then
    run by onnxruntime), each against torch eager."""
    want = torch_outputs(m)
    for backend in BACKENDS:
        got = rlx.compile(m.graph, backend=backend).run(inputs=m.feed, params=m.params)
        m.report[backend] = _compare(got, want, backend)
    m.report["onnx"] = _compare(onnx_outputs(m), want, "onnx")


def onnx_outputs(m: Imported) -> list[np.ndarray]:
    """rlx.onnx.export of the imported graph, checked (full_check) and run by onnxruntime."""
    import onnx
    import onnxruntime as ort

    import rlx.onnx

    proto = rlx.onnx.export(m.graph, m.params)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    fed = {i.name for i in sess.get_inputs()}
    return sess.run(None, {n: a for n, a in m.feed.items() if n in fed})


def _compare(got: list, want: list[np.ndarray], how: str) -> float:
    assert len(got) == len(want), f"{how}: {len(got)} outputs, torch gives {len(want)}"
    for o, w in zip(got, want):
        o = np.asarray(o)
        assert o.shape == w.shape and o.dtype == w.dtype, (how, o.shape, o.dtype, w.shape, w.dtype)
    err = max(rel_error(o, w) for o, w in zip(got, want))
    assert err <= RUN_TOL, f"{how}: rel error {err:.2e}"
    return err
