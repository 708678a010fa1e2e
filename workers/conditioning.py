"""Interventions on the conditioning of the attention block A, at a fixed shape and parameter count.

The paper (Saratchandran, Teney, Lucey 2025, arXiv 2505.20802, Theorem 3.2) proves that more heads lower
κ(A) of A = [A_1 … A_h] ∈ R^{N×h·d}, the per-head outputs concatenated before the output projection, and
hypothesises that this is why fewer layers then suffice. These interventions move κ(A) with the heads held
fixed, so a sweep can ask whether conditioning alone buys back what the heads buy. Each attention layer's
output projection (its family's ``output_projections``: timm's ``Attention.proj`` in ViT, ``attn.c_proj`` in
GPT-2, ``BertSelfOutput.dense`` in the softmax encoder) receives exactly A as its input, (B, N, h·d): a
forward pre-hook on it either replaces A (the preconditioner) or keeps it for a training-loss penalty. No
parameter is added, no shape changes.

``preconditioned``: a parameter-free diagonal preconditioner on each head's output before the output
projection, after H. Saratchandran, "Preconditioned Attention: Enhancing Efficiency in Transformers",
AISTATS 2026, arXiv 2603.27153 (there each head's attention output is multiplied by a diagonal
preconditioner C that depends on Q, K, V). The C used here is norm-preserving column equilibration:
    r_j = sqrt(mean_t A_tj² + ε)              column j's root mean square over the tokens t (ε = 1e-12)
    s   = sqrt(mean_j r_j²)                   the block's overall RMS (one scalar per sample)
    A ← A · C,   C = s · diag(1/r_1 … 1/r_{h·d})
so every column of every head has the same RMS s over tokens (A's Frobenius norm is kept, up to ε).
Column scaling is the diagonal preconditioner van der Sluis (1969, "Condition numbers and equilibration of
matrices", Numer. Math. 14) proved within a factor √n of the best diagonal scaling for κ, and the scalar s
does not change κ. C is per head (each of head i's d columns has its own entry), parameter-free and
cheap (2·N·h·d multiply-adds). A causal LM must not see the future: for a causal family (``gpt2``) the
statistics at token t are over tokens ≤ t only, a causal running RMS r_tj = sqrt(mean_{u≤t} A_uj² + ε),
s_t likewise, so the row of A at t is scaled with what the model has seen by then (token 0 is then ±s_0 in
every column, the first row alone). For a padded family (softmax_encoder) the mean is over each sample's real tokens
(padding rows are scaled too, with the real tokens' statistics, and never read by the classifier).
Gradients flow through r and s, as through a norm layer. The κ probe applies the same C (in float64) to the
block it computes, so ``kappa_mean`` is κ of what the output projection receives.

Measured before settling on it (a throwaway script; freshly built 2-block models, d_model 64, seed 0, 16
random probe samples; ``kappa_mean`` none → preconditioned, the model's own forward with the hook):
vit on 8×8 images, patch 2 (17 tokens), 1 / 4 / 16 heads: 1.9e8 → 8.0e7, 8.0e4 → 3.9e4, 2.4e4 → 1.1e4;
gpt2, 16 tokens: 79 → 56, 77 → 53, 75 → 53; softmax_encoder, 32 tokens (half the samples padded
to 20): 5.1e5 → 3.0e5, 9.6e3 → 4.8e3, 6.9e3 → 3.8e3. So it lowers κ by 1.4-2.5×, against the 10³-10⁴×
that 1 → 16 heads buys at initialisation. No diagonal scaling does much better there: at initialisation
attention is near uniform, every row of A_i is close to the mean of V_i, and A is close to rank one,
which no diagonal scaling undoes. Measured on the same vit / gpt2 blocks (1 head): row equilibration
(each token's row to unit RMS) 1.9e8 → 1.9e8 / 73 → 52; rows then columns 8.3e7 / 34; Ruiz's
alternating equilibration, 5 rounds, 8.4e7 / 44; columns alone 8.3e7 / 49. Column equilibration is kept:
as good as any diagonal on the ViT, causal with one running sum, and the one van der Sluis's bound is about.
Whether training then moves κ further is what the sweep measures (``kappa_mean`` is recorded per trial).

``orthogonality``: a training-loss penalty
    λ · mean over attention layers ℓ and samples b of  ‖G/(tr G / m) − I_m‖_F² / m,
with G the smaller Gram matrix of A = A_{ℓ,b} (A Aᵀ when N ≤ h·d, else Aᵀ A) and m = min(N, h·d). With σ_k
A's singular values and p_k = σ_k² / mean σ², it is mean_k (p_k − 1)²: the variance of the normalised
squared singular values, zero iff all are equal (κ = 1); scale-invariant, smooth, and without an SVD.
It lies in [0, m − 1]; a near-rank-one A (near-uniform attention, as at initialisation) gives about m − 1
(16 at 17 tokens). Default λ = 0.1 (``DEFAULT_WEIGHTS``): at first comparable to a task loss of 0.5-3, and
small once A spreads its spectrum.

``kappa_penalty``: a training-loss penalty
    λ · mean over attention layers and samples of  log κ(A) = log σ_1(A) − log σ_m(A),
from ``torch.linalg.svdvals`` (differentiable; the singular values' gradient needs no singular-vector
gap). σ_m is floored at 1e-12 · σ_1 (a rank-deficient A then gives log 1e12 ≈ 27.6 and no gradient
through σ_m). Default λ = 0.01: log κ of the small models measured here is 2-22 nats (κ from 8 to 4e9),
so the penalty starts at 0.02-0.2 nats beside a task loss of 0.5-3; on the embedded digits it still cut
the trained κ of a one-head ViT 3,200× (search_spaces/c3_conditioning.yaml's why).

Both penalties are computed in float32 from the A the forward pass computed (bf16 under autocast is cast
to float32; the linear algebra has no bf16 kernels), over each sample's real tokens for padded sequences
(the padding mask is captured by a pre-hook on the model). ``conditioning_weight`` overrides λ. The training
step (``workers.train``) minimises task loss + λ · penalty; the recorded ``train_loss`` stays the task loss
alone, so it is comparable across interventions (the penalty is not a score). A is recorded only in
training mode with gradients on; evaluation, the probes and FLOP counting never keep it.

Cost, in the record's own terms: the parameter count is unchanged (the hooks hold no tensors). Forward
FLOPs (``torch.utils.flop_counter``) are unchanged too: the counter registers matmuls and convolutions,
and the preconditioner is elementwise (squares, means, a square root, divisions: about 5·N·h·d operations
per layer, uncounted, as norms and softmax are); the penalties run in the training step, not the forward.
Training throughput does include the penalties' Gram matrices or SVDs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
from torch import nn

from workers.config import ModelSpec
from workers.families.base import Family

# λ when a space gives no conditioning_weight (module docstring says why these values).
DEFAULT_WEIGHTS: dict[str, float] = {"orthogonality": 0.1, "kappa_penalty": 0.01}
EPS = 1e-12  # added to the mean square before the root: an all-zero column stays finite
KAPPA_FLOOR = 1e-12  # σ_m is floored at this times σ_1 in the log-κ penalty


def weight(spec: ModelSpec) -> float:
    """λ of the spec's penalty: ``conditioning_weight``, else the intervention's default."""
    if spec.conditioning_weight is not None:
        return spec.conditioning_weight
    return DEFAULT_WEIGHTS.get(spec.resolved_conditioning, 0.0)


# --- the preconditioner -------------------------------------------------------------------------------------


def precondition(block: torch.Tensor, causal: bool = False, mask: torch.Tensor | None = None) -> torch.Tensor:
    """A · C for blocks (…, N, D), C = s · diag(1/r) as the module docstring defines it.

    ``causal``: r and s at row t from rows ≤ t only. ``mask`` (…, N) bool, True for real tokens: the
    statistics over real rows only (non-causal). The statistics are taken in float32 at least (a bf16 running
    sum drifts), the result is in the block's dtype."""
    out_dtype, block = block.dtype, block.to(torch.promote_types(block.dtype, torch.float32))
    squares = block * block
    if causal:
        counts = torch.arange(1, block.shape[-2] + 1, device=block.device, dtype=block.dtype)
        mean_square = squares.cumsum(dim=-2) / counts[:, None]  # (…, N, D): over rows ≤ t
    elif mask is not None:
        keep = mask.to(block.dtype).unsqueeze(-1)  # (…, N, 1)
        mean_square = (squares * keep).sum(dim=-2, keepdim=True) / keep.sum(dim=-2, keepdim=True).clamp(min=1.0)
    else:
        mean_square = squares.mean(dim=-2, keepdim=True)  # (…, 1, D)
    mean_square = mean_square + EPS
    scale = mean_square.mean(dim=-1, keepdim=True).sqrt()  # s: the RMS over the block's columns
    return (block * (scale / mean_square.sqrt())).to(out_dtype)


