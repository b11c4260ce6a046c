"""Op families. Importing this package registers every built-in op."""

from rlx.ops import (  # noqa: F401
    attention,
    backward,
    conv,
    elementwise,
    fused,
    hir_blocks,
    linalg,
    normalization,
    reduction,
    shape,
    sources,
)
