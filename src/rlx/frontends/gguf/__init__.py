"""GGUF reader (llama.cpp model files): metadata and memory-mapped tensors through the ``gguf`` package."""

from rlx.frontends.gguf.reader import GgufError, GgufFile, GgufTensor, read_gguf

__all__ = ["GgufError", "GgufFile", "GgufTensor", "read_gguf"]
