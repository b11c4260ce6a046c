"""Custom ops in exported graphs: traced through their Python function where it traces, transformers'
grouped-matmul experts op converted, anything else refused naming the op and the module path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx  # noqa: E402
import rlx.torch  # noqa: E402
from frontends.torch.helpers import check  # noqa: E402
from rlx.frontends.torch.importer import UnsupportedOpError  # noqa: E402


@torch.library.custom_op("rlxtest::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + torch.sin(y)


@scale_add.register_fake
def _(x, y):
    return torch.empty_like(x)


@torch.library.custom_op("rlxtest::per_row_sum", mutates_args=())
def per_row_sum(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    return torch.stack([x[: int(n)].sum(0) for n in counts.tolist()])  # data-dependent: cannot be traced


@per_row_sum.register_fake
def _(x, counts):
    return x.new_empty(counts.shape[0], x.shape[1])


class Inner(torch.nn.Module):
    def forward(self, x, counts):
        return per_row_sum(x, counts)


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Identity())
        self.block.append(Inner())

    def forward(self, x, counts):
        return self.block[1](x, counts)


class UsesScaleAdd(torch.nn.Module):
    def forward(self, x, y):
        return scale_add(x, y) - 1


def test_custom_op_traced_through_its_python_function():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    check(UsesScaleAdd(), x, y)


def test_untraceable_custom_op_is_refused_with_its_module_path():
    with pytest.raises(UnsupportedOpError) as info:
        rlx.torch.import_module(Outer(), (torch.randn(5, 3), torch.tensor([2, 5])))
    assert "rlxtest.per_row_sum.default" in info.value.ops
    assert info.value.where["rlxtest.per_row_sum.default"] == ["block.1"]
    assert "in block.1" in str(info.value)


def _transformers():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import models.zoo  # noqa: F401  (makes torchvision importable for transformers)

    importlib.import_module("transformers.integrations.moe")  # registers transformers::grouped_mm_fallback


def test_grouped_mm_fallback_rows_by_expert_and_unrouted_rows_zero():
    _transformers()

    class Grouped(torch.nn.Module):
        def forward(self, x, w, offs):
            return torch.ops.transformers.grouped_mm_fallback(x, w, offs)

    x, w = torch.randn(7, 4), torch.randn(3, 4, 5)
    offs = torch.tensor([2, 2, 5], dtype=torch.int32)  # expert 1 gets no row; rows 5, 6 no expert
    want = torch.zeros(7, 5)
    want[:2], want[2:5] = x[:2] @ w[0], x[2:5] @ w[2]
    check(Grouped(), x, w, offs)
    g, params = rlx.torch.import_module(Grouped(), (x, w, offs))
    got = rlx.run(g, inputs=dict(zip(g.inputs(), [x.numpy(), w.numpy(), offs.numpy()])), params=params)[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [pytest.param("mixtral", marks=pytest.mark.slow), "qwen2_moe"])
def test_transformers_moe_default_experts_path(name):
    _transformers()
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = {"mixtral": {"num_local_experts": 4}, "qwen2_moe": {"num_experts": 4, "moe_intermediate_size": 16,
                                                                 "shared_expert_intermediate_size": 16}}[name]
    cfg = AutoConfig.for_model(name, vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=4, num_key_value_heads=2, num_experts_per_tok=2, use_cache=False, **extra)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    g, params = rlx.torch.import_module(model, (), kwargs={"input_ids": ids, "use_cache": False})
    assert any(n.op == "grouped_matmul" for n in g.nodes)
    got = rlx.run(g, inputs={next(iter(g.inputs())): ids.numpy()}, params=params)[0]
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
