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


def _vision_hf(config_cls: str, model_cls: str, size: int = 32, bn: bool = False, batch: int = 2, **config: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **config)
        if bn:  # batch-norm statistics of real data (see calibrate)
            model = calibrate(model, _image(size, batch=8, seed=9))
        return model, (), {"pixel_values": _image(size, batch=batch)}

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


def _seq2seq(config_cls: str, model_cls: str, **config: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **config)
        model.config.use_cache = False
        return model, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seq=5, seed=4), "use_cache": False}

    return build


def _audio_hf(config_cls: str, model_cls: str, samples: int = 400, **config: Any) -> Callable:
    def build():
        model = _hf(config_cls, model_cls, **config)
        wave = torch.randn(2, samples, generator=torch.Generator().manual_seed(6))
        return model, (), {"input_values": wave}

    return build


def _whisper() -> tuple:
    model = _hf("WhisperConfig", "WhisperForConditionalGeneration", vocab_size=VOCAB, d_model=32, encoder_layers=1,
                decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16, max_target_positions=16,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    model.config.use_cache = False
    feats = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(7))
    return model, (), {"input_features": feats, "decoder_input_ids": _ids(seq=5, seed=4), "use_cache": False}


def _ast() -> tuple:
    model = _hf("ASTConfig", "ASTModel", hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                patch_size=8, num_mel_bins=16, max_length=32, frequency_stride=8, time_stride=8)
    spec = torch.randn(2, 32, 16, generator=torch.Generator().manual_seed(8))
    return model, (), {"input_values": spec}


def _torchvision(name: str, size: int = 32, **kwargs: Any) -> Callable:
    def build():
        import torchvision.models.segmentation

        torch.manual_seed(0)
        where, _, attr = name.rpartition(".")
        family = getattr(torchvision.models, where) if where else torchvision.models
        model = perturb(getattr(family, attr)(weights=None, **kwargs))
        return calibrate(model, _image(size, batch=8, seed=9)), (_image(size),), {}

    return build


_SEGMENT = {"num_channels": 3, "num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1], "hidden_sizes": [16, 32],
            "patch_sizes": [7, 3], "strides": [4, 2], "num_attention_heads": [1, 2], "mlp_ratios": [2, 2],
            "decoder_hidden_size": 32, "num_labels": 3}
_W2V = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "conv_dim": (16, 16),
        "conv_stride": (5, 4), "conv_kernel": (10, 4), "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4}
