"""What the sequence-classification families share: the classifier around an HF encoder, the spec rules,
and the masks.

The classifier is the one the Nyströmformer authors use on the Long-Range Arena (mlpen/Nystromformer,
``LRA/code/model_wrapper.py``: ``pooling_mode: MEAN`` and ``SCHead``): the encoder's last hidden states
are averaged over each sample's real tokens, then an MLP d_model → mlp_dim → classes with a ReLU. The
encoders come from HF ``transformers``, built from a config with random weights (nothing is downloaded).
"""

from __future__ import annotations

import torch
from torch import nn

from workers.config import ModelSpec
from workers.families.rules import SEQUENCE_FIELDS, check_sequence  # noqa: F401 (re-exported)

DEFAULT_DROPOUT = 0.1  # the Nyströmformer authors' LRA ListOps config (dropout_prob, attention_dropout)
PAD_ID = 0  # workers.data.listops pads with 0


class SequenceClassifier(nn.Module):
    """An encoder over token ids, mean-pooled over real tokens, and an MLP head.

    Subclasses define ``encode(input_ids, attention_mask) -> (B, N, d_model)``; ``forward`` returns logits
    (B, classes). ``attention_mask`` is (B, N), 1 for real tokens and 0 for padding.
    """

    def __init__(self, embed_dim: int, hidden_dim: int, num_classes: int):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(embed_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, num_classes))

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encode(input_ids, attention_mask)
        weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, N) 1/0 padding mask to the additive (B, 1, 1, N) mask HF attention layers add to their scores:
    0 for real keys, the dtype's most negative value for padding."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def sequence_input(spec: ModelSpec, device: torch.device | str) -> dict[str, torch.Tensor]:
    """One sample of ``seq_len`` token ids, every position real."""
    return {
        "input_ids": torch.zeros(1, spec.seq_len, dtype=torch.long, device=device),
        "attention_mask": torch.ones(1, spec.seq_len, dtype=torch.long, device=device),
    }


def sequence_tokens(spec: ModelSpec) -> int:
    """Positions every attention layer sees: the padded sequence length."""
    return spec.seq_len


def lra_head_params(spec: ModelSpec) -> int:
    """The classifier head's parameters, by hand: d_model → mlp_dim and mlp_dim → classes, with biases."""
    return spec.embed_dim * spec.mlp_dim + spec.mlp_dim + spec.mlp_dim * spec.num_classes + spec.num_classes


def encoder_mlp_layers(encoder_layers: nn.ModuleList) -> list[tuple[str, nn.Module]]:
    """Per BERT-style layer: the MLP's two projections (intermediate.dense, output.dense)."""
    found = []
    for i, layer in enumerate(encoder_layers):
        found += [(f"layer.{i}.intermediate.dense", layer.intermediate.dense)]
        found += [(f"layer.{i}.output.dense", layer.output.dense)]
    return found


def real_rows(context: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Each sample's rows of a (B, N, D) tensor at its real tokens, as (1, N_i, D): padding dropped."""
    return [context[i, mask[i]].unsqueeze(0) for i in range(len(context))]
