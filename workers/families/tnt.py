"""TNT (Han et al. 2021): an inner transformer over the pixels of each patch inside an outer one over patches.

κ definitions, for timm's TNT attention (q, k: C → C split into h heads of d = C / h; v: C → C):
- kind ``outer``, per block and per image, N = patches + class token, C = embed_dim:
    A_i = softmax(Q_i K_iᵀ / √d) V_i ∈ R^{N×d},   A = [A_1 … A_h] ∈ R^{N×C}   (before the output projection)
- kind ``inner``, per block, per image and per patch, N = pixels per patch ((patch_size / 4)², as timm's
  stride-4 pixel embedding makes them), C = inner_dim, h = inner_heads: the same A over that patch's pixels.
  An image's inner κ is the median over its patches; then median and max over images as for every layer.
A is computed in float64 from the layer's input and its weights cast to float64.

Shapes: depth and num_heads (outer), embed_dim, mlp_dim (outer MLP; the inner MLP is 4 × inner_dim as in
timm), inner_dim (default embed_dim // 16, as tnt_s and tnt_b) and inner_heads (default 4). head_dim is
embed_dim / num_heads: timm's TNT attention keeps q, k, v at the block's width.
"""

from __future__ import annotations

import torch
from timm.models.tnt import TNT, Attention
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
    softmax_attention,
    stock_timm_params,
)
from workers.families.rules import DEFAULT_INNER_HEADS, FAMILY_RULES, check_tnt, inner_dim, inner_heads  # noqa: F401 (re-exported)

PIXEL_STRIDE = 4  # timm's first_stride: each patch becomes (patch_size / 4)² pixel tokens


def build_tnt(spec: ModelSpec) -> nn.Module:
    return TNT(
        **common_timm_kwargs(spec),
        embed_dim=spec.embed_dim,
        inner_dim=inner_dim(spec),
        depth=spec.depth,
        num_heads_inner=inner_heads(spec),
        num_heads_outer=spec.num_heads,
        mlp_ratio=exact_mlp_ratio(spec.embed_dim, spec.mlp_dim),
        first_stride=PIXEL_STRIDE,
    )


def timm_tnt_params(spec: ModelSpec) -> int:
    return stock_timm_params(
        "tnt_s_patch16_224",
        **common_timm_kwargs(spec),
        embed_dim=spec.embed_dim,
        inner_dim=inner_dim(spec),
        depth=spec.depth,
        num_heads_inner=inner_heads(spec),
        num_heads_outer=spec.num_heads,
        mlp_ratio=spec.mlp_dim / spec.embed_dim,
        first_stride=PIXEL_STRIDE,
    )


def tnt_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's inner then outer attention, in depth order."""
    layers = []
    for i, block in enumerate(model.blocks):
        layers += [(f"blocks.{i}.attn_in", block.attn_in), (f"blocks.{i}.attn_out", block.attn_out)]
    return layers


def tnt_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    layers = []
    for i, block in enumerate(model.blocks):
        layers += [(f"blocks.{i}.mlp_in", block.mlp_in), (f"blocks.{i}.mlp", block.mlp)]
    return layers


def tnt_attention_block(attn: Attention, tokens: torch.Tensor, n_images: int) -> torch.Tensor:
    """A = [A_1 … A_h] of a timm TNT ``Attention`` on its input (B', N, C): (n_images, B' / n_images, N, C).

    For the outer attention B' is the number of images; for the inner one it is images × patches. float64.
    """
    rows, n_tokens, _ = tokens.shape
    qk = call_float64(attn.qk, tokens).reshape(rows, n_tokens, 2, attn.num_heads, attn.head_dim)
    q, k = qk.permute(2, 0, 3, 1, 4).unbind(0)
    v = call_float64(attn.v, tokens).reshape(rows, n_tokens, attn.num_heads, -1).transpose(1, 2)  # (B', h, N, C/h)
    block = concat_heads(softmax_attention(q, k, v, attn.scale))
    return block.reshape(n_images, rows // n_images, n_tokens, block.shape[-1])


def tnt_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    layers = []
    for i, block in enumerate(model.blocks):
        layers.append(KappaLayer(f"blocks.{i}.attn_in", "inner", block.attn_in, tnt_attention_block))
        layers.append(KappaLayer(f"blocks.{i}.attn_out", "outer", block.attn_out, tnt_attention_block))
    return layers


TNT_FAMILY = Family(
    name="tnt",
    **FAMILY_RULES["tnt"].family_fields(),
    description=FAMILY_DESCRIPTIONS["tnt"],
    build=build_tnt,
    attention_layers=tnt_attention_layers,
    mlp_layers=tnt_mlp_layers,
    kappa_layers=tnt_kappa_layers,
    num_tokens=lambda spec: (spec.img_size // spec.patch_size) ** 2 + 1,
    reference_params=timm_tnt_params,
    example=dict(
        img_size=32,
        in_chans=1,
        num_classes=10,
        depth=2,
        num_heads=4,
        embed_dim=32,
        mlp_dim=64,
        patch_size=8,
        inner_dim=8,
        inner_heads=2,
    ),
)
