"""The per-op test-case registry shared by every op family's test module.

Each ``tests/ops/cases_<family>.py`` defines ``CASES`` (numeric cases: a graph built from
a feed, checked against an independent oracle) and ``SHAPE_ERRORS`` (builds that must raise
``rlx.ShapeError``). ``tests/ops/test_op_cases.py`` runs them all (verify, numeric check,
text round trip) and fails when a registered op has no case of either kind.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import rlx


@dataclass
class OpCase:
    """Build ``op`` on graph inputs made from ``feed``; compare ``rlx.run`` with ``oracle(**feed)``.

    ``params`` names the feed entries declared as params rather than inputs. ``oracle``
    must be independent of rlx: NumPy written out in the test, or torch / scipy.
    """

    op: str
    name: str
    build: Callable[..., Any]
    feed: dict[str, np.ndarray]
    oracle: Callable[..., Any]
    rtol: float = 1e-6
    atol: float = 1e-7
    params: tuple[str, ...] = ()
    differentiable: tuple[str, ...] | None = None  # feed names to gradient-check (autodiff issue)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"

    def graph(self) -> tuple[rlx.Graph, list[rlx.Value]]:
        g = rlx.Graph(self.id.replace("-", "_"))
        handles = {}
        for key, arr in self.feed.items():
            declare = g.param if key in self.params else g.input
            handles[key] = declare(key, arr.shape, rlx.DType.of(arr.dtype))
        out = self.build(g, **handles)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        g.set_outputs(outs)
        return g, outs

    def split_feed(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        inputs = {k: v for k, v in self.feed.items() if k not in self.params}
        params = {k: v for k, v in self.feed.items() if k in self.params}
        return inputs, params

    def expected(self) -> list[np.ndarray]:
        result = self.oracle(**{k: v.copy() for k, v in self.feed.items()})
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        return [to_numpy(r) for r in results]


@dataclass
class ShapeErrorCase:
    """``build(g)`` on a fresh graph must raise ``rlx.ShapeError``."""

    op: str
    name: str
    build: Callable[[rlx.Graph], Any]
    match: str | None = None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"


def to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape: int, dtype: Any = np.float64, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(dtype)


def torch_f64(x: np.ndarray):
    """A torch tensor in float64 (ints and bools kept) for oracles."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.double() if t.is_floating_point() else t


def sub(name, sig, fn):
    """A subgraph with inputs ``sig`` [(name, shape, dtype)] and one output per value ``fn`` returns."""
    h = rlx.Graph(name)
    vals = [h.input(n, s, d) for n, s, d in sig]
    out = fn(h, *vals)
    h.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    return h


def symbolic(build: Callable[..., Any], shapes: dict[str, tuple[Any, ...]], expect: tuple[Any, ...]) -> Callable[..., Any]:
    """Wrap an ``OpCase.build`` so it also checks shape inference on symbolic dims.

    Numeric cases need static shapes, so the wrapper first builds the op in a scratch graph
    on inputs of the symbolic ``shapes`` (operand name -> dims, strings are symbols) and
    asserts the inferred output shape is ``expect``; then it builds on the real operands.
    """

    def wrapped(g, **operands):
        h = rlx.Graph("symbolic")
        out = build(h, **{k: h.input(k, shape, operands[k].dtype) for k, shape in shapes.items()})
        assert tuple(out.shape) == tuple(expect), f"symbolic inference gave {out.shape!r}, expected {list(expect)}"
        return build(g, **operands)

    return wrapped


@dataclass
class CaseSet:
    cases: list[OpCase] = field(default_factory=list)
    shape_errors: list[ShapeErrorCase] = field(default_factory=list)


def collect() -> CaseSet:
    """Import every ``tests/ops/cases_*.py`` module and gather its cases."""
    import ops as ops_pkg  # tests/ops, on sys.path through conftest

    found = CaseSet()
    for info in sorted(pkgutil.iter_modules(ops_pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("cases_"):
            mod = importlib.import_module(f"ops.{info.name}")
            found.cases.extend(getattr(mod, "CASES", []))
            found.shape_errors.extend(getattr(mod, "SHAPE_ERRORS", []))
    return found