def precondition_blocks(blocks, causal: bool):
    """The κ probe's blocks with the preconditioner applied, whatever their container: a tensor
    (images, sub-blocks, N, D), a list of such, or a list of per-sample (1, N_i, D) blocks (already the
    real tokens only). Returns the same container type."""
    if isinstance(blocks, torch.Tensor):
        return precondition(blocks, causal=causal)
    return type(blocks)(precondition(block, causal=causal) for block in blocks)


# --- the penalties ------------------------------------------------------------------------------------------


def orthogonality_penalty(block: torch.Tensor) -> torch.Tensor:
    """‖G/(tr G / m) − I_m‖_F² / m per matrix of (…, N, D), G the smaller Gram matrix, m = min(N, D)."""
    rows, cols = block.shape[-2:]
    gram = block @ block.transpose(-2, -1) if rows <= cols else block.transpose(-2, -1) @ block
    m = min(rows, cols)
    trace = gram.diagonal(dim1=-2, dim2=-1).sum(-1)
    normalised = gram / (trace / m)[..., None, None]
    identity = torch.eye(m, dtype=block.dtype, device=block.device)
    return ((normalised - identity) ** 2).sum(dim=(-2, -1)) / m


def log_kappa(block: torch.Tensor) -> torch.Tensor:
    """log σ_1 − log σ_m per matrix of (…, N, D), from ``torch.linalg.svdvals`` (σ_m floored, see above)."""
    values = torch.linalg.svdvals(block)
    return torch.log(values[..., 0]) - torch.log(torch.maximum(values[..., -1], values[..., 0] * KAPPA_FLOOR))


