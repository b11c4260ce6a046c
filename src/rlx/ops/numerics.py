"""Tier-2 numerics (docs/semantics.md#numerics, #random-numbers): fft, dense_solve, batched_dense_solve, top_k, sample
(with the Philox4x32 generator), scatter_add and the complex helpers complex_norm_sq,
complex_norm_sq_backward, conjugate. upstream's cumsum (docs/semantics.md#backward-ops) / cumsum_backward are the one op
``cumulative`` (op="sum"; builder ``g.cumsum``) in :mod:`rlx.ops.indexing`.

rlx conventions (where upstream cut corners): index results are ``i64`` and index operands
integer tensors (upstream encodes them as floats); complex values are the native ``c64`` dtype
(upstream's fft works on a real tensor holding a ``[re block | im block]`` of length 2N);
every op takes any axis where upstream is last-axis only. Autodiff of the complex ops follows
JAX's convention (:mod:`rlx.autodiff.rules`): fft is its own transpose (the DFT matrix is
symmetric), conjugate conjugates, complex_norm_sq pulls back to ``2·ct·conj(z)``.
"""

from __future__ import annotations

import numpy as np

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.errors import RlxError, ShapeError
from rlx.ir.flags import EPILOGUE
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType
from rlx.ops.common import along_axis, axis_of, linear_solve_jvp, require_float
from rlx.ops.quant import BATCH_DIMS, batch_lead, split_lead, with_lead


def _canon_axis(ins, attrs):
    try:
        return {**attrs, "axis": axis_of(attrs["axis"], ins[0])}
    except ShapeError:
        return attrs


def _shift_axis(ctx, node, operands, batched):
    ins = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    return ctx.graph.append(node.op, ins, {**dict(node.attrs), "axis": ctx.shift_axis(node.attrs["axis"])})


def _elementwise_batch(ctx, node, operands, batched):
    ins = [v if b else ctx.materialize(v) for v, b in zip(operands, batched)]
    return ctx.graph.append(node.op, ins, dict(node.attrs))


def _require_c64(t: TensorType, what: str = "z") -> None:
    if not t.dtype.is_complex:
        raise ShapeError(f"{what} must be complex (c64 / c128), got {t.dtype}")


def _complex_type(t: TensorType) -> TensorType:
    """The type of an elementwise complex op: its operand's, which must be complex."""
    _require_c64(t)
    return t


# ----------------------------------------------------------------------------------- fft
def _fft_type(ins, attrs):
    t = ins[0]
    _require_c64(t, "x")
    along_axis(t, attrs, "fft")
    return t


def _fft_kernel(args, attrs, out):
    x = args[0].astype(np.complex128)
    fn = np.fft.ifft if attrs["inverse"] else np.fft.fft
    if x.shape[attrs["axis"]] == 0:
        return x.astype(out.dtype.numpy)
    return fn(x, axis=attrs["axis"], norm=attrs["norm"]).astype(out.dtype.numpy)


def _same_fft(ctx, node, v):
    """``node``'s fft applied to ``v``: the JVP (fft is linear) and the VJP (in JAX's convention the
    transpose, and the DFT matrix is symmetric). Contract: rlx.autodiff.rules."""
    return ctx.graph.append("fft", [v], dict(node.attrs))


