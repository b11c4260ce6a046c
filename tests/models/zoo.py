"""The model zoo: small random-init configs of public architectures (the real model classes of
transformers and timm, never downloaded weights), each with example inputs.

Every entry builds ``(module, args, kwargs)`` with a fixed seed. Heads and norm layers that libraries
initialise to zeros / ones are perturbed (:func:`perturb`), so that parity is not met by constant
outputs.

torchvision: the PyPI wheel matching torch 2.13 (0.28.0) is a CUDA build; on a CPU-only torch its
compiled ops fail to load (``libc10_cuda.so``). torchvision tolerates that, except that it registers
fake kernels for ``torchvision::nms`` / ``qnms`` unconditionally, so ``import torchvision`` (and with it
transformers and timm, which import it) fails with ``operator torchvision::nms does not exist``.
:func:`torchvision_without_compiled_ops` declares those two op schemas (no kernels: detection ops stay
unusable) and re-imports; the model classes are pure Python and work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

VOCAB = 128
_TV_SCHEMAS = None  # keeps the schema library alive


def torchvision_without_compiled_ops() -> None:
    """Make ``import torchvision`` work when its compiled ops cannot load (see the module docstring)."""
    global _TV_SCHEMAS
    import sys

    try:
        import torchvision
        return
    except ImportError:
        return  # not installed: timm / transformers importorskip then
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    _TV_SCHEMAS = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        _TV_SCHEMAS.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import torchvision  # noqa: F401


torchvision_without_compiled_ops()


@dataclass
class Entry:
    """One zoo row: ``build() -> (module, args, kwargs)``; ``grad`` marks the gradient-checked rows."""

    name: str
    build: Callable[[], tuple[torch.nn.Module, tuple, dict]]
    fast: bool = False
    grad: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)


def perturb(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Add small noise to every parameter and float buffer (zero-init heads, unit norms, biases),
    keeping variances positive; then eval mode."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in [*module.named_parameters(), *module.named_buffers()]:
            if not p.is_floating_point():
                continue
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.05
            if name.endswith("running_var"):
                p.mul_(1 + noise.abs())
            else:
                p.add_(noise)
    return module.eval()


def calibrate(module: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    """Batch-norm running statistics measured on ``x`` (as a trained model's are), so that eval-mode
    BN does not shrink the signal below its biases layer after layer (a near-constant output)."""
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return module
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    module.train()
    with torch.no_grad():
        module(x)
    return module.eval()


def _ids(batch: int = 2, seq: int = 8, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _image(size: int = 32, channels: int = 3, batch: int = 2, seed: int = 2) -> torch.Tensor:
    return torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(seed))


def _hf(config_cls: str, model_cls: str, **config: Any) -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls)(**config)
    model = getattr(transformers, model_cls)(cfg)
    return perturb(model)


_DEC = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "max_position_embeddings": 64}


def _decoder(config_cls: str, model_cls: str, **extra: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **{**_DEC, **extra})
        model.config.use_cache = False
        return model, (), {"input_ids": _ids(), "use_cache": False}

    return build


def _encoder(config_cls: str, model_cls: str, mask: bool = True, **extra: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **{**_DEC, **extra})
        ids = _ids()
        kwargs = {"input_ids": ids}
        if mask:
            m = torch.ones_like(ids)
            m[1, -3:] = 0
            kwargs["attention_mask"] = m
        return model, (), kwargs

    return build


def _vision_hf(config_cls: str, model_cls: str, size: int = 32, **config: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **config)
        return model, (), {"pixel_values": _image(size)}

    return build


def _timm(name: str, size: int = 32, **kwargs: Any) -> Callable:
    def build():
        import timm

        torch.manual_seed(0)
        model = perturb(timm.create_model(name, pretrained=False, **kwargs))
        return calibrate(model, _image(size, batch=8, seed=9)), (_image(size),), {}

    return build


def _timm_efficientnet() -> tuple:
    from timm.models.efficientnet import _gen_efficientnet

    torch.manual_seed(0)
    model = perturb(_gen_efficientnet("efficientnet_b0", channel_multiplier=0.25, depth_multiplier=0.34, pretrained=False,
                                      num_classes=10))
    return calibrate(model, _image(32, batch=8, seed=9)), (_image(32),), {}


def _t5_encoder() -> tuple:
    model = _hf("T5Config", "T5EncoderModel", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                relative_attention_num_buckets=8, relative_attention_max_distance=16)
    return model, (), {"input_ids": _ids()}


_VIT = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32,
        "patch_size": 8}

ZOO: list[Entry] = [
    Entry("gpt2", _decoder("GPT2Config", "GPT2LMHeadModel", n_embd=64, n_layer=2, n_head=4, n_positions=64), grad=True),
    Entry("llama", _decoder("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2), fast=True, grad=True),
    Entry("mistral", _decoder("MistralConfig", "MistralForCausalLM", num_key_value_heads=2, sliding_window=4), grad=True),
    Entry("qwen2", _decoder("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2)),
    Entry("qwen3", _decoder("Qwen3Config", "Qwen3ForCausalLM", num_key_value_heads=2, head_dim=16)),
    Entry("phi", _decoder("PhiConfig", "PhiForCausalLM", partial_rotary_factor=0.5)),
    Entry("phi3", _decoder("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0)),
    Entry("gemma", _decoder("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=1, head_dim=16), grad=True),
    Entry("gemma2", _decoder("Gemma2Config", "Gemma2ForCausalLM", num_key_value_heads=2, head_dim=16, sliding_window=4)),
    Entry("opt", _decoder("OPTConfig", "OPTForCausalLM", ffn_dim=128, word_embed_proj_dim=64)),
    Entry("gpt_neox", _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM")),
    Entry("bloom", _decoder("BloomConfig", "BloomForCausalLM", n_layer=2, n_head=4)),
    Entry("falcon", _decoder("FalconConfig", "FalconForCausalLM", num_kv_heads=1)),
    Entry("bert", _encoder("BertConfig", "BertModel"), fast=True, grad=True),
    Entry("roberta", _encoder("RobertaConfig", "RobertaModel", pad_token_id=1)),
    Entry("distilbert", _encoder("DistilBertConfig", "DistilBertModel", dim=64, n_layers=2, n_heads=4, hidden_dim=128), grad=True),
    Entry("albert", _encoder("AlbertConfig", "AlbertModel", embedding_size=32)),
    Entry("electra", _encoder("ElectraConfig", "ElectraModel", embedding_size=32)),
    Entry("t5_encoder", _t5_encoder, grad=True),
    Entry("vit", _vision_hf("ViTConfig", "ViTModel", **_VIT), fast=True, grad=True),
    Entry("deit", _vision_hf("DeiTConfig", "DeiTModel", **_VIT)),
    Entry("swin", _vision_hf("SwinConfig", "SwinModel", image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
                             num_heads=[2, 4], window_size=4)),
    Entry("clip_vision", _vision_hf("CLIPVisionConfig", "CLIPVisionModel", **_VIT)),
    Entry("convnext_hf", _vision_hf("ConvNextConfig", "ConvNextModel", num_channels=3, hidden_sizes=[16, 32], depths=[1, 1],
                                    num_stages=2)),
    Entry("resnet_timm", _timm("resnet18", num_classes=10), grad=True),
    Entry("mobilenetv3", _timm("mobilenetv3_small_050", num_classes=10)),
    Entry("efficientnet", _timm_efficientnet),
    Entry("densenet", _timm("densenet121", size=32, num_classes=10, growth_rate=8, block_config=(2, 2, 2, 2))),
    Entry("convnext_timm", _timm("convnext_atto", num_classes=10)),
    Entry("regnet", _timm("regnetx_002", num_classes=10)),
]
