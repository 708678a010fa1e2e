"""Nyströmformer (Xiong et al. 2021), from HF ``transformers`` (``NystromformerConfig``), classifying sequences.

Built from HF's ``NystromformerModel``: its embeddings (token, learned position, token type, LayerNorm)
and its encoder layers, with the authors' LRA classifier around them (``workers.families.sequence``).
HF's layers are post-norm (BERT style, as in the authors' GLUE code); the authors' LRA code is pre-norm.
This is the closest faithful construction a maintained library offers; the softmax control
(``softmax_encoder``) has exactly the same layout, so the comparison between the two is clean.

The layers are called with an additive padding mask of shape (B, 1, 1, N), built here: HF's own model
forward builds an (B, 1, N, N) mask that does not broadcast against the landmark scores (B, h, m, N)
(transformers 5.x raises on any padded batch), so this family calls the layers itself.

Shapes: depth, num_heads, embed_dim (hidden_size), mlp_dim (intermediate_size), ``num_landmarks`` (m),
``conv_kernel_size`` and ``dropout``; seq_len and vocab_size come from the data. HF's q, k, v map
hidden_size to hidden_size, so head_dim is always embed_dim / num_heads. seq_len must be a multiple of
m (HF reshapes the N positions into m segments); with m = seq_len attention is exact softmax.

κ definition (kind ``nystrom``), per layer and per sample with N = the sample's real (unpadded) tokens:
    Q_i, K_i, V_i ∈ R^{L×d}   head i's query, key and value over all L padded positions, Q and K each
                              scaled by d^{-1/4} (HF's split of 1/√d)
    Q̃_i, K̃_i ∈ R^{m×d}        landmarks: means of Q_i, K_i over m consecutive segments of L/m positions
    F_i = softmax(Q_i K̃_iᵀ),  B_i = softmax(Q̃_i K̃_iᵀ)⁺ (6 Newton–Schulz steps, HF's iterative_inv),
    G_i = softmax(Q̃_i K_iᵀ + mask)   (padded keys masked)
    Â_i = F_i B_i G_i V_i + conv_i(V_i)   the head's approximated attention output (with the depthwise
                              convolution over positions that the Nyströmformer adds on V), before the
                              output projection
    A = [Â_1 … Â_h] restricted to the N rows of real tokens ∈ R^{N×h·d}
Padding enters only as HF computes it (the landmark means and the convolution run over all L positions).
A is recomputed in float64 from the layer's input and a float64 copy of its weights.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import NystromformerConfig, NystromformerModel

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import Family, KappaLayer, PerImageBlocks, stock_params
from workers.families.rules import DEFAULT_CONV_KERNEL, DEFAULT_LANDMARKS, FAMILY_RULES, check_nystromformer, landmarks  # noqa: F401 (re-exported)
from workers.families.sequence import (
    DEFAULT_DROPOUT,
    PAD_ID,
    SequenceClassifier,
    additive_mask,
    encoder_mlp_layers,
    lra_head_params,
    real_rows,
    sequence_input,
    sequence_tokens,
)


def nystromformer_config(spec: ModelSpec) -> NystromformerConfig:
    dropout = DEFAULT_DROPOUT if spec.dropout is None else spec.dropout
    return NystromformerConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.embed_dim,
        num_hidden_layers=spec.depth,
        num_attention_heads=spec.num_heads,
        intermediate_size=spec.mlp_dim,
        hidden_act="gelu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=spec.seq_len,
        segment_means_seq_len=spec.seq_len,
        num_landmarks=landmarks(spec),
        conv_kernel_size=spec.conv_kernel_size or DEFAULT_CONV_KERNEL,
        pad_token_id=PAD_ID,
    )


class NystromformerClassifier(SequenceClassifier):
    """HF Nyströmformer embeddings and layers, mean-pooled, with the LRA MLP head."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.embed_dim, spec.mlp_dim, spec.num_classes)
        self.nystromformer = NystromformerModel(nystromformer_config(spec))

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.nystromformer.embeddings(input_ids=input_ids)
        mask = additive_mask(attention_mask, hidden.dtype)
        for layer in self.nystromformer.encoder.layer:
            hidden = layer(hidden, mask)[0]
        return hidden


def build_nystromformer(spec: ModelSpec) -> nn.Module:
    return NystromformerClassifier(spec)


def reference_nystromformer_params(spec: ModelSpec) -> int:
    """HF's own NystromformerModel of this config, on the meta device, and the LRA head by hand."""
    with torch.device("meta"):
        encoder = NystromformerModel(nystromformer_config(spec))
    return stock_params(encoder) + lra_head_params(spec)


def nystromformer_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Per layer: the self-attention (q, k, v, the conv on V) and the output projection (dense)."""
    found = []
    for i, layer in enumerate(model.nystromformer.encoder.layer):
        found += [(f"layer.{i}.attention.self", layer.attention.self)]
        found += [(f"layer.{i}.attention.output.dense", layer.attention.output.dense)]
    return found


def nystrom_block(attention: nn.Module, hidden: torch.Tensor, n_samples: int, mask: torch.Tensor) -> PerImageBlocks:
    """A per sample, as the module docstring defines it: the layer's own computation run in float64 on
    its input, rows of real tokens kept. Returns one (1, N_i, h·d) block per sample."""
    exact = copy.deepcopy(attention).double().eval()
    context = exact(hidden.double(), additive_mask(mask, torch.float64))[0]  # (B, L, h·d)
    return PerImageBlocks(real_rows(context, mask))


def nystromformer_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [
        KappaLayer(f"layer.{i}.attention.self", "nystrom", layer.attention.self, nystrom_block, needs_mask=True)
        for i, layer in enumerate(model.nystromformer.encoder.layer)
    ]


NYSTROMFORMER = Family(
    name="nystromformer",
    **FAMILY_RULES["nystromformer"].family_fields(),
    description=FAMILY_DESCRIPTIONS["nystromformer"],
    build=build_nystromformer,
    attention_layers=nystromformer_attention_layers,
    mlp_layers=lambda model: encoder_mlp_layers(model.nystromformer.encoder.layer),
    kappa_layers=nystromformer_kappa_layers,
    num_tokens=sequence_tokens,
    reference_params=reference_nystromformer_params,
    example_input=sequence_input,
    example=dict(
        depth=2,
        num_heads=4,
        embed_dim=32,
        mlp_dim=64,
        seq_len=64,
        vocab_size=20,
        num_classes=10,
        dropout=0.0,
        num_landmarks=8,
        conv_kernel_size=5,
    ),
)
