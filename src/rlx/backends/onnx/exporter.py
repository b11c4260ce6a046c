"""rlx MIR → ONNX exporter.

``export(graph, params) -> onnx.ModelProto``. Fused ops are unfused first (each fused op's
``decompose`` hook, through :func:`rlx.opt.unfuse.unfuse`) unless they have an exporter (a fused conv
is a Conv with its bias input and the activation node); every remaining op is written by a
function in :data:`EXPORTERS` (keyed by rlx op name) as one or several ONNX nodes of the
default opset (``ai.onnx`` 18). Ops that ONNX cannot express exactly are listed with the
reason in :data:`REFUSED`; a test walks the registry so that no op is silently missing.
Structured control flow (``if_`` / ``while_`` / ``scan``, and the recurrences that unfuse
into ``scan``) becomes ONNX If / Loop / Scan with the subgraphs exported recursively by the
same converters (:mod:`rlx.backends.onnx.export_control_flow`). ``custom_fn`` is exported as its
forward ``body`` inlined; its custom derivative bodies (``vjp_body`` / ``jvp_body``) are
training-only and are not exported (an ONNX model computes values, not rlx gradients).
Where onnxruntime has one kernel (and fusions) for math the MIR spells with primitives, the
exporter writes that operator: the mean over every spatial axis as GlobalAveragePool, and the
hard-sigmoid / hard-swish chains as HardSigmoid / HardSwish (:mod:`rlx.backends.onnx.export_fusable`).

rlx promotes operand dtypes (``i32 + f32 = f32``) where ONNX requires equal types, so
operands are cast to the node's dtype first. Where onnxruntime's kernels differ from rlx's edge
semantics (docs/semantics.md "Edge cases") the export spells rlx's out: ``reduce`` max / min and
``arg_reduce`` add the NaN test onnxruntime's ReduceMax / ArgMax skip (``pool2d`` max / min a NaN term
that keeps its conv layout), ``softmax`` is ONNX's
``Softmax``, whose rows holding NaN / +inf are NaN as rlx's (onnxruntime; OpenVINO's CPU plugin keeps them
finite, docs/backends.md), the mean over an empty axis is sum / 0, integer
div / mod never reach Div / Mod with a divisor of 0 or -1 (MIN / -1 traps). ``binary`` fmax / fmin
(NaN-ignoring) are exported as Max / Min with the NaN operand replaced by the other; ``reduce``
and ``pool2d`` fmax / fmin have no ONNX form and are refused.

The op families with several ONNX spellings register from their own modules (``export_control_flow``,
``export_index``, ``export_quant``), imported by the package ``__init__`` after this module.

Size: over 800 lines because it is one table, one short exporter per op (about 120 of them), read
top to bottom beside ``docs/ops.md``; the families that need more than a few lines live in ``export_*``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rlx.backends.onnx.export_fusable import clamps_as_clip, drop_unread, fuse_hard_activations
from rlx.backends.onnx.export_shapes import dim_value, has_symbolic, reshape_target, shape_value
from rlx.backends.onnx.namespace import MaskNamespace, OnnxNamespace
from rlx.ir.dtype import DType
from rlx.ir.graph import RESULT, Graph, Node
from rlx.ir.onnx_format import SINCE_OPSET, OnnxError, OnnxUnsupported, onnx_dtype
from rlx.ops import rows
from rlx.ops.attention import KEEP_AT, MASK_FILL, attention_scale, position_keep
from rlx.ops.common import all_equal, bound_value
from rlx.ops.kinds import ACTIVATION_KINDS, BINARY_KINDS, COMPARE_KINDS, UNARY_MATH_KINDS
from rlx.ops.powers import MULTIPLIED_DTYPES
from rlx.ops.splat import SPLAT_OPS

OPSET = 18
EXPORTERS: dict[str, Callable[[Exporter, Node, list[str]], str]] = {}

#: rlx ops the exporter refuses, with the reason (checked by tests/backends/test_onnx_tables.py).
REFUSED: dict[str, str] = {
    "input": "a graph input, not a node (written as a graph input)",
    "param": "a weight, not a node (written as an initializer, or a graph input when no value is given)",
    "constant": "written as an initializer",
    "result": "a result of the multi-result node before it: one more output of that node's ONNX node(s)",
    "resize_nearest_2x": "",  # replaced below when exported; kept here only if not
    "relu_backward": "training-only backward op (export forward graphs)",
    "activation_backward": "training-only backward op (export forward graphs)",
    "max_pool2d_backward": "training-only backward op (export forward graphs)",
    "conv2d_backward_input": "training-only backward op (export forward graphs)",
    "conv2d_backward_weight": "training-only backward op (export forward graphs)",
    "softmax_cross_entropy_backward": "training-only backward op (export forward graphs)",
    "attention_backward": "training-only backward op (export forward graphs)",
    "layer_norm_backward_input": "training-only backward op (export forward graphs)",
    "layer_norm_backward_gamma": "training-only backward op (export forward graphs)",
    "rms_norm_backward_input": "training-only backward op (export forward graphs)",
    "rms_norm_backward_gamma": "training-only backward op (export forward graphs)",
    "rms_norm_backward_beta": "training-only backward op (export forward graphs)",
    "rope_backward": "training-only backward op (export forward graphs)",
    "group_norm_backward_input": "training-only backward op (export forward graphs)",
    "group_norm_backward_gamma": "training-only backward op (export forward graphs)",
    "group_norm_backward_beta": "training-only backward op (export forward graphs)",
    "gather_backward": "training-only backward op (export forward graphs)",
    "complex_norm_sq_backward": "training-only backward op (export forward graphs)",
    "fake_quantize_backward": "training-only backward op (export forward graphs)",
    "fake_quantize_lsq_backward_scale": "training-only backward op (export forward graphs)",
    "fake_quantize_lsq_backward_x": "training-only backward op (export forward graphs)",
    "complex_norm_sq": "c64 tensors: onnxruntime has no complex arithmetic kernels",
    "conjugate": "c64 tensors: onnxruntime has no complex arithmetic kernels",
    "fft": "c64 tensors (ONNX DFT works on a real [..., 2] layout; not mapped yet)",
    "dense_solve": "no ONNX linear-solve operator",
    "batched_dense_solve": "no ONNX linear-solve operator",
    **dict.fromkeys(("cholesky", "matrix_inverse", "slogdet", "eigh", "eig", "svd", "qr", "geqrf", "householder_product", "ormqr", "lu_factor", "lu_unpack", "lu_solve", "solve_triangular", "ldl_factor", "ldl_solve", "matrix_exp"), "no ONNX operator for this factorization / solver (ONNX has Det only)"),  # noqa: E501
    **dict.fromkeys(("complex", "view_as_real", "view_as_complex"), "complex tensors: onnxruntime has no complex kernels"),
    "sample": "random sampling: ONNX Multinomial has another random stream, results cannot match",
    "quantize": "rounds half away from zero; ONNX QuantizeLinear rounds half to even (not exact)",
    "dequantize": "paired with quantize's rounding; DequantizeLinear mapping not written yet",
    "fake_quantize": "QAT op with observer state (training-time)",
    "fake_quantize_lsq": "QAT op (training-time)",
    "observer_update": "QAT observer state update (training-time)",
    "q_matmul": "requantizes with round half away from zero; ONNX QLinearMatMul rounds half to even (not exact)",
    "q_conv2d": "requantizes with round half away from zero; ONNX QLinearConv rounds half to even (not exact)",
    "dequant_matmul": "packed weight schemes (int4 / GGUF / NVFP4 blocks) have no ONNX equivalent here",
    "grouped_matmul": "per-token expert matmul: Gather(w, ids) + batched MatMul mapping not written yet",
    "dequant_grouped_matmul": "GGUF K-quant / NVFP4 packed expert blocks have no ONNX equivalent",
    "dequant_moe_weights": "GGUF K-quant / NVFP4 packed expert blocks have no ONNX equivalent",
    "logcumsumexp": "no ONNX scan of logaddexp (a CumSum of exp underflows where torch's scan does not)",
    "special": "Bessel / Airy / zeta / incomplete-gamma functions, torch's orthogonal polynomials, gcd and frexp have no ONNX operator",
    **dict.fromkeys(
        SPLAT_OPS,
        "Gaussian splatting (data-dependent tile lists and depth sorts) has no ONNX operator"),
}
del REFUSED["resize_nearest_2x"]


def exporter(*ops: str):
    def wrap(fn):
        for op in ops:
            EXPORTERS[op] = fn
        return fn

    return wrap


#: initializers from this size on go to ``export(external=...)``'s dict (when given) instead of the model's bytes
EXTERNAL_MIN_BYTES = 1 << 20
#: the location their placeholders name: no file, the engine is handed the arrays (onnxruntime:
#: ``SessionOptions.add_external_initializers``)
EXTERNAL_LOCATION = "rlx-external"


def _as_inputs(model: Any, external: Mapping[str, np.ndarray]) -> Any:
    """A copy of ``model`` with its external initializers as graph inputs of the same type, for the checker (which
    reads external data from files)."""
    import onnx

    checked = onnx.ModelProto()
    checked.CopyFrom(model)
    kept = [t for t in checked.graph.initializer if t.name not in external]
    moved = [t for t in checked.graph.initializer if t.name in external]
    del checked.graph.initializer[:]
    checked.graph.initializer.extend(kept)
    checked.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in moved)
    return checked


def _external_tensor(onnx: Any, name: str, data_type: int, shape: tuple[int, ...], nbytes: int) -> Any:
    """An initializer whose data lives outside the model (ONNX external data under :data:`EXTERNAL_LOCATION`)."""
    t = onnx.TensorProto(name=name, data_type=data_type, dims=list(shape), data_location=onnx.TensorProto.EXTERNAL)
    for key, value in (("location", f"{EXTERNAL_LOCATION}/{name}"), ("offset", "0"), ("length", str(nbytes))):
        t.external_data.add(key=key, value=value)
    return t


class Exporter:
    """State of one export: the ONNX nodes, initializers and value names written so far."""

    def __init__(self, g: Graph, params: Mapping[str, np.ndarray], opset: int, parent: Exporter | None = None,
                 engine: str | None = None, external: dict[str, np.ndarray] | None = None,
                 threads: int | None = None):
        import onnx

        self.onnx = onnx
        self.g = g
        self.params = dict(params or {})
        self.opset = opset
        self.engine = parent.engine if parent else engine
        #: the engine's intra-op threads (None: all cores), for forms whose speed depends on them
        self.threads = parent.threads if parent else threads
        #: where large initializers go instead of the model's bytes (see :func:`export`), or None
        self.external = parent.external if parent else external
        self.nodes: list[Any] = []
        self.inputs: list[Any] = []
        self.names: dict[int, str] = {}
        # shared by every scope: initializers (subgraphs read them from the outer scope), and
        # fresh names, unique across nesting (ONNX forbids shadowing an outer name)
        self.inits: list[Any] = parent.inits if parent else []
        self._uid = parent._uid if parent else itertools.count()
        self._reserved: set[str] = parent._reserved if parent else {  # user names: graph inputs, output names
            n.attrs["name"] if n.op in ("input", "param") else n.name for n in g.nodes
            if n.op in ("input", "param") or (n.name and n.id in g.output_ids)}

    def scope(self, g: Graph, nodes: list[Any] | None = None) -> Exporter:
        """An exporter for subgraph ``g`` (its own node ids), sharing initializers and fresh names;
        it writes a new ONNX node list (a subgraph scope) or, given ``nodes``, that one."""
        child = Exporter(g, {}, self.opset, parent=self)
        if nodes is not None:
            child.nodes = nodes
        return child

    @functools.cached_property
    def users(self) -> list[list[int]]:
        """For each node of the graph, the ids of the nodes that read it (graph outputs not counted)."""
        return self.g.users()

    def fresh(self, hint: str = "t") -> str:
        name = f"{hint}_{next(self._uid)}"
        while name in self._reserved:
            name = f"{hint}_{next(self._uid)}"
        return name

    def convert(self, node: Node) -> None:
        """Write one node (not an input / param) and record its ONNX name(s).

        A multi-result node's exporter returns one name per result."""
        if node.op == RESULT:  # named by its producer
            return
        if node.op == "constant":
            self.names[node.id] = self.const(node.attrs["value"].array)
            return
        fn = EXPORTERS.get(node.op)
        if fn is None:
            reason = REFUSED.get(node.op, "no ONNX exporter")
            raise OnnxUnsupported(f"cannot export op {node.op!r} (node %{node.id}): {reason}")
        start = len(self.nodes)
        out = fn(self, node, [self.names[i] for i in node.inputs])
        if node.name:  # the value's name becomes the name of the ONNX node computing it
            first = out[0] if isinstance(out, (list, tuple)) else out
            made = next((nd for nd in reversed(self.nodes[start:]) if first in nd.output), None)
            if made is not None and not made.name:
                made.name = node.name
        if node.extra_types:
            self.names.update(zip(range(node.id, node.id + node.num_results), out))
        else:
            self.names[node.id] = out

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(self.onnx.helper.make_node(op, inputs, outs, **{k: v for k, v in attrs.items() if v is not None}))
        return outs[0] if n_out == 1 else outs

    def const(self, value: Any, dtype: DType | np.dtype | None = None) -> str:
        arr = np.asarray(value)
        if dtype is not None:
            arr = arr.astype(DType.of(dtype).numpy)
        name = self.fresh("c")
        self.inits.append(self._tensor(arr, name))
        return name

    def _tensor(self, arr: np.ndarray, name: str):
        dt = DType.of(arr.dtype)
        if dt in (DType.BF16, DType.F8E4M3, DType.F8E5M2):
            t = self.onnx.helper.make_tensor(name, onnx_dtype(dt), arr.shape, arr.astype(np.float32).reshape(-1).tolist())
            return t
        if self.external is not None and arr.nbytes >= EXTERNAL_MIN_BYTES:
            self.external[name] = np.ascontiguousarray(arr)
            return _external_tensor(self.onnx, name, onnx_dtype(dt), arr.shape, arr.nbytes)
        return self.onnx.numpy_helper.from_array(np.ascontiguousarray(arr).reshape(arr.shape), name)  # keeps rank 0

    def ints(self, values) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64))

    def cast(self, name: str, src: DType, dst: DType) -> str:
        return name if src == dst else self.node("Cast", [name], to=onnx_dtype(dst))

    def scalar(self, value: float, dtype: DType) -> str:
        return self.const(np.array(value).astype(dtype.numpy))

    def value_info(self, name: str, t) -> Any:
        dims = [d if isinstance(d, int) else str(d) for d in t.shape]
        return self.onnx.helper.make_tensor_value_info(name, onnx_dtype(t.dtype, f"{name}: "), dims)


