"""Quantization graph passes (docs/pipeline.md#quantisation-passes): ``insert_q_dq`` and ``propagate_fake_quant``.

``insert_q_dq(g, record)`` taps tensors with ``quantize → dequantize`` (post-training
quantization simulation / export). Differences from upstream: the dequantize is typed
with the tapped tensor's own float dtype (upstream: always F32), a non-float tap or an
unknown reference is an :class:`~rlx.ir.errors.RlxError` naming the node, references may
be node ids, :class:`~rlx.ir.graph.Value` s or node names of the *input* graph, and the
returned id map sends each tap to its dequantize so references compose across a pipeline.

``propagate_fake_quant(g)`` removes a ``fake_quantize`` whose input is already on its
quantization grid because an identical earlier ``fake_quantize`` produced it (possibly
through ops that only move or select values). Upstream's ``quant_propagate`` redirected
the consumers of the later node to the *earlier* one, silently dropping the ops in
between (``FQ(relu(FQ(x)))`` became ``FQ(x)``, docs/pipeline.md#upstream-bugs-fixed); here they read the
later node's own input. The soundness argument (bit-exact up to the sign of a zero), and
why ``per_batch`` fake-quants only pass through ops that keep max|x| while ``ema`` ones
are never removed, is in :func:`propagate_fake_quant`.

Both passes leave dead nodes for DCE and return :class:`~rlx.opt.manager.PassResult`.
The record of ``insert_q_dq`` names nodes of the graph the pass is given: use
``INSERT_Q_DQ.with_options(record=...)`` first in a pipeline (ids of the pipeline's
input graph); it is a ``top_level`` pass, so the pass manager never runs it on control-flow
bodies (node ids of a body are a different namespace).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError
from rlx.ir.graph import Graph, Node, Value
from rlx.ir.opdef import get_op, has_op
from rlx.ops.patterns import REDUNDANT_FAKE_QUANT
from rlx.opt.manager import Pass, PassResult
from rlx.opt.rebuild import Rebuilder

#: the quantize op's integer range (it always produces i8; docs/semantics.md#quantisation)
Q_MIN, Q_MAX = -128, 127


def _describe(node: Node) -> str:
    label = f" {node.name!r}" if node.name else ""
    return f"node %{node.id} ({node.op}{label}, {node.type})"


# ----------------------------------------------------------------------- QuantSpec
@dataclass(frozen=True)
class QuantSpec:
    """Parameters of one ``quantize`` / ``dequantize`` pair (the ops' attributes).

    The quantize op maps a real float tensor to **i8**: ``q = clip(round(x · (1/scale[c]))
    + zp[c], -128, 127)`` (round half away from zero), and dequantize computes ``(q -
    zp[c]) · scale[c]``. There is no bit-width attribute: the integer type is always i8
    (use ``fake_quantize(bits=…)`` for narrower grids). ``zero_points=None`` is the
    symmetric scheme (every zero point 0; an all-zero list is stored as None); ``axis=None``
    is per tensor (exactly one scale), otherwise one scale per channel along ``axis`` (or
    one shared scale). Scales must be finite and > 0, zero points in [-128, 127].
    """

    scales: tuple[float, ...]
    zero_points: tuple[int, ...] | None = None
    axis: int | None = None

    def __post_init__(self) -> None:
        scales = tuple(_number(s, float, "scale") for s in _seq(self.scales, "scales"))
        zps = None if self.zero_points is None else tuple(_number(z, int, "zero point") for z in _seq(self.zero_points, "zero_points"))
        axis = None if self.axis is None else _number(self.axis, int, "axis")
        if not scales:
            raise RlxError("QuantSpec: at least one scale is needed")
        bad = [s for s in scales if not (math.isfinite(s) and s > 0)]
        if bad:
            raise RlxError(f"QuantSpec: scales must be finite and > 0, got {bad}")
        if zps is not None:
            if len(zps) != len(scales):
                raise RlxError(f"QuantSpec: {len(zps)} zero points for {len(scales)} scales")
            out = [z for z in zps if not Q_MIN <= z <= Q_MAX]
            if out:
                raise RlxError(f"QuantSpec: zero points must lie in [{Q_MIN}, {Q_MAX}] (i8), got {out}")
            if not any(zps):
                zps = None
        if axis is None and len(scales) != 1:
            raise RlxError(f"QuantSpec: per-tensor quantization (axis=None) takes one scale, got {len(scales)}")
        object.__setattr__(self, "scales", scales)
        object.__setattr__(self, "zero_points", zps)
        object.__setattr__(self, "axis", axis)

    @classmethod
    def per_tensor(cls, scale: float, zero_point: int = 0) -> QuantSpec:
        """One scale (and zero point; 0 = symmetric) for the whole tensor."""
        return cls((scale,), (zero_point,), None)

    @classmethod
    def per_channel(cls, axis: int, scales: Sequence[float], zero_points: Sequence[int] | None = None) -> QuantSpec:
        """One scale (and zero point) per channel along ``axis``; negative axes count from the end."""
        return cls(tuple(scales), None if zero_points is None else tuple(zero_points), axis)

    @property
    def symmetric(self) -> bool:
        return self.zero_points is None

    def op_attrs(self, node: Node) -> dict[str, Any]:
        """The quantize attributes for tapping ``node`` (axis made non-negative)."""
        axis = self.axis
        if axis is not None:
            rank = len(node.shape)
            if not -rank <= axis < rank:
                raise RlxError(f"insert_q_dq: axis {axis} is out of range for {_describe(node)}")
            axis %= rank
        return {"axis": axis, "scales": list(self.scales),
                "zero_points": None if self.zero_points is None else list(self.zero_points)}


def _seq(values: Any, what: str) -> tuple:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise RlxError(f"QuantSpec: {what} must be a sequence, got {type(values).__name__}")
    return tuple(values)


def _number(v: Any, kind: type, what: str) -> Any:
    ok = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, ok):
        raise RlxError(f"QuantSpec: {what} must be {'an int' if kind is int else 'a number'}, got {v!r}")
    return kind(v)


# --------------------------------------------------------------------- insert_q_dq
def _resolve(g: Graph, key: Any) -> int:
    """Node id of a record key: a node id, a Value of ``g`` or a node name."""
    if isinstance(key, Value):
        if key.graph is not g:
            raise RlxError(f"insert_q_dq: {key!r} belongs to graph {key.graph.name!r}, not {g.name!r}")
        return key.id
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        if not 0 <= key < len(g.nodes):
            raise RlxError(f"insert_q_dq: graph {g.name!r} has no node %{int(key)} ({len(g.nodes)} nodes)")
        return int(key)
    if isinstance(key, str):
        hits = [n.id for n in g.nodes if n.name == key]
        if len(hits) != 1:
            what = "no node" if not hits else f"{len(hits)} nodes ({', '.join(f'%{i}' for i in hits)})"
            raise RlxError(f"insert_q_dq: graph {g.name!r} has {what} named {key!r}")
        return hits[0]
    raise RlxError(f"insert_q_dq: record keys are node ids, Values or names, got {type(key).__name__} {key!r}")


def _taps(g: Graph, record: Mapping[Any, QuantSpec]) -> dict[int, QuantSpec]:
    taps: dict[int, QuantSpec] = {}
    for key, spec in record.items():
        nid = _resolve(g, key)
        node = g.nodes[nid]
        if not isinstance(spec, QuantSpec):
            raise RlxError(f"insert_q_dq: the record entry for {_describe(node)} is a {type(spec).__name__}, not a QuantSpec")
        if not node.dtype.is_float or node.dtype.is_complex:
            raise RlxError(f"insert_q_dq: cannot quantize {_describe(node)}: only real floating-point tensors can be tapped")
        if taps.setdefault(nid, spec) != spec:
            raise RlxError(f"insert_q_dq: {_describe(node)} is recorded twice with different specs: {taps[nid]} and {spec}")
    return taps


def _suffixed(name: str | None, suffix: str) -> str | None:
    return None if name is None else f"{name}.{suffix}"


def insert_q_dq(g: Graph, record: Mapping[Any, QuantSpec] | None = None) -> PassResult:
    """After each node in ``record`` insert ``quantize → dequantize``; its later consumers and
    the graph outputs that referred to it read the dequantize instead.

    ``record`` maps references to nodes of ``g`` (node ids, Values of ``g`` or unique node
    names) to :class:`QuantSpec`. The quantize takes the spec's scales / zero points / axis
    and yields i8; the dequantize inverts it into the tapped node's own dtype (f16, bf16,
    f32 or f64), so downstream types are unchanged. Raises :class:`RlxError` naming the
    node for an unknown reference, a non-float (or complex) tap, a spec that does not fit
    the tap (axis out of range, wrong number of per-channel scales) or two different specs
    for one node. Stats: ``inserted`` = number of tapped nodes; the id map sends each tap to
    its dequantize and every other node to its copy.
    """
    if record is None:
        raise RlxError("insert_q_dq needs a record of taps: call insert_q_dq(g, record) or run "
                       "INSERT_Q_DQ.with_options(record=...)")
    taps = _taps(g, record)
    if not taps:
        return PassResult(g, None, {"inserted": 0})
    rb = Rebuilder(g, "insert_q_dq")
    for node in g.nodes:
        new = rb.copy(node, trusted=True)  # every value keeps its type (a dequantize has the tap's type)
        spec = taps.get(node.id)
        if spec is None:
            continue
        attrs = spec.op_attrs(node)
        try:
            q = rb.emit("quantize", [new], attrs, like=[node], name=_suffixed(node.name, "q"))
            dq = rb.emit("dequantize", [q], {**attrs, "to": node.dtype}, like=[node], name=_suffixed(node.name, "dq"))
        except RlxError as exc:
            raise RlxError(f"insert_q_dq: cannot quantize {_describe(node)} with {spec}: {exc}") from exc
        rb.alias(node.id, dq)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"inserted": len(taps)})


# ------------------------------------------------------------- propagate_fake_quant
def _protected_axes(fq: Node, rank: int) -> frozenset[int]:
    """Axes of the fake_quantize's operand whose coordinate selects its scale: batch axes + channel axis."""
    nb, axis = fq.attrs["batch_dims"], fq.attrs["axis"]
    out = set(range(nb))
    if axis is not None:
        out.add(nb + axis % (rank - nb))
    return frozenset(out)


