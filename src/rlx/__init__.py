"""rlx: a standalone, serializable, optimizable tensor IR for ML compilers.

The public surface: every name in ``__all__`` (docs/architecture.md). ``rlx.onnx`` and ``rlx.torch`` are submodules
loaded on first access; their frameworks are imported only when their functions run.
"""

import importlib
from typing import Any

from rlx import backends as _backends  # noqa: F401  (registers the built-in backends by name)
from rlx import ops as _ops  # noqa: F401  (registers the built-in ops)
from rlx._version import __version__  # noqa: F401  (re-exported)
from rlx.autodiff import grad, grad_with_loss, hvp, jvp, prepare_graph_for_ad, vmap
from rlx.autodiff import splat_body as _splat_body  # noqa: F401  (fills the splat backward body's derivative hook)
from rlx.frontends.upstream.reader import from_upstream_json
from rlx.frontends.upstream.writer import to_upstream_json
from rlx.hir import AdPipelineStage, FusionPolicy, GraphModule, HirModule, LowerError, define
from rlx.ir.attrs import AttrSpec
from rlx.ir.dtype import DType, bf16, bool_, c64, f8e4m3, f8e5m2, f16, f32, f64, i8, i16, i32, i64, u8, u32
from rlx.ir.errors import (
    AttributeSchemaError,
    AutodiffError,
    ExportError,
    FeedError,
    FormatError,
    InternalError,
    ParseError,
    RlxError,
    ShapeError,
    UnknownOpError,
    VerifyError,
)
from rlx.ir.graph import Graph, GraphStage, Node, Provenance, Value
from rlx.ir.opdef import OpDef, all_ops, get_op, register_op, unregister_op
from rlx.ir.serialize import LoadLimits, fingerprint, from_json, load, register_codec, save, to_json
from rlx.ir.shape import Shape, TensorType
from rlx.ir.text import parse
from rlx.ir.verify import verify
from rlx.ops.custom import custom_op, custom_ops, unregister_custom_op
from rlx.opt import FusionReport, inline_into, optimize, promote_params_to_inputs
from rlx.runtime.compile import BufferPlan, LirModule, compile, plan, specialize
from rlx.runtime.reference import run
from rlx.train import compile_training

_LAZY_SUBMODULES = ("onnx", "torch")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"rlx.{name}")
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")


__all__ = [
    "AdPipelineStage", "AttrSpec", "AttributeSchemaError", "AutodiffError", "BufferPlan", "DType", "ExportError", "FeedError",
    "FormatError", "FusionPolicy", "FusionReport", "Graph", "GraphModule", "GraphStage", "HirModule", "InternalError", "LirModule",
    "LoadLimits", "LowerError", "Node", "OpDef", "ParseError", "Provenance", "RlxError", "Shape", "ShapeError",
    "TensorType", "UnknownOpError", "Value", "VerifyError", "all_ops", "bf16", "bool_", "c64", "compile", "compile_training",
    "custom_op", "custom_ops", "define",
    "f8e4m3", "f8e5m2", "f16", "f32", "f64", "fingerprint", "from_json", "from_upstream_json", "get_op", "grad", "grad_with_loss", "hvp",
    "i8", "i16", "i32", "i64", "inline_into", "jvp", "load", "optimize", "parse", "plan", "prepare_graph_for_ad",
    "promote_params_to_inputs", "register_codec",
    "register_op", "run", "save", "specialize", "to_json", "to_upstream_json",
    "u8", "u32", "unregister_custom_op", "unregister_op", "verify", "vmap",
]
