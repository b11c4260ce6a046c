"""Op families. Importing this package registers every built-in op."""

from rlx.ops import (  # noqa: F401
    attention,
    backward,
    control_flow,
    conv,
    elementwise,
    fused,
    hir_blocks,
    indexing,
    linalg,
    math_ext,
    normalization,
    numerics,
    quant,
    reduction,
    shape,
    sources,
)