def _keeps_grid(node: Node, nodes: list[Node], protected: frozenset[int], copies_only: bool) -> bool:
    """Does ``node`` map values on the grid to values on the same grid, at the same scale?

    Every element of the result must be an element of the operand (or a grid image of one:
    relu / neg / abs) whose protected coordinates (the ones choosing the scale) are unchanged.
    ``copies_only``: the result must also keep max|x| of every scale group (a data-derived
    scale): only permutations / duplications of the elements, and neg / abs.
    """
    if len(node.inputs) != 1 or node.dtype != nodes[node.inputs[0]].dtype or not has_op(node.op):
        return False
    rule = get_op(node.op).keeps_grid
    return rule is not None and rule(node.attrs, len(node.shape), protected, copies_only)


def _same_operand(nodes: list[Node], a: int, b: int) -> bool:
    if a == b:
        return True
    na, nb = nodes[a], nodes[b]
    return na.op == nb.op == "constant" and na.type == nb.type and na.attrs["value"] == nb.attrs["value"]


def _same_quantizer(nodes: list[Node], earlier: Node, later: Node) -> bool:
    return (dict(earlier.attrs) == dict(later.attrs) and len(earlier.inputs) == len(later.inputs)
            and all(_same_operand(nodes, a, b) for a, b in zip(earlier.inputs[1:], later.inputs[1:])))


