"""The torch lowering of :mod:`rlx.ops.special`: each kind calls the torch function its row names
(``torch.special.*``, ``torch.igamma`` …); ``gcd`` / ``lcm`` run the NumPy kernel, because torch's integer
``lcm`` traps (SIGFPE) on the minimum int64 where the reference wraps."""

from __future__ import annotations

import functools
from typing import Any

import torch

from rlx.ops.special import KINDS

HOST_KINDS = frozenset({"gcd", "lcm"})


@functools.cache
def _function(dotted: str) -> Any:
    fn: Any = torch
    for part in dotted.split("."):
        fn = getattr(fn, part)
    return fn


def special(args: list[Any], attrs: Any, out: Any) -> Any:
    """The ``special`` op's lowering (registered by :mod:`.lowering`; operands in their common dtype)."""
    kind = KINDS[attrs["kind"]]
    if kind.name in HOST_KINDS:
        arrays = [a.detach().cpu().numpy() for a in args]
        return torch.from_numpy(kind.numpy(*arrays)).to(args[0].device)
    if kind.name.startswith("frexp"):
        mantissa, exponent = torch.frexp(args[0])
        return mantissa if kind.name == "frexp_mantissa" else exponent
    common = functools.reduce(torch.promote_types, (a.dtype for a in args))
    operands = [a.to(common) for a in args]
    return _function(kind.torch_fn)(*operands)


def logcumsumexp(args: list[Any], attrs: Any, out: Any) -> Any:
    """``logcumsumexp`` (registered by :mod:`.lowering`): torch's scan, flipped for ``reverse``."""
    x, axis = args[0], attrs["axis"] % args[0].ndim
    if attrs["reverse"]:
        return torch.logcumsumexp(x.flip(axis), axis).flip(axis)
    return torch.logcumsumexp(x, axis)
