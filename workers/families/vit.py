"""ViT and DeiT: timm's VisionTransformer, with head_dim independent of d_model and an exact MLP width.

κ definition (kind ``self``), per block and per image with N = patches + class token:
    Q_i, K_i, V_i ∈ R^{N×d}   head i's query, key and value (after q/k norm where the layer has it)
    A_i = softmax(Q_i K_iᵀ / √d) V_i,  A = [A_1 … A_h] ∈ R^{N×h·d}   (before the output projection)
A is computed in float64 from the layer's input (as the model computed it) and its weights cast to float64.
"""

from __future__ import annotations

import dataclasses

import torch
from timm.layers import Attention, Mlp
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import (
    Family,
    KappaLayer,
    call_float64,
    common_timm_kwargs,
    concat_heads,
    softmax_attention,
    stock_timm_params,
)
from workers.families.rules import FAMILY_RULES


def fixed_head_dim_attention(head_dim: int) -> type[Attention]:
    """An Attention subclass whose heads have ``head_dim`` channels whatever embed_dim is.

    timm's Block builds ``attn_layer(dim, num_heads=…, …)`` and checks ``issubclass``; a subclass (not a
    functools.partial) passes that check and sets timm's own ``attn_head_dim``.
    """

    class FixedHeadDimAttention(Attention):
        def __init__(self, dim: int, num_heads: int = 8, **kwargs):
            kwargs["attn_head_dim"] = head_dim
            super().__init__(dim, num_heads=num_heads, **kwargs)

    FixedHeadDimAttention.__name__ = f"Attention_hd{head_dim}"
    return FixedHeadDimAttention


def fixed_width_mlp(hidden_dim: int) -> type[Mlp]:
    """An Mlp subclass with exactly ``hidden_dim`` hidden units (mlp_ratio floats can round down)."""

    class FixedWidthMlp(Mlp):
        def __init__(self, in_features: int, hidden_features: int | None = None, **kwargs):
            super().__init__(in_features, hidden_features=hidden_dim, **kwargs)

    FixedWidthMlp.__name__ = f"Mlp_h{hidden_dim}"
    return FixedWidthMlp


def build_vit(spec: ModelSpec) -> nn.Module:
    """timm VisionTransformer with class token, learned positions, pre-norm blocks, token pooling."""
    attn_layer = Attention if spec.head_dim is None else fixed_head_dim_attention(spec.head_dim)
    return VisionTransformer(
        **common_timm_kwargs(spec),
        embed_dim=spec.embed_dim,
        depth=spec.depth,
        num_heads=spec.num_heads,
        mlp_ratio=spec.mlp_dim / spec.embed_dim,
        attn_layer=attn_layer,
        mlp_layer=fixed_width_mlp(spec.mlp_dim),
    )


def vit_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``attn`` (a timm ``Attention``), in depth order."""
    return [(f"blocks.{i}.attn", block.attn) for i, block in enumerate(model.blocks)]


def vit_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``mlp`` (fc1, activation, fc2), in depth order."""
    return [(f"blocks.{i}.mlp", block.mlp) for i, block in enumerate(model.blocks)]


def self_attention_block(attn: Attention, tokens: torch.Tensor, n_images: int) -> torch.Tensor:
    """A = [A_1 … A_h], A_i = softmax(Q_i K_iᵀ / √d) V_i, for a timm ``Attention`` on its input (B, N, C).

    Returns (B, 1, N, h·d), float64. q/k norms are applied as the layer applies them, in float64 too.
    """
    batch, n_tokens, _ = tokens.shape
    qkv = call_float64(attn.qkv, tokens).reshape(batch, n_tokens, 3, attn.num_heads, attn.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    q, k = call_float64(attn.q_norm, q), call_float64(attn.k_norm, k)
    heads = softmax_attention(q, k, v, attn.scale)  # (B, h, N, d)
    return concat_heads(heads).unsqueeze(1)


def vit_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [KappaLayer(name, "self", module, self_attention_block) for name, module in vit_attention_layers(model)]


def timm_vit_params(architecture: str):
    """timm's registered ``architecture`` (a VisionTransformer) at the spec's shape, with timm's own attention
    and MLP: the independent count for shapes with head_dim = embed_dim / num_heads."""

    def count(spec: ModelSpec) -> int:
        return stock_timm_params(
            architecture,
            **common_timm_kwargs(spec),
            embed_dim=spec.embed_dim,
            depth=spec.depth,
            num_heads=spec.num_heads,
            mlp_ratio=spec.mlp_dim / spec.embed_dim,
        )

    return count


def vit_tokens(spec: ModelSpec) -> int:
    return spec.num_tokens


VIT = Family(
    name="vit",
    **FAMILY_RULES["vit"].family_fields(),
    description=FAMILY_DESCRIPTIONS["vit"],
    build=build_vit,
    attention_layers=vit_attention_layers,
    mlp_layers=vit_mlp_layers,
    kappa_layers=vit_kappa_layers,
    num_tokens=vit_tokens,
    reference_params=timm_vit_params("vit_tiny_patch16_224"),
    example=dict(img_size=32, in_chans=1, num_classes=10, depth=2, num_heads=4, embed_dim=32, mlp_dim=64, patch_size=8),
    output_projections=lambda model: [block.attn.proj for block in model.blocks],
)
DEIT = dataclasses.replace(
    VIT,
    name="deit",
    description=FAMILY_DESCRIPTIONS["deit"],
    reference_params=timm_vit_params("deit_tiny_patch16_224"),
)