_MOE = {"num_experts_per_tok": 2, "num_key_value_heads": 2}


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
    # text decoders
    Entry("gptj", _decoder("GPTJConfig", "GPTJForCausalLM", n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64), grad=True),
    Entry("codegen", _decoder("CodeGenConfig", "CodeGenForCausalLM", n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                              n_positions=64, n_ctx=64)),
    Entry("gpt_bigcode", _decoder("GPTBigCodeConfig", "GPTBigCodeForCausalLM", n_embd=64, n_layer=2, n_head=4, n_positions=64)),
    Entry("stablelm", _decoder("StableLmConfig", "StableLmForCausalLM", num_key_value_heads=2), grad=True),
    Entry("starcoder2", _decoder("Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2)),
    Entry("olmo", _decoder("OlmoConfig", "OlmoForCausalLM"), grad=True),
    Entry("olmo2", _decoder("Olmo2Config", "Olmo2ForCausalLM", num_key_value_heads=2)),
    Entry("cohere", _decoder("CohereConfig", "CohereForCausalLM", num_key_value_heads=2)),
    Entry("granite", _decoder("GraniteConfig", "GraniteForCausalLM", num_key_value_heads=2), grad=True),
    Entry("persimmon", _decoder("PersimmonConfig", "PersimmonForCausalLM")),
    Entry("helium", _decoder("HeliumConfig", "HeliumForCausalLM", num_key_value_heads=2, head_dim=16)),
    Entry("glm", _decoder("GlmConfig", "GlmForCausalLM", num_key_value_heads=2, head_dim=16, pad_token_id=0)),
    Entry("nemotron", _decoder("NemotronConfig", "NemotronForCausalLM", num_key_value_heads=2)),
    Entry("gemma3_text", _decoder("Gemma3TextConfig", "Gemma3ForCausalLM", num_key_value_heads=2, head_dim=16,
                                  sliding_window=4)),
    # mixture of experts (transformers' default experts path: grouped_mm_fallback)
    Entry("mixtral", _decoder("MixtralConfig", "MixtralForCausalLM", num_local_experts=4, **_MOE), grad=True),
    Entry("qwen2_moe", _decoder("Qwen2MoeConfig", "Qwen2MoeForCausalLM", num_experts=4, moe_intermediate_size=32,
                                shared_expert_intermediate_size=32, **_MOE), grad=True),
    Entry("qwen3_moe", _decoder("Qwen3MoeConfig", "Qwen3MoeForCausalLM", num_experts=4, moe_intermediate_size=32,
                                head_dim=16, **_MOE)),
    Entry("olmoe", _decoder("OlmoeConfig", "OlmoeForCausalLM", num_experts=4, **_MOE)),
    # state space
    Entry("mamba", _decoder("MambaConfig", "MambaForCausalLM", state_size=8, expand=2, conv_kernel=4), grad=True),
    Entry("falcon_mamba", _decoder("FalconMambaConfig", "FalconMambaForCausalLM", state_size=8, expand=2, conv_kernel=4)),
    # text encoders
    Entry("deberta_v2", _encoder("DebertaV2Config", "DebertaV2Model", relative_attention=True, position_buckets=8,
                                 pos_att_type=["p2c", "c2p"])),
    Entry("mpnet", _encoder("MPNetConfig", "MPNetModel"), grad=True),
    Entry("xlm_roberta", _encoder("XLMRobertaConfig", "XLMRobertaModel", pad_token_id=1), grad=True),
    Entry("roformer", _encoder("RoFormerConfig", "RoFormerModel", embedding_size=64), grad=True),
    Entry("convbert", _encoder("ConvBertConfig", "ConvBertModel", embedding_size=64)),
    Entry("mobilebert", _encoder("MobileBertConfig", "MobileBertModel", embedding_size=32, intra_bottleneck_size=32,
                                 true_hidden_size=32, num_feedforward_networks=2)),
    Entry("squeezebert", _encoder("SqueezeBertConfig", "SqueezeBertModel", embedding_size=64)),
    Entry("ernie", _encoder("ErnieConfig", "ErnieModel"), grad=True),
    Entry("modernbert", _encoder("ModernBertConfig", "ModernBertModel", global_attn_every_n_layers=2, local_attention=4,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)),
    # encoder-decoder
    Entry("t5", _seq2seq("T5Config", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                         num_layers=2, num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                         decoder_start_token_id=0), grad=True),
    Entry("bart", _seq2seq("BartConfig", "BartForConditionalGeneration", vocab_size=VOCAB, d_model=64, encoder_layers=1,
                           decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                           decoder_ffn_dim=128, max_position_embeddings=64), grad=True),
    Entry("marian", _seq2seq("MarianConfig", "MarianMTModel", vocab_size=VOCAB, d_model=64, encoder_layers=1,
                             decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                             decoder_ffn_dim=128, max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0)),
    Entry("pegasus", _seq2seq("PegasusConfig", "PegasusModel", vocab_size=VOCAB, d_model=64, encoder_layers=1,
                              decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                              decoder_ffn_dim=128, max_position_embeddings=64)),
    # speech and audio
    Entry("wav2vec2", _audio_hf("Wav2Vec2Config", "Wav2Vec2Model", **_W2V), grad=True),
    Entry("hubert", _audio_hf("HubertConfig", "HubertModel", **_W2V), grad=True),
    Entry("wavlm", _audio_hf("WavLMConfig", "WavLMModel", num_buckets=16, max_bucket_distance=32, **_W2V)),
    Entry("data2vec_audio", _audio_hf("Data2VecAudioConfig", "Data2VecAudioModel", conv_pos_kernel_size=5,
                                      num_conv_pos_embeddings=4, **{k: v for k, v in _W2V.items() if k != "num_conv_pos_embeddings"})),
    Entry("whisper", _whisper, grad=True),
    Entry("ast", _ast),
    # vision
    Entry("beit", _vision_hf("BeitConfig", "BeitModel", use_relative_position_bias=True, **_VIT), grad=True),
    Entry("dinov2", _vision_hf("Dinov2Config", "Dinov2Model", **_VIT), grad=True),
    Entry("swinv2", _vision_hf("Swinv2Config", "Swinv2Model", image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
                               num_heads=[2, 4], window_size=4)),
    Entry("convnextv2", _vision_hf("ConvNextV2Config", "ConvNextV2Model", num_channels=3, hidden_sizes=[16, 32],
                                   depths=[1, 1], num_stages=2), grad=True),
    Entry("poolformer", _vision_hf("PoolFormerConfig", "PoolFormerModel", hidden_sizes=[16, 32], depths=[1, 1],
                                   num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1]), grad=True),
    Entry("mobilevit", _vision_hf("MobileViTConfig", "MobileViTModel", image_size=32, hidden_sizes=[16, 24, 32],
                                  neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], bn=True)),
    Entry("resnet_hf", _vision_hf("ResNetConfig", "ResNetModel", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]), grad=True),
    Entry("mobilenetv2_hf", _vision_hf("MobileNetV2Config", "MobileNetV2Model", image_size=32, depth_multiplier=0.35, bn=True)),
    # its pooler: a hidden_dim-wide average window with ceil_mode over the 1x1 map (see rlx.frontends.pool_window);
    # conv weights at the scale of a trained model's (at the default 0.02 the image's signal is gone by the last block)
    Entry("efficientnet_hf", _vision_hf("EfficientNetConfig", "EfficientNetModel", image_size=32, width_coefficient=0.25,
                                        depth_coefficient=0.25, hidden_dim=320, initializer_range=0.3, bn=True)),
    # detection / segmentation
    Entry("segformer", _vision_hf("SegformerConfig", "SegformerForSemanticSegmentation", **_SEGMENT), grad=True),
    Entry("yolos", _vision_hf("YolosConfig", "YolosForObjectDetection", num_detection_tokens=5,
                              **{**_VIT, "image_size": [32, 32]}), grad=True),
    Entry("lraspp", _torchvision("segmentation.lraspp_mobilenet_v3_large", num_classes=3, weights_backbone=None)),
    # timm and torchvision
    Entry("vit_timm", _timm("vit_tiny_patch16_224", img_size=32, patch_size=8, num_classes=10)),
    Entry("mixer_timm", _timm("mixer_s16_224", img_size=32, num_classes=10)),
    Entry("ghostnet", _timm("ghostnet_050", num_classes=10)),
    # re-parameterizable blocks as trained (parallel conv branches + the input's BatchNorm, summed)
    Entry("mobileone", _timm("mobileone_s0", num_classes=10)),
    Entry("repghost", _timm("repghostnet_050", num_classes=10)),
    Entry("fastvit", _timm("fastvit_t8", num_classes=10)),
    Entry("repvit", _timm("repvit_m0_9", num_classes=10)),
    Entry("resnet_tv", _torchvision("resnet18", num_classes=10)),
    Entry("mobilenetv2_tv", _torchvision("mobilenet_v2", width_mult=0.25, num_classes=10)),
    Entry("squeezenet", _torchvision("squeezenet1_1", size=64, num_classes=10)),
    Entry("shufflenet", _torchvision("shufflenet_v2_x0_5", num_classes=10)),
    Entry("mnasnet", _torchvision("mnasnet0_5", num_classes=10)),
    Entry("googlenet", _torchvision("googlenet", size=64, num_classes=10, aux_logits=False, init_weights=True)),
]