defop(
    name="fft", family="numerics", arity=1, operands=("x",),
    attrs={
        "inverse": AttrSpec("bool", default=False),
        "norm": AttrSpec("str", default="backward", choices=("backward", "ortho", "forward"),
                         doc="NumPy's norm: backward = forward unscaled, inverse 1/N; ortho 1/sqrt(N) both; forward = 1/N forward"),
        "axis": AttrSpec("int", default=-1),
    },
    canonicalize=_canon_axis, infer=_fft_type, kernel=_fft_kernel, flags={"complex_ad"}, batch=_shift_axis,
    vjp=lambda ctx, node, ct: [_same_fft(ctx, node, ct)], jvp=lambda ctx, node, tangents: _same_fft(ctx, node, tangents[0]),
    doc="1-D discrete Fourier transform of a c64 or c128 tensor along `axis` (default the last; other axes are "
    "batch): X[k] = Σ x[n]·exp(-2πi·nk/N), inverse with +, scaled as np.fft.fft / np.fft.ifft with `norm` "
    "(computed in complex128, stored in the operand's width; any length). Upstream 0.2.2's `Fft` on C64 maps to it "
    "(its `norm` names are not NumPy's: docs/upstream.md); upstream's real block layout (last axis 2N holding "
    "[re.., im..]) is refused on import. Linear with a symmetric matrix, so "
    "in JAX's cotangent convention its VJP is the same fft (same direction and norm; the conjugate-transpose "
    "convention would flip them).",
)


# ------------------------------------------------------------------------- linear solves
def _solve_check(a: TensorType, b: TensorType, batched: bool) -> None:
    for t, what in ((a, "A"), (b, "b")):
        require_float(t, what)
        if t.dtype.is_complex:
            raise ShapeError(f"{what} must be real (f32 / f64), got {t.dtype}")
    if a.dtype != b.dtype:
        raise ShapeError(f"A and b must have the same dtype, got {a.dtype} and {b.dtype}")
    ra = len(a.shape)
    if (ra < 3) if batched else (ra != 2):
        raise ShapeError(f"A must be {'[..., N, N] (rank >= 3)' if batched else '[N, N]'}, got {a.shape!r}")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"A must be square, got {a.shape!r}")
    rb = len(b.shape)
    if rb not in (ra - 1, ra):
        raise ShapeError(f"b must be [..., N] or [..., N, K] for A {a.shape!r}, got {b.shape!r}")
    if tuple(b.shape[: ra - 2]) != tuple(a.shape[:-2]):
        raise ShapeError(f"batch dims of A {a.shape!r} and b {b.shape!r} differ")
    if b.shape[ra - 2] != a.shape[-1]:
        raise ShapeError(f"b {b.shape!r} must have N = {a.shape[-1]} rows")


def _solve_type(ins: list[TensorType], batched: bool) -> TensorType:
    """x is shaped like b."""
    _solve_check(ins[0], ins[1], batched)
    return ins[1]


def _solve_kernel(args, attrs, out):
    a, b = args
    vector = b.ndim == a.ndim - 1
    try:
        x = np.linalg.solve(a, b[..., None] if vector else b)
    except np.linalg.LinAlgError as exc:
        raise RlxError(f"dense_solve: {exc} (A is singular)") from None
    return x[..., 0] if vector else x


def _solve_vjp(ctx, node, ct):
    g = ctx.graph
    a, b = ctx.operands(node)
    x = ctx.output(node)
    db = g.append(node.op, [ctx.transpose_last2(a), ct], {})
    da = None
    if ctx.wants(node, 0):
        if len(b.shape) == len(a.shape) - 1:  # outer product db ⊗ x
            da = -(ctx.reshape(db, [*db.shape, 1]) * ctx.reshape(x, [*x.shape[:-1], 1, x.shape[-1]]))
        else:
            da = -g.matmul(db, ctx.transpose_last2(x))
    return [da, db if ctx.wants(node, 1) else None]


def _solve_jvp(ctx, node, tangents):
    g = ctx.graph
    a, b = ctx.operands(node)

    def product(ta, x):
        if len(b.shape) == len(a.shape) - 1:  # a vector right-hand side
            return ctx.reshape(g.matmul(ta, ctx.reshape(x, [*x.shape, 1])), list(x.shape))
        return g.matmul(ta, x)

    return linear_solve_jvp(ctx, node, tangents, product, lambda rhs: g.append(node.op, [a, rhs], {}))


def _solve_batch(ctx, node, operands, batched):
    ins = [v if f else ctx.materialize(v) for v, f in zip(operands, batched)]
    return ctx.graph.batched_dense_solve(*ins)


