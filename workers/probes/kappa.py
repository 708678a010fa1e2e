"""κ, the condition number of the attention block (Saratchandran et al. 2025, Theorem 3.2).

For one attention layer and one input image with N tokens, using the layer's own projections:
    Q_i, K_i, V_i ∈ R^{N×d}   the query, key and value of head i (after q/k norm where the layer has it)
    A_i = softmax(Q_i K_iᵀ / √d) V_i ∈ R^{N×d}     (before the output projection)
    A   = [A_1 … A_h] ∈ R^{N×h·d}                   (heads concatenated along channels)
    κ   = σ_1(A) / σ_min(N, h·d)(A)                 (largest over smallest singular value, 2-norm)
κ is computed per image of a fixed probe batch, then summarised per layer by the median and the max
over images. The model-level ``kappa_mean`` is the mean over layers of the per-layer medians, and
``kappa_max`` the max over layers of the per-layer maxima.

The probe recomputes A from q, k and v rather than reading attention weights, because fused attention
(SDPA) never materialises them. Singular values are computed in float64.
"""

from __future__ import annotations

import math
import statistics

import torch
from timm.layers import Attention
from torch import nn

from workers.config import ModelSpec
from workers.models import attention_layers


def condition_number(matrices: torch.Tensor) -> torch.Tensor:
    """σ_1 / σ_min(rows, cols) of each matrix in a batch (…, rows, cols), computed in float64.

    An exactly rank-deficient matrix gives ``inf``.
    """
    singular_values = torch.linalg.svdvals(matrices.double())
    return singular_values[..., 0] / singular_values[..., -1]


def vit_attention_block(attn: Attention, tokens: torch.Tensor) -> torch.Tensor:
    """A = [A_1 … A_h] for a timm ``Attention`` layer on its input ``tokens`` (B, N, C): (B, N, h·d)."""
    batch, n_tokens, _ = tokens.shape
    qkv = attn.qkv(tokens).reshape(batch, n_tokens, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    weights = torch.softmax((q @ k.transpose(-2, -1)) * attn.scale, dim=-1)
    heads = weights @ v  # (B, h, N, d)
    return heads.transpose(1, 2).reshape(batch, n_tokens, attn.num_heads * attn.head_dim)


def capture_attention_inputs(model: nn.Module, layers: list[tuple[str, nn.Module]], images: torch.Tensor):
    """Run ``model`` once on ``images`` and return each attention layer's input, in layer order."""
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def make_hook(index: int):
        def hook(_module, args):
            captured[index] = args[0].detach()

        return hook

    handles = [module.register_forward_pre_hook(make_hook(i)) for i, (_, module) in enumerate(layers)]
    try:
        model(images)
    finally:
        for handle in handles:
            handle.remove()
    return captured


@torch.no_grad()
def kappa_per_layer(spec: ModelSpec, model: nn.Module, images: torch.Tensor) -> list[dict]:
    """κ of every attention layer of ``model`` on ``images``: [{layer, kappa, kappa_max}, …].

    ``kappa`` is the median over the images, ``kappa_max`` the max (module docstring has the definition).
    The model is put in eval mode for the probe and restored afterwards; autocast is off so A is
    computed in the model's own precision.
    """
    layers = attention_layers(spec, model)
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(device_type=images.device.type, enabled=False):
            inputs = capture_attention_inputs(model, layers, images)
            rows = []
            for index, ((name, module), tokens) in enumerate(zip(layers, inputs, strict=True)):
                kappas = condition_number(vit_attention_block(module, tokens)).cpu().tolist()
                rows.append(
                    {
                        "layer": index,
                        "layer_name": name,
                        "kappa": statistics.median(kappas),
                        "kappa_max": max(kappas),
                    }
                )
    finally:
        model.train(was_training)
    return rows


def summarise_kappa(rows: list[dict]) -> dict[str, float]:
    """Model-level figures: mean over layers of the medians, max over layers of the maxima."""
    return {
        "kappa_mean": statistics.fmean(row["kappa"] for row in rows),
        "kappa_max": max(row["kappa_max"] for row in rows),
    }


def theorem_kappa(n_tokens: int, width: int) -> float:
    """Theorem 3.2's estimate for i.i.d. Gaussian heads, D = h·d ≫ N: (√D + √N) / (√D − √N).

    The ratio of the edges of the Marchenko–Pastur support; meaningless (returned as inf) for D ≤ N.
    """
    if width <= n_tokens:
        return math.inf
    root_d, root_n = math.sqrt(width), math.sqrt(n_tokens)
    return (root_d + root_n) / (root_d - root_n)


def gaussian_heads_kappa(n_tokens: int, head_dim: int, num_heads: int, samples: int = 32, seed: int = 0) -> list[float]:
    """κ of A = [A_1 … A_h] with each A_i an N×d matrix of i.i.d. standard normal entries, per sample."""
    generator = torch.Generator().manual_seed(seed)
    heads = torch.randn(samples, num_heads, n_tokens, head_dim, generator=generator, dtype=torch.float64)
    block = heads.permute(0, 2, 1, 3).reshape(samples, n_tokens, num_heads * head_dim)
    return condition_number(block).tolist()
