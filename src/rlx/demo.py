"""``rlx demo``: the whole pipeline on a small model, in a few seconds.

1. **HIR** — a two-layer pre-norm transformer (RMSNorm, attention, SwiGLU, a GELU head)
   built from HIR blocks, each labelled (``layer0/attn`` …).
2. **MIR** — lowered with ``FusionPolicy.FUSABLE`` (primitive chains).
3. **optimize** — the optimizer fuses the chains back; the fusion report is printed.
4. **plan** — one arena for every tensor; arena size against the liveness lower bound,
   checked by :func:`rlx.lir.check`.
5. **run** — the planned arena executor against the op-by-op reference.
6. **train** — a two-layer MLP fits a synthetic regression with ``rlx.grad_with_loss`` and
   Adam (the loss falls by well over 10x in 200 steps); then a few SGD steps on the
   transformer itself when autodiff covers all its ops.
7. **save / load** — the planned model and its weights to ``.rlx``; reloaded, the
   fingerprints are equal and the outputs identical.
8. **pictures** — HIR, MIR and LIR graphs as SVG (Graphviz), the memory plan as PNG.

:func:`main` returns 0 and writes into ``out_dir``; the figures it prints are the ones
``tests/cli/test_cli_demo.py`` checks.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

import rlx
from rlx.ir.atomic import atomic_open
from rlx.viz.console import Console, get_console

__all__ = ["adam_fit", "build_transformer", "main", "mlp_regression"]

# the transformer: batch, sequence, model width, heads, head width, FFN width, vocabulary (head width)
B, S, D, H, HD, F, V = 2, 8, 32, 4, 8, 64, 16
LAYERS = 2


# ------------------------------------------------------------------------------ models


def _transformer_body(h: Any) -> Any:
    """Build the transformer into the HIR builder ``h``; returns the logits value."""
    x = h.input("x", (B, S, D))
    for i in range(LAYERS):
        p = f"l{i}."
        with h.block(f"layer{i}"):
            with h.block("attn"):
                a = h.rms_norm(x, h.param(p + "ln1.g", (D,)), h.param(p + "ln1.b", (D,)))
                q = h.linear(a, h.param(p + "wq", (D, D)), bias=h.param(p + "bq", (D,)))
                k = h.linear(a, h.param(p + "wk", (D, D)))
                v = h.linear(a, h.param(p + "wv", (D, D)))
                q, k, v = (h.reshape(t, new_shape=[B, S, H, HD]) for t in (q, k, v))
                o = h.attention(q, k, v, num_heads=H, head_dim=HD, mask_kind="causal", layout="bshd")
                o = h.linear(h.reshape(o, new_shape=[B, S, D]), h.param(p + "wo", (D, D)))
            with h.block("ffn"):
                r = h.residual_rms_norm(o, x, h.param(p + "ln2.g", (D,)), h.param(p + "ln2.b", (D,)))
                f = h.swiglu(r, h.param(p + "w_up", (D, F)), h.param(p + "w_gate", (D, F)), h.param(p + "w_down", (F, D)))
                x = x + o + f
    return h.linear(x, h.param("head.w", (D, V)), bias=h.param("head.b", (V,)), activation="gelu", name="head")


def build_transformer() -> rlx.GraphModule:
    """The demo transformer as a HIR module (lowering policy FUSABLE)."""
    return rlx.define("tiny_transformer", _transformer_body, policy=rlx.FusionPolicy.FUSABLE)


def transformer_params(m: rlx.GraphModule, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, v in m.graph.params().items():
        shape = tuple(v.shape)
        if name.endswith(".g"):
            out[name] = np.ones(shape, np.float32)
        elif len(shape) == 1:
            out[name] = np.zeros(shape, np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    return out


def mlp_regression(n: int = 64, d_in: int = 4, hidden: int = 32, seed: int = 0) -> tuple[rlx.Graph, dict, dict]:
    """A two-layer tanh MLP with a mean-squared-error loss, its data and initial weights.

    Target: ``sin(2 x0) + 0.5 x1 x2`` on ``x ~ U(-1, 1)``."""
    g = rlx.Graph("mlp_regression")
    x, y = g.input("x", (n, d_in)), g.input("y", (n, 1))
    w1, b1 = g.param("w1", (d_in, hidden)), g.param("b1", (hidden,))
    w2, b2 = g.param("w2", (hidden, 1)), g.param("b2", (1,))
    err = g.tanh(x @ w1 + b1) @ w2 + b2 - y
    g.set_outputs([g.mean(err * err, axes=[0, 1], keep_dim=False)])
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (n, d_in)).astype(np.float32)
    ys = (np.sin(2 * xs[:, :1]) + 0.5 * xs[:, 1:2] * xs[:, 2:3]).astype(np.float32)
    params = {
        "w1": (rng.standard_normal((d_in, hidden)) / np.sqrt(d_in)).astype(np.float32), "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, 1)) / np.sqrt(hidden)).astype(np.float32), "b2": np.zeros(1, np.float32),
    }
    return g, {"x": xs, "y": ys}, params


def adam_fit(loss_graph: rlx.Graph, inputs: dict, params: dict, steps: int = 200, lr: float = 0.01) -> tuple[list[float], Any]:
    """Minimise the one-output ``loss_graph`` over all its params with Adam.

    ``rlx.compile_training`` plans the forward and the backward once (sharing one weight
    layout); each step runs the backward in its arena and updates the weights in place.
    Returns (loss per step, the trainer)."""
    trainer = rlx.compile_training(loss_graph, optimizer="adam", lr=lr, params=params)
    losses = [float(trainer.step(inputs)) for _ in range(steps)]
    return losses, trainer


# ------------------------------------------------------------------------------- story


def _kb(n: int) -> str:
    from rlx.hir.inspect import format_bytes

    return format_bytes(n)


def main(out_dir: str = "rlx-demo", *, steps: int = 200, pictures: bool = True, console: Console | None = None) -> int:
    con = console or get_console()
    t_start = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)

    # 1. HIR
    con.rule("1. HIR: a small transformer built from blocks")
    m = build_transformer()
    hir = m.graph
    blocks = [n for n in hir.nodes if n.op not in ("input", "param", "constant")]
    from rlx.hir.inspect import op_histogram

    n_params = sum(int(np.prod(v.shape)) for v in hir.params().values())
    con.line(f"{m!r}: {LAYERS} layers, d_model={D}, {H} heads, seq={S}, {len(hir.params())} weights ({n_params} numbers)")
    con.table("HIR ops", ["op", "count"], [(k, c) for k, c in op_histogram(hir) if k not in ("param", "input")], right=["count"])
    con.line(f"blocks: {len(blocks)} HIR nodes, labels " + ", ".join(sorted({n.name for n in blocks if n.name})))

    # 2. MIR
    con.rule("2. lower to MIR (FusionPolicy.FUSABLE: primitive chains)")
    mir = m.lower_to_mir()
    con.line(f"MIR: {len(mir)} nodes; every node keeps its HIR provenance (block id and label)")

    # 3. optimize
    con.rule("3. optimize: cleanup and pattern fusion")
    opt, report = rlx.optimize(mir)
    rows = [(name, ", ".join(f"{k}={v}" for k, v in stats.items())) for name, stats in report.applied.items()]
    con.table("passes that changed the graph", ["pass", "effect"], rows)
    con.line(str(report))
    fused = sum(1 for n in opt.nodes if rlx.get_op(n.op).level == "fused")
    con.line(f"fusion: {len(mir)} -> {len(opt)} nodes, {fused} fused ops")

    # 4. plan
    con.rule("4. plan: one arena, checked")
    lir = rlx.plan(opt, alignment=64)
    lir.check()
    p = lir.plan
    con.table(None, ["arena", "lower bound", "ratio", "no reuse", "saved", "views", "in place", "heuristic"],
              [(_kb(p.arena_size), _kb(p.lower_bound), f"{p.ratio:.3f}x", _kb(p.total_unshared_bytes), _kb(p.bytes_saved),
                len(p.view_aliases), len(p.inplace), p.heuristic)],
              right=["arena", "lower bound", "ratio", "no reuse", "saved", "views", "in place"])
    con.line(f"arena: {p.arena_size} B, lower bound: {p.lower_bound} B ({p.ratio:.3f}x), "
             f"no reuse would need {p.total_unshared_bytes} B")

    # 5. run
    con.rule("5. run: arena executor against the reference interpreter")
    params = transformer_params(m)
    x = np.random.default_rng(1).standard_normal((B, S, D)).astype(np.float32)
    exe = rlx.compile(lir)
    out = exe.run(inputs={"x": x}, params=params)[0].copy()  # the first run also binds the weights
    t0 = time.perf_counter()
    exe.run(inputs={"x": x}, params=params)
    t_run = time.perf_counter() - t0
    (ref,) = rlx.run(mir, {"x": x}, params)
    diff = float(np.max(np.abs(out - ref)))
    con.line(f"output {list(out.shape)} {out.dtype}, mean {out.mean():.5f}; max |arena - reference| = {diff:.2e} "
             f"({t_run * 1e3:.1f} ms per run)")

    # 6. train
    con.rule("6. train: rlx.compile_training (grad_with_loss + Adam) on a two-layer MLP")
    loss_graph, data, init = mlp_regression()
    t0 = time.perf_counter()
    losses, trainer = adam_fit(loss_graph, data, init, steps=steps)
    t_train = time.perf_counter() - t0
    fwd_plan, bwd_plan = trainer.forward.plan, trainer.backward.plan
    top = fwd_plan.weight_region[1] if fwd_plan.weight_region else 0
    con.line(f"forward arena {fwd_plan.arena_size} B, backward arena {bwd_plan.arena_size} B; "
             f"both keep the weights at the same offsets ({top} B weight region)")
    marks = sorted({1, *range(max(1, steps // 4), steps + 1, max(1, steps // 4)), steps})
    con.table(None, ["step", "loss"], [(s, f"{losses[s - 1]:.6f}") for s in marks], right=["step", "loss"])
    factor = losses[0] / max(losses[-1], 1e-30)
    con.line(f"loss: {losses[0]:.6f} -> {losses[-1]:.6f} ({factor:.1f}x lower) in {steps} steps ({t_train:.2f} s)")
    _train_transformer(con, params, x)

    # 7. save / load
    con.rule("7. save and reload")
    hir_path = os.path.join(out_dir, "tiny_transformer.hir.rlx")
    lir_path = os.path.join(out_dir, "tiny_transformer.lir.rlx")
    rlx.save(hir, hir_path, params=params)
    rlx.save(lir, lir_path, params=params)
    loaded, loaded_params = rlx.load(lir_path, with_params=True)
    fp_saved, fp_loaded = lir.fingerprint(), loaded.fingerprint()
    (again,) = rlx.compile(loaded).run(inputs={"x": x}, params=loaded_params)
    same = "equal" if fp_saved == fp_loaded else "DIFFERENT"
    x_path = os.path.join(out_dir, "x.npy")
    with atomic_open(x_path, "wb") as f:
        np.save(f, x)
    con.line(f"wrote {hir_path} and {lir_path} (+ .safetensors weights), {x_path}")
    con.line(f"fingerprint: {fp_saved[:16]} saved, {fp_loaded[:16]} reloaded: {same}; "
             f"outputs {'identical' if np.array_equal(again, out) else 'DIFFERENT'}")

    # 8. pictures
    if pictures:
        con.rule("8. pictures")
        _pictures(con, out_dir, hir, opt, lir)

    con.rule("done")
    con.line(f"done in {time.perf_counter() - t_start:.1f} s; files in {out_dir}/ "
             f"(try: rlx inspect {lir_path} ; rlx run {lir_path} --input x={x_path})")
    ok = fp_saved == fp_loaded and np.array_equal(again, out) and diff < 1e-4
    return 0 if ok else 1


def _train_transformer(con: Console, params: dict[str, np.ndarray], x: np.ndarray, steps: int = 5) -> None:
    """A few Adam steps on the transformer (regressing a fixed target), when autodiff covers it."""
    def body(h: Any) -> Any:
        err = _transformer_body(h) - h.input("target", (B, S, V))
        return h.mean(err * err, axes=[0, 1, 2], keep_dim=False)

    target = (np.random.default_rng(2).standard_normal((B, S, V)) * 0.1).astype(np.float32)
    try:
        loss_module = rlx.define("tiny_transformer_loss", body, policy=rlx.FusionPolicy.for_autodiff())
        trainer = rlx.compile_training(loss_module, optimizer="adam", lr=3e-3, params=params)
    except rlx.RlxError as exc:
        con.line(f"transformer training skipped: {str(exc).splitlines()[0]}")
        return
    seen = [float(trainer.step({"x": x, "target": target})) for _ in range(steps)]
    con.line(f"transformer, {steps} Adam steps: loss " + " -> ".join(f"{v:.5f}" for v in seen))


def _pictures(con: Console, out_dir: str, hir: rlx.Graph, opt: rlx.Graph, lir: Any) -> None:
    from rlx.viz import draw_graph, draw_plan, find_dot

    rows = []
    if find_dot() is None:
        con.line("Graphviz 'dot' not found: graph pictures skipped (apt-get install graphviz)")
    else:
        for stage, obj in (("hir", hir), ("mir", opt), ("lir", lir)):
            path = draw_graph(obj, os.path.join(out_dir, f"tiny_transformer.{stage}.svg"))
            rows.append((stage.upper() + " graph", path, os.path.getsize(path)))
    try:
        import matplotlib  # noqa: F401

        suffix = "png"
    except ImportError:
        suffix = "svg"
    path = draw_plan(lir, os.path.join(out_dir, f"tiny_transformer.plan.{suffix}"))
    rows.append(("memory plan", path, os.path.getsize(path)))
    path = draw_graph(lir, os.path.join(out_dir, "tiny_transformer.html"))  # no Graphviz needed
    rows.append(("interactive viewer (open in a browser)", path, os.path.getsize(path)))
    con.table(None, ["picture", "file", "bytes"], rows, right=["bytes"])
