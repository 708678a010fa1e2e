"""A model's input, whatever its modality: an image tensor (B, C, H, W), or a dict of sequence tensors
(``input_ids`` and ``attention_mask``, each (B, seq_len)). The training loop and the probes go through
these helpers so they never need to know which one they hold."""

from __future__ import annotations

import torch
from torch import nn

Inputs = torch.Tensor | dict[str, torch.Tensor]


def forward(model: nn.Module, inputs: Inputs) -> torch.Tensor:
    """The model's output on ``inputs``: ``model(images)``, or ``model(**tensors)`` for a dict."""
    return model(**inputs) if isinstance(inputs, dict) else model(inputs)


def batch_size(inputs: Inputs) -> int:
    return len(next(iter(inputs.values()))) if isinstance(inputs, dict) else len(inputs)


def head(inputs: Inputs, count: int) -> Inputs:
    """The first ``count`` samples."""
    if isinstance(inputs, dict):
        return {name: tensor[:count] for name, tensor in inputs.items()}
    return inputs[:count]


def tensors(inputs: Inputs) -> list[torch.Tensor]:
    return list(inputs.values()) if isinstance(inputs, dict) else [inputs]


def device_of(inputs: Inputs) -> torch.device:
    return tensors(inputs)[0].device


def tokens_per_sample(inputs: Inputs) -> int | None:
    """Sequence positions the model processes per sample (padding included), or None for images."""
    return inputs["input_ids"].shape[1] if isinstance(inputs, dict) else None


def padding_mask(inputs: Inputs) -> torch.Tensor | None:
    """(B, N) bool, True for real tokens; None for images."""
    return inputs["attention_mask"].bool() if isinstance(inputs, dict) else None
