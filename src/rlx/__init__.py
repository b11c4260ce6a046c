"""rlx: a standalone, serializable, optimizable tensor IR for ML compilers."""

from rlx import ops as _ops  # noqa: F401  (registers the built-in ops)
from rlx.autodiff import grad, grad_with_loss, hvp, jvp, prepare_graph_for_ad, vmap  # noqa: F401  (API.md "Autodiff and transforms")
from rlx.hir import AdPipelineStage, FusionPolicy, GraphModule, HirModule, LowerError, define  # noqa: F401  (API.md "Stages")
from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType, bf16, bool_, c64, f8e4m3, f8e5m2, f16, f32, f64, i8, i16, i32, i64, u8, u32
from rlx.ir.errors import (
    AttributeSchemaError,
    AutodiffError,
    FeedError,
    FormatError,
    ParseError,
    RlxError,
    ShapeError,
    UnknownOpError,
    VerifyError,
)
from rlx.ir.graph import Graph, GraphStage, Node, Provenance, Value
from rlx.ir.opdef import OpDef, all_ops, get_op, register_op
from rlx.ir.serialize import LoadLimits, fingerprint, from_json, load, register_codec, save, to_json  # noqa: F401  (API.md "Files")
from rlx.ir.shape import Shape, TensorType
from rlx.ir.text import parse
from rlx.ir.verify import verify
from rlx.opt import FusionReport, optimize  # noqa: F401  (API.md "Stages": the optimizer)
from rlx.runtime.compile import BufferPlan, LirModule, compile, plan, specialize  # noqa: F401  (API.md "Stages": LIR, "Checking, running")
from rlx.runtime.reference import run

__version__ = "0.1.0"

__all__ = [
    "AttrSpec", "AttributeSchemaError", "AutodiffError", "DType", "FeedError", "FormatError",
    "Graph", "GraphStage", "Node", "OpDef", "ParseError", "Provenance", "RlxError", "Shape",
    "ShapeError", "TensorType", "UnknownOpError", "Value", "VerifyError", "all_ops", "bf16",
    "bool_", "c64", "f8e4m3", "f8e5m2", "f16", "f32", "f64", "get_op", "i8", "i16", "i32",
    "i64", "parse", "register_op", "run", "u8", "u32", "verify",
]
