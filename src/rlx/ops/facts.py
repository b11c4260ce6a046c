"""Op flags read by the layers above ``ops`` (the optimizer, its report, autodiff preparation, the
torch backend) instead of lists of op names of their own.

A flag is a promise one op makes about itself, stated in its ``defop``; flags that passes below
``ops`` read live in :mod:`rlx.ir.flags`.
"""

#: A fused kernel: the fusion report (``rlx.opt.report``) counts it in ``fused`` / ``created``.
FUSED_KIND = "fused_kind"
#: The result is operand 0's elements under a new shape / stride / offset, nothing computed
#: (reshape, transpose, narrow, expand): the torch backend returns a view where it can.
VIEW = "view"
#: Operand 1 is a convolution weight [O, I/groups, kH, kW] read as a whole by the kernel: the torch
#: backend lays it out once for its conv kernels (``rlx.backends.torch_backend.weights``).
CONV_WEIGHT = "conv_weight"
#: The result dtype is the op's ``to`` attribute (an explicit conversion): automatic mixed precision
#: (``rlx.opt.precision``) never retypes it, whatever its operand becomes.
CONVERTS = "converts"
#: Autodiff preparation (``rlx.autodiff.prepare``) splits a multi-axis ``axes`` attribute into a
#: chain of one-axis nodes of the same op, highest axis first (the result is the same).
SPLIT_AXES = "split_axes"

# The optimizer's named backends (``OpDef.native_on``; rlx.opt.BACKENDS), grouped as their kernel sets are:
#: every named native backend (the CPU runtimes, Metal, CUDA / ROCm, TPU)
ALL_NATIVE = frozenset({"cpu", "numpy", "metal", "cuda", "rocm", "tpu"})
#: all but TPU
NOT_TPU = ALL_NATIVE - {"tpu"}
#: the CPU runtimes and Metal
CPU_METAL = frozenset({"cpu", "numpy", "metal"})
#: the CPU runtimes only
CPU_ONLY = frozenset({"cpu", "numpy"})
