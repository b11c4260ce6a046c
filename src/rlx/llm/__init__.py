"""Large language models from GGUF files: ``load_gguf(path)`` -> :class:`LlmModel` (``logits``, ``generate``)."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from rlx.frontends.gguf import GgufError, read_gguf
from rlx.llm.config import LlmConfig, check_tensors, config_from_gguf
from rlx.llm.graphs import load_weights
from rlx.llm.model import LlmModel, check_vocab

__all__ = ["GgufError", "LlmConfig", "LlmModel", "default_backend", "load_gguf"]


def default_backend(int8_activations: bool = False) -> str:
    """onnxruntime when installed (packed Q4_0 / Q8_0 kernels, low per-call overhead), else the numpy executor; with
    ``int8_activations``, openvino first when installed: it runs the same graphs' int8-activation matmuls in ~30%
    less CPU time per decoded token and prefills ~2x faster (docs/llm.md), and its 4-bit kernels always quantize
    activations, which is that path's semantics but not the exact one's."""
    if int8_activations and importlib.util.find_spec("openvino") is not None:
        return "openvino"
    return "onnxruntime" if importlib.util.find_spec("onnxruntime") is not None else "numpy"


def load_gguf(path: str | os.PathLike[str], backend: str = "auto", *, int8_activations: bool = False, **options: Any) -> LlmModel:
    """Read, validate and build the model in a GGUF file (llama / mistral / qwen2 / qwen3 / gemma / gemma2 / gemma3).

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
        backend = default_backend(int8_activations)
    w = load_weights(f, c)
    w.x_quant = "q8_block" if int8_activations else "none"
    fallback = None
    if auto:  # openvino -> onnxruntime -> numpy, for graphs an engine cannot compile
        fallback = "onnxruntime" if backend == "openvino" and default_backend() == "onnxruntime" else "numpy"
    return LlmModel(f, c, w, backend=backend, options=options, fallback=fallback)
