"""ONNX → rlx MIR importer.

``import_model(model) -> (graph, params)``: initializers become params (floats) or constants
(integer / bool tensors, which are shape-like in practice); every ONNX node is converted by a
small function in :data:`CONVERTERS` (keyed by op type; the ``import_*`` modules, one op family each) into one or several MIR ops. Ops with
no converter whose ONNX schema defines a function body (``MeanVarianceNormalization``,
``Celu``, context-dependent ones like ``LayerNormalization``…) are expanded into that body and
imported node by node. Values computable at import time (``Shape`` of a static tensor and
everything downstream of constants: ``Gather``, ``Concat``, ``ConstantOfShape``, ``Range`` …)
are folded with rlx's own reference kernels, so static shape chains end up as attributes.

An unsupported model raises :class:`UnsupportedOpsError` listing every unsupported op type
with its count before anything is converted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx.frontends.onnx import (  # each module registers its converters on import
    import_constant,  # noqa: F401
    import_control_flow,  # noqa: F401
    import_conv,  # noqa: F401
    import_detect,  # noqa: F401
    import_dft,  # noqa: F401
    import_elementwise,
    import_grid_sample,  # noqa: F401
    import_index,  # noqa: F401
    import_linalg,  # noqa: F401
    import_ml,  # noqa: F401
    import_norm,  # noqa: F401
    import_quant,  # noqa: F401
    import_quant_ms,  # noqa: F401
    import_recurrent,  # noqa: F401
    import_reduce,  # noqa: F401
    import_resize,  # noqa: F401
    import_sequence,  # noqa: F401
    import_shape,  # noqa: F401
    import_text,  # noqa: F401
    import_training,  # noqa: F401
    import_tree,  # noqa: F401
    loading,
)
from rlx.frontends.onnx.import_context import CONVERTERS, FOLD_LIMIT, Importer, NeedsStatic, converter, node_label
from rlx.ir.graph import Graph
from rlx.ir.serialize import DEFAULT_LIMITS, LoadLimits

__all__ = ["CONVERTERS", "FOLD_LIMIT", "Importer", "NeedsStatic", "converter", "import_model", "node_label"]


def import_model(model: Any, *, static_inputs: Mapping[str, np.ndarray] | None = None,
                 input_shapes: Mapping[str, Sequence[Any]] | None = None, base_dir: str | os.PathLike | None = None,
                 limits: LoadLimits | None = None) -> tuple[Graph, dict[str, np.ndarray]]:
    """Import an ONNX model (path, bytes or ``onnx.ModelProto``) as an rlx MIR graph and its params.

    ``static_inputs`` binds graph inputs to constant values (specialization: shape-like
    inputs become attributes); ``input_shapes`` overrides the declared input shapes.
    External data is read only from inside the model's folder: a path's own folder, or
    ``base_dir`` (required for bytes / a ``ModelProto`` that has external data). ``limits``
    (default :class:`rlx.LoadLimits`) bounds the file and the work done at import; every
    refusal is an :class:`rlx.RlxError`. onnx's own (C++) checker and shape inference are
    never run on the model: rlx infers types itself.
    """
    limits = limits or DEFAULT_LIMITS
    proto = loading.read_model(model, base_dir, limits)
    return Importer(proto, static_inputs=static_inputs, input_shapes=input_shapes, limits=limits).run()


# The kind rows' ONNX ops register last: a row names the ONNX op computing exactly its kind, so
# it wins over a composite converter registered by a family module (rlx.ops.kinds; CONTRIBUTING.md).
for _op_type in import_elementwise._ACT:
    CONVERTERS[_op_type] = import_elementwise._act
for _op_type in import_elementwise._MATH:
    CONVERTERS[_op_type] = import_elementwise._math
