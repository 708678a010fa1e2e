"""The softmax control for the Nyströmformer: the same BERT-style encoder with exact softmax attention,
from HF ``transformers`` (``BertConfig`` / ``BertModel``), classifying sequences.

Same layout as the ``nystromformer`` family: post-norm layers, token + learned position + token-type
embeddings with a LayerNorm, GELU MLPs, and the same mean-pooled LRA classifier
(``workers.families.sequence``). Only the attention differs, so a space that runs both tells whether the
Nyström approximation changes the head-for-depth trade. BERT's q, k, v map hidden_size to hidden_size,
so head_dim is always embed_dim / num_heads.

κ definition (kind ``self``), per layer and per sample with N = the sample's real (unpadded) tokens:
    Q_i, K_i, V_i ∈ R^{N×d}   head i's query, key and value at the real tokens
    A_i = softmax(Q_i K_iᵀ / √d) V_i,   A = [A_1 … A_h] ∈ R^{N×h·d}   (before the output projection)
Padded keys are masked out of the softmax in the model, so this is exactly the layer's output at the real
tokens. A is recomputed in float64 from the layer's input and its weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertModel

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import (
    Family,
    KappaLayer,
    PerImageBlocks,
    concat_heads,
    softmax_attention,
    stock_params,
)
from workers.families.rules import FAMILY_RULES
from workers.families.sequence import (
    DEFAULT_DROPOUT,
    PAD_ID,
    SequenceClassifier,
    additive_mask,
    encoder_mlp_layers,
    lra_head_params,
    sequence_input,
    sequence_tokens,
)


def bert_config(spec: ModelSpec) -> BertConfig:
    dropout = DEFAULT_DROPOUT if spec.dropout is None else spec.dropout
    return BertConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.embed_dim,
        num_hidden_layers=spec.depth,
        num_attention_heads=spec.num_heads,
        intermediate_size=spec.mlp_dim,
        hidden_act="gelu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=spec.seq_len,
        pad_token_id=PAD_ID,
        attn_implementation="sdpa",
    )


class SoftmaxEncoderClassifier(SequenceClassifier):
    """HF BERT encoder (no pooler), mean-pooled, with the LRA MLP head."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.embed_dim, spec.mlp_dim, spec.num_classes)
        self.encoder = BertModel(bert_config(spec), add_pooling_layer=False)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # The layers are called directly with an additive (B, 1, 1, N) mask, as in the Nyströmformer family:
        # HF's mask builder inspects the mask's values, which FLOP counting on the meta device cannot.
        hidden = self.encoder.embeddings(input_ids=input_ids)
        mask = additive_mask(attention_mask, hidden.dtype)
        for layer in self.encoder.encoder.layer:
            output = layer(hidden, attention_mask=mask)
            hidden = output[0] if isinstance(output, tuple) else output
        return hidden


def build_softmax_encoder(spec: ModelSpec) -> nn.Module:
    return SoftmaxEncoderClassifier(spec)


def reference_softmax_encoder_params(spec: ModelSpec) -> int:
    """HF's own BertModel of this config (no pooler), on the meta device, and the LRA head by hand."""
    with torch.device("meta"):
        encoder = BertModel(bert_config(spec), add_pooling_layer=False)
    return stock_params(encoder) + lra_head_params(spec)


def softmax_encoder_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Per layer: the self-attention (q, k, v) and the output projection (dense)."""
    found = []
    for i, layer in enumerate(model.encoder.encoder.layer):
        found += [(f"layer.{i}.attention.self", layer.attention.self)]
        found += [(f"layer.{i}.attention.output.dense", layer.attention.output.dense)]
    return found


def float64_projection(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    bias = linear.bias.double() if linear.bias is not None else None
    return F.linear(x, linear.weight.double(), bias)


def softmax_block(attention: nn.Module, hidden: torch.Tensor, n_samples: int, mask: torch.Tensor) -> PerImageBlocks:
    """A per sample, as the module docstring defines it, in float64; one (1, N_i, h·d) block per sample."""
    heads, head_dim = attention.num_attention_heads, attention.attention_head_size
    blocks = []
    for sample, keep in zip(hidden, mask, strict=True):
        tokens = sample[keep].double()  # (N, C): real tokens only
        q, k, v = (
            float64_projection(proj, tokens).view(-1, heads, head_dim).transpose(0, 1)
            for proj in (attention.query, attention.key, attention.value)
        )
        blocks.append(concat_heads(softmax_attention(q, k, v, head_dim**-0.5)).unsqueeze(0))
    return PerImageBlocks(blocks)


def softmax_encoder_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [
        KappaLayer(f"layer.{i}.attention.self", "self", layer.attention.self, softmax_block, needs_mask=True)
        for i, layer in enumerate(model.encoder.encoder.layer)
    ]


SOFTMAX_ENCODER = Family(
    name="softmax_encoder",
    **FAMILY_RULES["softmax_encoder"].family_fields(),
    description=FAMILY_DESCRIPTIONS["softmax_encoder"],
    build=build_softmax_encoder,
    attention_layers=softmax_encoder_attention_layers,
    mlp_layers=lambda model: encoder_mlp_layers(model.encoder.encoder.layer),
    kappa_layers=softmax_encoder_kappa_layers,
    num_tokens=sequence_tokens,
    reference_params=reference_softmax_encoder_params,
    example_input=sequence_input,
    example=dict(
        depth=2, num_heads=4, embed_dim=32, mlp_dim=64, seq_len=64, vocab_size=20, num_classes=10, dropout=0.0
    ),
    output_projections=lambda model: [layer.attention.output.dense for layer in model.encoder.encoder.layer],
)
