"""The zoo's ONNX files as people ship them: torch's TorchScript export with a dynamic batch axis on every input and
a dynamic sequence axis on token ids, masks and raw audio, imported by ``rlx.onnx.import_model`` without input
shapes (one graph for every size) and run by ``rlx.run`` against onnxruntime on the same file at the exported size
and at another batch and length. Where onnxruntime refuses the other size (the file baked a traced size in), rlx
must refuse it with a typed error too, never crash.

One small CNN and one small transformer run in CI; every row runs with ``-m slow``.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models.zoo import VOCAB, ZOO  # noqa: E402  (first: it makes torchvision importable for transformers and timm)

pytest.importorskip("transformers")
pytest.importorskip("timm")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import rlx  # noqa: E402
import rlx.onnx  # noqa: E402
from models.test_zoo_onnx import TORCH_MOE_FAILS  # noqa: E402
from models.zoo_check import _other_feed, rel_error  # noqa: E402
from models.zoo_onnx import TOL, _inputs  # noqa: E402
from rlx.frontends.onnx.import_context import NeedsShapes, NeedsStatic  # noqa: E402

FAST = {"bert", "convnext_hf"}


def _axes(tensors: dict[str, torch.Tensor]) -> dict[str, dict[int, str]]:
    """batch on axis 0 of every input; on axis 1 of token ids, masks and raw audio (rank-2 inputs) the sequence,
    the decoder's its own (as shipped encoder-decoder files name them)."""
    def seq(name: str) -> str:
        return "decoder_seq" if name.startswith("decoder_") else "seq"
    return {name: {0: "batch", **({1: seq(name)} if t.ndim == 2 else {})} for name, t in tensors.items()}


def _shipped(entry) -> tuple[bytes, dict[str, np.ndarray]]:
    module, tensors = _inputs(entry, "torchscript")
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(tensors.values()), buf, dynamo=False, opset_version=17,
                          input_names=list(tensors), dynamic_axes=_axes(tensors))
    return buf.getvalue(), {n: t.numpy() for n, t in tensors.items()}


def _resized(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Twice the batch (the feed and a second input stacked) and rank-2 inputs cut to 3/4 of their length."""
    other = _other_feed(feed, VOCAB)
    out = {}
    for name, a in feed.items():
        both = np.concatenate([a, other[name]], axis=0) if a.ndim else a
        out[name] = both[:, : max(1, a.shape[1] * 3 // 4)] if a.ndim == 2 else both
    return out


#: rows torch's TorchScript exporter cannot export with dynamic axes (whisper's decoder reaches ``aten::diff``;
#: GLM's partial rotary concatenates tensors of different ranks in the trace)
TORCH_DYNAMIC_FAILS = {"whisper", "glm"}


def _param(entry):
    marks = [] if entry.name in FAST else [pytest.mark.slow]
    if entry.name in TORCH_MOE_FAILS:
        marks.append(pytest.mark.skip(reason="torch.onnx.export has no ONNX function for histc / grouped_mm_fallback"))
    if entry.name in TORCH_DYNAMIC_FAILS:
        marks.append(pytest.mark.xfail(raises=(torch.onnx.errors.UnsupportedOperatorError, AssertionError), strict=True,
                                       reason="torch.onnx.export(dynamo=False) with dynamic axes fails on the model"))
    return pytest.param(entry, id=entry.name, marks=marks)


def _runs_in_onnxruntime(sess, feed: dict[str, np.ndarray]) -> bool:
    try:
        sess.run(None, feed)
    except Exception:  # onnxruntime's own error types
        return False
    return True


@pytest.mark.parametrize("entry", [_param(e) for e in ZOO])
def test_zoo_onnx_with_dynamic_dims(entry):
    blob, feed = _shipped(entry)
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = [{n: f[n] for n in names} for f in (feed, _resized(feed))]
    try:
        g, params = rlx.onnx.import_model(blob)
        assert any(not v.node.shape.is_static for v in g.inputs().values()), "the dynamic axes were lost"
    except (NeedsShapes, NeedsStatic):
        # only a file that does not run at every size (a traced size baked into it, as torch's exporter does for
        # some models) may need its input shapes: then it imports with them, as `rlx run` does
        assert not all(_runs_in_onnxruntime(sess, f) for f in feeds), "rlx refuses a file onnxruntime runs at both sizes"
        try:
            g, params = rlx.onnx.import_model(blob, input_shapes={n: list(a.shape) for n, a in feeds[0].items()})
        except rlx.RlxError:  # torch wrote a wrong size into the file (Helium, Cohere): no engine runs it
            assert not _runs_in_onnxruntime(sess, feeds[0]), "rlx refuses, with its shapes, a file onnxruntime runs"
            return
        feeds = feeds[:1]
    outputs = []
    for fed in feeds:
        try:
            want = sess.run(None, fed)
        except Exception:  # onnxruntime's own error types: rlx must refuse that size too, typed
            with pytest.raises(rlx.RlxError):
                rlx.run(g, fed, params)
            continue
        got = rlx.run(g, fed, params)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
            assert rel_error(a, b) <= 2 * TOL, rel_error(a, b)  # f32 rounding at new positions (LRASPP: 1.4e-4)
        outputs.append(want)
    if len(outputs) == 2:  # the two stacked inputs give two different halves: no constant output passes
        n = next(iter(feed.values())).shape[0]
        moved = [rel_error(b[:n], b[n:]) for b in outputs[1] if b.dtype.kind == "f" and b.ndim and b.shape[0] == 2 * n]
        assert moved and max(moved) > 1e-3, f"outputs do not depend on the input ({moved})"