def _operands(ex: Exporter, node: Node, names: list[str], dtype: DType | None = None) -> list[str]:
    """Operand names cast to ``dtype`` (default: the node's dtype)."""
    want = dtype or node.dtype
    return [ex.cast(n, ex.g.node(i).dtype, want) for n, i in zip(names, node.inputs)]


def _in_dtype(ex: Exporter, node: Node, i: int) -> DType:
    return ex.g.node(node.inputs[i]).dtype


def _in_shape(ex: Exporter, node: Node, i: int):
    return ex.g.node(node.inputs[i]).shape


# ================================================================ elementwise
_ACT = {k: row.onnx for k, row in ACTIVATION_KINDS.items() if row.onnx}  # one ONNX op each; the rest from the formula


def activate(ex: Exporter, kind: str, x: str, dt: DType) -> str:
    """Activation ``kind`` of ONNX value ``x`` (one node where ONNX has the op, else the row's formula)."""
    if kind == "neg" and dt.is_int and not dt.value.startswith("i"):  # ONNX Neg takes signed types: 0 - x wraps
        return ex.node("Sub", [ex.scalar(0, dt), x])
    if kind in _ACT:
        return ex.node(_ACT[kind], [x])
    ns = OnnxNamespace(ex, dt)
    return ACTIVATION_KINDS[kind].forward(ns, ns.wrap(x), is_int=dt.is_int).name


