"""Anonymous ONNX dims become fresh symbols; symbolic Pad / Slice / Conv; silero-vad (its LSTM one scan)
against onnxruntime at both sample rates, state carried across calls.

tests/fixtures/silero_vad/silero_vad.onnx is the file shipped in the ``silero-vad`` 6.2.3 wheel
(MIT licence, tests/fixtures/silero_vad/LICENSE).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx.onnx  # noqa: E402

SILERO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "silero_vad", "silero_vad.onnx")


def test_anonymous_dims_become_fresh_symbols_and_run_at_any_size():
    """x: [?, ?] (no dim_param) -> reflect Pad of the last axis, a Slice of it, a Conv over it."""
    r = np.random.default_rng(0)
    w = r.standard_normal((4, 1, 5)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])
    x.type.tensor_type.shape.dim[1].dim_param = ""  # anonymous, like torch.onnx's dynamic axes without names
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["x_d0"])  # a named dim that looks like a fresh one
    nodes = [helper.make_node("Unsqueeze", ["x", "ax1"], ["u"]),
             helper.make_node("Pad", ["u", "pads"], ["p"], mode="reflect"),
             helper.make_node("Slice", ["p", "st", "en", "axs"], ["s"]),
             helper.make_node("Conv", ["s", "w"], ["c"], pads=[2, 2]),
             helper.make_node("Relu", ["c"], ["out"])]
    inits = [helper.make_tensor("ax1", TensorProto.INT64, [1], [1]),
             helper.make_tensor("pads", TensorProto.INT64, [6], [0, 0, 3, 0, 0, 2]),
             helper.make_tensor("st", TensorProto.INT64, [2], [0, 1]), helper.make_tensor("en", TensorProto.INT64, [2], [2**63 - 1, -1]),
             helper.make_tensor("axs", TensorProto.INT64, [2], [0, 2]), helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 5], w.ravel())]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "m", [x, y], [out], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 18)])
    g, params = rlx.onnx.import_model(model)
    shape = next(n for n in g.nodes if n.op == "input" and n.attrs["name"] == "x").shape
    assert [str(d) for d in shape] == ["x_d0_2", "x_d1"]  # named from input and axis, distinct from "x_d0"
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, n in [(1, 9), (3, 40)]:
        feed = {"x": r.standard_normal((b, n)).astype(np.float32), "y": np.zeros(2, np.float32)}
        (want,) = sess.run(None, feed)
        (got,) = rlx.run(g, feed, params)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _matches_onnxruntime_across_calls(run, sr: int, chunk: int) -> None:
    """Speech-like chunks, state fed back for 3 calls: ``run(x, state)`` against onnxruntime."""
    sess = ort.InferenceSession(SILERO, providers=["CPUExecutionProvider"])
    t = np.arange(3 * chunk) / sr
    audio = (0.4 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)
    audio += 0.05 * np.random.default_rng(sr).standard_normal(audio.shape).astype(np.float32)
    theirs = ours = np.zeros((2, 1, 128), np.float32)
    probs = []
    for k in range(3):
        x = audio[None, k * chunk:(k + 1) * chunk]
        want = sess.run(None, {"input": x, "state": theirs, "sr": np.array(sr, np.int64)})
        got = run(x, ours)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-4)
        theirs, ours = want[1], got[1]
        probs.append(float(want[0].ravel()[0]))
    assert np.abs(theirs).max() > 1e-2  # the state evolves
    assert max(probs) - min(probs) > 1e-4  # the output is not a constant


@pytest.mark.parametrize("sr,chunk", [(16000, 512), (8000, 256)])
def test_silero_vad_matches_onnxruntime_with_state_across_calls(sr, chunk):
    """Each sample rate's graph (the If on sr folded) imported with its shapes."""
    model = onnx.load(SILERO)
    g, params = rlx.onnx.import_model(model, input_shapes={"input": [1, chunk], "state": [2, 1, 128]},
                                      static_inputs={"sr": np.array(sr, np.int64)})
    assert sum(n.op == "scan" for n in g.nodes) == 1  # the decoder's LSTM: one node
    _matches_onnxruntime_across_calls(lambda x, state: rlx.run(g, {"input": x, "state": state}, params), sr, chunk)


def test_silero_vad_runs_as_shipped_at_both_sample_rates():
    """No overrides: one runnable specialises on the fed shapes (the decoder's If reads a conv's time
    size) and on ``sr`` (the If choosing the 8 / 16 kHz branch), then runs both rates."""
    runnable = rlx.onnx.import_runnable(SILERO)
    assert runnable.shape_specialized  # the If squeezes an axis whose size is 1 only at some input lengths
    for sr, chunk in [(16000, 512), (8000, 256), (16000, 512)]:
        _matches_onnxruntime_across_calls(
            lambda x, state, sr=sr: runnable.run({"input": x, "state": state, "sr": np.array(sr, np.int64)}), sr, chunk)
