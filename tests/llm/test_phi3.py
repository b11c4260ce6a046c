"""phi3 GGUF files (llama.cpp's tensors: q / k / v rows in one attn_qkv, gate / up rows in one ffn_up) against
transformers' Phi3 on the same file: plain, and with longrope factors, its attention factor and a partial rotary
(Phi-3.5 / Phi-4-mini's form) given to transformers as the config the file describes."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model
from reference import hf_run

from rlx.llm import load_gguf

pytest.importorskip("gguf")
pytest.importorskip("accelerate")

PROMPT = [1, 5, 9, 200, 17, 33, 120, 44, 3, 250]
NEW = 6
HD = 16  # d 64 / 4 heads


def _check(path, backend: str, **hf_config) -> None:
    model = load_gguf(path, backend=backend)
    logits, tokens = model.logits(PROMPT), model.generate(PROMPT, max_new_tokens=NEW, stop=[])
    ref_logits, ref_tokens = hf_run(path, PROMPT, NEW, pad_token_id=0, **hf_config)
    assert np.abs(logits - ref_logits).max() <= 1e-3 * np.abs(ref_logits).max()
    assert tokens == ref_tokens
    whole_heads = hf_config.get("rope_parameters", {}).get("partial_rotary_factor", 1.0) == 1.0
    assert model.cached == (backend == "onnxruntime" and whole_heads)  # the fused attention kernel rotates whole heads


@pytest.mark.parametrize("qtype", ["F32", "Q8_0"])
@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_phi3(tmp_path, qtype, backend):
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    _check(write_model(tmp_path / "phi3.gguf", arch="phi3", qtype=qtype, embed_std=0.5), backend)


@pytest.mark.parametrize(("n_rot", "backend"), [(HD, "onnxruntime"), (12, "numpy"), (12, "onnxruntime")])
def test_longrope_short_factors_and_partial_rotary(tmp_path, n_rot, backend):
    """The prompt is shorter than the original context: the short factors rotate it (transformers' choice, and
    llama.cpp's for a context no longer than the original one); cos and sin are scaled by the attention factor."""
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(3)
    short, long = (1.0 + rng.uniform(0, 3, n_rot // 2)).astype(np.float32), (2.0 + rng.uniform(0, 9, n_rot // 2)).astype(np.float32)
    original, context = 64, 2048  # the file's context_length (gguf_models)
    attn_factor = float(np.sqrt(1 + np.log(context / original) / np.log(original)))  # transformers' longrope default
    path = write_model(tmp_path / "phi3_long.gguf", arch="phi3", embed_std=0.5, n_rot=n_rot, tie=True,
                       extra={"add_rope_scaling_attn_factors": attn_factor, "add_rope_scaling_orig_ctx_len": original},
                       tensors={"rope_factors_short.weight": short, "rope_factors_long.weight": long})
    _check(path, backend, max_position_embeddings=context, original_max_position_embeddings=original, tie_word_embeddings=True,
           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": n_rot / HD,
                            "short_factor": short.tolist(), "long_factor": long.tolist(), "original_max_position_embeddings": original})
