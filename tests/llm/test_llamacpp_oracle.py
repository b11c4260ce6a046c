"""llama.cpp itself as the oracle (``llama-cpp-python``, built from source; skipped where it is not installed): the
only one for gemma (v1), whose GGUF files transformers cannot load, and a second one for the gemma2 / gemma3 and
llama / phi3 / qwen2 / qwen3 graphs. F32 weights and an F32 KV cache, so the remaining difference is llama.cpp's
table-driven GELU."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_models import write_model

from rlx.llm import load_gguf

pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

PROMPT = [1, 5, 9, 200, 17, 33, 120]
GGML_F32 = 0


@pytest.mark.parametrize("arch", ["gemma", "gemma2", "gemma3", "llama", "phi3", "qwen2", "qwen3"])
def test_logits_equal_llama_cpp(tmp_path, arch):
    path = write_model(tmp_path / f"{arch}.gguf", arch=arch, tie=arch != "llama", embed_std=0.05,
                       layers=7 if arch == "gemma3" else 2, extra={"add_sliding_window": 4} if arch in ("gemma2", "gemma3") else None)
    ours = load_gguf(path, backend="numpy").logits(PROMPT)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_threads=1, logits_all=True, verbose=False,
                          type_k=GGML_F32, type_v=GGML_F32)
    llm.eval(PROMPT)
    ref = np.array(llm.scores[len(PROMPT) - 1], np.float32)
    llm.close()
    assert np.abs(ours - ref).max() <= 1e-3 * np.abs(ref).max(), arch
    assert int(np.argmax(ours)) == int(np.argmax(ref))