def _scale_source(fq: Node) -> str | None:
    """How ``fq``'s scale can be known to equal an identical earlier one's, or None.

    ``"state"``: scale_mode fixed, the same state operand gives the same scale. ``"data"``:
    per_batch, where the scale recomputed from grid values is the same (see
    :func:`propagate_fake_quant`) as long as max|x| per scale group is unchanged.
    Also requires the straight-through estimator to be the identity on the grid.
    """
    a = fq.attrs
    if not (a["ste"] == "identity" or (a["ste"] == "clipped_identity" and fq.dtype in (DType.F32, DType.F64))):
        return None
    return {"fixed": "state", "per_batch": "data"}.get(a["scale_mode"])  # ema mixes data into the state


def redundant_fake_quant(g: Graph, fq: Node) -> int | None:
    """Id of the identical earlier fake_quantize that makes ``fq`` redundant, or None."""
    nodes = g.nodes
    source = _scale_source(fq) if fq.op == REDUNDANT_FAKE_QUANT.quantizer else None
    if source is None:
        return None
    cur = nodes[fq.inputs[0]]
    protected = _protected_axes(fq, len(cur.shape))
    while cur.op != REDUNDANT_FAKE_QUANT.quantizer:
        if not _keeps_grid(cur, nodes, protected, source == "data"):
            return None
        cur = nodes[cur.inputs[0]]
    return cur.id if _same_quantizer(nodes, cur, fq) else None


