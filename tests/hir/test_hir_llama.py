"""A llama-style decoder block built in HIR matches a hand-written torch reference (1e-4)."""

from __future__ import annotations

import numpy as np
import pytest
from hir_cases import LLAMA_PARAMS, llama_arrays

import rlx

torch = pytest.importorskip("torch")


def torch_llama(arr: dict[str, np.ndarray], heads: int, kv: int, head_dim: int, eps: float = 1e-5, mask=None, causal: bool = True):
    """Pre-norm LLaMA layer in float64: RMSNorm with beta, NeoX (half-split) RoPE, causal GQA attention, SwiGLU."""
    t = {k: torch.from_numpy(v).double() for k, v in arr.items()}
    x = t["x"]
    b, s, _ = x.shape

    def rms(z, g, beta):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps) * g + beta

    def rope(z, n_heads):  # z [B, S, n*D]; rotate halves of each head
        z = z.view(b, s, n_heads, head_dim)
        half = head_dim // 2
        c = t["cos"][:s, None, :half]
        si = t["sin"][:s, None, :half]
        a, bb = z[..., :half], z[..., half:]
        return torch.cat([a * c - bb * si, bb * c + a * si], dim=-1)  # [B, S, n, D]

    h = rms(x, t["attn_norm"], t["attn_norm_b"])
    q = rope(h @ t["wq"], heads).transpose(1, 2)  # [B, H, S, D]
    k = rope(h @ t["wk"], kv).transpose(1, 2)  # [B, KV, S, D]
    v = (h @ t["wv"]).view(b, s, kv, head_dim).transpose(1, 2)
    k = k.repeat_interleave(heads // kv, dim=1)
    v = v.repeat_interleave(heads // kv, dim=1)
    scores = q @ k.transpose(-1, -2) / head_dim**0.5
    keep = torch.ones(s, s, dtype=torch.bool)
    if causal:
        keep = keep.tril()
    if mask is not None:
        keep = keep & (torch.from_numpy(mask) > 0.5)[:, None, None, :]
    scores = scores.masked_fill(~keep, -1e9)
    att = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, heads * head_dim)
    x1 = x + att @ t["wo"]
    h2 = rms(x1, t["ffn_norm"], t["ffn_norm_b"])
    ffn = (torch.nn.functional.silu(h2 @ t["w_gate"]) * (h2 @ t["w_up"])) @ t["w_down"]
    return (x1 + ffn).numpy()


def _module(arr, heads, kv, head_dim, builder="llama_decoder_block", mask_kind="causal"):
    names = ("x", *LLAMA_PARAMS, *(("mask",) if "mask" in arr else ()))

    def build(h):
        vals = [(h.param if k in LLAMA_PARAMS else h.input)(k, arr[k].shape) for k in names]
        return getattr(h, builder)(*vals, num_heads=heads, head_dim=head_dim, num_kv_heads=kv, mask_kind=mask_kind)

    return rlx.define("llama", build)


def _feed(arr):
    return ({k: v for k, v in arr.items() if k not in LLAMA_PARAMS}, {k: v for k, v in arr.items() if k in LLAMA_PARAMS})


@pytest.mark.parametrize("heads,kv", [(4, 2), (4, 1), (2, 2)])
@pytest.mark.parametrize("policy", [rlx.FusionPolicy.DIRECT, rlx.FusionPolicy.FUSABLE], ids=str)
def test_llama_block_matches_torch(heads, kv, policy):
    arr = llama_arrays(2, 6, heads, kv, 4, seed=100 + heads + kv)
    m = _module(arr, heads, kv, 4)
    mir = m.lower_to_mir(policy)
    (got,) = rlx.run(mir, *_feed(arr))
    want = torch_llama(arr, heads, kv, 4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_llama_block_custom_mask_matches_torch():
    arr = llama_arrays(2, 5, 4, 2, 4, seed=7, custom_mask=True)
    m = _module(arr, 4, 2, 4, mask_kind="custom")
    (got,) = rlx.run(m.graph, *_feed(arr))
    want = torch_llama(arr, 4, 2, 4, mask=arr["mask"], causal=False)  # mask_kind="custom": key padding only
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_transformer_block_alias_relabels():
    arr = llama_arrays(1, 3, 2, 1, 4)
    m = _module(arr, 2, 1, 4, builder="transformer_block")
    node = m.graph.node(m.graph.output_ids[0])
    assert node.op == "llama_decoder_block" and node.name == "transformer_block"
    mir = m.lower_to_mir()
    assert {n.prov.label for n in mir.nodes if n.op not in ("input", "param")} == {"transformer_block"}
