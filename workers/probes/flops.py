"""Forward FLOPs per sample, counted by ``torch.utils.flop_counter``."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from workers.batch import forward
from workers.config import ModelSpec
from workers.models import build_on_meta, example_input, set_fused_attention


def forward_flops_per_sample(spec: ModelSpec, meta_model: torch.nn.Module | None = None) -> int:
    """FLOPs (not MACs: one multiply-add counts 2) of one forward pass on one sample: one image, or one
    sequence of ``seq_len`` tokens (the task's padded length) for sequence families.

    Counted by ``FlopCounterMode`` on a meta-device copy of the model (shapes only, so it costs nothing
    and works for models that would not fit in memory). Fused attention is switched off for counting:
    the CPU flash-attention kernel has no FLOP formula registered, and counting it would silently drop
    the two N×N attention matmuls. The count covers matmuls and convolutions (what the counter
    registers), not softmax, norms or activations, as is usual for transformer FLOP figures.

    ``meta_model``: a meta-device build of ``spec`` to count on (the planner's, to build once); its
    fused attention is switched off.
    """
    model = meta_model if meta_model is not None else build_on_meta(spec)
    set_fused_attention(model, False)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        forward(model, example_input(spec, "meta"))
    return int(counter.get_total_flops())
