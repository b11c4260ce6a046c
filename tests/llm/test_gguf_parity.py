"""GGUF models through rlx.llm against transformers on the same file: greedy tokens equal, logits within 1e-3."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model
from reference import hf_run

from rlx.llm import load_gguf

pytest.importorskip("gguf")
pytest.importorskip("accelerate")

PROMPT = [1, 5, 9, 200, 17, 33, 120]
NEW = 6
SLOW = pytest.mark.slow


def _case(tmp_path, arch: str, qtype: str, backend: str = "numpy", **kw):
    d = 256 if qtype.endswith("_K") or qtype == "IQ4_XS" else 64
    path = write_model(tmp_path / f"{arch}_{qtype}.gguf", arch=arch, qtype=qtype, d=d, ff=2 * d if d == 256 else 96, **kw)
    model = load_gguf(path, backend=backend)
    logits = model.logits(PROMPT)
    tokens = model.generate(PROMPT, max_new_tokens=NEW, stop=[])
    # transformers' qwen3 GGUF config ignores key_length: give it the head dim
    ref_logits, ref_tokens = hf_run(path, PROMPT, NEW, head_dim=d // 4 if arch == "qwen3" else None)
    assert logits.shape == ref_logits.shape == (300,)
    assert np.abs(logits - ref_logits).max() <= 1e-3 * np.abs(ref_logits).max(), (arch, qtype)
    assert tokens == ref_tokens, (arch, qtype)


FAST = [("llama", "F32"), ("qwen2", "Q8_0"), ("qwen3", "Q4_0")]
FULL = [(a, q) for a in ("llama", "qwen2") for q in ("F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K")]
MORE = [("llama", q) for q in ("Q2_K", "Q3_K", "Q5_K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL")] + [("qwen2", "IQ4_XS"), ("qwen3", "Q6_K"),
                                                                                         ("llama", "BF16")]


@pytest.mark.parametrize(("arch", "qtype"), FAST)
def test_parity_fast(tmp_path, arch, qtype):
    _case(tmp_path, arch, qtype)


@SLOW
@pytest.mark.parametrize(("arch", "qtype"), [c for c in FULL + MORE if c not in FAST])
def test_parity_matrix(tmp_path, arch, qtype):
    _case(tmp_path, arch, qtype)


def test_onnxruntime_matmulnbits_fast(tmp_path):
    """Q4_0 through onnxruntime's MatMulNBits (the weight stays 4-bit in the session)."""
    pytest.importorskip("onnxruntime")
    _case(tmp_path, "llama", "Q4_0", backend="onnxruntime")


def test_int8_activations_onnxruntime_equals_its_reference(tmp_path):
    """The fast path (int8 activation blocks, MatMulNBits accuracy_level 4) computes the dequant_matmul x_quant
    semantics: onnxruntime's logits and tokens equal the NumPy reference executor's on the same graphs."""
    pytest.importorskip("onnxruntime")
    path = write_model(tmp_path / "m.gguf", arch="qwen2", qtype="Q8_0", d=128, ff=160)
    fast = load_gguf(path, backend="onnxruntime", int8_activations=True)
    ref = load_gguf(path, backend="numpy", int8_activations=True)
    a, b = fast.logits(PROMPT), ref.logits(PROMPT)
    assert np.abs(a - b).max() <= 1e-4 * np.abs(b).max()
    assert np.abs(a - load_gguf(path, backend="numpy").logits(PROMPT)).max() > 1e-6 * np.abs(b).max()  # not the float model
    assert fast.generate(PROMPT, max_new_tokens=NEW, stop=[]) == ref.generate(PROMPT, max_new_tokens=NEW, stop=[])


@SLOW
@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q5_1"])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_parity_onnxruntime(tmp_path, arch, qtype):
    pytest.importorskip("onnxruntime")
    _case(tmp_path, arch, qtype, backend="onnxruntime")


GEMMA2_CAPS = {"add_attn_logit_softcapping": 0.5, "add_final_logit_softcapping": 2.0, "add_sliding_window": 4}


@pytest.mark.parametrize(("qtype", "backend"), [("Q8_0", "onnxruntime"), pytest.param("F32", "numpy", marks=SLOW),
                                                pytest.param("Q4_K", "onnxruntime", marks=SLOW)])
def test_gemma2(tmp_path, qtype, backend):
    """gemma2: embeddings times sqrt(d), post-attention / post-FFN norms, GELU-tanh gating, tied head, soft-capped
    scores and logits (caps small enough to bind: 0.5 and 2.0), a sliding window of 4 on the even layers (shorter
    than the prompt: prefill and decode masks both bind); transformers' GGUF reader takes neither cap nor the query
    scale from the file, so its config gets them. Embeddings at std 0.05 so the tied head does not just repeat
    the last token."""
    d = 256 if qtype.endswith("_K") or qtype == "IQ4_XS" else 64
    path = write_model(tmp_path / "g.gguf", arch="gemma2", qtype=qtype, d=d, ff=2 * d if d == 256 else 96, tie=True,
                       extra=GEMMA2_CAPS, embed_std=0.05)
    model = load_gguf(path, backend=backend)
    logits, tokens = model.logits(PROMPT), model.generate(PROMPT, max_new_tokens=NEW, stop=[])
    ref_logits, ref_tokens = hf_run(path, PROMPT, NEW, head_dim=d // 4, query_pre_attn_scalar=d // 4,
                                    attn_logit_softcapping=0.5, final_logit_softcapping=2.0)
    assert np.abs(logits - ref_logits).max() <= 1e-3 * np.abs(ref_logits).max()
    assert tokens == ref_tokens
    assert np.abs(ref_logits).max() <= 2.0  # the final cap binds


