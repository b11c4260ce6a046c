"""Symbolic dims: canonical integer polynomials over named sizes, plus floordiv, mod, max, min.

A symbolic dim is a :class:`SymDim`, a ``str`` subclass whose text is its canonical form
(``"batch"``, ``"2*seq + 1"``, ``"floordiv(h + 1, 2)"``). Being a string keeps the API
contract (a symbol is spelled by name), makes JSON and the text form carry expressions with
no extra encoding, and makes equality and hashing the (fast, C-level) comparison of canonical
texts: equal texts mean equal expressions. Python's ``+ - * // %`` work between dims and ints,
so shape rules written for ints (conv output sizes, concat sums, reshape products) work on
symbols unchanged. Ordering comparisons are decided soundly from the symbols' ranges: every
symbol is >= 1, and a graph may narrow a symbol to ``[lo, hi]`` (:func:`ranges_in_effect`, which
the graph holds while its shape rules run); where the answer depends on the sizes,
:class:`ShapeError` names both expressions.

Internally a dim is a sum of ``coefficient * monomial`` terms; a monomial is a product of
atoms raised to powers; an atom is a symbol name or a ``(op, a, b)`` tuple for floordiv / mod /
max / min of two dims. Constants collapse to plain ``int``.

Size: one algebra. Arithmetic, the decisions from ranges, monotonicity and the parser all read the private
term form; split, each part would reach into another's internals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Union

from rlx.ir.errors import ShapeError

_Atom = Union[str, tuple]  # a symbol name or (op, a, b)
_Mono = tuple  # ((atom, power), ...) sorted by atom key
_INF = math.inf
_OPS = ("floordiv", "mod", "max", "min")
SYMBOL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_TEXT = 4096  # characters of one dim expression accepted by the parser
MAX_DEPTH = 32  # nesting of one dim expression accepted by the parser
MAX_TERMS = 256  # terms of one polynomial: bounds the work hostile expressions can cause
Range = tuple  # (lo, hi) of a symbol: ints with 1 <= lo <= hi, hi may be math.inf (unbounded)
DEFAULT_RANGE: Range = (1, _INF)
_RANGES: ContextVar[Mapping[str, Range]] = ContextVar("rlx_symbol_ranges", default=MappingProxyType({}))


def _operator(fn: Any) -> tuple[Any, Any]:
    """A binary dunder and its reflected twin: operands are ints and dims, anything else
    (a plain str, a float) gets NotImplemented."""

    def forward(self: SymDim, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else fn(self, o)

    def reflected(self: SymDim, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if o is None else fn(o, self)

    return forward, reflected


class SymDim(str):
    """A symbolic dim; its ``str`` value is its canonical text (see the module docstring)."""

    __array_ufunc__ = None  # numpy scalars defer to our reflected operators

    _terms: tuple[tuple[_Mono, int], ...]
    symbols: frozenset[str]

    __add__, __radd__ = _operator(lambda a, b: _add(a, b, 1))
    __sub__, __rsub__ = _operator(lambda a, b: _add(a, b, -1))
    __mul__, __rmul__ = _operator(lambda a, b: _mul(a, b))
    __floordiv__, __rfloordiv__ = _operator(lambda a, b: floordiv(a, b))
    __mod__, __rmod__ = _operator(lambda a, b: mod(a, b))  # a plain str on the left is %-formatting: not ours

    def __neg__(self) -> Any:
        return _scale(self, -1)

    def __pos__(self) -> SymDim:
        return self

    __ge__ = _operator(lambda a, b: _decide_ge(a, b, ">=", (a, b)))[0]
    __le__ = _operator(lambda a, b: _decide_ge(b, a, "<=", (a, b)))[0]
    __gt__ = _operator(lambda a, b: _decide_ge(a, b + 1, ">", (a, b)))[0]
    __lt__ = _operator(lambda a, b: _decide_ge(b, a + 1, "<", (a, b)))[0]

    __hash__ = str.__hash__

    def __reduce__(self) -> Any:  # pickles (process pools) rebuild from the canonical text
        return (parse_dim, (str.__str__(self),))


Dim = Union[int, SymDim]


# ------------------------------------------------------------------ construction
_SYMBOLS: dict[str, SymDim] = {}


def symbol(name: str) -> SymDim:
    """The dim that is the symbol ``name`` (an identifier)."""
    found = _SYMBOLS.get(name)
    if found is None:
        if not (isinstance(name, str) and SYMBOL_RE.fullmatch(name)):
            raise ShapeError(f"a symbol name must be an identifier, got {name!r}")
        found = _SYMBOLS[name] = _make({((name, 1),): 1})  # type: ignore[assignment]
    return found  # type: ignore[return-value]


def is_symbolic(d: object) -> bool:
    return d.__class__ is SymDim


def _operand(x: Any) -> Any:
    """An int or SymDim for arithmetic, or None (the operator then returns NotImplemented)."""
    cls = x.__class__
    if cls is int or cls is SymDim:
        return x
    if cls is bool or isinstance(x, str):
        return None
    if hasattr(x, "__index__"):
        return int(x.__index__())
    return None


def _terms(d: Any) -> dict[_Mono, int]:
    if d.__class__ is SymDim:
        return dict(d._terms)
    return {(): d} if d else {}


def _atom_key(atom: _Atom) -> tuple[int, str]:
    return (0, atom) if atom.__class__ is str else (1, _atom_text(atom))


def _atom_text(atom: _Atom) -> str:
    if isinstance(atom, str):
        return atom
    op, a, b = atom
    return f"{op}({a}, {b})"


def _degree(mono: _Mono) -> int:
    return sum(p for _, p in mono)


def _make(terms: dict[_Mono, int]) -> Dim:
    """Canonical dim of a term dict: an int when constant, else a SymDim with canonical text."""
    live = {m: c for m, c in terms.items() if c}
    if not live:
        return 0
    if len(live) == 1 and () in live:
        return live[()]
    ordered = sorted(live.items(), key=lambda mc: (-_degree(mc[0]), [(_atom_key(a), p) for a, p in mc[0]]))
    parts: list[str] = []
    for mono, coeff in ordered:
        factors = [_atom_text(a) if p == 1 else f"{_atom_text(a)}^{p}" for a, p in mono]
        mag = abs(coeff)
        body = "*".join(factors) if mag == 1 and factors else "*".join([str(mag), *factors])
        if not parts:
            parts.append(body if coeff > 0 else f"-{body}")
        else:
            parts.append(f"+ {body}" if coeff > 0 else f"- {body}")
    out = str.__new__(SymDim, " ".join(parts))
    out._terms = tuple(ordered)
    syms: set[str] = set()
    for mono, _ in ordered:
        for atom, _p in mono:
            syms.update((atom,) if atom.__class__ is str else _atom_symbols(atom))
    out.symbols = frozenset(syms)
    return out


def _atom_symbols(atom: tuple) -> frozenset[str]:
    _, a, b = atom
    return (a.symbols if a.__class__ is SymDim else frozenset()) | (b.symbols if b.__class__ is SymDim else frozenset())


def _lone_atom(d: SymDim) -> tuple | None:
    """The (op, a, b) atom when ``d`` is exactly one such atom, else None."""
    if len(d._terms) == 1:
        (mono, coeff), = d._terms
        if coeff == 1 and len(mono) == 1 and mono[0][1] == 1 and mono[0][0].__class__ is tuple:
            return mono[0][0]
    return None


def _atom_dim(op: str, a: Dim, b: Dim) -> Dim:
    return _make({(((op, a, b), 1),): 1})


# ------------------------------------------------------------------ arithmetic
def _add(a: Dim, b: Dim, sign: int) -> Dim:
    if a.__class__ is int and b.__class__ is int:
        return a + sign * b
    out = _terms(a)
    for m, c in _terms(b).items():
        out[m] = out.get(m, 0) + sign * c
    return _make(out)


def _scale(a: Dim, k: int) -> Dim:
    if a.__class__ is int:
        return a * k
    return _make({m: c * k for m, c in a._terms})  # type: ignore[union-attr]


def _mono_mul(m1: _Mono, m2: _Mono) -> _Mono:
    if not m1:
        return m2
    if not m2:
        return m1
    powers: dict[Any, int] = dict(m1)
    for a, p in m2:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: _atom_key(ap[0])))


def _mul(a: Dim, b: Dim) -> Dim:
    if a.__class__ is int:
        return a * b if b.__class__ is int else _scale(b, a)
    if b.__class__ is int:
        return _scale(a, b)
    if len(a._terms) * len(b._terms) > MAX_TERMS * 4:  # type: ignore[union-attr]
        raise ShapeError(f"dim expression too large: ({a}) * ({b})")
    out: dict[_Mono, int] = {}
    for m1, c1 in a._terms:  # type: ignore[union-attr]
        for m2, c2 in b._terms:  # type: ignore[union-attr]
            m = _mono_mul(m1, m2)
            out[m] = out.get(m, 0) + c1 * c2
    return _make(out)


def _exact_quotient(a: Dim, b: SymDim) -> Dim | None:
    """a / b when b divides a as a polynomial (atoms taken as variables) with integer coefficients, else
    None. Long division by b's leading term under a graded lexicographic order: when b divides a the
    remainder is zero, so a leading term of the remainder that b's does not divide means no exact quotient
    (``768*batch*n - 768*batch`` by ``64*batch*n - 64*batch`` is 12: a reshape's -1 after a conv stack)."""
    atoms = sorted({atom for d in (a, b) for m in _terms(d) for atom, _ in m}, key=_atom_key)

    def order(mono: _Mono) -> tuple:
        powers = dict(mono)
        return (_degree(mono), tuple(powers.get(atom, 0) for atom in atoms))

    lead, lead_c = max(b._terms, key=lambda mc: order(mc[0]))
    lead_powers = dict(lead)
    rest: dict[_Mono, int] = _terms(a)
    out: dict[_Mono, int] = {}
    for _ in range(MAX_TERMS):
        if not rest:
            return _make(out)
        m, c = max(rest.items(), key=lambda mc: order(mc[0]))
        powers = dict(m)
        if c % lead_c or any(powers.get(x, 0) < p for x, p in lead_powers.items()):
            return None
        q = tuple((x, p - lead_powers.get(x, 0)) for x, p in m if p - lead_powers.get(x, 0))
        out[q] = c // lead_c
        for bm, bc in b._terms:
            t = _mono_mul(q, bm)
            rest[t] = rest.get(t, 0) - out[q] * bc
            if not rest[t]:
                del rest[t]
        if len(rest) > MAX_TERMS * 4:  # bounded work on hostile expressions: no claim made
            return None
    return None


def floordiv(a: Dim, b: Dim) -> Dim:
    """Python ``a // b`` on dims (floor division)."""
    if b.__class__ is int:
        if a.__class__ is int:
            return a // b
        if b == 0:
            raise ZeroDivisionError(f"floordiv({a}, 0)")
        if b < 0:
            return floordiv(_scale(a, -1), -b)
        if b == 1:
            return a
        whole, rest = {}, {}
        for m, c in a._terms:  # type: ignore[union-attr]
            whole[m], rest[m] = c // b, c % b
        q, r = _make(whole), _make(rest)
        if isinstance(r, int):
            return _add(q, r // b, 1)
        if _within(r, b):  # 0 <= r < b over the symbols' ranges
            return q
        nested = _lone_atom(r)
        if nested is not None and nested[0] == "floordiv" and nested[2].__class__ is int and nested[2] > 0:
            return _add(q, floordiv(nested[1], nested[2] * b), 1)  # floor(floor(x / c) / b) = floor(x / (c*b))
        return _add(q, _atom_dim("floordiv", r, b), 1)
    if a == b:
        return 1
    if a == 0:
        return 0
    exact = _exact_quotient(a, b)  # type: ignore[arg-type]
    return exact if exact is not None else _atom_dim("floordiv", a, b)


def mod(a: Dim, b: Dim) -> Dim:
    """Python ``a % b`` on dims (the result has the sign of b)."""
    if b.__class__ is int:
        if a.__class__ is int:
            return a % b
        if b == 0:
            raise ZeroDivisionError(f"mod({a}, 0)")
        if b < 0:
            return _add(a, _mul(b, floordiv(a, b)), -1)
        r = _make({m: c % b for m, c in a._terms})  # type: ignore[union-attr]
        if isinstance(r, int):
            return r % b
        return r if _within(r, b) else _atom_dim("mod", r, b)
    if a == b or a == 0 or _exact_quotient(a, b) is not None:  # type: ignore[arg-type]
        return 0
    return _atom_dim("mod", a, b)


def _within(r: SymDim, b: int) -> bool:
    """0 <= r < b for every size in the symbols' ranges (floordiv(r, b) is 0, mod(r, b) is r)."""
    lo, hi = bounds(r)
    return lo >= 0 and hi < b


def _minmax(op: str, a: Dim, b: Dim) -> Dim:
    ge = known_ge(a, b)
    if ge is None and known_ge(b, a):  # b >= a holds (a may equal b): a is the min
        ge = False
    if ge is not None:
        return (a if ge else b) if op == "max" else (b if ge else a)
    if str(a) > str(b):  # commutative: canonical argument order
        a, b = b, a
    return _atom_dim(op, a, b)


def dim_max(*dims: Any) -> Dim:
    """max of dims, symbolic where the order depends on the sizes."""
    out = check_dim(dims[0])
    for d in dims[1:]:
        out = _minmax("max", out, check_dim(d))
    return out


def dim_min(*dims: Any) -> Dim:
    """min of dims, symbolic where the order depends on the sizes."""
    out = check_dim(dims[0])
    for d in dims[1:]:
        out = _minmax("min", out, check_dim(d))
    return out


# ------------------------------------------------------------------ decisions
def _imul(x: float, y: float) -> float:
    return 0 if x == 0 or y == 0 else x * y


def _interval_mul(a: tuple, b: tuple) -> tuple:
    products = [_imul(x, y) for x in a for y in b]
    return (min(products), max(products))


def _atom_bounds(atom: _Atom) -> tuple:
    if isinstance(atom, str):
        return _RANGES.get().get(atom, DEFAULT_RANGE)
    op, a, b = atom
    (alo, ahi), (blo, bhi) = bounds(a), bounds(b)
    if op == "max":
        return (max(alo, blo), max(ahi, bhi))
    if op == "min":
        return (min(alo, blo), min(ahi, bhi))
    if blo < 1:
        return (-_INF, _INF)
    if op == "mod":
        return (0, bhi - 1 if ahi >= bhi or alo < 0 else ahi)
    if b.__class__ is int:  # floordiv by a positive constant
        return (alo // b if alo != -_INF else alo, ahi // b if ahi != _INF else ahi)
    return (0, ahi) if alo >= 0 else (-_INF, _INF)


def _shifted_lower(d: SymDim) -> float:
    """A lower bound for a polynomial in symbols only: substitute s = lo + t (t >= 0, lo the
    symbol's lower bound) and expand; with no negative coefficient left the constant term is
    the minimum."""
    ranges = _RANGES.get()
    out: dict[_Mono, int] = {}
    for mono, coeff in d._terms:
        expanded: dict[_Mono, int] = {(): coeff}
        for atom, power in mono:
            if atom.__class__ is not str:
                return -_INF
            lo = ranges.get(atom, DEFAULT_RANGE)[0]
            for _ in range(power):
                nxt: dict[_Mono, int] = {}
                for m, c in expanded.items():
                    nxt[m] = nxt.get(m, 0) + c * lo
                    t = _mono_mul(m, ((atom, 1),))
                    nxt[t] = nxt.get(t, 0) + c
                expanded = nxt
        for m, c in expanded.items():
            out[m] = out.get(m, 0) + c
    if any(c < 0 for m, c in out.items() if m):
        return -_INF
    return out.get((), 0)


def bounds(d: Dim) -> tuple:
    """(lo, hi) such that lo <= d <= hi for every size of every symbol in its range (inf allowed)."""
    if d.__class__ is int:
        return (d, d)
    lo: float = 0
    hi: float = 0
    for mono, coeff in d._terms:  # type: ignore[union-attr]
        mlo, mhi = 1, 1
        for atom, power in mono:
            alo, ahi = _atom_bounds(atom)
            for _ in range(power):
                mlo, mhi = _interval_mul((mlo, mhi), (alo, ahi))
        tlo, thi = (_imul(coeff, mlo), _imul(coeff, mhi)) if coeff > 0 else (_imul(coeff, mhi), _imul(coeff, mlo))
        lo, hi = lo + tlo, hi + thi
    return (max(lo, _shifted_lower(d)), hi)  # type: ignore[arg-type]


def known_ge(a: Dim, b: Dim) -> bool | None:
    """True / False when ``a >= b`` holds / fails for all sizes, None when it depends on them."""
    diff = _add(a, b, -1)
    if diff.__class__ is int:
        return diff >= 0
    lo, hi = bounds(diff)
    if lo >= 0:
        return True
    if hi < 0 or bounds(_scale(diff, -1))[0] >= 1:  # the second: -diff >= 1 by the expansion
        return False
    return None


def _decide_ge(a: Dim, b: Dim, op: str, shown: tuple) -> bool:
    ge = known_ge(a, b)
    if ge is None:
        left, right = shown
        names = sorted(_symbols_of(left) | _symbols_of(right))
        ranges = ", ".join(f"{n} in {range_text(symbol_range(n))}" for n in names)
        raise ShapeError(f"cannot decide whether {left} {op} {right}: it depends on the symbol sizes ({ranges})")
    return ge


def _symbols_of(d: Any) -> frozenset[str]:
    return d.symbols if d.__class__ is SymDim else frozenset()


def divides(k: Dim, d: Dim) -> bool | None:
    """Whether ``k`` divides ``d`` for all sizes (True / False), None when undecided."""
    r = mod(d, k)
    if r.__class__ is int:
        return r == 0
    return None


def _nondecreasing(d: Dim) -> bool:
    """Whether ``d`` cannot decrease when a symbol grows: positive coefficients on atoms that cannot
    either (symbols; floordiv by a positive constant, max and min of such), a product only of atoms >= 0."""
    if d.__class__ is int:
        return True
    for mono, coeff in d._terms:  # type: ignore[union-attr]
        if not mono:
            continue
        if coeff < 0 or not all(_atom_nondecreasing(atom) for atom, _ in mono):
            return False
        if (len(mono) > 1 or mono[0][1] > 1) and not all(_atom_bounds(atom)[0] >= 0 for atom, _ in mono):
            return False
    return True


def _atom_nondecreasing(atom: _Atom) -> bool:
    if isinstance(atom, str):
        return True
    op, a, b = atom
    if op == "floordiv":
        return b.__class__ is int and b > 0 and _nondecreasing(a)
    return op in ("max", "min") and _nondecreasing(a) and _nondecreasing(b)


def least_for_nonnegative(d: Dim, limit: int = 1 << 62) -> tuple[str, int] | None:
    """``(s, lo)`` when ``d`` is nondecreasing in its one symbol ``s``, may be negative in ``s``'s range,
    and is >= 0 exactly from ``s = lo`` on (``lo`` within the range); None otherwise. A tensor's size is
    >= 0 for every input a model runs on, so an importer may narrow ``s`` to start at ``lo``: then
    ``max(0, d)`` is ``d`` (a conv's output length sliced by ``[:-1]``, wav2vec2's positional conv)."""
    if d.__class__ is not SymDim or len(d.symbols) != 1 or known_ge(d, 0) is not None or not _nondecreasing(d):
        return None
    (name,) = d.symbols
    lo, hi = symbol_range(name)
    top = min(hi, limit)

    def ok(size: int) -> bool:
        return evaluate(d, {name: size}) >= 0

    try:
        if ok(lo) or not ok(top):  # already >= 0 on the range (the bounds could not show it), or never
            return None
        return name, _least(ok, lo, top)
    except ShapeError:  # a part is negative where it is evaluated (max(s - 20, 5) at s = 1): no claim made
        return None


def _least(ok: Any, lo: int, top: int) -> int:
    """The least size in (lo, top] where the nondecreasing predicate ``ok`` holds (it fails at lo, holds at top)."""
    step = 1
    while lo + step < top and not ok(lo + step):  # doubling, then bisection: O(log size) evaluations
        lo, step = lo + step, step * 2
    hi_ok = min(lo + step, top)
    while hi_ok - lo > 1:
        mid = (lo + hi_ok) // 2
        lo, hi_ok = (lo, mid) if ok(mid) else (mid, hi_ok)
    return hi_ok


# ------------------------------------------------------------------ ranges
def check_range(name: str, lo: Any = 1, hi: Any = None) -> Range:
    """The validated range ``(lo, hi)`` of symbol ``name``: ints ``1 <= lo <= hi``; ``hi`` None
    or ``math.inf`` for unbounded (symbols are sizes >= 1: that is every symbol's default)."""
    symbol(name)  # an identifier
    hi = _INF if hi is None or hi == _INF else hi
    for what, v in (("lower", lo), ("upper", hi)):
        if v is not _INF and (v.__class__ is bool or not hasattr(v, "__index__")):
            raise ShapeError(f"symbol {name!r}: the {what} bound must be an int, got {v!r}")
    lo, hi = int(lo), (hi if hi is _INF else int(hi))
    if lo < 1:
        raise ShapeError(f"symbol {name!r}: the lower bound must be >= 1 (symbols are sizes >= 1), got {lo}")
    if hi < lo:
        raise ShapeError(f"symbol {name!r}: empty range [{lo}, {hi}]")
    return (lo, hi)


def symbol_range(name: str) -> Range:
    """The range of symbol ``name`` in effect (:data:`DEFAULT_RANGE` unless narrowed)."""
    return _RANGES.get().get(name, DEFAULT_RANGE)


def range_text(r: Range) -> str:
    """``[1, 64]``; ``[3, inf]`` for an unbounded range."""
    return f"[{r[0]}, {'inf' if r[1] == _INF else r[1]}]"


@contextmanager
def ranges_in_effect(ranges: Mapping[str, Range]) -> Iterator[None]:
    """Decide comparisons with ``ranges`` (symbol -> (lo, hi), validated by :func:`check_range`)
    narrowing the ranges already in effect; shape rules run inside a graph's ranges."""
    token = _RANGES.set({**_RANGES.get(), **ranges})
    try:
        yield
    finally:
        _RANGES.reset(token)


def encode_ranges(ranges: Mapping[str, Range]) -> dict[str, list]:
    """JSON form of symbol ranges: ``{"batch": [1, 64], "seq": [3, null]}`` (null: unbounded)."""
    return {name: [lo, None if hi == _INF else hi] for name, (lo, hi) in sorted(ranges.items())}


def decode_ranges(raw: Any, max_items: int = 4096) -> dict[str, Range]:
    """Inverse of :func:`encode_ranges`; ShapeError naming the symbol on anything else."""
    if not isinstance(raw, dict):
        raise ShapeError(f"symbol ranges must be an object of name: [lo, hi], got {type(raw).__name__}")
    if len(raw) > max_items:
        raise ShapeError(f"{len(raw)} symbol ranges exceed {max_items}")
    out: dict[str, Range] = {}
    for name, pair in raw.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(v is None or v.__class__ is int for v in pair)
                and pair[0] is not None):
            raise ShapeError(f"symbol {str(name)[:40]!r}: a range is [lo, hi] of ints (hi null for unbounded), got {str(pair)[:40]}")
        out[name] = check_range(name, *pair)
    return out


def out_of_range(name: str, size: int, ranges: Mapping[str, Range]) -> str | None:
    """Why ``size`` is no size of symbol ``name`` under ``ranges`` (None when it is)."""
    lo, hi = ranges.get(name, DEFAULT_RANGE)
    if lo <= size <= hi:
        return None
    return f"symbol {name!r} = {size} is outside its range {range_text((lo, hi))}"


# ------------------------------------------------------------------ substitution
def substitute(d: Any, binding: Mapping[str, Any]) -> Dim:
    """``d`` with the bound symbols replaced (by ints or dims); unbound symbols stay."""
    if d.__class__ is not SymDim:
        return d
    if not (d.symbols & binding.keys()):
        return d
    total: Dim = 0
    for mono, coeff in d._terms:
        term: Dim = coeff
        for atom, power in mono:
            if atom.__class__ is str:
                value = binding.get(atom)
                value = symbol(atom) if value is None else check_dim(value)
            else:
                op, a, b = atom
                a, b = substitute(a, binding), substitute(b, binding)
                value = {"floordiv": floordiv, "mod": mod, "max": dim_max, "min": dim_min}[op](a, b)
            for _ in range(power):
                term = _mul(term, value)
        total = _add(total, term, 1)
    return total


def evaluate(d: Any, binding: Mapping[str, int]) -> int:
    """The size of ``d`` under ``binding``; ShapeError naming the unbound symbols otherwise."""
    out = substitute(d, binding)
    if not isinstance(out, int):
        missing = sorted(out.symbols - binding.keys())
        raise ShapeError(f"dim {d} needs a size for symbol(s) {missing}")
    return out


def free_symbols(dims: Iterable[Any]) -> tuple[str, ...]:
    """Symbol names of ``dims`` in first-appearance order."""
    seen: dict[str, None] = {}
    for d in dims:
        if d.__class__ is SymDim:
            if d in _SYMBOLS:
                seen[str(d)] = None
            else:
                seen.update(dict.fromkeys(sorted(d.symbols)))
    return tuple(seen)


def solve_for(d: SymDim, size: int, binding: Mapping[str, int]) -> tuple[str, int] | None:
    """(symbol, value) making ``d == size`` when, after ``binding``, d is ``c*s + k`` in one
    unbound symbol s with an integer solution; None when it has no such form."""
    rest = substitute(d, binding)
    if rest.__class__ is not SymDim or len(rest.symbols) != 1:
        return None
    (name,) = rest.symbols
    terms = dict(rest._terms)
    coeff, const = terms.pop(((name, 1),), 0), terms.pop((), 0)
    if terms or not coeff or (size - const) % coeff:
        return None
    return name, (size - const) // coeff


def bind_symbols(shapes: Iterable[tuple[str, Iterable[Any], Iterable[int]]],
                 ranges: Mapping[str, Range] | None = None) -> tuple[dict[str, int], list[str]]:
    """Symbol sizes from (what, declared dims, actual sizes) triples, e.g. a run's feeds.

    Bare symbols bind directly; an expression dim (``2*n + 1``) is solved for its one
    unbound symbol once the others are known, then every dim is checked, and every size
    against its symbol's range (``ranges``; >= 1 for a symbol not listed). Returns the
    binding and the problems (each naming the feeds involved: ``batch`` bound to 2 by ``x``
    and to 3 by ``y`` names both)."""
    binding: dict[str, int] = {}
    bound_by: dict[str, str] = {}
    problems: list[str] = []
    compound: list[tuple[str, int, SymDim, int]] = []
    for what, declared, actual in shapes:
        declared, actual = tuple(declared), tuple(int(n) for n in actual)
        for axis, (dim, size) in enumerate(zip(declared, actual)):
            if dim.__class__ is not SymDim:
                if dim != size:
                    problems.append(f"{what}: shape {list(actual)} given, [{', '.join(str(d) for d in declared)}] declared")
                    break
            elif dim in dim.symbols:  # a bare symbol
                name = str(dim)
                if binding.setdefault(name, size) != size:
                    problems.append(f"{what}: axis {axis} is symbol {name!r} = {binding[name]} elsewhere, but {size} "
                                    f"here (bound by {bound_by[name]})")
                bound_by.setdefault(name, f"{what} axis {axis}")
            else:
                compound.append((what, axis, dim, size))
    pending = list(compound)
    while pending:
        solved_any = False
        for item in list(pending):
            what, axis, dim, size = item
            solved = solve_for(dim, size, binding)
            if solved is not None:
                binding[solved[0]] = solved[1]
                bound_by[solved[0]] = f"{what} axis {axis} ({dim} = {size})"
                pending.remove(item)
                solved_any = True
        if not solved_any:
            break
    for what, axis, dim, size in compound:
        value = substitute(dim, binding)
        if not isinstance(value, int):
            problems.append(f"{what}: axis {axis} is {dim}, which the other sizes do not determine "
                            f"(unbound: {sorted(value.symbols)})")
        elif value != size:
            problems.append(f"{what}: axis {axis} is {dim} = {value} by the other sizes, but {size} here")
    for name, size in binding.items():
        why = out_of_range(name, size, ranges or {})
        if why is not None:
            problems.append(f"{why} (bound by {bound_by[name]})")
    return binding, problems


def fresh_symbol(input_name: str, axis: int, taken: Iterable[str] = ()) -> SymDim:
    """A new symbol for a dim a frontend leaves anonymous (an ONNX ``dim_param``-less dynamic
    dim): named from the input and axis (``"pixel_values.0"`` axis 2 -> ``pixel_values_0_d2``),
    made an identifier, and suffixed until it is not in ``taken``."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", f"{input_name}_d{axis}")
    if not base or base[0].isdigit():
        base = f"_{base}"
    taken = set(taken)
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return symbol(name)


# ------------------------------------------------------------------ text
def check_dim(d: object) -> Dim:
    """Validate one dim: an int >= 0, a SymDim, or its text (``"batch"``, ``"2*n + 1"``)."""
    cls = d.__class__
    if cls is int:
        if d < 0:  # type: ignore[operator]
            raise ShapeError(f"dim must be >= 0, got {d}")
        return d  # type: ignore[return-value]
    if cls is SymDim:
        return d  # type: ignore[return-value]
    if cls is bool:
        raise ShapeError(f"dim must be an int or a symbolic dim, got {d!r}")
    if isinstance(d, str):
        found = _SYMBOLS.get(d)
        if found is not None:
            return found
        if SYMBOL_RE.fullmatch(d):
            return symbol(d)
        return check_dim(parse_dim(d))
    if hasattr(d, "__index__"):  # numpy integers
        return check_dim(int(d))  # type: ignore[call-overload]
    raise ShapeError(f"dim must be an int >= 0 or a symbolic dim, got {d!r}")


def parse_dim(text: str) -> Dim:
    """Read a dim expression (the canonical text of a SymDim, or any equivalent spelling)."""
    if len(text) > MAX_TEXT:
        raise ShapeError(f"dim expression longer than {MAX_TEXT} characters")
    value, end = parse_dim_at(text, 0)
    if text[end:].strip():
        raise ShapeError(f"bad dim expression {text[:80]!r}: unexpected {text[end:end + 10]!r} at column {end + 1}")
    return value


_TOKEN = re.compile(r"\s*(?:(?P<int>[0-9]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*%^(),]))")


class _DimParser:
    def __init__(self, text: str, pos: int):
        self.text, self.pos, self.depth = text, pos, 0

    def fail(self, msg: str) -> ShapeError:
        return ShapeError(f"bad dim expression {self.text[:80]!r}: {msg} at column {self.pos + 1}")

    def peek(self) -> tuple[str, str] | None:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            return None
        kind = m.lastgroup
        return kind, m.group(kind)  # type: ignore[arg-type, return-value]

    def take(self) -> tuple[str, str]:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            raise self.fail("expected a dim")
        self.pos = m.end()
        return m.lastgroup, m.group(m.lastgroup)  # type: ignore[arg-type, return-value]

    def expect(self, op: str) -> None:
        if self.take() != ("op", op):
            raise self.fail(f"expected {op!r}")

    def expr(self) -> Dim:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH}")
        negate = False
        if self.peek() == ("op", "-"):
            self.take()
            negate = True
        total = self.term()
        if negate:
            total = -total
        while self.peek() in (("op", "+"), ("op", "-")):
            sign = self.take()[1]
            t = self.term()
            total = total + t if sign == "+" else total - t
        self.depth -= 1
        return total

    def term(self) -> Dim:
        value = self.power()
        while self.peek() in (("op", "*"), ("op", "//"), ("op", "%")):
            op = self.take()[1]
            rhs = self.power()
            if op == "*":
                value = value * rhs
            else:
                if rhs == 0:
                    raise self.fail("division by zero")
                value = floordiv(value, rhs) if op == "//" else mod(value, rhs)
        return value

    def power(self) -> Dim:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.take()
            kind, tok = self.take()
            if kind != "int" or not 1 <= int(tok) <= 64:
                raise self.fail("expected a power between 1 and 64")
            out: Dim = 1
            for _ in range(int(tok)):
                out = out * base
            return out
        return base

    def atom(self) -> Dim:
        kind, tok = self.take()
        if kind == "int":
            if len(tok) > 20:
                raise self.fail("integer too long")
            return int(tok)
        if kind == "name":
            if tok in _OPS and self.peek() == ("op", "("):
                self.take()
                a = self.expr()
                self.expect(",")
                b = self.expr()
                self.expect(")")
                if tok in ("floordiv", "mod") and b == 0:
                    raise self.fail("division by zero")
                return {"floordiv": floordiv, "mod": mod, "max": dim_max, "min": dim_min}[tok](a, b)
            return symbol(tok)
        if (kind, tok) == ("op", "("):
            value = self.expr()
            self.expect(")")
            return value
        raise self.fail(f"unexpected {tok!r}")


def parse_dim_at(text: str, pos: int) -> tuple[Dim, int]:
    """Parse one dim starting at ``text[pos]``; return it and the position just after it
    (a list in the text form, ``[n + 1, 4]``, continues there)."""
    p = _DimParser(text, pos)
    value = p.expr()
    if p.pos - pos > MAX_TEXT:
        raise ShapeError(f"dim expression longer than {MAX_TEXT} characters")
    return value, p.pos


def encode_dim(d: Dim) -> int | str:
    """JSON form of a dim: the int, or the canonical text (a bare name for a symbol)."""
    return d if d.__class__ is int else str.__str__(d)  # type: ignore[arg-type]


def encode_shape(dims: Iterable[Any]) -> list[int | str]:
    """JSON form of a shape (a list of :func:`encode_dim`)."""
    return [d if d.__class__ is int else str.__str__(d) for d in dims]


def decode_dim(v: Any) -> Dim:
    """Inverse of :func:`encode_dim`; version-1 files (ints and symbol names) read the same."""
    return check_dim(v)
