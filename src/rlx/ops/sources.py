"""Source ops: graph inputs, weights (params) and embedded constants. They have no operands.

They carry the ``no_grad`` flag: having no operands they need no VJP / JVP / batching rule
(autodiff seeds inputs and params itself; vmap declares batched inputs itself).
"""

from __future__ import annotations

from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType
from rlx.ir.opdef import defop
from rlx.ir.shape import Shape, TensorType

_LEAF_ATTRS = {
    "name": AttrSpec("str", doc="name the runtime binds data by"),
    "shape": AttrSpec("dims", doc="declared dims (ints or symbol names)"),
    "dtype": AttrSpec("dtype", default=DType.F32),
}


def _declared(ins, attrs):
    return TensorType(Shape(attrs["shape"]), attrs["dtype"])


defop(
    name="input", work="none", precision="boundary", family="sources", level="source", arity=0, attrs=_LEAF_ATTRS,
    infer=_declared, kernel=None, flags={"no_grad"},
    doc="A named runtime input with a declared shape (symbolic dims allowed) and dtype.",
)

defop(
    name="param", work="none", precision="boundary", family="sources", level="source", arity=0, attrs=_LEAF_ATTRS,
    infer=_declared, kernel=None, flags={"no_grad"},
    doc="A named weight with a declared shape and dtype; fed by name like an input.",
)

defop(
    name="constant", work="none", precision="boundary", family="sources", level="source", arity=0,
    attrs={"value": AttrSpec("tensor", doc="the embedded tensor (immutable)")},
    infer=lambda ins, attrs: TensorType(Shape(attrs["value"].array.shape), DType.of(attrs["value"].array.dtype)),
    kernel=lambda args, attrs, out: attrs["value"].array, flags={"no_grad"},
    doc="An embedded tensor. Its bytes are stored little-endian in the declared dtype.",
)