_SOLVE_DOC = ("Singular A raises RlxError at run time. Gradient: db = solve(Aᵀ, dy), dA = -db·xᵀ (an outer "
              "product for vector b); tangent: solve(A, tb - tA·x).")

defop(
    name="dense_solve", family="numerics", arity=2, operands=("a", "b"),
    infer=lambda ins, attrs: _solve_type(ins, False), kernel=_solve_kernel,
    vjp=_solve_vjp, jvp=_solve_jvp, batch=_solve_batch, flags={"blas", "eager_unsafe"},
    doc="Solve A x = b: A [N, N], b [N] or [N, K] -> x shaped like b (np.linalg.solve: LU with partial pivoting). "
    "A and b share one real float dtype. " + _SOLVE_DOC,
)

defop(
    name="batched_dense_solve", family="numerics", arity=2, operands=("a", "b"),
    infer=lambda ins, attrs: _solve_type(ins, True), kernel=_solve_kernel,
    vjp=_solve_vjp, jvp=_solve_jvp, batch=_solve_batch, flags={"blas", "eager_unsafe"},
    doc="dense_solve per batch slice: A [..., N, N] (rank >= 3), b [..., N] (rank of A minus 1: vectors) or "
    "[..., N, K]; the batch dims must be equal (no broadcasting). Upstream allows one batch dim; rlx any "
    "number (so vmap of either solve is this op). " + _SOLVE_DOC,
)


# --------------------------------------------------------------------------------- top_k
def _top_k_type(ins, attrs):
    t = ins[0]
    if t.dtype.is_complex or t.dtype.is_bool:
        raise ShapeError(f"top_k is not defined on {t.dtype}")
    axis = along_axis(t, attrs, "top_k")
    k, n = attrs["k"], t.shape[axis]
    if k < 0 or (isinstance(n, int) and k > n):
        raise ShapeError(f"k={k} must be in [0, {n}] (the size of axis {axis})")
    dims = Shape((*t.shape[:axis], k, *t.shape[axis + 1:]))
    if attrs["output"] == "both":
        return TensorType(dims, t.dtype), TensorType(dims, DType.I64)
    return TensorType(dims, DType.I64 if attrs["output"] == "indices" else t.dtype)


def _top_k_kernel(args, attrs, out):
    x, axis, k = args[0], attrs["axis"], attrs["k"]
    largest = attrs["largest"]
    if x.dtype.kind == "f":  # NaN ranks as the largest value (torch.topk)
        key = np.where(np.isnan(x), np.inf, x.astype(np.float64))
        order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    else:  # integers sorted in their own dtype (no cast, no negation: u64 and i64 extremes stay exact)
        order = _argsort_desc_int(x, axis) if largest else np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    if attrs["output"] == "indices":
        return idx.astype(np.int64)
    values = np.take_along_axis(x, idx, axis=axis)
    return (values, idx.astype(np.int64)) if attrs["output"] == "both" else values


def _argsort_desc_int(key: np.ndarray, axis: int) -> np.ndarray:
    """Stable descending argsort of integers (ties keep the lower index), without overflow of -key."""
    n = key.shape[axis]
    flipped = np.flip(key, axis)
    order = np.argsort(flipped, axis=axis, kind="stable")
    # ascending on the flipped array, reversed: descending, ties in increasing original index
    return n - 1 - np.flip(order, axis)


def _top_k_indices(ctx, node):
    if node.attrs["output"] == "both":
        return ctx.outputs(node)[1]
    return ctx.graph.append("top_k", [ctx.operand(node, 0)], {**dict(node.attrs), "output": "indices"})


def _top_k_vjp(ctx, node, ct):
    if node.attrs["output"] == "both":
        ct = ct[0]  # the indices carry no cotangent
        if ct is None:
            return [None]
    x = ctx.operand(node, 0)
    idx = _top_k_indices(ctx, node)
    return [ctx.graph.scatter_elements(ctx.zeros_like(x), idx, ct, axis=node.attrs["axis"], reduction="add")]


