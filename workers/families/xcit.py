"""XCiT (El-Nouby et al. 2021): cross-covariance attention, which attends over channels, not tokens.

κ definition (kind ``xca``), per XCA layer and per image with N patch tokens (the class token joins only
in the two class-attention layers at the end):
    Q_i, K_i, V_i ∈ R^{N×d}   head i's query, key and value, d = embed_dim / h
    Q̂_i, K̂_i                  Q_i, K_i with each column scaled to unit L2 norm over the N tokens
    W_i = softmax(τ_i · Q̂_iᵀ K̂_i) ∈ R^{d×d}   (row softmax; τ_i the head's learned temperature)
    A_i = (W_i V_iᵀ)ᵀ = V_i W_iᵀ ∈ R^{N×d},   A = [A_1 … A_h] ∈ R^{N×C}   (before the output projection)
A is computed in float64 from the layer's input and its weights (and temperatures) cast to float64.
The class-attention layers are not probed: only the class token queries there, so their block is one
row and its κ is 1 by construction. Their parameters still count as attention.

Shapes: depth, num_heads, embed_dim and mlp_dim. XCA's q, k, v map C → C, so head_dim is always
embed_dim / num_heads, and (unlike ViT) attention parameters do not depend on the number of heads.
Every block uses layer-scale init 1e-5 and normalises all tokens before the head, as timm's
xcit_*_24 variants (the paper's rows) do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models.xcit import XCA, Xcit
from torch import nn

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import (
    Family,
    KappaLayer,
    call_float64,
    common_timm_kwargs,
    concat_heads,
    exact_mlp_ratio,
    stock_timm_params,
)
from workers.families.rules import FAMILY_RULES, check_xcit  # noqa: F401 (re-exported)

LAYER_SCALE_INIT = 1e-5  # timm's xcit_*_24 variants (eta); the 12-layer ones use 1.0


def build_xcit(spec: ModelSpec) -> nn.Module:
    return Xcit(
        **common_timm_kwargs(spec),
        embed_dim=spec.embed_dim,
        depth=spec.depth,
        num_heads=spec.num_heads,
        mlp_ratio=exact_mlp_ratio(spec.embed_dim, spec.mlp_dim),
        eta=LAYER_SCALE_INIT,
        tokens_norm=True,
    )


def timm_xcit_params(spec: ModelSpec) -> int:
    return stock_timm_params(
        "xcit_nano_12_p16_224",
        **common_timm_kwargs(spec),
        embed_dim=spec.embed_dim,
        depth=spec.depth,
        num_heads=spec.num_heads,
        mlp_ratio=spec.mlp_dim / spec.embed_dim,
        eta=LAYER_SCALE_INIT,
        tokens_norm=True,
    )


def xcit_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every XCA layer, then the class-attention layers."""
    return [(f"blocks.{i}.attn", b.attn) for i, b in enumerate(model.blocks)] + [
        (f"cls_attn_blocks.{i}.attn", b.attn) for i, b in enumerate(model.cls_attn_blocks)
    ]


def xcit_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"blocks.{i}.mlp", b.mlp) for i, b in enumerate(model.blocks)] + [
        (f"cls_attn_blocks.{i}.mlp", b.mlp) for i, b in enumerate(model.cls_attn_blocks)
    ]


def xca_block(attn: XCA, tokens: torch.Tensor, n_images: int) -> torch.Tensor:
    """A = [A_1 … A_h] of an XCA layer on its input (B, N, C), as the module docstring defines, in float64:
    (B, 1, N, C)."""
    batch, n_tokens, width = tokens.shape
    head_dim = width // attn.num_heads
    qkv = call_float64(attn.qkv, tokens).reshape(batch, n_tokens, 3, attn.num_heads, head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, h, N, d)
    q_hat, k_hat = F.normalize(q, dim=-2), F.normalize(k, dim=-2)  # unit columns over the N tokens
    temperature = attn.temperature.double()  # (h, 1, 1)
    weights = torch.softmax(q_hat.transpose(-2, -1) @ k_hat * temperature, dim=-1)  # (B, h, d, d)
    heads = v @ weights.transpose(-2, -1)  # (B, h, N, d)
    return concat_heads(heads).unsqueeze(1)


def xcit_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [KappaLayer(f"blocks.{i}.attn", "xca", b.attn, xca_block) for i, b in enumerate(model.blocks)]


XCIT = Family(
    name="xcit",
    **FAMILY_RULES["xcit"].family_fields(),
    description=FAMILY_DESCRIPTIONS["xcit"],
    build=build_xcit,
    attention_layers=xcit_attention_layers,
    mlp_layers=xcit_mlp_layers,
    kappa_layers=xcit_kappa_layers,
    num_tokens=lambda spec: (spec.img_size // spec.patch_size) ** 2,
    reference_params=timm_xcit_params,
    example=dict(img_size=32, in_chans=1, num_classes=10, depth=2, num_heads=4, embed_dim=32, mlp_dim=64, patch_size=8),
)
