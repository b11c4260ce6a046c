"""How the generation graphs are written: rope rows against the rope op, merged matmuls against separate ones."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gguf_models import write_model

import rlx
from rlx.frontends.gguf import read_gguf
from rlx.ir.graph import Graph
from rlx.llm import load_gguf
from rlx.llm.config import config_from_gguf
from rlx.llm.graphs import load_weights, rope_pairs, rope_rows
from rlx.llm.model import LlmModel, rope_tables

pytest.importorskip("gguf")

PROMPT = [1, 7, 42, 99, 5]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("dg") / "m.gguf", arch="qwen2", qtype="Q4_0", seed=5)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("n_rot", [16, 10])
def test_rope_rows_equal_the_rope_op(small, interleaved, n_rot):
    """x·cos_rows + x[pair]·sin_rows is the rope op (NumPy reference) bit for bit, partial rotary included."""
    c = dataclasses.replace(config_from_gguf(read_gguf(small)), head_dim=16, n_rot=n_rot, rope_interleaved=interleaved)
    heads, s = 3, 7
    x = np.random.default_rng(0).standard_normal((s, heads * 16)).astype(np.float32)
    cos, sin = rope_tables(c, s)
    pad = [(0, 0), (0, 8 - n_rot // 2)]  # the op's tables are head_dim/2 wide, read up to n_rot/2
    g = Graph("rope")
    y = g.rope(g.input("x", x.shape, "f32"), g.input("c", (s, 8), "f32"), g.input("s", (s, 8), "f32"),
               head_dim=16, n_rot=n_rot, interleaved=interleaved)
    g.set_outputs([y])
    want = np.asarray(rlx.compile(g, backend="numpy").run(inputs={"x": x, "c": np.pad(cos, pad), "s": np.pad(sin, pad)})[0])
    cr, sr = rope_rows(c, cos, sin, heads)  # tiled over the heads, as the graphs take them
    pairs = (rope_pairs(c)[None, :] + 16 * np.arange(heads)[:, None]).reshape(-1)
    got = x * cr + x[:, pairs] * sr
    np.testing.assert_array_equal(got, want)


def test_merged_matmuls_equal_separate_ones(small):
    """q / k / v (with qwen2's biases) and gate / up stacked into one packed weight give the separate matmuls' logits."""
    f = read_gguf(small)
    c = config_from_gguf(f)
    merged, separate = load_weights(f, c), load_weights(f, c, merge=False)
    assert "blk.0.attn_qkv.weight" in merged.arrays and "blk.0.attn_qkv.bias" in merged.arrays
    assert "blk.0.ffn_gate_up.weight" in merged.arrays and "blk.0.attn_q.weight" not in merged.arrays
    a = LlmModel(f, c, merged).logits(PROMPT)
    b = LlmModel(f, c, separate).logits(PROMPT)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


def test_onnxruntime_decode_step_node_count(small, tmp_path):
    """The decode step onnxruntime runs stays small (its time is mostly per-node overhead beside the matmuls): one
    MatMulNBits per merged group, each RMSNorm fused into one kernel."""
    ort = pytest.importorskip("onnxruntime")
    import onnx

    from rlx.backends.ort_backend import export_for_session
    from rlx.llm.graphs import build_decode

    m = load_gguf(small, backend="onnxruntime")
    g = build_decode(m.config, m.weights, 256)
    names = set(g.params())
    proto = export_for_session(g, {k: v for k, v in m.weights.arrays.items() if k in names})
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    layers = m.config.n_layers
    assert ops.count("MatMulNBits") == 4 * layers + 1  # qkv, output, gate-up, down; the lm head
    assert ops.count("SimplifiedLayerNormalization") == 2 * layers + 1
    assert len(ops) <= 45 * layers + 10, len(ops)


def test_auto_backend(small):
    """backend="auto" takes onnxruntime when it is installed (numpy otherwise), for the exact and the int8-activation
    paths (the faster engine for both on the benchmark model, docs/llm.md)."""
    import importlib.util

    from rlx.llm import default_backend

    want = "onnxruntime" if importlib.util.find_spec("onnxruntime") is not None else "numpy"
    assert load_gguf(small).backend == default_backend() == want
    assert load_gguf(small, int8_activations=True).backend == want


def test_onnxruntime_cached_decode_step_node_count(small, tmp_path):
    """The cached decode step: one GroupQueryAttention per layer in onnxruntime's optimized graph (its present caches
    the graph's outputs, so the backend can bind them to the input caches), about 14 nodes per layer in all."""
    ort = pytest.importorskip("onnxruntime")
    import onnx

    from rlx.backends.ort_backend import export_for_session
    from rlx.llm.graphs import build_decode_cached

    m = load_gguf(small, backend="onnxruntime")
    assert m.cached
    g = build_decode_cached(m.config, m.weights, 256)
    names = set(g.params())
    proto = export_for_session(g, {k: v for k, v in m.weights.arrays.items() if k in names}, engine="onnxruntime")
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    optimized = onnx.load(str(tmp_path / "opt.onnx"))
    ops = [n.op_type for n in optimized.graph.node]
    layers = m.config.n_layers
    assert ops.count("GroupQueryAttention") == layers and ops.count("MatMulNBits") == 4 * layers + 1
    presents = {o for n in optimized.graph.node if n.op_type == "GroupQueryAttention" for o in n.output[1:]}
    assert presents == {o.name for o in optimized.graph.output[1:]}
    assert len(ops) <= 15 * layers + 10, len(ops)
