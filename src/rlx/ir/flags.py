"""Well-known :class:`~rlx.ir.opdef.OpDef` flags that passes below the ops layer read.

A flag is a promise an op makes about itself, stated once in its ``defop``; a pass reads the
flag instead of keeping its own list of op names. Flags read only by one upper layer live
with their reader (``NO_GRAD`` / ``COMPLEX_AD`` in :mod:`rlx.autodiff.rules`, ``SUBGRAPHS``
in :mod:`rlx.ops.evaluate`).
"""

#: Compute-bound: matrix products, convolutions, attention, dense solves. The buffer planner
#: counts the steady phase as ending at the last such op (``rlx.lir.plan.derive_phases``).
BLAS = "blas"
#: Output-side work (sampling, top-k): the planner puts it, and all that follows, in the epilogue.
EPILOGUE = "epilogue"