def _top_k_jvp(ctx, node, tangents):
    dv = ctx.graph.gather_elements(tangents[0], _top_k_indices(ctx, node), axis=node.attrs["axis"])
    return (dv, None) if node.attrs["output"] == "both" else dv


def _top_k_batch(ctx, node, operands, batched):
    return ctx.graph.results(_shift_axis(ctx, node, operands, batched))


defop(
    name="top_k", precision="data_movement", family="numerics", arity=1, operands=("x",), flags={EPILOGUE},
    attrs={
        "k": AttrSpec("int"),
        "axis": AttrSpec("int", default=-1),
        "largest": AttrSpec("bool", default=True),
        "output": AttrSpec("str", default="indices", choices=("indices", "values", "both"),
                           doc="which result(s) the node produces: both = one node with results (values, indices)"),
    },
    methods={"topk_indices": {"output": "indices"}},
    canonicalize=_canon_axis, infer=_top_k_type, kernel=_top_k_kernel,
    vjp=_top_k_vjp, jvp=_top_k_jvp, batch=_top_k_batch,
    doc="The k largest (largest=False: smallest) entries along `axis` (any axis, default last), sorted by value, "
    "ties to the lower index (stable; torch.topk(sorted=True), ONNX TopK, which also accepts this order for "
    "sorted=0); NaN ranks as the largest value (first for largest, last for smallest). Integers (signed or "
    "unsigned) compare exactly in their dtype. output='both' makes one node with two results, (values, "
    "indices) (ONNX TopK, torch.topk); output='indices' (default, upstream's meaning; builder g.topk_indices) "
    "gives only the i64 indices, output='values' only the values (x's dtype, equal to "
    "gather_elements(x, indices, axis)). k must be in "
    "[0, axis size] (upstream repeats index 0 past the end). Indices carry no gradient; values differentiate as "
    "a gather: dx = scatter_elements(0, indices, dy, add).",
)


# ------------------------------------------------------------------------- Philox4x32-10
PHILOX_M0 = 0xD2561A75  # upstream rng.rs (Random123's standard constant is 0xD2511F53)
PHILOX_M0_STANDARD = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
SAMPLE_DEFAULT_SEED = 0xDEADBEEF
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counters: np.ndarray, key: tuple[int, int], rounds: int = 10, m0: int = PHILOX_M0, m1: int = PHILOX_M1) -> np.ndarray:
    """Philox4x32 blocks for counters ``[n, 4]`` (u32 words, word 0 least significant) -> ``[n, 4]`` u32.

    Round: ``p0 = s0·m0, p1 = s2·m1`` (64-bit); ``s = (hi(p1)^s1^k0, lo(p1), hi(p0)^s3^k1, lo(p0))``; then
    the key is bumped by the Weyl constants. Vectorised over blocks.
    """
    c = np.asarray(counters, dtype=np.uint64).reshape(-1, 4)
    s0, s1, s2, s3 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    k0, k1 = np.uint64(key[0] & 0xFFFFFFFF), np.uint64(key[1] & 0xFFFFFFFF)
    for _ in range(rounds):
        p0 = s0 * np.uint64(m0)
        p1 = s2 * np.uint64(m1)
        s0, s1, s2, s3 = (p1 >> np.uint64(32)) ^ s1 ^ k0, p1 & _MASK32, (p0 >> np.uint64(32)) ^ s3 ^ k1, p0 & _MASK32
        k0 = (k0 + np.uint64(PHILOX_W0)) & _MASK32
        k1 = (k1 + np.uint64(PHILOX_W1)) & _MASK32
    return np.stack([s0, s1, s2, s3], axis=-1).astype(np.uint32)


