"""What an isolated child runs (tests/security/isolate.py): load one GGUF file and run one prefill, or tokenize."""

from __future__ import annotations

from rlx.frontends.gguf import read_gguf
from rlx.llm import GgufTokenizer, load_gguf


def load_and_run(path: str) -> str:
    model = load_gguf(path, backend="numpy")
    model.logits([1, 2, 3])
    return "loaded"


def tokenize(path: str) -> str:
    return str(GgufTokenizer(read_gguf(path)).encode("hello hell"))
