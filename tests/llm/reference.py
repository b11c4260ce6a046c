"""transformers as the oracle: it loads the same GGUF file (dequantizing through gguf.quants) into its own model."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def hf_run(path: Path, ids: list[int], new_tokens: int, head_dim: int | None = None, **config: object) -> tuple[np.ndarray, list[int]]:
    """(last position's logits [vocab], greedy continuation of ``new_tokens`` ids) from transformers eager;
    ``config`` overrides what its GGUF reader does not take from the file (rope scaling)."""
    # isort: off
    import models.zoo  # noqa: F401  (first: makes transformers importable next to a CUDA-only torchvision wheel)
    import torch
    import transformers
    # isort: on

    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                              **({"head_dim": head_dim} if head_dim else {}), **config)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].numpy()
        out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    return logits, out[0, len(ids):].tolist()
