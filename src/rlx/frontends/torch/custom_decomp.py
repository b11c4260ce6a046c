"""torch-level decompositions of custom ops that torch itself ships without a traceable body.

torch's chunked ``linear_cross_entropy`` (``torch_nn::_linear_cross_entropy_batch_chunked`` and its
``_no_reduction`` sibling, chosen when ``options=`` is given) is a ``torch.library.custom_op`` whose Python body
accumulates chunk by chunk; its value is ``cross_entropy(linear(input, weight, bias), target, ...)``, which is
what the importer decomposes it into (the chunking only bounds peak memory). The scalar form also returns
precomputed gradients: only the empty placeholders it returns when no gradient is asked for are reproduced;
an op asked for gradients stays unsupported (reported by name)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["custom_decomposition"]


def _chunked(input: Any, linear_weight: Any, target: Any, linear_bias: Any, weight: Any, reduction: str,
             ignore_index: int, label_smoothing: float, batch_chunk_size: int, acc_policy: str, acc_dtype: Any,
             allow_retain_graph: bool, compute_input_grad: bool, compute_linear_weight_grad: bool,
             compute_linear_bias_grad: bool) -> tuple[Any, Any, Any, Any]:
    import torch
    import torch.nn.functional as F

    logits = F.linear(input, linear_weight, linear_bias)
    loss = F.cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
    empty = {"dtype": input.dtype, "device": input.device}
    return loss, torch.zeros((0, 0), **empty), torch.zeros((0, 0), **empty), torch.zeros((0,), **empty)


def _chunked_no_reduction(input: Any, linear_weight: Any, target: Any, linear_bias: Any, weight: Any,
                          ignore_index: int, batch_chunk_size: int, acc_policy: str, acc_dtype: Any) -> Any:
    import torch.nn.functional as F

    logits = F.linear(input, linear_weight, linear_bias)
    return F.cross_entropy(logits, target, weight=weight, reduction="none", ignore_index=ignore_index)


def _wants_gradients(node_args: tuple) -> bool:
    return any(bool(a) for a in node_args[-3:])


_TABLE: dict[str, Callable[..., Any]] = {
    "torch_nn::_linear_cross_entropy_batch_chunked": _chunked,
    "torch_nn::_linear_cross_entropy_batch_chunked_no_reduction": _chunked_no_reduction,
}


def custom_decomposition(op: Any, ep: Any) -> Callable[..., Any] | None:
    """A torch-level decomposition of ``op`` from the table above, or None (also when a node of ``ep`` asks
    the scalar chunked op for precomputed gradients, which this decomposition does not produce)."""
    name = getattr(getattr(op, "_schema", None), "name", None)
    fn = _TABLE.get(name or "")
    if fn is _chunked and any(_wants_gradients(n.args) for n in ep.graph.nodes if n.target is op):
        return None
    return fn
