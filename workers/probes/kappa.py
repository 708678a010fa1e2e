"""κ, the condition number of the attention block (Saratchandran et al. 2025, Theorem 3.2).

For one attention layer and one input image with N tokens, using the layer's own projections:
    A = [A_1 … A_h] ∈ R^{N×h·d}   the heads' outputs concatenated along channels, before the output projection
    κ = σ_1(A) / σ_min(N, h·d)(A)   (largest over smallest singular value, 2-norm)
For a ViT, A_i = softmax(Q_i K_iᵀ / √d) V_i. Each family writes down its own A_i in its module's docstring
(``workers/families/``): XCiT attends over channels, TNT has inner and outer attention, DaViT window and
channel attention, VOLO outlook attention in its first stage. Where one image gives several blocks
(DaViT's windows, TNT's patches), the image's κ is the median over them.

κ is computed per image of a fixed probe batch, then summarised per layer by the median and the max
over images. The model-level ``kappa_mean`` is the mean over probed layers (every kind) of the per-layer
medians, and ``kappa_max`` the max over layers of the per-layer maxima. The ``attention`` column of each
layer's row says which kind it is, so one kind can be averaged alone in SQL.

The probe recomputes A from the layer's q, k and v rather than reading attention weights, because fused
attention (SDPA) never materialises them. Every family forms A itself in float64, from the layer's input
as the model computed it (captured here in the model's precision, then cast to float64) and the layer's
weights cast to float64 (norms and convolutions the block applies before its attention too); the singular
values are then computed in float64. So κ carries float64 rounding only (relative error ~κ · 1e-16): a
float32 A is off by roughly κ · 1e-9 … 1e-8 relative (1e-4 … 1e-3 at κ ≈ 1e5, percent level at 1e6 – 1e7,
tests/workers/probes/test_probes_truth.py), and past κ ≈ 1e8 it measures float32's noise floor, not A.
For token sequences N is each sample's real length: padding rows are dropped.
With the ``preconditioned`` conditioning intervention (``workers/conditioning.py``) the block measured is
the one the output projection receives, A · C: the same diagonal C is applied to the float64 A here
(causally for gpt2, over the real tokens for padded sequences). The penalties leave the forward unchanged.
"""

from __future__ import annotations

import statistics

import torch
from torch import nn

from workers.batch import Inputs, batch_size, device_of, forward, padding_mask
from workers.conditioning import precondition_blocks
from workers.config import ModelSpec
from workers.families.base import PerImageBlocks
from workers.models import get_family, kappa_layers
from workers.probes.gaussian import gaussian_edges_kappa, theorem_kappa  # noqa: F401 (their home was here)


def condition_number(matrices: torch.Tensor) -> torch.Tensor:
    """σ_1 / σ_min(rows, cols) of each matrix in a batch (…, rows, cols), computed in float64.

    An exactly rank-deficient matrix gives ``inf``.
    """
    singular_values = torch.linalg.svdvals(matrices.double())
    return singular_values[..., 0] / singular_values[..., -1]


def capture_attention_inputs(model: nn.Module, modules: list[nn.Module], images: Inputs):
    """Run ``model`` once on ``images`` and return each module's first input (its hidden states), in the
    given order."""
    captured: list[torch.Tensor | None] = [None] * len(modules)

    def make_hook(index: int):
        def hook(_module, args, kwargs):
            captured[index] = (args[0] if args else kwargs["hidden_states"]).detach()

        return hook

    handles = [module.register_forward_pre_hook(make_hook(i), with_kwargs=True) for i, module in enumerate(modules)]
    try:
        forward(model, images)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def per_image_kappa(blocks: torch.Tensor | list[torch.Tensor]) -> list[float]:
    """κ of each image from its blocks (images, sub-blocks, N, D), or a list of such groups that differ
    in N, or :class:`PerImageBlocks` (one (sub-blocks, N_i, D) per image): the median over all of the
    image's sub-blocks."""
    if isinstance(blocks, PerImageBlocks):
        return [statistics.median(condition_number(block).cpu().tolist()) for block in blocks]
    groups = [blocks] if isinstance(blocks, torch.Tensor) else blocks
    kappas = torch.cat([condition_number(group) for group in groups], dim=1).cpu().tolist()
    return [statistics.median(per_block) for per_block in kappas]


@torch.no_grad()
def kappa_per_layer(spec: ModelSpec, model: nn.Module, images: Inputs) -> list[dict]:
    """κ of every probed attention layer of ``model`` on ``images`` (or a dict of token sequences):
    [{layer, layer_name, attention, kappa, kappa_max}, …].

    ``kappa`` is the median over the images, ``kappa_max`` the max (module docstring has the definition).
    The model is put in eval mode for the probe and restored afterwards; autocast is off so A is
    computed in the model's own precision.
    """
    layers = kappa_layers(spec, model)
    mask = padding_mask(images)
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(device_type=device_of(images).type, enabled=False):
            inputs = capture_attention_inputs(model, [layer.module for layer in layers], images)
            rows = []
            for index, (layer, tokens) in enumerate(zip(layers, inputs, strict=True)):
                extra = (mask,) if layer.needs_mask else ()
                blocks = layer.block(layer.module, tokens, batch_size(images), *extra)
                kappas = per_image_kappa(conditioned_blocks(spec, blocks))
                rows.append(
                    {
                        "layer": index,
                        "layer_name": layer.name,
                        "attention": layer.kind,
                        "kappa": statistics.median(kappas),
                        "kappa_max": max(kappas),
                    }
                )
    finally:
        model.train(was_training)
    return rows


def conditioned_blocks(spec: ModelSpec, blocks):
    """The blocks the output projections receive: A itself, or for the ``preconditioned`` intervention
    A · C with the model's own diagonal C (``workers/conditioning.py``), applied here in float64."""
    if spec.resolved_conditioning != "preconditioned":
        return blocks
    return precondition_blocks(blocks, causal=get_family(spec.family).causal)


def summarise_kappa(rows: list[dict]) -> dict[str, float]:
    """Model-level figures: mean over layers of the medians, max over layers of the maxima."""
    return {
        "kappa_mean": statistics.fmean(row["kappa"] for row in rows),
        "kappa_max": max(row["kappa_max"] for row in rows),
    }


def gaussian_heads_kappa(n_tokens: int, head_dim: int, num_heads: int, samples: int = 32, seed: int = 0) -> list[float]:
    """κ of A = [A_1 … A_h] with each A_i an N×d matrix of i.i.d. standard normal entries, per sample."""
    generator = torch.Generator().manual_seed(seed)
    heads = torch.randn(samples, num_heads, n_tokens, head_dim, generator=generator, dtype=torch.float64)
    block = heads.permute(0, 2, 1, 3).reshape(samples, n_tokens, num_heads * head_dim)
    return condition_number(block).tolist()