@exporter("activation")
def _activation(ex, node, ins):
    return activate(ex, node.attrs["kind"], ins[0], node.dtype)


@exporter("cast")
def _cast(ex, node, ins):
    src, dst = _in_dtype(ex, node, 0), node.attrs["to"]
    if dst.is_int and src.is_float:  # rlx truncates toward zero; make it explicit (ONNX leaves it to the runtime)
        ns = OnnxNamespace(ex, src)
        return ex.node("Cast", [ns.trunc(ns.wrap(ins[0])).name], to=onnx_dtype(dst))
    if dst in SINCE_OPSET and dst.is_float and ex.opset >= 19:  # rlx's cast does not saturate (ONNX's default does)
        return ex.node("Cast", [ins[0]], to=onnx_dtype(dst), saturate=0, **({"round_mode": "nearest"} if dst is DType.F8E8M0 else {}))
    return ex.node("Cast", [ins[0]], to=onnx_dtype(dst))


def _bitcast_round_trip(ex: Exporter, node: Node) -> bool:
    """Whether ``node`` is the outer half of ``bitcast(bitcast(x, T), x.dtype)`` (the value is ``x``: the torch
    reader writes it to stop a gradient), or an inner half read only by such outer halves."""
    inner = ex.g.node(node.inputs[0])
    if inner.op == "bitcast" and ex.g.node(inner.inputs[0]).dtype == node.dtype:
        return True
    readers = [ex.g.node(u) for u in ex.g.users()[node.id]]
    source = ex.g.node(node.inputs[0]).dtype
    return (node.id not in ex.g.output_ids and bool(readers)
            and all(r.op == "bitcast" and r.dtype == source for r in readers))


@exporter("bitcast")
def _bitcast(ex, node, ins):
    if ex.opset < 26 and _bitcast_round_trip(ex, node):  # exported as the value it round-trips
        return ex.node("Identity", [ins[0]])
    if ex.opset < 26:
        raise OnnxUnsupported(f"node %{node.id} (bitcast): ONNX BitCast needs opset 26, exporting at {ex.opset} (pass opset=)")
    return ex.node("BitCast", [ins[0]], to=onnx_dtype(node.attrs["to"]))


_BIN = {k: row.onnx for k, row in BINARY_KINDS.items()}


def _power_of(ex: Exporter, node: Node) -> tuple[int, float] | None:
    """``(x, 2.0)`` for ``mul(x, x)`` and ``(x, 3.0)`` for ``mul(mul(x, x), x)`` (either order) in f32 / f64:
    the products onnxruntime's ``Pow`` computes for those exponents, bit for bit
    (:data:`rlx.ops.powers.MULTIPLIED_EXPONENTS`; the importers write them for ``Pow`` and torch's
    ``pow``). Exported as ``Pow``, the fusions that look for it (FastGelu's cube, RMSNorm's square) fire."""
    if node.attrs["op"] != "mul" or node.dtype not in MULTIPLIED_DTYPES:
        return None
    a, b = node.inputs
    if a == b:
        return a, 2.0
    for square, x in ((a, b), (b, a)):
        sq = ex.g.node(square)
        if sq.op == "binary" and sq.attrs["op"] == "mul" and tuple(sq.inputs) == (x, x) and sq.dtype == node.dtype:
            return x, 3.0
    return None


@exporter("binary")
def _binary(ex, node, ins):
    power = _power_of(ex, node)
    if power is not None:  # a cube's square is left unread (drop_unread removes it)
        return ex.node("Pow", [ex.names[power[0]], ex.scalar(power[1], node.dtype)])
    a, b = _operands(ex, node, ins)
    op = node.attrs["op"]
    if node.dtype.is_bool:
        return ex.node({"add": "Or", "mul": "And", "max": "Or", "min": "And", "fmax": "Or", "fmin": "And"}[op], [a, b])
    if op in ("fmax", "fmin"):  # Max / Min propagate NaN: a NaN operand takes the other's value first
        nan_a, nan_b = ex.node("IsNaN", [a]), ex.node("IsNaN", [b])
        a, b = ex.node("Where", [nan_a, b, a]), ex.node("Where", [nan_b, a, b])
        return ex.node("Max" if op == "fmax" else "Min", [a, b])
    if op == "div" and node.dtype.is_int:  # rlx: truncate toward zero, x / 0 = 0, MIN / -1 = MIN
        return _widened(ex, a, b, node.dtype, _int_div)
    return ex.node(_BIN[op], [a, b])


def _widened(ex, a: str, b: str, dt: DType, fn) -> str:
    """``fn(ex, a, b, dt)``, computed in i32 for i16 / u16 (onnxruntime has no Where for them; the
    quotient and remainder fit, and the cast back wraps as rlx does)."""
    if dt not in (DType.I16, DType.U16):
        return fn(ex, a, b, dt)
    return ex.cast(fn(ex, ex.cast(a, dt, DType.I32), ex.cast(b, dt, DType.I32), DType.I32), DType.I32, dt)


def _int_div(ex, a: str, b: str, dt: DType) -> str:
    if _unsigned(dt):
        nonzero, safe = _unsigned_divisor(ex, b, dt)
        return ex.node("Mul", [ex.node("Div", [a, safe]), nonzero])
    is0, is_m1, safe = _int_divisor(ex, b, dt)
    q = ex.node("Where", [is_m1, ex.node("Sub", [ex.scalar(0, dt), a]), ex.node("Div", [a, safe])])  # wraps -MIN to MIN
    return ex.node("Where", [is0, ex.scalar(0, dt), q])


def _int_mod(ex, a: str, b: str, dt: DType, fmod: int) -> str:
    if _unsigned(dt):
        nonzero, safe = _unsigned_divisor(ex, b, dt)
        return ex.node("Mul", [ex.node("Mod", [a, safe], fmod=fmod), nonzero])
    is0, is_m1, safe = _int_divisor(ex, b, dt)  # x % 0 = x % -1 = 0
    return ex.node("Where", [ex.node("Or", [is0, is_m1]), ex.scalar(0, dt), ex.node("Mod", [a, safe], fmod=fmod)])


def _unsigned(dt: DType) -> bool:
    return dt.is_int and not dt.value.startswith("i")


def _unsigned_divisor(ex, b: str, dt: DType) -> tuple[str, str]:
    """(1 where b != 0 else 0, b with 0 replaced by 1), by arithmetic: onnxruntime has no Where for u64."""
    nonzero = ex.cast(ex.node("Not", [ex.node("Equal", [b, ex.scalar(0, dt)])]), DType.BOOL, dt)
    return nonzero, ex.node("Add", [b, ex.node("Sub", [ex.scalar(1, dt), nonzero])])


def _int_divisor(ex, b: str, dt: DType) -> tuple[str, str, str]:
    """(b == 0, b == -1, b with both replaced by 1) of a signed type: onnxruntime's integer Div / Mod
    fail on a zero divisor and trap (SIGFPE, the process dies) on MIN / -1, so neither reaches them;
    the callers put rlx's results (0; -a or 0) where the flags are set."""
    is0 = ex.node("Equal", [b, ex.scalar(0, dt)])
    is_m1 = ex.node("Equal", [b, ex.scalar(-1, dt)])
    return is0, is_m1, ex.node("Where", [ex.node("Or", [is0, is_m1]), ex.scalar(1, dt), b])


