"""Two held-out-style model sets for ``zoo_peers.py --set`` (issue #38's rule is judged on models no table here
was tuned on; these are the architectures the sessions measured as such, kept so the tables can be re-run).

``heldout-timm``: 33 timm architectures outside the zoo (mobile hybrids, re-parameterizable CNNs, small ViTs),
random init through the zoo's timm builder (10 classes, batch 2, BatchNorm statistics of real-looking data),
64x64 input, 224 where the architecture fixes its resolution.
``heldout-hf``: 30 transformers models at their public configs (text encoders at sequence 128 with a padding
mask, 64 for DistilRoBERTa and DeBERTa-v3; speech encoders on 0.25-0.5 s of audio; ViT-style encoders at 112
px; mobile hybrids and small CNNs at 160-256 px), batch 1, random init through the zoo's builders (BatchNorm
statistics from 8 images; conv weights of transformers' EfficientNet at 0.3 std: at its default the image's
signal is gone by the last block).
"""

from __future__ import annotations

from typing import Any

import torch

TIMM = ("levit_128s efficientformer_l1 efficientformerv2_s0 fastvit_t8 repvit_m0_9 edgenext_xx_small mobilevitv2_050 "
        "tiny_vit_5m_224 efficientvit_b0 efficientvit_m0 mobileone_s0 ghostnetv2_100 hgnetv2_b0 lcnet_050 mixnet_s "
        "repghostnet_050 inception_next_atto mobilenetv4_conv_small starnet_s1 shvit_s1 mambaout_femto rexnet_100 "
        "tinynet_e coat_lite_tiny xcit_nano_12_p16_224 fasternet_t0 rdnet_tiny mobilenetv4_hybrid_medium "
        "efficientnetv2_rw_t dla34 regnetz_005 nextvit_small convformer_s18").split()
FIXED_224 = {"levit_128s", "efficientformer_l1", "efficientformerv2_s0", "coat_lite_tiny"}  # fail at 64x64


