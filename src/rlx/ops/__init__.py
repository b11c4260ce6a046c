"""Op families. Importing this package registers every built-in op."""

from rlx.ops import (  # noqa: F401
    attention,
    backward,
    control_flow,
    conv,
    custom,
    elementwise,
    fused,
    hir_blocks,
    indexing,
    linalg,
    math_ext,
    moe,
    normalization,
    numerics,
    quant,
    reduction,
    sequence,
    shape,
    sources,
    splat,
)