PENALTY_FUNCTIONS = {"orthogonality": orthogonality_penalty, "kappa_penalty": log_kappa}


# --- hooking a model ----------------------------------------------------------------------------------------


@dataclass
class ConditioningState:
    """What a conditioned model carries between its hooks and the training step: the intervention, λ,
    the last padding mask the model was called with, and the blocks recorded for the penalty."""

    kind: str
    weight: float
    causal: bool
    mask: torch.Tensor | None = None  # (B, N) bool, True for real tokens; None: every token is real
    recorded: list[tuple[torch.Tensor, torch.Tensor | None]] = field(default_factory=list)


STATE_ATTRIBUTE = "conditioning_state"


def _capture_mask(state: ConditioningState, _module, args, kwargs):
    mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
    state.mask = None if mask is None else mask.bool()


def _precondition_hook(state: ConditioningState, _module, args):
    return (precondition(args[0], causal=state.causal, mask=state.mask), *args[1:])


def _record_hook(state: ConditioningState, module, args):
    if module.training and torch.is_grad_enabled():
        state.recorded.append((args[0], state.mask))


def install(spec: ModelSpec, model: nn.Module, family: Family) -> nn.Module:
    """Hook ``spec.conditioning`` into ``model`` of ``family`` (a no-op for ``none``); returns the model. The
    hooks sit on the family's output projections (``Family.output_projections``); a causal family's
    statistics look only back, a padded one's take real tokens only. The hooks are stateless for the
    preconditioner apart from the padding mask; for a penalty they record A in training, for :func:`penalty`
    to read."""
    kind = spec.resolved_conditioning
    if kind == "none":
        return model
    if family.output_projections is None:
        raise ValueError(f"conditioning is not wired for the {family.name} family: it has no output_projections")
    state = ConditioningState(kind, weight(spec), family.causal)
    setattr(model, STATE_ATTRIBUTE, state)
    if family.padded:  # its mask decides which rows count
        model.register_forward_pre_hook(functools.partial(_capture_mask, state), with_kwargs=True)
    hook = _precondition_hook if kind == "preconditioned" else _record_hook
    for projection in family.output_projections(model):
        projection.register_forward_pre_hook(functools.partial(hook, state))
    return model


def penalty(model: nn.Module) -> torch.Tensor | None:
    """λ · the penalty over the blocks recorded since the last call (then forgotten), or None when the
    model has no penalty or recorded nothing. Mean over layers and samples, each sample over its real
    tokens."""
    state = getattr(model, STATE_ATTRIBUTE, None)
    if state is None or state.kind not in PENALTY_FUNCTIONS:
        return None
    recorded, state.recorded = state.recorded, []
    if not recorded:
        return None
    function = PENALTY_FUNCTIONS[state.kind]
    per_layer = [per_sample_penalty(function, block.float(), mask).mean() for block, mask in recorded]
    return state.weight * torch.stack(per_layer).mean()


def per_sample_penalty(function, block: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``function`` of each sample's block (B, N, D), over its real tokens when ``mask`` is given: (B,)."""
    if mask is None or bool(mask.all()):
        return function(block)
    return torch.stack([function(sample[keep]) for sample, keep in zip(block, mask, strict=True)])


def clear(model: nn.Module) -> None:
    """Forget recorded blocks (a forward in training mode whose loss is not trained on)."""
    state = getattr(model, STATE_ATTRIBUTE, None)
    if state is not None:
        state.recorded.clear()
