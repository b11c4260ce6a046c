"""Large language models from GGUF files: ``load_gguf(path)`` -> :class:`LlmModel` (``logits``, ``generate``)."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from rlx.frontends.gguf import GgufError, read_gguf
from rlx.llm.config import LlmConfig, check_tensors, config_from_gguf
from rlx.llm.graphs import load_weights
from rlx.llm.model import LlmModel, check_vocab
from rlx.llm.tokenizer import GgufTokenizer

__all__ = ["GgufError", "GgufTokenizer", "LlmConfig", "LlmModel", "default_backend", "load_gguf"]


def default_backend() -> str:
    """onnxruntime when installed (packed Q4_0 / Q8_0 kernels, one fused attention kernel per layer that appends to
    the cache in place, low per-call overhead), else the numpy executor. For both paths: measured on an AVX2 x86-64
    CPU (docs/llm.md, "Benchmarks"), onnxruntime decoded the benchmark model 1.2-1.9x faster than openvino at Q4_0
    and 0.9-1.2x at Q8_0, 1 and 2 threads (``int8_activations``; openvino's 4-bit kernels need AVX-512 to be fast);
    openvino stays one ``backend="openvino"`` away."""
    return "onnxruntime" if importlib.util.find_spec("onnxruntime") is not None else "numpy"


def load_gguf(path: str | os.PathLike[str], backend: str = "auto", *, int8_activations: bool = False, **options: Any) -> LlmModel:
    """Read, validate and build the model in a GGUF file (llama / mistral / qwen2 / qwen3 / gemma / gemma2 / gemma3 / phi3).

    ``backend`` (``"auto"``: :func:`default_backend`, falling back to numpy for graphs it cannot compile) and
    ``options`` (e.g. ``threads=1`` for onnxruntime) go to :func:`rlx.compile` for the prefill and decode graphs;
    ``"numpy"`` is the reference executor (decodes block weights on every call).
    ``int8_activations``: Q4_0 / Q8_0 matmuls round their inputs to int8 blocks of 32 first (dequant_matmul
    ``x_quant='q8_block'``, as llama.cpp does), which onnxruntime runs as integer MatMulNBits: the fast CPU path,
    not bit-equal to a float model."""
    f = read_gguf(path)
    c = config_from_gguf(f)
    check_tensors(f, c)
    check_vocab(f, c)
    auto = backend == "auto"
    if auto:
        backend = default_backend()
    w = load_weights(f, c)
    w.x_quant = "q8_block" if int8_activations else "none"
    fallback = "numpy" if auto else None  # for graphs the engine cannot compile
    return LlmModel(f, c, w, backend=backend, options=options, fallback=fallback)