_CMP = {k: row.onnx for k, row in COMPARE_KINDS.items() if row.onnx}  # ne: Not(Equal)


@exporter("compare")
def _compare(ex, node, ins):
    dt = DType.promote(_in_dtype(ex, node, 0), _in_dtype(ex, node, 1))
    a, b = _operands(ex, node, ins, dt)
    if node.attrs["op"] == "ne" and node.inputs[0] == node.inputs[1] and dt.is_float:
        return ex.node("IsNaN", [a])  # x != x, as importers write IsNaN: one kernel
    if node.attrs["op"] == "ne":
        return ex.node("Not", [ex.node("Equal", [a, b])])
    return ex.node(_CMP[node.attrs["op"]], [a, b])


@exporter("where")
def _where(ex, node, ins):
    c = ex.cast(ins[0], _in_dtype(ex, node, 0), DType.BOOL)
    a, b = (ex.cast(n, _in_dtype(ex, node, i), node.dtype) for i, n in ((1, ins[1]), (2, ins[2])))
    return ex.node("Where", [c, a, b])


_MATH = {k: row.onnx for k, row in UNARY_MATH_KINDS.items() if row.onnx}  # the rest from the formula


@exporter("unary_math")
def _unary_math(ex, node, ins):
    kind, x = node.attrs["kind"], ins[0]
    if node.dtype.is_int and kind != "sign":
        return ex.node("Identity", [x])
    if kind in _MATH:
        return ex.node(_MATH[kind], [x])
    ns = OnnxNamespace(ex, node.dtype)
    return UNARY_MATH_KINDS[kind].forward(ns, ns.wrap(x)).name