def propagate_fake_quant(g: Graph) -> PassResult:
    """Remove each ``fake_quantize`` made redundant by an identical earlier one.

    For every ``FQ₂ = fake_quantize(y, state)``, walk up from ``y`` through single-operand
    ops that keep values on the grid (below) to the nearest ``fake_quantize`` ``FQ₁``; if
    ``FQ₁`` has exactly the same attributes (bits, axis, batch_dims, ste, scale_mode, decay)
    and the same state operand (same node, or equal constants), ``FQ₂``'s consumers and
    graph outputs read ``y`` — ``FQ₂``'s own input, so the ops in between still run
    (upstream redirected them to ``FQ₁``, bypassing e.g. the relu: a miscompute). Stats:
    ``removed``; the id map sends ``FQ₂`` to (the copy of) ``y``.

    Why ``FQ₂(y) = y``. ``fake_quantize`` is symmetric with zero point 0: it maps ``x`` to
    the grid ``G = {k·s : k integer, -q_max <= k <= q_max}`` by ``clip(round(x/s), -q_max,
    q_max)·s``, and is the identity on ``G`` provided ``FQ₂``'s scale is ``FQ₁``'s:

    * the clamp matters here: a value ``k·s`` with ``|k| > q_max`` is a multiple of ``s``
      but ``FQ₂`` would clip it, so every op on the path must keep ``|k| <= q_max``.
      ``relu(k·s) = max(k, 0)·s``, ``abs`` and ``neg`` stay in ``G`` because the range is
      symmetric and contains 0 (for an affine grid ``(k - zp)·s`` with ``k`` in [-128, 127],
      ``neg`` would leave it and ``relu`` needs ``zp`` in range — fake_quantize has no zero
      point, so this case does not arise). reshape / transpose / narrow / expand /
      single-operand concat copy elements; max / min pool2d return one element of the
      window (padding never wins; an all-NaN window gives NaN, which FQ maps to NaN).
    * same scale. ``scale_mode="fixed"``: ``s = max(state, 1e-12)`` is the same computation
      on the same operand. ``per_batch`` recomputes ``s`` from the data ``FQ₂`` sees, so
      every op on the path must also keep ``max|y|`` of each scale group: only copies that
      drop nothing (reshape, expand, transpose, single-operand concat) and neg / abs —
      relu, narrow and pooling can shrink it and ``FQ₂`` would re-quantize on a finer
      grid. With ``a = max|x|`` and ``s = fl(a/q_max)`` (computed in f32, f64 for f64),
      ``max|y|`` is ``R(t)``, ``t = fl(q_max·s)``, ``R`` the rounding to the tensor's dtype:

      - f32 / f64 (``R`` exact): ``fl(t/q_max) = s``. ``t`` is the float nearest
        ``q_max·s`` and ``a`` is a float, so ``|t - q_max·s| <= |a - q_max·s| <=
        q_max·ulp(s)/2``: ``t/q_max`` is within half an ulp of ``s`` (a tie resolves to the
        same even ``s``; when ``s`` is a power of two ``q_max·s`` is exact). Checked over
        every f32 mantissa and 4·10⁷ f64 ones for all three ``q_max`` (for an *arbitrary*
        ``s`` it fails for 0.78 % of f32 scales at 8 bits: the argument needs ``s =
        fl(a/q_max)``).
      - f16 / bf16: ``t`` is within ~2⁻²³·a of ``a``, far below half a storage ulp, so
        ``R(t) = a`` and the scale is recomputed from the same ``a``.
      - the 1e-12 floor (``a/q_max`` below it): checked directly, ``fl(t/q_max) <= 1e-12``
        in f32 / f64; for f16 / bf16 every representable ``a`` and every ``k`` was checked
        (bf16 at 2 bits re-derives a different scale for 128 tiny ``a``, but the same
        values).

      ``ema`` (which mixes the batch scale into the state) is never removed.
    * per channel / with batch_dims: the scale is chosen by the element's batch and
      channel coordinates, so an op qualifies only if it keeps those coordinates: narrow
      on another axis, transpose fixing them, pooling when they are axes 0 / 1;
      reshape and expand only for a per-tensor FQ without batch_dims.
    * floor and overflow: if ``amax/q_max < 1e-12`` both scales are the floor; if
      ``fl(k·s)`` overflows to ±inf, so does ``fl(q_max·s)`` and ``FQ₂`` returns it.

    In floating point ``FQ₂`` computes ``fl(v/s)`` with ``v`` the stored grid value: in
    f32 / f64 ``v = fl(k·s)`` and ``fl(v/s)`` is within a few ulps of ``k`` (``|k| <=
    127``), so it rounds back to ``k`` and ``fl(k·s) = v``: the same bits. f16 / bf16
    tensors are computed in f32 and stored rounded, a relative error <= 2⁻¹¹ / 2⁻⁸, i.e.
    < 127·2⁻⁸ < 0.5 grid steps, so ``k`` is recovered again (f16 subnormals: the gap
    2⁻²⁴ is uniform, ``FQ₂`` picks the grid point nearest ``v``, which rounds back to
    ``v``; checked over 400k scales × every ``k``). The one difference: ``FQ₁`` can produce -0.0
    (``round(-0.3) = -0.0``) and ``FQ₂(-0.0) = +0.0``; the values compare equal and the
    result may keep the sign of that zero.

    Gradients: removing ``FQ₂`` must not change its straight-through estimate either.
    ``ste="identity"`` passes ``dy`` unchanged; ``clipped_identity`` multiplies by
    ``|y| <= q_max·s``, which holds on ``G`` when ``y`` is rounded like the product
    (f32 / f64); for f16 / bf16 the stored ``y`` can round above ``q_max·s``, and ``tanh``
    / ``hard_tanh`` are not 1 on ``G``, so those ``FQ₂`` are kept.
    """
    nodes = g.nodes
    drop = {fq.id for fq in nodes if redundant_fake_quant(g, fq) is not None}
    if not drop:
        return PassResult(g, None, {"removed": 0})
    rb = Rebuilder(g, "propagate_fake_quant")
    for node in nodes:
        if node.id in drop:
            rb.alias(node.id, rb.mapped(node.inputs[0]))
        else:
            rb.copy(node, trusted=True)
    graph, id_map = rb.finish()
    return PassResult(graph, id_map, {"removed": len(drop)})


INSERT_Q_DQ = Pass("insert_q_dq", insert_q_dq, frozenset({"quantize", "dequantize"}), top_level=True)
PROPAGATE_FAKE_QUANT = Pass("propagate_fake_quant", propagate_fake_quant)

__all__ = [
    "INSERT_Q_DQ", "PROPAGATE_FAKE_QUANT", "QuantSpec", "insert_q_dq",
    "propagate_fake_quant", "redundant_fake_quant",
]
