"""Large language models from GGUF files: ``load_gguf(path)`` -> :class:`LlmModel` (``logits``, ``generate``)."""

from __future__ import annotations

import os

from rlx.frontends.gguf import GgufError, read_gguf
from rlx.llm.config import LlmConfig, check_tensors, config_from_gguf
from rlx.llm.graphs import load_weights
from rlx.llm.model import LlmModel, check_vocab

__all__ = ["GgufError", "LlmConfig", "LlmModel", "load_gguf"]


def load_gguf(path: str | os.PathLike[str], backend: str = "numpy") -> LlmModel:
    """Read, validate and build the model in a GGUF file (llama / mistral / qwen2 / qwen3)."""
    f = read_gguf(path)
    c = config_from_gguf(f)
    check_tensors(f, c)
    check_vocab(f, c)
    return LlmModel(f, c, load_weights(f, c), backend=backend)