def philox_u32(seed: int, n: int, m0: int = PHILOX_M0) -> np.ndarray:
    """The first ``n`` u32 words of the stream of ``Philox4x32(seed)``: counter 0, 1, … (128-bit), 4 words each."""
    blocks = -(-n // 4)
    b = np.arange(blocks, dtype=np.uint64)
    counters = np.stack([b & _MASK32, b >> np.uint64(32), np.zeros_like(b), np.zeros_like(b)], axis=-1)
    return philox4x32(counters, (seed & 0xFFFFFFFF, seed >> 32), m0=m0).reshape(-1)[:n]


def philox_f32(seed: int, n: int, m0: int = PHILOX_M0) -> np.ndarray:
    """``next_f32`` draws: ``(u32 >> 8) / 2**24`` in [0, 1), f32."""
    return ((philox_u32(seed, n, m0) >> np.uint32(8)).astype(np.float32) / np.float32(1 << 24)).astype(np.float32)


# -------------------------------------------------------------------------------- sample
def _sample_type(ins, attrs):
    nb = attrs["batch_dims"]
    lead, (t,) = split_lead(ins, nb)
    require_float(t, "logits")
    if t.dtype.is_complex:
        raise ShapeError("logits must be real")
    if len(t.shape) == 0:
        raise ShapeError("logits need rank >= 1 ([..., vocab])")
    v = t.shape[-1]
    if isinstance(v, int) and v < 1:
        raise ShapeError("the vocabulary axis must not be empty")
    if not 0 <= attrs["seed"] < 2**64:
        raise ShapeError(f"seed must be a u64, got {attrs['seed']}")
    if attrs["top_k"] < 0:
        raise ShapeError(f"top_k must be >= 0, got {attrs['top_k']}")
    return with_lead(lead, TensorType(Shape(t.shape[:-1]), DType.I64))


def sample_rows(logits: np.ndarray, r: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """Token ids (i64) for rows ``logits [R, V]`` given one uniform draw per row ``r [R]``."""
    ct = logits.dtype.type
    z = logits / ct(max(temperature, 1e-6))
    v = z.shape[1]
    if 0 < top_k < v:
        kth = np.sort(z, axis=1)[:, v - top_k][:, None]
        z = np.where(z < kth, ct(-np.inf), z)
    m = np.max(z, axis=1, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(m), m, 0))
    p = e / np.sum(e, axis=1, keepdims=True)
    if top_p < 1.0:
        order = np.argsort(-p, axis=1, kind="stable")
        ps = np.take_along_axis(p, order, axis=1)
        reached = np.cumsum(ps, axis=1) >= ct(top_p)
        n_keep = np.where(reached.any(axis=1), np.argmax(reached, axis=1) + 1, v)
        keep_sorted = np.arange(v)[None, :] < n_keep[:, None]
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=1)
        p = np.where(keep, p, ct(0))
        p = p / np.sum(p, axis=1, keepdims=True)
    hit = r[:, None].astype(p.dtype) <= np.cumsum(p, axis=1)
    return np.where(hit.any(axis=1), np.argmax(hit, axis=1), v - 1).astype(np.int64)


def _sample_kernel(args, attrs, out):
    x = args[0]
    x = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    nb = attrs["batch_dims"]
    lead, rows_shape, v = x.shape[:nb], x.shape[nb:-1], x.shape[-1]
    n_rows = int(np.prod(rows_shape, dtype=np.int64))
    n_lead = int(np.prod(lead, dtype=np.int64))
    seed = attrs["seed"] or SAMPLE_DEFAULT_SEED
    draws = philox_f32(seed, n_rows)  # every execution (and every batch_dims index) restarts the stream
    r = np.tile(draws, n_lead)
    ids = sample_rows(x.reshape(n_lead * n_rows, v), r, attrs["temperature"], attrs["top_k"], attrs["top_p"])
    return ids.reshape(tuple(out.shape))


