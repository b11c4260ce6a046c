"""MAC rules (``OpDef.macs``) of the quantised contractions that ``quant.py`` / ``dequant.py`` define.

They are attached here, after registration, only while those two modules are being changed by
other work; each line belongs in its op's ``defop`` (``macs=...``), where every other op states it.
"""

from rlx.ir.opdef import get_op
from rlx.ops import dequant, quant  # noqa: F401  (registers the ops below)
from rlx.ops.cost import conv_macs, last_dim_macs

for _name, _rule in (("q_matmul", last_dim_macs), ("dequant_matmul", last_dim_macs), ("q_conv2d", conv_macs)):
    get_op(_name).macs = _rule
