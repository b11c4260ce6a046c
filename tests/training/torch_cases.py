"""Torch modules returning a scalar loss, their batches, and torch's own AdamW run as the oracle
(shared by the training parity tests, the example and the benchmark)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn


@dataclass
class Case:
    name: str
    module: nn.Module
    batch: Callable[[int], tuple[torch.Tensor, ...]]


def cnn_bn() -> Case:
    """A conv (no bias: BatchNorm follows) + BatchNorm in training mode + classifier."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.head = nn.Linear(8, 4)

        def forward(self, x, y):
            h = torch.relu(self.bn(self.conv(x))).mean((2, 3))
            return nn.functional.cross_entropy(self.head(h), y)

    def batch(i: int):
        g = torch.Generator().manual_seed(100 + i)
        return torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g)

    return Case("cnn_bn", Net().train(), batch)


class _Loss(nn.Module):
    def __init__(self, inner: nn.Module, labels: bool):
        super().__init__()
        self.m, self.labels = inner, labels

    def forward(self, ids, labels=None):
        return self.m(input_ids=ids, labels=labels if self.labels else ids).loss


def gpt2_lm(vocab: int = 64, seq: int = 12, batch_size: int = 4) -> Case:
    """A 2-layer GPT-2 language model (random init, dropout 0), its LM loss."""
    from models.zoo import torchvision_without_compiled_ops

    torchvision_without_compiled_ops()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=vocab, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)

    def batch(i: int):  # counting sequences from random starts: a next token the model can learn
        g = torch.Generator().manual_seed(200 + i)
        starts = torch.randint(0, vocab, (batch_size, 1), generator=g)
        return ((starts + torch.arange(seq)) % vocab,)

    return Case("gpt2", _Loss(GPT2LMHeadModel(cfg), labels=False).train(), batch)


def llama_lm() -> Case:
    """A 2-layer Llama language model (rotary ``inv_freq`` is a float buffer: never trained)."""
    from models.zoo import torchvision_without_compiled_ops

    torchvision_without_compiled_ops()
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32, bos_token_id=0, eos_token_id=0)
    return Case("llama", _Loss(LlamaForCausalLM(cfg), labels=False).train(), gpt2_lm().batch)


def bert_classifier() -> Case:
    """A 2-layer BERT sequence classifier (random init, dropout 0; pad id 0 appears in the ids)."""
    from models.zoo import torchvision_without_compiled_ops

    torchvision_without_compiled_ops()
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=16, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def batch(i: int):
        g = torch.Generator().manual_seed(300 + i)
        return torch.randint(0, 64, (4, 12), generator=g), torch.randint(0, 3, (4,), generator=g)

    return Case("bert", _Loss(BertForSequenceClassification(cfg), labels=True).train(), batch)


def torch_run(case: Case, steps: int, lr: float, **opt: Any) -> tuple[list[float], dict[str, np.ndarray]]:
    """torch's own training: AdamW, ``steps`` batches; every loss and the final state (params and buffers)."""
    module = copy.deepcopy(case.module)
    optim = torch.optim.AdamW(module.parameters(), lr=lr, **opt)
    losses = []
    for i in range(steps):
        optim.zero_grad()
        loss = module(*case.batch(i))
        loss.backward()
        optim.step()
        losses.append(loss.item())
    state = {**dict(module.named_parameters(remove_duplicate=False)), **dict(module.named_buffers())}
    return losses, {k: v.detach().numpy().copy() for k, v in state.items()}


_IMPORTED: dict[str, tuple] = {}


def imported(make: Callable[[], Case]) -> tuple[Case, Any, dict[str, np.ndarray]]:
    """``(case, graph, params)``, imported once per test session (torch.export takes seconds)."""
    if make.__name__ not in _IMPORTED:
        import rlx

        case = make()
        _IMPORTED[make.__name__] = (case, *rlx.torch.import_module(case.module, case.batch(0)))
    return _IMPORTED[make.__name__]


def feeds(graph: Any, case: Case, steps: int) -> list[dict[str, np.ndarray]]:
    names = list(graph.inputs())
    return [{n: t.numpy() for n, t in zip(names, case.batch(i))} for i in range(steps)]
