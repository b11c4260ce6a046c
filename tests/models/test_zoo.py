"""The model zoo through torch.export → rlx (tests/models/zoo.py lists the models, zoo_check.py the checks).

Every row runs every check against torch eager: ``rlx.run``, optimize → plan → compiled numpy, the jax
and torch backends, rlx's own ONNX export run by onnxruntime, and gradients on the rows marked ``grad``.
The rows marked ``fast`` run in CI; the rest are ``slow``: ``pytest -m slow tests/models`` runs them
(``-m "slow or not slow"`` runs all). The summary table (import time, relative error of each check,
gradient error) and the count of rows passing every check are printed at the end of the session.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from models.zoo import VOCAB, ZOO

pytest.importorskip("transformers")
pytest.importorskip("timm")
from models.zoo_check import check_backends, check_forward, check_gradients, import_entry

REPORTS: dict[str, dict] = {}
#: rows whose gradient check fails for a cause outside the zoo, with it (kept exact: a listed row whose
#: gradients match fails, so the entry is dropped when the cause is fixed)
GRAD_KNOWN: dict[str, str] = {}


def _param(entry):
    marks = [] if entry.fast else [pytest.mark.slow]
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ZOO])
def test_model_matches_torch(entry):
    m = import_entry(entry)
    m.report["import_s"] = m.seconds
    REPORTS[entry.name] = m.report
    check_forward(m, VOCAB)
    check_backends(m)
    if entry.grad and entry.name in GRAD_KNOWN:
        with pytest.raises(AssertionError, match="embed"):  # the padding row of an embedding table
            check_gradients(m)
        return
    if entry.grad:
        check_gradients(m)
    m.report["every_check"] = True


def test_zoo_covers_the_required_architectures():
    names = {e.name for e in ZOO}
    required = {"gpt2", "llama", "mistral", "qwen2", "phi", "gemma", "bert", "roberta", "distilbert", "t5_encoder", "vit",
                "swin", "clip_vision", "convnext_timm", "resnet_timm", "mobilenetv3", "efficientnet", "densenet"}
    required |= {"mixtral", "qwen2_moe", "mamba", "t5", "bart", "whisper", "wav2vec2", "ast", "segformer", "yolos", "dinov2",
                 "resnet_tv", "deberta_v2"}  # MoE, state space, encoder-decoder, speech, audio, segmentation, detection
    assert required <= names, sorted(required - names)
    assert len(ZOO) >= 60 and 3 * sum(e.grad for e in ZOO) >= len(ZOO)  # gradients on a third
    assert set(GRAD_KNOWN) <= {e.name for e in ZOO if e.grad}
