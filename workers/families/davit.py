"""DaViT (Ding et al. 2022): four stages, each a stack of (window attention, channel attention) pairs.

κ definitions, for a stage of width C with h heads of d = C / h, on one image:
- kind ``window`` (spatial block): the feature map is cut into 7×7 windows; for each window, with its
  49 tokens as keys and values,
    A_i = softmax(Q_i K_iᵀ / √d) V_i,   A = [A_1 … A_h] ∈ R^{N×C}   (before the output projection),
  keeping the rows of the window's N real tokens. Where the map is not a multiple of 7 the layer pads it
  with zeros; padding tokens are keys there, but their output rows are discarded by the layer, and would
  make A rank-deficient, so they are dropped (at 224 px no stage pads: 56, 28, 14 and 7 tokens a side).
  An image's window κ is the median over its windows.
- kind ``channel`` (channel block): over all N = H·W tokens of the stage, attention runs across channels:
    W_i = softmax(K_iᵀ V_i / √d) ∈ R^{d×d}  (row softmax),   A_i = Q_i W_iᵀ ∈ R^{N×d},   A = [A_1 … A_h].
Then median and max over images per layer, as for every family. A is computed in float64 from the layer's
input and its weights cast to float64 (for the window kind, the block's positional convolution and norm
that precede the attention are applied in float64 too).

Shapes: the stages are ``stage_depths``, ``stage_heads`` and ``stage_dims`` (davit_base: (1, 1, 9, 1),
(4, 8, 16, 32), (128, 256, 512, 1024)); ``swept_stage`` names the stage that depth, num_heads, embed_dim
and mlp_dim set, and every stage's MLP is mlp_dim / embed_dim times its width. The stem is a stride-4
convolution, so patch_size must be 4. Attention parameters do not depend on the number of heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models.davit import ChannelAttention, ChannelBlock, DaVit, SpatialBlock, WindowAttention, window_partition
from torch import nn

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import (
    Family,
    KappaLayer,
    call_float64,
    concat_heads,
    exact_mlp_ratio,
    softmax_attention,
    stock_timm_params,
)
from workers.families.rules import FAMILY_RULES, STEM_STRIDE, check_davit  # noqa: F401 (re-exported)


def build_davit(spec: ModelSpec) -> nn.Module:
    depths, heads, dims = zip(*spec.stages(), strict=True)
    return DaVit(
        in_chans=spec.in_chans,
        depths=depths,
        embed_dims=dims,
        num_heads=heads,
        mlp_ratio=exact_mlp_ratio(spec.embed_dim, spec.mlp_dim),
        qkv_bias=spec.qkv_bias,
        drop_path_rate=spec.drop_path_rate,
        num_classes=spec.num_classes,
    )


def timm_davit_params(spec: ModelSpec) -> int:
    depths, heads, dims = zip(*spec.stages(), strict=True)
    return stock_timm_params(
        "davit_tiny",
        in_chans=spec.in_chans,
        num_classes=spec.num_classes,
        depths=depths,
        embed_dims=dims,
        num_heads=heads,
        mlp_ratio=spec.mlp_dim / spec.embed_dim,
        qkv_bias=spec.qkv_bias,
    )


def davit_blocks(model: nn.Module):
    for name, module in model.named_modules():
        if isinstance(module, SpatialBlock | ChannelBlock):
            yield name, module


def davit_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"{name}.attn", block.attn) for name, block in davit_blocks(model)]


def davit_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"{name}.mlp", block.mlp) for name, block in davit_blocks(model) if block.mlp is not None]


def window_blocks(block: SpatialBlock, x: torch.Tensor, n_images: int) -> list[torch.Tensor]:
    """A per window of a SpatialBlock's window attention, from the block's input map (B, C, H, W).

    Repeats the block's steps up to its attention (positional conv, norm, zero padding to whole windows,
    partition), then keeps each window's real-token rows. Windows are grouped by how many real rows and
    columns they have: a list of (B, windows in group, real tokens, C), one per group. float64 throughout.
    """
    attn, (win_h, win_w) = block.attn, block.window_size
    batch, channels, height, width = x.shape
    tokens = call_float64(block.norm1, call_float64(block.cpe1, x).flatten(2).transpose(1, 2))
    tokens = tokens.view(batch, height, width, channels)
    pad_h, pad_w = (-height) % win_h, (-width) % win_w
    tokens = F.pad(tokens, (0, 0, 0, pad_w, 0, pad_h))
    rows_of_windows, cols_of_windows = (height + pad_h) // win_h, (width + pad_w) // win_w
    windows = window_partition(tokens, (win_h, win_w)).view(-1, win_h * win_w, channels)
    qkv = call_float64(attn.qkv, windows).reshape(-1, win_h * win_w, 3, attn.num_heads, channels // attn.num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    out = concat_heads(softmax_attention(q, k, v, attn.scale))
    out = out.view(batch, rows_of_windows, cols_of_windows, win_h, win_w, channels)
    real_h = [min(win_h, height - r * win_h) for r in range(rows_of_windows)]
    real_w = [min(win_w, width - c * win_w) for c in range(cols_of_windows)]
    groups = []
    for rh in sorted(set(real_h)):
        for rw in sorted(set(real_w)):
            rows = [r for r, size in enumerate(real_h) if size == rh]
            cols = [c for c, size in enumerate(real_w) if size == rw]
            part = out[:, rows][:, :, cols, :rh, :rw]  # (B, len(rows), len(cols), rh, rw, C)
            groups.append(part.reshape(batch, len(rows) * len(cols), rh * rw, channels))
    return groups


def channel_block(attn: ChannelAttention, tokens: torch.Tensor, n_images: int) -> torch.Tensor:
    """A of a ChannelAttention on its input (B, N, C): A_i = Q_i softmax(K_iᵀ V_i / √d)ᵀ; (B, 1, N, C), float64."""
    batch, n_tokens, width = tokens.shape
    qkv = call_float64(attn.qkv, tokens).reshape(batch, n_tokens, 3, attn.num_heads, width // attn.num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, h, N, d)
    weights = torch.softmax((k * attn.scale).transpose(-2, -1) @ v, dim=-1)  # (B, h, d, d)
    return concat_heads(q @ weights.transpose(-2, -1)).unsqueeze(1)


def davit_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    layers = []
    for name, block in davit_blocks(model):
        if isinstance(block.attn, WindowAttention):  # hooked on the block: the map's size decides the padding
            layers.append(KappaLayer(f"{name}.attn", "window", block, window_blocks))
        elif isinstance(block.attn, ChannelAttention):
            layers.append(KappaLayer(f"{name}.attn", "channel", block.attn, channel_block))
    return layers


def davit_tokens(spec: ModelSpec) -> int:
    """Tokens of the swept stage's feature map (what its channel attention sees)."""
    side = spec.img_size // STEM_STRIDE // 2 ** ((spec.swept_stage or 1) - 1)
    return max(1, side) ** 2


DAVIT = Family(
    name="davit",
    **FAMILY_RULES["davit"].family_fields(),
    description=FAMILY_DESCRIPTIONS["davit"],
    build=build_davit,
    attention_layers=davit_attention_layers,
    mlp_layers=davit_mlp_layers,
    kappa_layers=davit_kappa_layers,
    num_tokens=davit_tokens,
    reference_params=timm_davit_params,
    example=dict(
        img_size=32,
        in_chans=1,
        num_classes=10,
        depth=2,
        num_heads=4,
        embed_dim=32,
        mlp_dim=64,
        patch_size=4,
        swept_stage=3,
        stage_depths=(1, 1, 2, 1),
        stage_heads=(1, 2, 4, 8),
        stage_dims=(8, 16, 32, 64),
    ),
)
