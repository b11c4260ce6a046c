"""Autodiff and transforms on MIR: prepare_graph_for_ad, grad_with_loss, grad, jvp, hvp, vmap.

Staging: HIR → lower (FusionPolicy.for_autodiff()) → MIR → prepare_graph_for_ad → primitive
MIR → grad_with_loss → backward MIR. LIR is never differentiated. The per-op rules live in
each op's registry entry; their contract is documented in :mod:`rlx.autodiff.rules`.
"""

from rlx.autodiff.forward import jvp
from rlx.autodiff.hvp import hvp
from rlx.autodiff.prepare import prepare_graph_for_ad
from rlx.autodiff.reverse import grad, grad_with_loss
from rlx.autodiff.rules import COMPLEX_AD, NO_GRAD
from rlx.autodiff.vmap import vmap

__all__ = ["COMPLEX_AD", "NO_GRAD", "grad", "grad_with_loss", "hvp", "jvp", "prepare_graph_for_ad", "vmap"]