defop(
    name="sample", precision="reduction", family="numerics", arity=1, operands=("logits",),
    attrs={
        "top_k": AttrSpec("int", default=0, doc="keep the k largest logits (ties at the threshold survive); 0 = off"),
        "top_p": AttrSpec("float", default=1.0, doc="nucleus: keep the shortest prefix of sorted probs reaching top_p; 1 = off"),
        "temperature": AttrSpec("float", default=1.0, doc="logits / max(temperature, 1e-6)"),
        "seed": AttrSpec("int", default=0, doc="u64 Philox key; 0 means 0xDEADBEEF (upstream)"),
        "batch_dims": BATCH_DIMS,
    },
    infer=_sample_type, kernel=_sample_kernel, flags={"no_grad", EPILOGUE, "eager_unsafe"}, batch=batch_lead,
    doc="Sample one token id (i64) per row of logits [..., vocab] -> [...] (upstream: float-encoded ids, rank <= 2; "
    "rlx: every leading axis is a row, C order). Per row: z = logits / max(temperature, 1e-6); if 0 < top_k < vocab "
    "values below the k-th largest become -inf; stable softmax; if top_p < 1 sort the probabilities descending "
    "(stable), keep the shortest prefix whose cumulative sum reaches top_p, zero the rest and renormalise; then "
    "with a draw r in [0, 1) return the first i with r <= cumsum(p)[i] (vocab - 1 if none). Computed in f32 (f64 "
    "for f64 logits). RNG (docs/semantics.md#random-numbers, bit-exact): one Philox4x32-10 with key (seed lo, seed hi), counter from 0, "
    "upstream's multiplier M0 = 0xD2561A75 (not Random123's), 4 words per block in order, "
    "r = (u32 >> 8) / 2**24, one draw per row in row order; the stream restarts at every execution, so the same "
    "seed repeats, and for every index of the batch_dims axes (a vmapped sample equals the per-example one). "
    "Deterministic given its attributes, so it is an ordinary pure op. No gradient.",
)


# --------------------------------------------------------------------------- scatter_add
def _scatter_add_type(ins, attrs):
    nb = attrs["batch_dims"]
    lead, (upd, idx) = split_lead(ins, nb)
    if upd.dtype.is_bool:
        raise ShapeError("updates must be numeric, got bool")
    if not idx.dtype.is_int:
        raise ShapeError(f"indices must be an integer tensor, got {idx.dtype}")
    if len(upd.shape) < 1 or len(idx.shape) != 1:
        raise ShapeError(f"need updates [U, ...] and indices [U], got {upd.shape!r} and {idx.shape!r}")
    if upd.shape[0] != idx.shape[0]:
        raise ShapeError(f"updates {upd.shape!r} and indices {idx.shape!r} differ in U")
    if attrs["num_rows"] < 0:
        raise ShapeError(f"num_rows must be >= 0, got {attrs['num_rows']}")
    return with_lead(lead, TensorType(Shape((attrs["num_rows"], *upd.shape[1:])), upd.dtype))


def _scatter_add_kernel(args, attrs, out):
    upd, idx = args
    nb, o = attrs["batch_dims"], attrs["num_rows"]
    idx = idx.astype(np.int64)
    bad = (idx < -o) | (idx >= o)
    if bad.any():
        raise RlxError(f"scatter_add: index {int(idx[bad].flat[0])} is out of range for num_rows={o}")
    idx = np.where(idx < 0, idx + o, idx)
    lead, tail = upd.shape[:nb], upd.shape[nb + 1:]
    p = int(np.prod(lead, dtype=np.int64))
    result = np.zeros((p * o, *tail), dtype=upd.dtype)
    rows = (np.arange(p).reshape(p, 1) * o + idx.reshape(p, -1)).reshape(-1)
    np.add.at(result, rows, upd.reshape(-1, *tail))
    return result.reshape(tuple(out.shape))


def _scatter_gather(ctx, node, ct):
    """gather the rows of ``ct`` named by the indices: the transpose of scatter_add."""
    upd, idx = ctx.operands(node)
    nb = node.attrs["batch_dims"]
    full = ctx.reshape(idx, [*idx.shape, *([1] * (len(upd.shape) - nb - 1))])
    full = ctx.broadcast_like(full, upd) if tuple(full.shape) != tuple(upd.shape) else full
    return ctx.graph.gather_elements(ct, full, axis=nb)


