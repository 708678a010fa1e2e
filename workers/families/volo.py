"""VOLO (Yuan et al. 2022): outlook attention in its first stage, self-attention after it.

κ definitions, for a stage of width C with h heads of d = C / h, on one image:
- kind ``outlook`` (stage 1, kernel K = 3): for each position p of the H×W map, head i's weights
  a_{i,p} = softmax(scale · reshape(W_a x̄_p)) ∈ R^{K²×K²} come from the (pooled) token itself, not from
  q·k; they mix the values of p's K×K neighbourhood, Ṽ_{i,p} ∈ R^{K²×d}, and the K² results are folded
  back onto the map, summing where neighbourhoods overlap. A_i ∈ R^{N×d}, N = H·W, is head i's folded
  output and A = [A_1 … A_h] ∈ R^{N×C} is the layer's output before its projection.
- kind ``self`` (stages 2 to 4): N = H·W tokens, A_i = softmax(Q_i K_iᵀ / √d) V_i, A = [A_1 … A_h].
A is computed in float64 from the layer's input and its weights cast to float64.
The two class-attention layers at the end are not probed (one query row: κ is 1 by construction); their
parameters count as attention.

Shapes: ``stage_depths`` / ``stage_heads`` / ``stage_dims`` (volo_d3: (8, 8, 16, 4), (8, 16, 16, 16),
(256, 512, 512, 512)) with ``swept_stage`` naming the stage that depth, num_heads, embed_dim and mlp_dim
set; every stage's MLP is mlp_dim / embed_dim times its width (VOLO's ratio is 3). Width changes only at
the one downsampling, after stage 1.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from timm.models.volo import VOLO, ClassBlock, OutlookAttention, Outlooker, Transformer
from timm.models.volo import Attention as VoloAttention
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
    stock_params,
)
from workers.families.rules import FAMILY_RULES, STAGES, check_volo  # noqa: F401 (re-exported)


def build_volo(spec: ModelSpec) -> nn.Module:
    depths, heads, dims = zip(*spec.stages(), strict=True)
    ratio = exact_mlp_ratio(spec.embed_dim, spec.mlp_dim)
    return VOLO(
        **common_timm_kwargs(spec),
        layers=list(depths),
        embed_dims=list(dims),
        num_heads=list(heads),
        mlp_ratio=(ratio,) * STAGES,
    )


def timm_volo_params(spec: ModelSpec) -> int:
    """timm's VOLO class itself (its registered volo_d* models fix the stages and refuse them as arguments)."""
    depths, heads, dims = zip(*spec.stages(), strict=True)
    with torch.device("meta"):
        model = VOLO(
            **common_timm_kwargs(spec),
            layers=list(depths),
            embed_dims=list(dims),
            num_heads=list(heads),
            mlp_ratio=spec.mlp_dim / spec.embed_dim,
        )
    return stock_params(model)


def volo_blocks(model: nn.Module):
    for name, module in model.named_modules():
        if isinstance(module, Outlooker | Transformer | ClassBlock):
            yield name, module


def volo_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"{name}.attn", block.attn) for name, block in volo_blocks(model)]


def volo_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"{name}.mlp", block.mlp) for name, block in volo_blocks(model)]


def outlook_block(attn: OutlookAttention, x: torch.Tensor, n_images: int) -> torch.Tensor:
    """A of an OutlookAttention on its input (B, H, W, C), as the module docstring defines, in float64:
    (B, 1, H·W, C)."""
    batch, height, width, channels = x.shape
    x = x.double()
    kk = attn.kernel_size * attn.kernel_size
    h_out, w_out = math.ceil(height / attn.stride), math.ceil(width / attn.stride)
    v = attn.unfold(call_float64(attn.v, x).permute(0, 3, 1, 2))  # (B, C·K², positions)
    v = v.reshape(batch, attn.num_heads, channels // attn.num_heads, kk, h_out * w_out).permute(0, 1, 4, 3, 2)
    pooled = attn.pool(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
    logits = call_float64(attn.attn, pooled).reshape(batch, h_out * w_out, attn.num_heads, kk, kk)
    logits = logits.permute(0, 2, 1, 3, 4)
    weights = torch.softmax(logits * attn.scale, dim=-1)  # (B, h, positions, K², K²)
    spread = (weights @ v).permute(0, 1, 4, 3, 2).reshape(batch, channels * kk, h_out * w_out)
    folded = F.fold(
        spread, (height, width), kernel_size=attn.kernel_size, padding=attn.padding, stride=attn.stride
    )  # (B, C, H, W), channels head-major: channel = head · d + j
    return folded.flatten(2).transpose(1, 2).unsqueeze(1)


def volo_self_block(attn: VoloAttention, x: torch.Tensor, n_images: int) -> torch.Tensor:
    """A = [A_1 … A_h] of a VOLO ``Attention`` on its input (B, H, W, C): (B, 1, H·W, C), float64."""
    batch, height, width, channels = x.shape
    tokens = height * width
    head_dim = channels // attn.num_heads
    qkv = call_float64(attn.qkv, x).reshape(batch, tokens, 3, attn.num_heads, head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    return concat_heads(softmax_attention(q, k, v, attn.scale)).unsqueeze(1)


def volo_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    layers = []
    for name, block in volo_blocks(model):
        if isinstance(block, Outlooker):
            layers.append(KappaLayer(f"{name}.attn", "outlook", block.attn, outlook_block))
        elif isinstance(block, Transformer):
            layers.append(KappaLayer(f"{name}.attn", "self", block.attn, volo_self_block))
    return layers


def volo_tokens(spec: ModelSpec) -> int:
    """Tokens of the swept stage's map: (img / patch)² in stage 1, a quarter of that after it."""
    side = spec.img_size // spec.patch_size
    return (side if (spec.swept_stage or 1) == 1 else side // 2) ** 2


VOLO_FAMILY = Family(
    name="volo",
    **FAMILY_RULES["volo"].family_fields(),
    description=FAMILY_DESCRIPTIONS["volo"],
    build=build_volo,
    attention_layers=volo_attention_layers,
    mlp_layers=volo_mlp_layers,
    kappa_layers=volo_kappa_layers,
    num_tokens=volo_tokens,
    reference_params=timm_volo_params,
    example=dict(
        img_size=32,
        in_chans=1,
        num_classes=10,
        depth=2,
        num_heads=4,
        embed_dim=32,
        mlp_dim=96,
        patch_size=8,
        swept_stage=3,
        stage_depths=(1, 1, 2, 1),
        stage_heads=(2, 4, 4, 4),
        stage_dims=(16, 32, 32, 32),
    ),
)
