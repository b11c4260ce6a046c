"""The ONNX path of the zoo: torch.onnx.export → rlx.onnx.import_model → rlx.onnx.export.

:func:`round_trip` exports a zoo row with torch (``dynamo=True``, or the TorchScript exporter
with ``dynamo=False``), imports the file into rlx, exports it back, runs
``onnx.checker.check_model(full_check=True)`` on rlx's file and compares, on two different
inputs, onnxruntime on rlx's file and ``rlx.run`` with onnxruntime on torch's file. The
outputs must move between the two inputs (no constant output passes), and the graph inputs and
outputs keep their names.

The module is fed flat tensors (keyword inputs in the zoo row's order) and returns its float
output tensors. TorchScript cannot export ``aten::diff``, which transformers' decoders run to
detect packed sequences when no attention mask is given: in that mode a decoder gets an
all-ones ``attention_mask`` input.
"""

from __future__ import annotations

import inspect
import io
import warnings
from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_leaves

import rlx
import rlx.onnx
from models.zoo import VOCAB
from models.zoo_check import _other_feed, rel_error

TOL = 1e-4
MODES = ("torchscript", "dynamo")


class Flat(torch.nn.Module):
    """``module`` called with positional tensors (``names`` map them to keywords), float outputs flattened."""

    def __init__(self, module: torch.nn.Module, names: list[str], extra: dict):
        super().__init__()
        self.m, self.names, self.extra = module, names, extra

    def forward(self, *xs):
        out = self.m(*xs[: len(xs) - len(self.names)], **dict(zip(self.names, xs[len(xs) - len(self.names):])), **self.extra)
        return tuple(t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point())


@dataclass
class RoundTrip:
    name: str
    mode: str
    nodes: tuple[int, int]  # torch's node count, rlx's
    errors: dict[str, float]  # rlx.run vs onnxruntime on torch's file; onnxruntime on rlx's file vs the same


def exported(module: torch.nn.Module, xs: tuple, names: list[str], mode: str):
    import onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "dynamo":
            return torch.onnx.export(module, xs, dynamo=True, verbose=False, input_names=names).model_proto
        buf = io.BytesIO()
        torch.onnx.export(module, xs, buf, dynamo=False, opset_version=17, input_names=names)
    return onnx.load_from_string(buf.getvalue())


def _inputs(entry, mode: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    module, args, kwargs = entry.build()
    tensors = {f"x{i}": a for i, a in enumerate(args)}
    keywords = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    if (mode == "torchscript" and "input_ids" in keywords and "attention_mask" not in keywords
            and "attention_mask" in inspect.signature(module.forward).parameters):
        keywords["attention_mask"] = torch.ones_like(keywords["input_ids"])
    extra = {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}
    return Flat(module, list(keywords), extra).eval(), {**tensors, **keywords}


def round_trip(entry, mode: str) -> RoundTrip:
    import onnx
    import onnxruntime as ort

    module, tensors = _inputs(entry, mode)
    proto = exported(module, tuple(tensors.values()), list(tensors), mode)
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    fed = [i.name for i in theirs.get_inputs()]
    feeds = [{n: tensors[n].numpy() for n in fed}]
    feeds.append(_other_feed(feeds[0], VOCAB))
    g, params = rlx.onnx.import_model(proto)
    mine = rlx.onnx.export(g, params)
    onnx.checker.check_model(mine, full_check=True)
    ours = ort.InferenceSession(mine.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in ours.get_inputs()] == fed
    assert [o.name for o in ours.get_outputs()] == [o.name for o in theirs.get_outputs()]
    errors = {"run": 0.0, "reexport": 0.0}
    wants = []
    for feed in feeds:
        want = theirs.run(None, feed)
        wants.append(want)
        for key, got in (("run", rlx.run(g, feed, params)), ("reexport", ours.run(None, feed))):
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert a.shape == b.shape and a.dtype == b.dtype, (key, a.shape, a.dtype, b.shape, b.dtype)
                errors[key] = max(errors[key], rel_error(a, b))
    assert max(errors.values()) <= TOL, errors
    moved = [rel_error(a, b) for a, b in zip(*wants) if b.dtype.kind == "f"]
    assert moved and max(moved) > 1e-3, f"outputs do not depend on the input ({moved})"
    return RoundTrip(entry.name, mode, (len(proto.graph.node), len(mine.graph.node)), errors)


def check_exporter_available(mode: str) -> None:
    """Skip where torch's exporter for ``mode`` cannot run (dynamo=True needs onnxscript)."""
    import pytest

    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    if mode == "dynamo":
        pytest.importorskip("onnxscript")