defop(
    name="scatter_add", flags={"eager_unsafe"}, precision="data_movement", family="numerics", arity=2, operands=("updates", "indices"),
    attrs={"num_rows": AttrSpec("int", doc="rows O of the result (declared; not inferable)"), "batch_dims": BATCH_DIMS},
    infer=_scatter_add_type, kernel=_scatter_add_kernel,
    vjp=lambda ctx, node, ct: [_scatter_gather(ctx, node, ct), None],
    jvp=lambda ctx, node, ts: ctx.graph.append("scatter_add", [ts[0], ctx.operand(node, 1)], dict(node.attrs)),
    batch=batch_lead,
    doc="Row scatter-add into zeros: updates [U, *T], integer indices [U] -> [num_rows, *T], out[idx[i]] += "
    "updates[i] (duplicates accumulate, np.add.at). Indices are integers (upstream: floats); negative ones wrap as "
    "in gather; out of range raises RlxError at run time. Gradient: the rows of dy gathered by the indices.",
)


# ------------------------------------------------------------------------------- complex
def _cns_type(ins, attrs):
    _require_c64(ins[0])
    return TensorType(ins[0].shape, DType.F32)


def _cns_vjp(ctx, node, ct):
    """d|z|² = 2·Re(conj(z)·dz), so JAX's cotangent is 2·ct·conj(z) (primitives, so that second order
    works; complex_norm_sq_backward is the Wirtinger ∂/∂z̄ instead). Contract: rlx.autodiff.rules."""
    g, z = ctx.graph, ctx.operand(node, 0)
    return [ctx.cast(ct, z.dtype) * g.conjugate(z) * 2.0]


def _cns_jvp(ctx, node, tangents):
    """2·Re(conj(z)·t); casting c64 to f32 keeps the real part."""
    g, z = ctx.graph, ctx.operand(node, 0)
    return ctx.cast(g.conjugate(z) * tangents[0], node.dtype) * 2.0


defop(
    name="complex_norm_sq", precision="elementwise", family="numerics", arity=1, operands=("z",),
    infer=_cns_type, kernel=lambda args, attrs, out: (args[0].real.astype(np.float32) ** 2 + args[0].imag.astype(np.float32) ** 2),
    flags={"complex_ad"}, vjp=_cns_vjp, jvp=_cns_jvp, batch=_elementwise_batch,
    doc="|z|² = re² + im² of a c64 tensor, as f32 of the same dims (computed in f32). Gradient in JAX's "
    "convention: 2·dy·conj(z) (jax.grad of |z|² at 3+4j is 6-8j).",
)


def _cnsb_type(ins, attrs):
    z, gr = ins
    _require_c64(z)
    if gr.dtype != DType.F32 or tuple(gr.shape) != tuple(z.shape):
        raise ShapeError(f"g must be f32 shaped like z {z.shape!r}, got {gr}")
    return z


defop(
    name="complex_norm_sq_backward", precision="elementwise", family="numerics", arity=2, operands=("z", "g"),
    infer=_cnsb_type, kernel=lambda args, attrs, out: args[1].astype(np.float32) * args[0],
    flags={"no_grad"}, batch=_elementwise_batch,
    doc="g·z (c64): g times the Wirtinger derivative ∂/∂z̄ of |z|² (upstream's backward kernel). Not JAX's "
    "cotangent, which is 2·g·conj(z) (complex_norm_sq's rule). z c64, g f32 of the same dims.",
)

defop(
    name="conjugate", precision="elementwise", family="numerics", arity=1, operands=("z",),
    infer=lambda ins, attrs: _complex_type(ins[0]), kernel=lambda args, attrs, out: np.conj(args[0]),
    flags={"elementwise", "complex_ad"}, batch=_elementwise_batch,
    vjp=lambda ctx, node, ct: [ctx.graph.conjugate(ct)], jvp=lambda ctx, node, tangents: ctx.graph.conjugate(tangents[0]),
    doc="Complex conjugate re - i·im of a c64 tensor. Real-linear, not holomorphic: its VJP (JAX's convention) "
    "and its JVP both conjugate.",
)