def _text(zoo: Any, config_cls: str, model_cls: str, seq: int = 128, vocab: int = 30522, **config: Any):
    def build():
        model = zoo._hf(config_cls, model_cls, vocab_size=vocab, **config)
        model.config.use_cache = False
        ids = torch.randint(3, min(vocab, 1000), (1, seq), generator=torch.Generator().manual_seed(1))
        mask = torch.ones_like(ids)
        mask[0, -seq // 4:] = 0
        return model, (), {"input_ids": ids, "attention_mask": mask}

    return build


def _vision(zoo: Any, config_cls: str, model_cls: str, size: int = 224, bn: bool = False, **config: Any):
    return zoo._vision_hf(config_cls, model_cls, size=size, bn=bn, batch=1, **config)


def _audio(zoo: Any, config_cls: str, model_cls: str, samples: int, **config: Any):
    def build():
        model = zoo._hf(config_cls, model_cls, **config)
        return model, (), {"input_values": torch.randn(1, samples, generator=torch.Generator().manual_seed(6))}

    return build


def heldout_timm(zoo: Any) -> list:
    return [zoo.Entry(name, zoo._timm(name, size=224 if name in FIXED_224 else 64, num_classes=10)) for name in TIMM]


def heldout_hf(zoo: Any) -> list:
    e, t, v, a = zoo.Entry, _text, _vision, _audio
    small_vit = {"hidden_size": 384, "num_attention_heads": 6}
    return [
        e("minilm_l12", t(zoo, "BertConfig", "BertModel", hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                          intermediate_size=1536)),
        e("electra_small", t(zoo, "ElectraConfig", "ElectraModel", embedding_size=128, hidden_size=256, num_hidden_layers=12,
                             num_attention_heads=4, intermediate_size=1024)),
        e("deberta_v3_xsmall", t(zoo, "DebertaV2Config", "DebertaV2Model", seq=64, vocab=128100, hidden_size=384,
                                 num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, relative_attention=True,
                                 max_relative_positions=-1, position_buckets=256, pos_att_type=["p2c", "c2p"],
                                 norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False, type_vocab_size=0)),
        e("t5_small_enc", t(zoo, "T5Config", "T5EncoderModel", vocab=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                            num_heads=8)),
        e("esm2_8m", t(zoo, "EsmConfig", "EsmModel", vocab=33, hidden_size=320, num_hidden_layers=6, num_attention_heads=20,
                       intermediate_size=1280, position_embedding_type="rotary", pad_token_id=1, mask_token_id=32,
                       token_dropout=True, emb_layer_norm_before=False, max_position_embeddings=1026)),
        e("roformer_small", t(zoo, "RoFormerConfig", "RoFormerModel", vocab=50000, embedding_size=384, hidden_size=384,
                              num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)),
        e("distilroberta", t(zoo, "RobertaConfig", "RobertaModel", seq=64, vocab=50265, hidden_size=768, num_hidden_layers=6,
                             num_attention_heads=12, intermediate_size=3072, pad_token_id=1, max_position_embeddings=514,
                             type_vocab_size=1)),
        e("sew_tiny", a(zoo, "SEWConfig", "SEWModel", 8000)),
        e("sew_d_tiny", a(zoo, "SEWDConfig", "SEWDModel", 6000)),
        e("wav2vec2_base", a(zoo, "Wav2Vec2Config", "Wav2Vec2Model", 4000)),
        e("unispeech_sat_base", a(zoo, "UniSpeechSatConfig", "UniSpeechSatModel", 4000)),
        e("dinov2_small", v(zoo, "Dinov2Config", "Dinov2Model", size=112, image_size=518, patch_size=14, **small_vit)),
        e("dinov2_reg_small", v(zoo, "Dinov2WithRegistersConfig", "Dinov2WithRegistersModel", size=112, image_size=518,
                                patch_size=14, num_register_tokens=4, **small_vit)),
        e("vit_msn_small", v(zoo, "ViTMSNConfig", "ViTMSNModel", size=112, intermediate_size=1536, image_size=112, **small_vit)),
        e("data2vec_vision_small", v(zoo, "Data2VecVisionConfig", "Data2VecVisionModel", size=112, intermediate_size=1536,
                                     image_size=112, use_relative_position_bias=True, **small_vit)),
        e("dinov3_vits16", v(zoo, "DINOv3ViTConfig", "DINOv3ViTModel", size=112, intermediate_size=1536, num_hidden_layers=12,
                             patch_size=16, **small_vit)),
        e("siglip_b16_64", v(zoo, "SiglipVisionConfig", "SiglipVisionModel", size=64, image_size=64)),
        e("hiera_tiny", v(zoo, "HieraConfig", "HieraModel")),
        e("mobilevit_xxs", v(zoo, "MobileViTConfig", "MobileViTModel", size=256, bn=True, hidden_sizes=[64, 80, 96],
                             neck_hidden_sizes=[16, 16, 24, 48, 64, 80, 320], expand_ratio=2.0)),
        e("mobilevit_xs", v(zoo, "MobileViTConfig", "MobileViTModel", size=256, bn=True, hidden_sizes=[96, 120, 144],
                            neck_hidden_sizes=[16, 32, 48, 64, 80, 96, 384])),
        e("mobilevitv2_050", v(zoo, "MobileViTV2Config", "MobileViTV2Model", size=256, bn=True, width_multiplier=0.5)),
        e("levit_128s", v(zoo, "LevitConfig", "LevitModel", bn=True, hidden_sizes=[128, 256, 384], num_attention_heads=[4, 6, 8],
                          depths=[2, 3, 4], key_dim=[16, 16, 16], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2])),
        e("pvt_v2_b0", v(zoo, "PvtV2Config", "PvtV2Model", hidden_sizes=[32, 64, 160, 256], depths=[2, 2, 2, 2],
                         num_attention_heads=[1, 2, 5, 8], sr_ratios=[8, 4, 2, 1], mlp_ratios=[8, 8, 4, 4])),
        e("swiftformer_xs", v(zoo, "SwiftFormerConfig", "SwiftFormerModel", bn=True, depths=[3, 3, 6, 4],
                              embed_dims=[48, 56, 112, 220])),
        e("convnextv2_atto", v(zoo, "ConvNextV2Config", "ConvNextV2Model", hidden_sizes=[40, 80, 160, 320], depths=[2, 2, 6, 2])),
        e("mobilenet_v1_075", v(zoo, "MobileNetV1Config", "MobileNetV1Model", size=192, bn=True, depth_multiplier=0.75,
                                image_size=192)),
        e("efficientnet_b0_hf", v(zoo, "EfficientNetConfig", "EfficientNetModel", bn=True, width_coefficient=1.0,
                                  depth_coefficient=1.0, image_size=224, hidden_dim=1280, initializer_range=0.3)),
        e("cvt_13", v(zoo, "CvtConfig", "CvtModel", size=160, bn=True)),
        e("focalnet_tiny", v(zoo, "FocalNetConfig", "FocalNetModel", size=160)),
        e("swin_tiny", v(zoo, "SwinConfig", "SwinModel")),
    ]


SETS = {"heldout-timm": heldout_timm, "heldout-hf": heldout_hf}
