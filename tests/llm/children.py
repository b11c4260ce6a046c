"""What an isolated child runs (tests/security/isolate.py): load one GGUF file and run one prefill."""

from __future__ import annotations

from rlx.llm import load_gguf


def load_and_run(path: str) -> str:
    model = load_gguf(path, backend="numpy")
    model.logits([1, 2, 3])
    return "loaded"