@pytest.mark.parametrize("backend", ["onnxruntime", pytest.param("numpy", marks=SLOW)])
def test_gemma3(tmp_path, backend):
    """gemma3: gemma2's block with per-head q / k RMSNorm and no soft-caps, five local layers in six (window 4,
    shorter than the prompt) rotating with their own base (10000) while the global ones use the file's (1e6)."""
    prompt = [*PROMPT, 44, 51]
    path = write_model(tmp_path / "g3.gguf", arch="gemma3", qtype="Q4_0", layers=7, tie=True, embed_std=0.05,
                       extra={"add_sliding_window": 4, "add_rope_freq_base": 1e6})
    model = load_gguf(path, backend=backend)
    logits, tokens = model.logits(prompt), model.generate(prompt, max_new_tokens=NEW, stop=[])
    ref_logits, ref_tokens = hf_run(path, prompt, NEW, head_dim=16, query_pre_attn_scalar=16)
    assert np.abs(logits - ref_logits).max() <= 1e-3 * np.abs(ref_logits).max()
    assert tokens == ref_tokens


@SLOW
def test_openvino(tmp_path):
    """OpenVINO reads the same ONNX (MatMulNBits included): Q8_0 exact (f32 MatMul) against transformers, and
    Q4_0 against one of onnxruntime's two paths: where the CPU has AVX-512 OpenVINO's 4-bit kernel quantizes the
    activations to int8 blocks whatever the accuracy level (llama.cpp's scheme, onnxruntime's int8-activation
    path); on AVX2 alone it runs in f32 (onnxruntime's exact path)."""
    pytest.importorskip("openvino")
    pytest.importorskip("onnxruntime")
    _case(tmp_path, "llama", "Q8_0", backend="openvino")
    path = write_model(tmp_path / "q4.gguf", qtype="Q4_0")
    ov = load_gguf(path, backend="openvino")
    a = ov.logits(PROMPT)
    refs = [load_gguf(path, backend="onnxruntime", int8_activations=x) for x in (True, False)]
    errors = [float(np.abs(a - r.logits(PROMPT)).max() / np.abs(a).max()) for r in refs]
    assert min(errors) <= 1e-5, errors
    ort = refs[int(np.argmin(errors))]
    assert ov.generate(PROMPT, max_new_tokens=NEW, stop=[]) == ort.generate(PROMPT, max_new_tokens=NEW, stop=[])


@SLOW
def test_tied_embeddings_and_mha(tmp_path):
    """No output.weight (the head reads token_embd) and as many KV heads as query heads."""
    _case(tmp_path, "llama", "Q8_0", tie=True, kv_heads=4)


def _llama3_freq_factors(head_dim: int, rope: dict) -> np.ndarray:
    """llama.cpp's rope_freqs (theta_i divided by factor_i) for transformers' llama3 rope: default / llama3 inv_freq."""
    # isort: off
    import models.zoo  # noqa: F401  (first: the torchvision shim)
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    # isort: on

    cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=head_dim, rope_parameters=rope)
    inv3, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    base = 1.0 / (rope["rope_theta"] ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    return (base / inv3.double().numpy()).astype(np.float32)


@pytest.mark.parametrize("kind", ["linear", pytest.param("llama3", marks=SLOW)])
def test_rope_scaling(tmp_path, kind):
    """Linear rope scaling (metadata) and llama3's per-frequency factors (the rope_freqs tensor) against
    transformers configured the same way (its GGUF reader takes neither from the file)."""
    from gguf import RopeScalingType

    ids = list(range(3, 80))
    if kind == "linear":
        rope = {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}
        path = write_model(tmp_path / "lin.gguf", extra={"add_rope_scaling_type": RopeScalingType.LINEAR, "add_rope_scaling_factor": 4.0})
    else:
        rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16, "rope_theta": 10000.0}
        path = write_model(tmp_path / "l3.gguf", tensors={"rope_freqs.weight": _llama3_freq_factors(16, rope)})
    model = load_gguf(path)
    ref_logits, ref_tokens = hf_run(path, ids, 4, rope_parameters=rope)
    assert np.abs(model.logits(ids) - ref_logits).max() <= 1e-3 * np.abs(ref_logits).max()
    assert model.generate(ids, max_new_tokens=4, stop=[]) == ref_tokens
