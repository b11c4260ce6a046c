"""Well-known :class:`~rlx.ir.opdef.OpDef` flags that passes below the ops layer read.

A flag is a promise an op makes about itself, stated once in its ``defop``; a pass reads the
flag instead of keeping its own list of op names. Flags read only by one upper layer live
with their reader (``COMPLEX_AD`` in :mod:`rlx.autodiff.rules`, ``SUBGRAPHS`` in
:mod:`rlx.ops.evaluate`).
"""

#: Compute-bound: matrix products, convolutions, attention, dense solves. The buffer planner
#: counts the steady phase as ending at the last such op (``rlx.lir.plan.derive_phases``).
BLAS = "blas"
#: Output-side work (sampling, top-k): the planner puts it, and all that follows, in the epilogue.
EPILOGUE = "epilogue"
#: Evaluating the op on values nobody uses may raise (indices out of range, a singular system, a
#: degenerate camera, a bad label) or draw random numbers: control-flow lowering never runs it
#: speculatively (``rlx.opt.lower.eager_unsafe_ops``). Floating-point overflow and NaN never count.
EAGER_UNSAFE = "eager_unsafe"
#: Result r >= 1 is operand r with some of its entries replaced (same type; a KV-cache append): an engine may write it
#: into the operand's own buffer (``rlx.backends.ort_backend.updated_inputs`` binds it there).
UPDATES_OPERANDS = "updates_operands"
#: The operands broadcast implicitly (NumPy rules); ``rlx.opt.legalize`` makes it explicit for
#: backends that need equal shapes.
BROADCASTS = "broadcasts"
#: Element by element the result is one of the operands after the first (the first chooses): where
#: those are one value of the result's type, the result is that value (``rlx.opt.cleanup.simplify``).
SELECTS = "selects"
#: The op needs no derivative rule (sources; ops locally constant in every operand): autodiff passes
#: no gradient through it, so ``simplify`` collapses it only when told no one differentiates the graph.
NO_GRAD = "no_grad"
