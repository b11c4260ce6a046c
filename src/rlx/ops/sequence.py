"""Sequence-model ops (docs/semantics.md#sequence-models): ``selective_scan`` (Mamba SSM scan),
``gated_delta_net`` (gated delta-rule linear attention) and ``axial_rope2d`` (2-D axial rotary
embedding, SAM2 geometry).

Design choices:

* **Level ``fused``**, each with a ``decompose(g, operands, attrs)`` hook into primitive ops.
  So autodiff and vmap need no rules of their own: ``prepare_graph_for_ad`` unfuses them (docs/semantics.md#sequence-models), and the
  derivative graphs are those of ``scan`` / elementwise / reduce / reshape ops. The optimizer
  unfuses them for backends that do not claim them (``unfuse_unclaimed``: the numpy / cpu
  pipelines run the decomposition); the JAX backend claims every op and lowers them directly
  (``rlx.backends.jax.lowering_sequence``: ``lax.scan`` for the recurrences). The ONNX exporter
  unfuses them first; the recurrences then export as ONNX ``Scan``.
* **Recurrences decompose into one ``scan``** (not an unrolled loop): the node count does not
  grow with the sequence length, and ``scan`` has VJP / JVP / batch rules. The scan's length is
  the sequence length, so the decomposition needs a static sequence axis (shape inference
  accepts symbolic dims everywhere). Everything that does not depend on the carried state
  (``exp(delta·A)``, ``delta·B·x``, ``exp(g)``, the read-outs ``C·h`` / ``Sᵀq``) is computed
  outside the scan, vectorised over the sequence; the body is a few elementwise ops and one
  reduce. The per-step read-out uses the scan's stacked trajectory.
* **dtype**: every operand must have the same float dtype, which is the output dtype (upstream is
  f32 only; f64 is allowed so gradients can be checked). Kernels compute in that dtype (f32 for
  the narrow floats).
* **One output per node** (the rlx convention): ``gated_delta_net`` does not write its final state
  into the ``state`` operand as upstream does (docs/semantics.md#differences-from-upstream); its attribute ``output``
  chooses the node's value: ``"y"`` (the read-out ``o``) or ``"state"`` (the final state S). Two
  nodes with the same operands give both (each runs the recurrence).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import ShapeError
from rlx.ir.graph import Graph, Value
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import compute_dtype
from rlx.ops.graph_helpers import zeros_like

_FAMILY = "sequence"


# ---------------------------------------------------------------------------- helpers
def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ShapeError(msg)


def _same_float(ins: list[TensorType], names: tuple[str, ...]) -> DType:
    dt = ins[0].dtype
    for t, n in zip(ins, names):
        _require(t.dtype.is_float, f"operand {n} must be a float tensor, got {t.dtype}")
        _require(t.dtype == dt, f"operand {n} is {t.dtype}, but {names[0]} is {dt} (all operands share one dtype)")
    return dt


def _ranks(ins: list[TensorType], names: tuple[str, ...], ranks: tuple[int, ...]) -> None:
    for t, n, r in zip(ins, names, ranks):
        _require(len(t.shape) == r, f"operand {n} must have rank {r}, got {t.shape!r}")


def _dim(actual: Any, expected: Any, what: str) -> None:
    _require(actual == expected, f"{what}: expected {expected}, got {actual}")


def _dims(shape: Sequence[Any]) -> list[int]:
    """Dims as a reshape attribute: one symbolic dim becomes -1 (more is an error)."""
    syms = [d for d in shape if isinstance(d, str)]
    _require(len(syms) <= 1, f"cannot reshape to {Shape(shape)!r}: more than one symbolic dim")
    return [-1 if isinstance(d, str) else int(d) for d in shape]


def _reshape(g: Graph, v: Value, shape: Sequence[Any]) -> Value:
    return v if tuple(v.shape) == tuple(shape) else g.reshape(v, new_shape=_dims(shape))


def _static_len(s: Any, op: str) -> int:
    _require(isinstance(s, int), f"{op}: the decomposition needs a static sequence length, got {s!r}")
    return s


def _zeros(g: Graph, shape: Sequence[Any], dtype: DType, template: Callable[[], Value]) -> Value:
    """Zeros of ``shape``: a constant when static, else ``where``-broadcast over ``template()``
    (a value of that shape; never ``x * 0``, which is NaN for inf)."""
    if Shape(shape).is_static:
        return g.constant(np.zeros(tuple(shape), dtype=np.float32 if dtype.is_low_precision_float else dtype.numpy), dtype=dtype)
    return zeros_like(g, template())


def _sub(name: str, sig: list[tuple[str, TensorType]], body: Callable[[Graph, list[Value]], list[Value]]) -> Graph:
    from rlx.ops.control_flow import make_graph

    return make_graph(name, sig, body)


def _step_type(v: Value) -> TensorType:
    """The per-step type of a stacked ``[s, ...]`` value."""
    return TensorType(Shape(list(v.shape)[1:]), v.dtype)


# ------------------------------------------------------------------------ selective_scan
_SS_OPERANDS = ("x", "delta", "A", "B", "C")


def _ss_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    x, delta, a, b, c = ins
    _ranks(ins, _SS_OPERANDS, (3, 3, 2, 3, 3))
    dt = _same_float(ins, _SS_OPERANDS)
    n = attrs["state_size"]
    _require(n >= 1, f"state_size must be >= 1, got {n}")
    bs, s, h = x.shape
    _dim(tuple(delta.shape), tuple(x.shape), "delta must have x's shape [b, s, h]")
    _dim(tuple(a.shape), (h, n), "A must be [h, state_size]")
    _dim(tuple(b.shape), (bs, s, n), "B must be [b, s, state_size]")
    _dim(tuple(c.shape), (bs, s, n), "C must be [b, s, state_size]")
    return TensorType(x.shape, dt)


def _ss_kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out: TensorType) -> np.ndarray:
    dt = compute_dtype(out.dtype)
    x, delta, a, b, c = (np.asarray(v, dtype=dt) for v in args)
    bs, s, h = x.shape
    da = np.exp(delta[..., None] * a)  # [b, s, h, n], vectorised over the sequence
    dbx = (delta * x)[..., None] * b[:, :, None, :]  # [b, s, h, n]
    hs = np.zeros((bs, h, a.shape[1]), dtype=dt)
    y = np.empty((bs, s, h), dtype=dt)
    for t in range(s):  # the recurrence: one step per token
        hs = da[:, t] * hs + dbx[:, t]
        y[:, t] = np.einsum("bhn,bn->bh", hs, c[:, t])
    return y


def _ss_decompose(g: Graph, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Value:
    x, delta, a, b, c = (g.value(o) for o in operands)
    bs, s, h = x.shape
    n = attrs["state_size"]
    length = _static_len(s, "selective_scan")
    da = g.exp(_reshape(g, delta, [bs, s, h, 1]) * a)  # [b, s, h, n]
    dbx = _reshape(g, delta * x, [bs, s, h, 1]) * _reshape(g, b, [bs, s, 1, n])  # [b, s, h, n]
    da_t, dbx_t = (g.transpose(v, perm=[1, 0, 2, 3]) for v in (da, dbx))  # [s, b, h, n]
    carry = TensorType(Shape([bs, h, n]), x.dtype)
    body = _sub("selective_scan_step", [("h", carry), ("da", _step_type(da_t)), ("dbx", _step_type(dbx_t))],
                lambda sg, v: [v[1] * v[0] + v[2]])
    init = _zeros(g, [bs, h, n], x.dtype, lambda: _reshape(g, g.narrow(da_t, axis=0, start=0, length=1), [bs, h, n]))
    traj = g.scan(init, da_t, dbx_t, body=body, length=length, save_trajectory=True, num_xs=2)  # [s, b, h, n]
    c_t = _reshape(g, g.transpose(c, perm=[1, 0, 2]), [s, bs, 1, n])  # [s, b, 1, n]
    y = g.reduce(traj * c_t, op="sum", axes=[3], keep_dim=False)  # [s, b, h]
    return g.transpose(y, perm=[1, 0, 2])


defop(
    name="selective_scan", precision="reduction", family=_FAMILY, level="fused", arity=5, operands=_SS_OPERANDS,
    attrs={"state_size": AttrSpec("int", doc="n, the SSM state size per channel")},
    infer=_ss_type, kernel=_ss_kernel, decompose=_ss_decompose,
    doc="Mamba selective scan (docs/semantics.md#sequence-models): x, delta [b, s, h], A [h, n], B, C [b, s, n] (n = "
    "state_size), all one float dtype → y [b, s, h]. Per batch row the state hs [h, n] starts at 0; "
    "for each t: hs = exp(delta[t, :, None]·A)·hs + delta[t, :, None]·B[t]·x[t, :, None]; "
    "y[t] = hs @ C[t]. No D skip term and no softplus on delta (the caller's job). Decomposes to "
    "exp/mul (vectorised over the sequence), one scan (carry hs, save_trajectory; body hs·dA_t + "
    "dBx_t) and a mul + sum read-out; the decomposition needs a static s. Differentiated and "
    "batched through the decomposition.",
)


# ------------------------------------------------------------------------ gated_delta_net
_GDN_OPERANDS = ("q", "k", "v", "g", "beta", "state")


def _gdn_arity(attrs: Mapping[str, Any]) -> int:
    return 6 if attrs["carry_state"] else 5


def _gdn_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    names = _GDN_OPERANDS[: len(ins)]
    _ranks(ins, names, (4, 4, 4, 3, 3, 4))
    dt = _same_float(ins, names)
    q = ins[0]
    bs, s, h, n = q.shape
    _dim(n, attrs["state_size"], "q's last dim must be state_size")
    for t, name in zip(ins[1:3], ("k", "v")):
        _dim(tuple(t.shape), tuple(q.shape), f"{name} must have q's shape [b, s, h, n]")
    for t, name in zip(ins[3:5], ("g", "beta")):
        _dim(tuple(t.shape), (bs, s, h), f"{name} must be [b, s, h]")
    if attrs["carry_state"]:
        _dim(tuple(ins[5].shape), (bs, h, n, n), "state must be [b, h, n, n]")
    if attrs["output"] == "state":
        return TensorType(Shape([bs, h, n, n]), dt)
    return TensorType(q.shape, dt)


def _gdn_kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out: TensorType) -> np.ndarray:
    dt = compute_dtype(out.dtype)
    q, k, v, gg, beta = (np.asarray(a, dtype=dt) for a in args[:5])
    bs, s, h, n = q.shape
    st = np.array(args[5], dtype=dt) if attrs["carry_state"] else np.zeros((bs, h, n, n), dtype=dt)
    eg = np.exp(gg)[..., None, None]  # [b, s, h, 1, 1]
    o = np.empty((bs, s, h, n), dtype=dt)
    scale = dt.type(1.0 / math.sqrt(n))
    for t in range(s):  # the recurrence, vectorised over (batch, head)
        st = st * eg[:, t]
        sk = np.einsum("bhij,bhi->bhj", st, k[:, t])
        d = (v[:, t] - sk) * beta[:, t, :, None]
        st = st + k[:, t, :, :, None] * d[:, :, None, :]
        o[:, t] = np.einsum("bhij,bhi->bhj", st, q[:, t]) * scale
    return st if attrs["output"] == "state" else o


def _gdn_decompose(g: Graph, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Value:
    vals = [g.value(o) for o in operands]
    q, k, v, gg, beta = vals[:5]
    bs, s, h, n = q.shape
    length = _static_len(s, "gated_delta_net")
    perm4 = [1, 0, 2, 3]
    eg_t = g.transpose(_reshape(g, g.exp(gg), [bs, s, h, 1, 1]), perm=[1, 0, 2, 3, 4])  # [s, b, h, 1, 1]
    k_t = g.transpose(_reshape(g, k, [bs, s, h, n, 1]), perm=[1, 0, 2, 3, 4])  # [s, b, h, n, 1]
    v_t = g.transpose(_reshape(g, v, [bs, s, h, 1, n]), perm=[1, 0, 2, 3, 4])  # [s, b, h, 1, n]
    beta_t = g.transpose(_reshape(g, beta, [bs, s, h, 1, 1]), perm=[1, 0, 2, 3, 4])  # [s, b, h, 1, 1]
    carry = TensorType(Shape([bs, h, n, n]), q.dtype)

    def step(sg: Graph, a: list[Value]) -> list[Value]:
        st, eg, kk, vv, bb = a
        st = st * eg
        sk = sg.reduce(st * kk, op="sum", axes=[2], keep_dim=True)  # [b, h, 1, n]: Σ_i S[i, j] k[i]
        return [st + kk * ((vv - sk) * bb)]

    xs = [eg_t, k_t, v_t, beta_t]
    body = _sub("gated_delta_net_step", [("S", carry), *[(nm, _step_type(x)) for nm, x in zip(("eg", "k", "v", "beta"), xs)]], step)
    if attrs["carry_state"]:
        init = vals[5]
    else:
        def template() -> Value:  # k[0] ⊗ v[0]: a [b, h, n, n] value
            kk = _reshape(g, g.narrow(k_t, axis=0, start=0, length=1), [bs, h, n, 1])
            vv = _reshape(g, g.narrow(v_t, axis=0, start=0, length=1), [bs, h, 1, n])
            return kk * vv

        init = _zeros(g, [bs, h, n, n], q.dtype, template)
    if attrs["output"] == "state":
        return g.scan(init, *xs, body=body, length=length, save_trajectory=False, num_xs=4)
    traj = g.scan(init, *xs, body=body, length=length, save_trajectory=True, num_xs=4)  # [s, b, h, n, n]
    q_t = g.transpose(_reshape(g, q, [bs, s, h, n, 1]), perm=[1, 0, 2, 3, 4])  # [s, b, h, n, 1]
    o = g.reduce(traj * q_t, op="sum", axes=[3], keep_dim=False)  # [s, b, h, n]: Σ_i S[i, j] q[i]
    o = o * g.scalar(1.0 / math.sqrt(n), q.dtype)
    return g.transpose(o, perm=perm4)


defop(
    name="gated_delta_net", precision="reduction", family=_FAMILY, level="fused", arity=_gdn_arity, operands=_GDN_OPERANDS,
    attrs={"state_size": AttrSpec("int", doc="n, the head dim (state S is n×n per head)"),
           "carry_state": AttrSpec("bool", default=False, doc="a 6th operand state [b, h, n, n] is the initial S"),
           "output": AttrSpec("str", default="y", choices=("y", "state"),
                              doc="the node's value: 'y' = o [b, s, h, n], 'state' = final S [b, h, n, n]")},
    infer=_gdn_type, kernel=_gdn_kernel, decompose=_gdn_decompose,
    doc="Gated delta-rule linear attention (docs/semantics.md#sequence-models): q, k, v [b, s, h, n], g, beta [b, s, h], "
    "plus state [b, h, n, n] iff carry_state; one float dtype. Per (batch, head) S (n×n) starts at 0 "
    "(or the state operand); for each t: S *= exp(g[t]); sk = Sᵀ k[t]; d = (v[t] − sk)·beta[t]; "
    "S += outer(k[t], d); o[t] = Sᵀ q[t] / sqrt(n). q / k are expected L2-normalised and GQA-"
    "expanded by the caller. output='y' gives o [b, s, h, n]; output='state' gives the final S "
    "[b, h, n, n] (rlx returns the carried state as an explicit output; upstream writes it into the "
    "state operand in place, docs/semantics.md#differences-from-upstream, which rlx never does: operands are immutable). "
    "Decomposes to exp / reshape / transpose, one scan over S (body: mul, mul + reduce, sub, mul, "
    "add) and, for 'y', a mul + sum read-out over the stacked trajectory; needs a static s.",
)


# --------------------------------------------------------------------------- axial_rope2d
def _rope2d_seq(attrs: Mapping[str, Any]) -> int:
    return attrs["end_x"] * attrs["end_y"] * max(attrs["repeat_factor"], 1)


def axial_rope2d_tables(attrs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """cos / sin tables [S, head_dim/2] in f32: column p < head_dim/4 is x-angle ``tx·f_p``, the
    next head_dim/4 columns the y-angles ``ty·f_i`` (pair p covers dims 2p, 2p+1)."""
    d, q = attrs["head_dim"], attrs["head_dim"] // 4
    f = np.power(np.float32(attrs["theta"]), -4.0 * np.arange(q, dtype=np.float32) / np.float32(d)).astype(np.float32)
    pos = np.arange(_rope2d_seq(attrs)) // max(attrs["repeat_factor"], 1)
    tx = (pos % attrs["end_x"]).astype(np.float32)
    ty = (pos // attrs["end_x"]).astype(np.float32)
    ang = np.concatenate([tx[:, None] * f[None, :], ty[:, None] * f[None, :]], axis=1).astype(np.float32)
    return np.cos(ang), np.sin(ang)


def _rope2d_type(ins: list[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    (x,) = ins
    d, heads = attrs["head_dim"], attrs["num_heads"]
    _require(d >= 4 and d % 4 == 0, f"head_dim must be a positive multiple of 4, got {d}")
    _require(heads >= 1 and attrs["end_x"] >= 1 and attrs["end_y"] >= 1, "num_heads, end_x and end_y must be >= 1")
    _require(len(x.shape) == 3, f"x must be [B, S, num_heads·head_dim], got {x.shape!r}")
    _require(x.dtype.is_float, f"x must be a float tensor, got {x.dtype}")
    _dim(x.shape[1], _rope2d_seq(attrs), "x's sequence axis must be end_x·end_y·max(repeat_factor, 1)")
    _dim(x.shape[2], heads * d, "x's last dim must be num_heads·head_dim")
    return x


def _rope2d_kernel(args: list[np.ndarray], attrs: Mapping[str, Any], out: TensorType) -> np.ndarray:
    dt = compute_dtype(out.dtype)
    x = np.asarray(args[0], dtype=dt)
    b, s, _ = x.shape
    cos, sin = (t.astype(dt)[:, None, :] for t in axial_rope2d_tables(attrs))  # [S, 1, D/2]
    xp = x.reshape(b, s, attrs["num_heads"], attrs["head_dim"] // 2, 2)
    a, bb = xp[..., 0], xp[..., 1]
    res = np.stack([a * cos - bb * sin, a * sin + bb * cos], axis=-1)
    return res.reshape(x.shape)


def _rope2d_decompose(g: Graph, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Value:
    (x,) = (g.value(o) for o in operands)
    bs, s, width = x.shape
    heads, half = attrs["num_heads"], attrs["head_dim"] // 2
    cos, sin = (g.constant(np.ascontiguousarray(t[:, None, :, None])) for t in axial_rope2d_tables(attrs))  # f32 [S, 1, D/2, 1]
    cos, sin = (t if t.dtype == x.dtype else g.cast(t, to=x.dtype) for t in (cos, sin))
    xp = _reshape(g, x, [bs, s, heads, half, 2])
    a, b = (g.narrow(xp, axis=4, start=i, length=1) for i in (0, 1))
    res = g.concat([a * cos - b * sin, a * sin + b * cos], axis=4)
    return _reshape(g, res, [bs, s, width])


defop(
    name="axial_rope2d", precision="data_movement", family=_FAMILY, level="fused", arity=1, operands=("x",),
    attrs={"end_x": AttrSpec("int", doc="grid width"), "end_y": AttrSpec("int", doc="grid height"),
           "head_dim": AttrSpec("int", doc="D, a multiple of 4"), "num_heads": AttrSpec("int", doc="H"),
           "theta": AttrSpec("float", default=10000.0), "repeat_factor": AttrSpec("int", default=1)},
    infer=_rope2d_type, kernel=_rope2d_kernel, decompose=_rope2d_decompose,
    doc="2-D axial rotary embedding, SAM2 geometry (docs/semantics.md#sequence-models): x [B, S, H·D] with S = end_x·end_y·"
    "max(repeat_factor, 1), D % 4 == 0 → x's shape and dtype. Interleaved (adjacent-pair) rotation, "
    "unlike rope: with q = D/4, f_i = theta^(−4i/D); token t has pos = t // repeat_factor, tx = pos % "
    "end_x, ty = pos // end_x; per head, pair (2i, 2i+1) (i < q) rotates by tx·f_i and pair (D/2 + 2i, "
    "D/2 + 2i + 1) by ty·f_i: (a, b) → (a·cos − b·sin, a·sin + b·cos). The angle tables are computed "
    "in f32 (as upstream) and then cast to x's dtype. Decomposes to reshape [B, S, H, D/2, 2], narrow, "
    "mul / sub / add with constant cos / sin tables, concat, reshape.",
)