@exporter("binary_ext")
def _binary_ext(ex, node, ins):
    a, b = _operands(ex, node, ins)
    op = node.attrs["op"]
    if op in ("mod", "fmod"):
        if node.dtype.is_float and op == "mod":
            return _float_mod(ex, a, b, node.dtype)
        if not node.dtype.is_int:
            return ex.node("Mod", [a, b], fmod=1)
        fmod = 1 if op == "fmod" else 0
        return _widened(ex, a, b, node.dtype, lambda ex, a, b, dt: _int_mod(ex, a, b, dt, fmod))
    if op.startswith("bitwise"):
        if node.dtype.is_bool:
            return ex.node({"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}[op], [a, b])
        return ex.node({"bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor"}[op], [a, b])
    return _bit_shift(ex, a, b, node.dtype, left=op == "shift_left")


_UNSIGNED = {DType.I8: DType.U8, DType.I16: DType.U16, DType.I32: DType.U32, DType.I64: DType.U64}


def _bit_shift(ex, a: str, b: str, dt: DType, left: bool) -> str:
    """rlx's shifts on any integer type with ONNX BitShift, which takes unsigned ones: the operands as
    their unsigned twin (same bits), the count read as unsigned; a count of the width or more gives 0,
    and a right shift of a signed value is arithmetic: ~(~a >> n) for a < 0, the count capped at
    width - 1 (which gives 0 or -1, as rlx)."""
    if dt not in _UNSIGNED and dt not in _UNSIGNED.values():
        raise OnnxUnsupported(f"binary_ext shift on {dt}: ONNX BitShift takes integers")
    u, width = _UNSIGNED.get(dt, dt), dt.bits
    count = ex.cast(b, dt, u)
    if dt in _UNSIGNED and not left:
        safe = ex.node("Min", [count, ex.scalar(width - 1, u)])
        neg = ex.node("Less", [a, ex.scalar(0, dt)])
        flipped = ex.node("Where", [neg, ex.node("BitwiseNot", [a]), a])
        shifted = ex.cast(ex.node("BitShift", [ex.cast(flipped, dt, u), safe], direction="RIGHT"), u, dt)
        return ex.node("Where", [neg, ex.node("BitwiseNot", [shifted]), shifted])
    big = ex.node("GreaterOrEqual", [count, ex.scalar(width, u)])
    safe = ex.node("Where", [big, ex.scalar(0, u), count])
    shifted = ex.node("BitShift", [ex.cast(a, dt, u), safe], direction="LEFT" if left else "RIGHT")
    return ex.cast(ex.node("Where", [big, ex.scalar(0, u), shifted]), u, dt)


def _float_mod(ex, a: str, b: str, dt: DType) -> str:
    """Floor modulo of floats (ONNX Mod takes fmod=1 only for floats): the exact fmod, plus the divisor
    where the remainder's sign differs from it; a zero remainder takes the divisor's sign (np.mod),
    so an infinite divisor and signed zeros come out as NumPy's."""
    r = ex.node("Mod", [a, b], fmod=1)
    zero, minus_zero = ex.scalar(0.0, dt), ex.scalar(-0.0, dt)
    neg_r, neg_b = ex.node("Less", [r, zero]), ex.node("Less", [b, zero])
    is_zero = ex.node("Equal", [r, zero])
    shift = ex.node("And", [ex.node("Xor", [neg_r, neg_b]), ex.node("Not", [is_zero])])
    signed_zero = ex.node("Where", [neg_b, minus_zero, zero])
    return ex.node("Where", [is_zero, signed_zero, ex.node("Where", [shift, ex.node("Add", [r, b]), r])])


# ================================================================ linear algebra
@exporter("matmul")
def _matmul(ex, node, ins):
    return ex.node("MatMul", _operands(ex, node, ins))


@exporter("dot_general")
def _dot_general(ex, node, ins):
    a, b = _operands(ex, node, ins)
    ra, rb = len(_in_shape(ex, node, 0)), len(_in_shape(ex, node, 1))
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [next(letters) for _ in range(ra)]
    lb = [next(letters) for _ in range(rb)]
    at = node.attrs
    lbat, lcon = [i % ra for i in at["lhs_batch"]], [i % ra for i in at["lhs_contracting"]]
    rbat, rcon = [i % rb for i in at["rhs_batch"]], [i % rb for i in at["rhs_contracting"]]
    for i, j in zip(lbat + lcon, rbat + rcon):
        lb[j] = la[i]
    free_a = [la[i] for i in range(ra) if i not in lbat and i not in lcon]
    free_b = [lb[j] for j in range(rb) if j not in rbat and j not in rcon]
    eq = f"{''.join(la)},{''.join(lb)}->{''.join([la[i] for i in lbat] + free_a + free_b)}"
    if node.dtype == DType.BF16:  # ONNX Einsum takes no bfloat16: float32 products and sums, rounded once
        a, b = (ex.cast(v, DType.BF16, DType.F32) for v in (a, b))
        return ex.cast(ex.node("Einsum", [a, b], equation=eq), DType.F32, DType.BF16)
    return ex.node("Einsum", [a, b], equation=eq)


# ================================================================ normalization
def _square(ex, x: str, dt: DType) -> str:
    """``x * x``; as ``Pow(x, 2)`` where onnxruntime computes that product bit for bit, so its
    (Simplified)LayerNormalization fusions, which look for ``Pow``, fire."""
    return ex.node("Pow", [x, ex.scalar(2.0, dt)]) if dt in MULTIPLIED_DTYPES else ex.node("Mul", [x, x])


def _normalize(ex, x: str, axes: list[int], eps: float, dt: DType, rms: bool = False) -> str:
    ax = ex.ints(axes)
    if rms:
        ms = ex.node("ReduceMean", [_square(ex, x, dt), ax], keepdims=1)
        return ex.node("Div", [x, ex.node("Sqrt", [ex.node("Add", [ms, ex.scalar(eps, dt)])])])
    mu = ex.node("ReduceMean", [x, ax], keepdims=1)
    d = ex.node("Sub", [x, mu])
    var = ex.node("ReduceMean", [_square(ex, d, dt), ax], keepdims=1)
    return ex.node("Div", [d, ex.node("Sqrt", [ex.node("Add", [var, ex.scalar(eps, dt)])])])


def _affine(ex, y: str, gamma: str, beta: str, rank: int, axis: int) -> str:
    shape = [1] * rank
    shape[axis] = -1
    s = ex.ints(shape)
    return ex.node("Add", [ex.node("Mul", [y, ex.node("Reshape", [gamma, s])]), ex.node("Reshape", [beta, s])])


@exporter("layer_norm", "rms_norm", "layer_norm2d")
def _layer_norm(ex, node, ins):
    x, gamma, beta = _operands(ex, node, ins)
    rank = len(node.shape)
    axis = 1 if node.op == "layer_norm2d" else node.attrs["axis"] % rank
    if node.op == "layer_norm" and axis == rank - 1:
        return ex.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=node.attrs["eps"])
    y = _normalize(ex, x, [axis], node.attrs["eps"], node.dtype, rms=node.op == "rms_norm")
    return _affine(ex, y, gamma, beta, rank, axis)


@exporter("group_norm")
def _group_norm(ex, node, ins):
    """Float32: InstanceNormalization of x as [N, G, rest] (the mean and biased variance per sample and group,
    as torch's own file writes it: onnxruntime runs one kernel where the formula was seven nodes, PoolFormer
    50 -> 39 us a call at 1 thread, torch's file 43), then the per-channel affine; other dtypes: the formula."""
    x, gamma, beta = _operands(ex, node, ins)
    shape = list(node.shape)
    g_ = node.attrs["num_groups"]
    grouped = ex.node("Reshape", [x, ex.ints([0, g_, -1])])
    if node.dtype == DType.F32:
        ones, zeros = ex.const(np.ones(g_, np.float32)), ex.const(np.zeros(g_, np.float32))
        y = ex.node("InstanceNormalization", [grouped, ones, zeros], epsilon=float(node.attrs["eps"]))
    else:
        y = _normalize(ex, grouped, [2], node.attrs["eps"], node.dtype)
    y = ex.node("Reshape", [y, ex.node("Shape", [x])])
    return _affine(ex, y, gamma, beta, len(shape), 1)


# ================================================================ shape ops
def _dims(shape) -> list[int]:
    return [d if isinstance(d, int) else -1 for d in shape]


@exporter("reshape")
def _reshape(ex, node, ins):
    dims = list(node.attrs["new_shape"])
    if has_symbolic(dims):
        return ex.node("Reshape", [ins[0], reshape_target(ex, dims, node.shape)], allowzero=1 if 0 in dims else None)
    if dims.count(-1) > 1 or (-1 in dims and 0 in dims):
        dims = _dims(node.shape)
    return ex.node("Reshape", [ins[0], ex.ints(dims)], allowzero=1 if 0 in dims else None)


@exporter("transpose")
def _transpose(ex, node, ins):
    return ex.node("Transpose", [ins[0]], perm=list(node.attrs["perm"]))


@exporter("narrow")
def _narrow(ex, node, ins):
    a, s, n = node.attrs["axis"], node.attrs["start"], node.attrs["length"]
    if has_symbolic([s, n]):
        return ex.node("Slice", [ins[0], dim_value(ex, s), dim_value(ex, s + n), ex.ints([a])])
    return ex.node("Slice", [ins[0], ex.ints([s]), ex.ints([s + n]), ex.ints([a])])


@exporter("concat")
def _concat(ex, node, ins):
    return ex.node("Concat", _operands(ex, node, ins), axis=node.attrs["axis"])


@exporter("expand")
def _expand(ex, node, ins):
    return ex.node("Expand", [ins[0], shape_value(ex, node.shape)])


@exporter("gather")
def _gather(ex, node, ins):
    return ex.node("Gather", ins, axis=node.attrs["axis"])


@exporter("gather_elements")
def _gather_elements(ex, node, ins):
    return ex.node("GatherElements", ins, axis=node.attrs["axis"])


@exporter("scatter_elements")
def _scatter_elements(ex, node, ins):
    red = node.attrs["reduction"]
    return ex.node("ScatterElements", ins, axis=node.attrs["axis"], reduction=None if red == "none" else red)


# ================================================================ reductions
_RED = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin", "prod": "ReduceProd"}


@exporter("reduce")
def _reduce(ex, node, ins):
    axes = list(node.attrs["axes"])
    if not axes:
        return ex.node("Identity", [ins[0]])
    if node.attrs["op"] not in _RED:
        raise OnnxUnsupported(f"reduce {node.attrs['op']!r} (NaN-ignoring) has no ONNX equivalent")
    x, dt = ins[0], _in_dtype(ex, node, 0)
    if dt.is_bool and node.attrs["op"] in ("max", "min"):  # any / all: ReduceMax / ReduceMin take bool from opset 20
        y = ex.node(_RED[node.attrs["op"]], [ex.cast(x, dt, DType.U8), ex.ints(axes)], keepdims=int(node.attrs["keep_dim"]))
        return ex.cast(y, DType.U8, node.dtype)
    rank = len(_in_shape(ex, node, 0))
    if node.attrs["op"] == "mean" and rank in (4, 5) and sorted(a % rank for a in axes) == list(range(2, rank)) \
            and node.dtype in (DType.F32, DType.F64, DType.F16):
        # the mean over every spatial axis of an image is GlobalAveragePool: onnxruntime keeps it (and what
        # follows, a squeeze-excite gate say) in its blocked conv layout, where ReduceMean needs layout
        # reorders. Not on rank 3, where the last axis is a sequence model's features (RMSNorm's mean).
        pooled = ex.node("GlobalAveragePool", [x])
        return pooled if node.attrs["keep_dim"] else ex.node("Flatten", [pooled], axis=1)
    op, keep = node.attrs["op"], int(node.attrs["keep_dim"])
    shape = _in_shape(ex, node, 0)
    if dt.is_float and op in ("mean", "max", "min") and any(shape[a] == 0 for a in axes):
        # the identity from the sum of nothing (0): the mean of nothing is NaN (NumPy; onnxruntime's ReduceMean
        # gives 0), the max -inf and the min +inf (OpenVINO's ReduceMax / ReduceMin give the float's limits)
        total = ex.node("ReduceSum", [x, ex.ints(axes)], keepdims=keep)
        if op == "mean":
            return ex.node("Div", [total, ex.scalar(0.0, dt)])
        return ex.node("Add", [total, ex.scalar(float("-inf") if op == "max" else float("inf"), dt)])
    if dt in (DType.I16, DType.U16) or (dt in (DType.I8, DType.U8) and op in ("sum", "prod")):
        # ONNX reduces no i16 / u16 and sums no 8-bit ints: in i64, wrapped back (exact for max / min)
        wide = ex.node(_RED[op], [ex.cast(x, dt, DType.I64), ex.ints(axes)], keepdims=keep)
        if op in ("max", "min"):  # an empty slice gives i64's limit: clamp to dt's (the identity rlx gives)
            info = np.iinfo(dt.numpy)
            wide = ex.node("Min", [ex.node("Max", [wide, ex.scalar(int(info.min), DType.I64)]), ex.scalar(int(info.max), DType.I64)])
        return ex.cast(wide, DType.I64, dt)
    y = ex.node(_RED[op], [x, ex.ints(axes)], keepdims=keep)
    if op in ("max", "min") and dt.is_float and not _never_nan(ex, node.inputs[0]):
        # onnxruntime skips a NaN unless it comes first: rlx propagates it
        y = ex.node("Where", [_any_nan(ex, x, axes, keep), ex.scalar(float("nan"), dt), y])
    return y


def _never_nan(ex, vid: int) -> bool:
    """Whether value ``vid`` is a cast of a bool or an integer (a mask seen as floats): never NaN, no NaN test."""
    node = ex.g.node(vid)
    if node.op != "cast":
        return False
    source = ex.g.node(node.inputs[0]).dtype
    return source.is_bool or source.is_int


def _any_nan(ex, x: str, axes: list[int], keep: int) -> str:
    """Whether the reduced slice of ``x`` holds a NaN (bool)."""
    flags = ex.cast(ex.node("IsNaN", [x]), DType.BOOL, DType.U8)
    return ex.cast(ex.node("ReduceMax", [flags, ex.ints(axes)], keepdims=keep), DType.U8, DType.BOOL)


@exporter("softmax")
def _softmax(ex, node, ins):
    """ONNX's ``Softmax`` (rlx's rule: a row holding NaN or +inf is all NaN, as onnxruntime computes it); the
    formula exp(x - m) / sum, m the row max, for the types onnxruntime's Softmax lacks (bf16)."""
    x, axis = ins[0], node.attrs["axis"]
    if node.dtype in (DType.F32, DType.F64, DType.F16):
        return ex.node("Softmax", [x], axis=axis)
    m = ex.node("ReduceMax", [x, ex.ints([axis])], keepdims=1)
    e = ex.node("Exp", [ex.node("Sub", [x, m])])
    return ex.node("Div", [e, ex.node("ReduceSum", [e, ex.ints([axis])], keepdims=1)])


@exporter("arg_reduce")
def _arg_reduce(ex, node, ins):
    axis, keep, last = node.attrs["axis"], int(node.attrs["keep_dim"]), int(node.attrs["select_last"])
    idx = ex.node("ArgMax" if node.attrs["op"] == "argmax" else "ArgMin", [ins[0]], axis=axis, keepdims=keep,
                  select_last_index=last)
    if not _in_dtype(ex, node, 0).is_float or _never_nan(ex, node.inputs[0]):
        return idx
    # NaN counts as the extreme (NumPy): the first (select_last: last) NaN of a slice that has one
    flags = ex.cast(ex.node("IsNaN", [ins[0]]), DType.BOOL, DType.U8)
    nan_idx = ex.node("ArgMax", [flags], axis=axis, keepdims=keep, select_last_index=last)
    return ex.node("Where", [_any_nan(ex, ins[0], [axis], keep), nan_idx, idx])


CUMPROD_UNROLL = 256  # longest axis a cumulative product is written out for (ONNX CumProd needs opset 26)


def _cumulative_prod(ex, node, x: str) -> str:
    """A running product along a static axis, one Mul per element in scan order (exclusive: ones first)."""
    shape, axis = list(node.shape), node.attrs["axis"]
    n = shape[axis]
    if not isinstance(n, int) or n > CUMPROD_UNROLL:
        raise OnnxUnsupported(f"cumulative 'prod' along a symbolic or longer than {CUMPROD_UNROLL} axis: "
                              "ONNX CumProd needs opset 26")
    if n == 0:
        return ex.node("Identity", [x])
    parts = list(ex.node("Split", [x, ex.ints([1] * n)], n_out=n, axis=axis)) if n > 1 else [x]
    order = list(reversed(range(n))) if node.attrs["reverse"] else list(range(n))
    exclusive = node.attrs["exclusive"]
    out: dict[int, str] = {}
    acc = None
    for i in order:
        if exclusive and acc is None:  # the first in scan order: ones
            out[i] = ex.node("Expand", [ex.scalar(1, node.dtype), ex.node("Shape", [parts[i]])])
        elif exclusive:
            out[i] = acc
        acc = parts[i] if acc is None else ex.node("Mul", [acc, parts[i]])
        if not exclusive:
            out[i] = acc
    return ex.node("Concat", [out[i] for i in range(n)], axis=axis) if n > 1 else out[0]


@exporter("cumulative")
def _cumulative(ex, node, ins):
    """Upstream's cumsum / cumsum_backward (docs/semantics.md#backward-ops): cumulative(op="sum"), the backward one reversed."""
    if node.attrs["op"] == "prod":
        return _cumulative_prod(ex, node, ins[0])
    if node.attrs["op"] != "sum":
        raise OnnxUnsupported(f"cumulative {node.attrs['op']!r} has no ONNX equivalent")
    return ex.node("CumSum", [ins[0], ex.ints([node.attrs["axis"]])], exclusive=int(node.attrs["exclusive"]),
                   reverse=int(node.attrs["reverse"]))


@exporter("top_k")
def _top_k(ex, node, ins):
    vals, idx = ex.node("TopK", [ins[0], ex.ints([node.attrs["k"]])], n_out=2, axis=node.attrs["axis"],
                        largest=int(node.attrs["largest"]), sorted=1)
    return [vals, idx] if node.attrs["output"] == "both" else vals if node.attrs["output"] == "values" else idx


@exporter("max_pool2d_with_indices")
def _max_pool2d_with_indices(ex, node, ins):
    """MaxPool's Indices count over the whole NCHW tensor; rlx's over each plane: the plane offset is taken off."""
    from rlx.ops.conv import pool_geo

    k, s, p = pool_geo(node.attrs)
    n, c, h, w = _in_shape(ex, node, 0)
    vals, idx = ex.node("MaxPool", [ins[0]], n_out=2, kernel_shape=list(k), strides=list(s), pads=[p[0], p[1], p[0], p[1]])
    if has_symbolic([n, c, h, w]):  # the index within its plane: the flat index modulo the plane size
        return [vals, ex.node("Mod", [idx, dim_value(ex, h * w)])]
    offset = ex.const((np.arange(n * c, dtype=np.int64) * (h * w)).reshape(n, c, 1, 1))
    return [vals, ex.node("Sub", [idx, offset])]


@exporter("split")
def _split(ex, node, ins):
    return ex.node("Split", [ins[0], shape_value(ex, node.attrs["sizes"])], n_out=node.num_results, axis=node.attrs["axis"])


@exporter("scatter_add")
def _scatter_add(ex, node, ins):
    if node.attrs.get("batch_dims", 0):
        raise OnnxUnsupported("scatter_add with batch_dims")
    upd, idx = ins
    rows = node.attrs["num_rows"]
    idx = ex.cast(idx, _in_dtype(ex, node, 1), DType.I64)
    idx = ex.node("Where", [ex.node("Less", [idx, ex.scalar(0, DType.I64)]), ex.node("Add", [idx, ex.scalar(rows, DType.I64)]), idx])
    if node.shape.is_static:
        zeros = ex.const(np.zeros(list(node.shape), node.dtype.numpy))
    else:  # symbolic sizes: zeros expanded to the shape computed at run time
        zeros = ex.node("Expand", [ex.scalar(0, node.dtype), shape_value(ex, node.shape)])
    return ex.node("ScatterND", [zeros, ex.node("Unsqueeze", [idx, ex.ints([1])]), upd], reduction="add")


@exporter("softmax_cross_entropy")
def _sce(ex, node, ins):
    logits, labels = ins
    lsm = ex.node("LogSoftmax", [logits], axis=1)
    idx = ex.node("Unsqueeze", [ex.cast(labels, _in_dtype(ex, node, 1), DType.I64), ex.ints([1])])
    picked = ex.node("GatherElements", [lsm, idx], axis=1)
    return ex.node("Neg", [ex.node("Squeeze", [picked, ex.ints([1])])])


# ================================================================ conv and pooling
def _float_conv(ex, node, ins, op: str, **attrs) -> str:
    """ONNX Conv / ConvTranspose take floats only: an integer conv runs in float64 and is cast back
    (exact while every partial sum stays below 2**53 in magnitude)."""
    if node.dtype.is_float:
        return ex.node(op, _operands(ex, node, ins), **attrs)
    y = ex.node(op, _operands(ex, node, ins, DType.F64), **attrs)
    return ex.cast(y, DType.F64, node.dtype)


@exporter("conv2d")
def _conv2d(ex, node, ins):
    a = node.attrs
    p = list(a["padding"])
    return _float_conv(ex, node, ins, "Conv", kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
                       pads=[p[0], p[1], p[0], p[1]], dilations=list(a["dilation"]), group=a["groups"])


@exporter("fused_conv2d_bias_act")
def _fused_conv2d(ex, node, ins):
    """Conv with the bias as its third input, then the activation node (onnxruntime fuses the pair)."""
    y = _conv2d(ex, node, ins)
    kind = node.attrs["activation"]
    return y if kind is None else activate(ex, kind, y, node.dtype)


@exporter("conv_transpose2d")
def _conv_t(ex, node, ins):
    a = node.attrs
    p = list(a["padding"])
    return _float_conv(ex, node, ins, "ConvTranspose", kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
                       pads=[p[0], p[1], p[0], p[1]], dilations=list(a["dilation"]), group=a["groups"],
                       output_padding=list(a["output_padding"]))


def _window_nan(ex, x: str, dtype: DType, channels: int, geo: dict, nonneg: bool = False) -> str:
    """NaN where a pooling window holds a NaN, else 0: added to MaxPool, which skips a NaN that is not
    last in its window (onnxruntime) or anywhere (OpenVINO), it makes max / min pooling propagate NaN.

    General form: Tanh keeps NaN and maps every other value (±inf too) into [-1, 1]; a depthwise Conv
    with zero weights over the pool's windows sums 0 · tanh, which is NaN exactly where a window holds one.
    Tanh, Conv and Add keep onnxruntime's blocked (NCHWc) conv layout and the Add fuses into the Conv, where
    an IsNaN test costs a CNN layout reorders (scripts/pool_nan_cost.py). Written for onnxruntime
    (``engine``), HardSigmoid takes Tanh's place: it keeps NaN there too and costs ~5% less on SqueezeNet;
    OpenVINO's HardSigmoid drops NaN, so any other engine gets Tanh.

    ``nonneg`` (``x`` is a relu's, never negative nor -inf: :func:`rlx.backends.onnx.export_pool.nonneg`):
    no pass over ``x`` but the window sums. A depthwise Conv with unit weights sums each window, NaN
    exactly where it holds one (no -inf to meet a +inf), else in [0, +inf]. onnxruntime's fused
    ``Clip(0, 0)`` sends those to 0 and keeps NaN (OpenVINO's Clip drops NaN); any other engine gets
    ``0 · tanh(sum)``, on the pool's (smaller) output side, which OpenVINO fuses into the Conv.
    onnxruntime's CPU Conv is float32-only: other float types make the term in float32 (a cast keeps NaN
    and sends the rest to a float or ±inf)."""
    x32 = ex.cast(x, dtype, DType.F32)
    if nonneg:
        ones = ex.const(np.ones((channels, 1, *geo["kernel_shape"]), np.float32))
        sums = ex.node("Conv", [x32, ones], group=channels, **geo)
        zero = ex.scalar(0.0, DType.F32)
        if ex.engine == "onnxruntime" and ex.opset >= 11:
            term = ex.node("Clip", [sums, zero, zero])
        else:
            term = ex.node("Mul", [ex.node("Tanh", [sums]), zero])
        return ex.cast(term, DType.F32, dtype)
    zeros = ex.const(np.zeros((channels, 1, *geo["kernel_shape"]), np.float32))
    bounded = ex.node("HardSigmoid" if ex.engine == "onnxruntime" else "Tanh", [x32])
    return ex.cast(ex.node("Conv", [bounded, zeros], group=channels, **geo), DType.F32, dtype)


@exporter("pool2d")
def _pool2d(ex, node, ins):
    a = node.attrs
    k, s, p = list(a["kernel_size"]), list(a["stride"]), list(a["padding"])
    return pool_window(ex, node, ins[0], {"kernel_shape": k, "strides": s, "pads": [p[0], p[1], p[0], p[1]]})


_POOL_FLOATS = (DType.F16, DType.F32, DType.F64)  # the float types ONNX MaxPool / AveragePool take


def pool_window(ex, node: Node, x: str, geo: dict, nonneg: bool = False) -> str:
    """The pool2d node's ONNX pooling of ``x`` over the windows ``geo`` (kernel_shape, strides, pads);
    ``nonneg``: ``x`` is never negative nor -inf (:func:`rlx.backends.onnx.export_pool.nonneg`). Other
    float types (bf16, the f8s) pool in float32 and are cast back: exact for max / min, a mean rounded once."""
    dt = node.dtype
    if dt.is_float and dt not in _POOL_FLOATS:
        return ex.cast(_pool(ex, node, ex.cast(x, dt, DType.F32), geo, nonneg, DType.F32), DType.F32, dt)
    return _pool(ex, node, x, geo, nonneg, dt)


def _pool(ex, node: Node, x: str, geo: dict, nonneg: bool, dt: DType) -> str:
    a, k = node.attrs, geo["kernel_shape"]
    kind = a["kind"]
    if kind in ("max", "min"):
        y = ex.node("MaxPool", [x if kind == "max" else ex.node("Neg", [x])], **geo)
        if dt.is_float:
            term = _window_nan(ex, x, dt, _in_shape(ex, node, 0)[1], geo, kind == "max" and nonneg)
            y = ex.node("Add", [y, term])
        return y if kind == "max" else ex.node("Neg", [y])
    if kind == "mean":
        return ex.node("AveragePool", [x], count_include_pad=int(a["count_include_pad"]), **geo)
    if kind == "sum":
        avg = ex.node("AveragePool", [x], count_include_pad=1, **geo)
        return ex.node("Mul", [avg, ex.scalar(float(k[0] * k[1]), dt)])
    raise OnnxUnsupported(f"pool2d {kind!r} has no ONNX equivalent")


@exporter("resize_nearest_2x")
def _resize(ex, node, ins):
    return ex.node("Resize", [ins[0], "", ex.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
                   nearest_mode="floor", coordinate_transformation_mode="asymmetric")


def constant_of(ex: Exporter, vid: int) -> np.ndarray | None:
    """The value of a constant node, or of a param the export binds (an initializer); else None."""
    return bound_value(ex.g.node(vid), ex.params)


# ================================================================ attention
@exporter("attention")
def _attention(ex, node, ins):
    a = node.attrs
    heads, hd = a["num_heads"], a["head_dim"]
    q, k, v = _operands(ex, node, ins[:3])
    dt = node.dtype
    rank = len(node.shape)
    qs, ks = _in_shape(ex, node, 0), _in_shape(ex, node, 1)
    if rank == 4:
        if a["layout"] == "bshd":
            q, k, v = (ex.node("Transpose", [t], perm=[0, 2, 1, 3]) for t in (q, k, v))
        sq, sk = (qs[2], ks[2]) if a["layout"] == "bhsd" else (qs[1], ks[1])
    else:
        def split(t):
            t = ex.node("Reshape", [t, ex.ints([0] * (rank - 1) + [heads, hd])])
            return ex.node("Transpose", [t], perm=[*list(range(rank - 2)), rank - 1, rank - 2, rank])

        q, k, v = (split(t) for t in (q, k, v))
        sq, sk = qs[-2], ks[-2]
    r4 = 4 if rank in (3, 4) else 3
    kt = ex.node("Transpose", [k], perm=[*list(range(r4 - 2)), r4 - 1, r4 - 2])
    s = ex.node("Mul", [ex.node("MatMul", [q, kt]), ex.scalar(attention_scale(a), dt)])
    cap = a["attn_logit_softcap"]
    if cap is not None and cap > 0:
        s = ex.node("Mul", [ex.node("Tanh", [ex.node("Div", [s, ex.scalar(cap, dt)])]), ex.scalar(cap, dt)])
    kind = a["mask_kind"]
    fill = ex.scalar(MASK_FILL, dt)
    static = isinstance(sq, int) and isinstance(sk, int)
    keep = position_keep(kind, sq, sk, a["window"]) if static else rows.position_keep(MaskNamespace(ex), kind, sq, sk, a["window"])
    if keep is not None:
        s = ex.node("Where", [ex.const(keep) if static else keep.name, s, fill])
    elif kind == "custom":
        m = ex.cast(ins[3], _in_dtype(ex, node, 3), dt)
        mshape = list(_in_shape(ex, node, 3))
        m = ex.node("Reshape", [m, reshape_target(ex, [*mshape[:-1], 1, 1, mshape[-1]], [*mshape[:-1], 1, 1, mshape[-1]])])
        s = ex.node("Where", [ex.node("GreaterOrEqual", [m, ex.scalar(KEEP_AT, dt)]), s, fill])
    elif kind == "bias" and not all_equal(constant_of(ex, node.inputs[3]), 0.0, max_size=1 << 24):  # a bias of zeros (a mask that masks
        s = ex.node("Add", [s, ex.cast(ins[3], _in_dtype(ex, node, 3), dt)])  # nothing, bound): the same softmax
    p = ex.node("Softmax", [s], axis=-1)
    o = ex.node("MatMul", [p, v])
    if rank == 4:
        return o if a["layout"] == "bhsd" else ex.node("Transpose", [o], perm=[0, 2, 1, 3])
    o = ex.node("Transpose", [o], perm=[*list(range(rank - 2)), rank - 1, rank - 2, rank])
    return ex.node("Reshape", [o, reshape_target(ex, list(node.shape), node.shape)])


@exporter("rope")
def _rope(ex, node, ins):
    x, cos, sin = _operands(ex, node, ins)
    hd = node.attrs["head_dim"]
    n_rot = node.attrs["n_rot"] if node.attrs["n_rot"] is not None else hd
    half = n_rot // 2
    shape = node.shape
    rank, seq = len(shape), shape[-2]
    xh = ex.node("Reshape", [x, ex.ints([0] * (rank - 1) + [shape[-1] // hd, hd])])

    def table(t):
        t = ex.node("Slice", [t, ex.ints([0, 0]), shape_value(ex, [seq, half]), ex.ints([0, 1])])
        return ex.node("Unsqueeze", [t, ex.ints([1])])

    c, s = table(cos), table(sin)

    def sl(start, end, step=1):
        return ex.node("Slice", [xh, ex.ints([start]), ex.ints([end]), ex.ints([-1]), ex.ints([step])])

    if node.attrs["interleaved"]:
        a, b = sl(0, n_rot, 2), sl(1, n_rot, 2)
    else:
        a, b = sl(0, half), sl(half, n_rot)
    ya = ex.node("Sub", [ex.node("Mul", [a, c]), ex.node("Mul", [b, s])])
    yb = ex.node("Add", [ex.node("Mul", [b, c]), ex.node("Mul", [a, s])])
    if node.attrs["interleaved"]:
        pair = ex.node("Concat", [ex.node("Unsqueeze", [ya, ex.ints([-1])]), ex.node("Unsqueeze", [yb, ex.ints([-1])])], axis=-1)
        rot = ex.node("Reshape", [pair, ex.ints([0] * rank + [n_rot])])
    else:
        rot = ex.node("Concat", [ya, yb], axis=-1)
    if n_rot < hd:
        rot = ex.node("Concat", [rot, sl(n_rot, hd)], axis=-1)
    return ex.node("Reshape", [rot, ex.ints([0] * (rank - 1) + [-1])])


# ================================================================ driver
def primitive(graph: Graph) -> Graph:
    """``graph`` with every fused op unfused (decompositions may yield fused ops again: repeat), except
    those with an exporter of their own (a Conv with its bias input).

    Subgraphs (control-flow bodies) are unfused when they are exported."""
    from rlx.ir.opdef import get_op
    from rlx.opt.unfuse import unfuse

    def pick(n: Node) -> bool:
        return get_op(n.op).level == "fused" and n.op not in EXPORTERS

    for _ in range(16):
        if not any(pick(n) for n in graph.nodes):
            return graph
        graph = unfuse(graph, pick).graph
    raise OnnxError(f"graph {graph.name!r}: fused ops keep reappearing after 16 unfuse rounds")


def export(graph: Graph, params: Mapping[str, np.ndarray] | None = None, *, opset: int = OPSET, name: str | None = None,
           engine: str | None = None, external: dict[str, np.ndarray] | None = None, threads: int | None = None):
    """Export an rlx MIR graph (fused ops are unfused first) as an ``onnx.ModelProto``.

    Params with a value in ``params`` become initializers; the others become graph inputs. ``engine``
    (``"onnxruntime"``) picks forms that engine runs faster with the same results; the default writes forms
    every engine computes as rlx does. ``external``: a dict that receives the initializers of 1 MiB or more
    (name -> array) while the model names them as external data without a file, for an engine handed the arrays
    themselves (a session over decoded LLM weights: no copy of them in the model's bytes). ``threads``: the
    engine's intra-op thread count (None: all cores), for the ``engine`` forms whose speed depends on it.
    The model passes ``onnx.checker.check_model(full_check=True)``.
    """
    import onnx

    from rlx.ir.graph import GraphStage

    if not isinstance(graph, Graph):
        graph = getattr(graph, "graph", graph)
        if not isinstance(graph, Graph):
            raise OnnxError(f"export expects an rlx Graph, got {type(graph).__name__}")
    if graph.stage == GraphStage.HIR:
        raise OnnxError("export expects a MIR graph: lower the HIR module first (lower_to_mir)")
    graph = primitive(graph)
    for node in graph.nodes:
        if SINCE_OPSET.get(node.dtype, 0) > opset:
            raise OnnxUnsupported(f"node %{node.id} ({node.op}): element type {node.dtype} needs opset "
                                  f"{SINCE_OPSET[node.dtype]}, exporting at {opset} (pass opset=)")
    ex = Exporter(graph, params or {}, opset, engine=engine, external=external, threads=threads)
    for node in graph.nodes:
        if node.op == "input":
            ex.names[node.id] = node.attrs["name"]
            ex.inputs.append(ex.value_info(node.attrs["name"], node.type))
        elif node.op == "param":
            pname = node.attrs["name"]
            ex.names[node.id] = pname
            if pname in ex.params:
                arr = np.asarray(ex.params[pname]).astype(node.dtype.numpy, copy=False)
                ex.inits.append(ex._tensor(arr, pname))
            else:
                ex.inputs.append(ex.value_info(pname, node.type))
        else:
            ex.convert(node)
    outputs = []
    taken = {vi.name for vi in ex.inputs} | {t.name for t in ex.inits} | {o for nd in ex.nodes for o in nd.output}
    for i, oid in enumerate(graph.output_ids):
        src = ex.names[oid]
        out_name = graph.node(oid).name if graph.node(oid).name and graph.node(oid).op not in ("input", "param") else f"output_{i}"
        if out_name in taken:
            out_name = f"output_{i}"
            while out_name in taken:
                out_name = ex.fresh(f"output_{i}")
        taken.add(out_name)
        ex.nodes.append(onnx.helper.make_node("Identity", [src], [out_name]))
        outputs.append(ex.value_info(out_name, graph.node(oid).type))
    names = [o.name for o in outputs]
    nodes, inits = drop_unread(clamps_as_clip(fuse_hard_activations(ex.nodes, ex.inits, names), ex.inits, names), ex.inits, names)
    if external is not None:  # only what the model still reads
        kept = {t.name for t in inits}
        for dropped in [k for k in external if k not in kept]:
            del external[dropped]
    g = onnx.helper.make_graph(nodes, name or graph.name, ex.inputs, outputs, initializer=inits)
    contrib = [onnx.helper.make_opsetid(d, 1) for d in sorted({nd.domain for nd in nodes if nd.domain})]  # export_quant
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", opset), *contrib], producer_name="rlx")
    model.ir_version = min(model.ir_version, 10)
    try:
        onnx.checker.check_model(_as_inputs(model, external) if external else model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:  # a type ONNX lacks (u8 ReduceSum …)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise OnnxUnsupported(f"export of {graph.name!r}: the ONNX model does not check: {first}") from None
    return model

