"""Crammed BERT (Geiping & Goldstein 2023, "Cramming: Training a Language Model on a Single GPU in One Day")
as a masked language model, built from HF ``transformers``' ModernBERT modules (``ModernBertConfig``,
``ModernBertForMaskedLM``), and the sequence classifier it is fine-tuned as on GLUE.

Why ModernBERT: HF's ``BertModel`` is post-norm with biases everywhere and a plain GELU MLP; changing that
would mean rewriting its layers. ModernBERT's layer is cramming's: pre-norm, no biases on any linear layer,
a gated GELU MLP, a final LayerNorm after the last block and one after the embeddings. The construction
here, against cramming's ``crammed-bert.yaml`` (JonasGeiping/cramming, ``arch/crammed-bert.yaml``):

- layers, heads, width as the spec says; every layer attends globally (ModernBERT's sliding-window layers
  are switched off: ``layer_types`` all ``full_attention``);
- MLP ``Wi`` maps d_model to 2 · mlp_dim, GELU(first half) ⊙ second half, ``Wo`` maps mlp_dim back: cramming's
  ``GELUglu`` with ``intermed_size`` = 2 · mlp_dim (cramming's 3072 is mlp_dim 1536 here);
- output layer tied to the token embedding, no bias, and no transform before it (cramming's
  ``skip_head_transform: True``): ModernBERT's prediction head (dense + norm) is replaced by the identity;
- q, k, v in one ``Wqkv`` without bias (cramming's ``qkv_bias: False``); head_dim = d_model / heads.

Grouped-query attention (``num_kv_heads`` = kv, a divisor of h; not in cramming): ModernBERT's attention
splits ``Wqkv`` into three equal parts, so a subclass, :class:`GroupedQueryModernBertAttention`, maps d_model
to (h + 2·kv) · head_dim (q, then k, then v), rotates q and k, and lets the attention function share each
key/value head among h/kv query heads (HF's sdpa path through ``num_key_value_groups``, the eager path by
repeating them). Initialised as ModernBERT initialises its attention. An encoder has no KV cache, so here
grouping saves only the K and V projections (parameters and FLOPs); it asks whether an encoder's heads can
share keys and values, not what decoding saves. num_kv_heads unset or equal to h: ModernBERT's own layer.

Differences, none of them in the parameter count beyond a few LayerNorm vectors: positions are rotary
(ModernBERT's RoPE, θ = 10,000) where cramming adds scaled sinusoids (one learned scale); LayerNorms have
no bias (cramming's do: 2 · d_model per norm more); the first layer's attention norm is the embedding norm
(ModernBERT's; cramming normalises again). Counted at d_model 768, MLP 1536 (GLU 3072), 32,768 tokens:
16 × 12 is 119,563,008 parameters and 10 × 24 is 84,164,352; cramming's layout would have 119,589,889 and
84,182,017 (published 119M and 84M: +0.5% and +0.2% here).

The model takes ``input_ids`` and ``attention_mask`` (B, N), 1 for real tokens, and returns token logits
(B, N, vocab). The layers are called directly with an additive (B, 1, 1, N) mask and the rotary cos/sin:
HF's mask builder inspects the mask's values, which FLOP counting on the meta device cannot.

κ definition (kind ``self``), per layer and per sample with N = the sample's real tokens (right padding, so
they are positions 0 … N-1):
    Q_i, K_j, V_j ∈ R^{N×d}   query head i, key and value head j from ``Wqkv`` at the real tokens
    g(i) = ⌊i / (h/kv)⌋   the key/value head query head i reads (g(i) = i without grouping)
    Q̃_i, K̃_j = RoPE(Q_i), RoPE(K_j) at positions 0 … N-1 (rotate-half form, θ = 10,000)
    A_i = softmax(Q̃_i K̃_{g(i)}ᵀ / √d) V_{g(i)},   A = [A_1 … A_h] ∈ R^{N×h·d}   (before the output projection Wo)
With grouping, A keeps one block per query head: it is what Wo reads (workers/families/gpt2.py says why).
Padded keys are masked out of the softmax in the model, so this is exactly the layer's output at the real
tokens. A is recomputed in float64 from the attention's input (after the attention norm) and its weights.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import ModernBertConfig, ModernBertForMaskedLM
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.modernbert.modeling_modernbert import (
    ModernBertAttention,
    ModernBertPredictionHead,
    apply_rotary_pos_emb,
    eager_attention_forward,
)

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import Family, KappaLayer, PerImageBlocks, concat_heads, softmax_attention, stock_params
from workers.families.rules import FAMILY_RULES
from workers.families.sequence import additive_mask, sequence_input, sequence_tokens

ROPE_THETA = 10_000.0
NORM_EPS = 1e-12  # cramming's norm_eps


def crammed_bert_config(spec: ModelSpec, num_labels: int = 2) -> ModernBertConfig:
    dropout = spec.dropout or 0.0
    return ModernBertConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.embed_dim,
        intermediate_size=spec.mlp_dim,
        num_hidden_layers=spec.depth,
        num_attention_heads=spec.num_heads,
        layer_types=["full_attention"] * spec.depth,
        rope_parameters={"full_attention": {"rope_theta": ROPE_THETA, "rope_type": "default"}},
        max_position_embeddings=spec.seq_len,
        norm_eps=NORM_EPS,
        embedding_dropout=dropout,
        mlp_dropout=dropout,
        attention_dropout=dropout,
        classifier_dropout=dropout,
        decoder_bias=False,
        tie_word_embeddings=True,
        pad_token_id=None,  # [PAD]'s id is the tokenizer's; padded keys are masked, so its embedding is unused
        bos_token_id=None,
        eos_token_id=None,
        cls_token_id=None,
        sep_token_id=None,
        num_labels=num_labels,
        attn_implementation="sdpa",
    )


class GroupedQueryModernBertAttention(ModernBertAttention):
    """ModernBERT's attention with ``num_kv_heads`` key/value heads, each shared by num_heads / num_kv_heads
    query heads (module docstring); everything else is ModernBERT's."""

    def __init__(self, config: ModernBertConfig, layer_idx: int, num_kv_heads: int):
        super().__init__(config, layer_idx)
        heads = config.num_attention_heads
        self.num_key_value_groups = heads // num_kv_heads  # read by HF's sdpa_attention_forward
        self.split_size = [heads * self.head_dim, num_kv_heads * self.head_dim, num_kv_heads * self.head_dim]
        self.Wqkv = nn.Linear(config.hidden_size, sum(self.split_size), bias=config.attention_bias)

    def forward(
        self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch_tokens = hidden_states.shape[:-1]
        query, key, value = (
            x.view(*batch_tokens, -1, self.head_dim).transpose(1, 2)
            for x in self.Wqkv(hidden_states).split(self.split_size, dim=-1)
        )
        cos, sin = position_embeddings
        query, key = apply_rotary_pos_emb(query, key, cos, sin, unsqueeze_dim=1)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, grouped_eager_attention)
        output, weights = attend(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.head_dim**-0.5,
            sliding_window=self.sliding_window,
            deterministic=self.deterministic_flash_attn,
            **kwargs,
        )
        return self.out_drop(self.Wo(output.reshape(*batch_tokens, -1).contiguous())), weights


def grouped_eager_attention(module: GroupedQueryModernBertAttention, query, key, value, attention_mask, **kwargs):
    """ModernBERT's eager attention after each key/value head is repeated for its query heads (``repeat_kv``)."""
    groups = module.num_key_value_groups
    return eager_attention_forward(
        module, query, repeat_kv(key, groups), repeat_kv(value, groups), attention_mask, **kwargs
    )


class CrammedEncoder(nn.Module):
    """The encoder pass shared by the masked LM and the classifier: embeddings and their norm, the layers
    with RoPE and an additive padding mask, the final norm. Returns hidden states (B, N, d_model)."""

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        backbone = self.backbone()
        hidden = backbone.embeddings(input_ids=input_ids)
        mask = additive_mask(attention_mask, hidden.dtype)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        rotary = backbone.rotary_emb(hidden, positions, "full_attention")
        for layer in backbone.layers:
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary)
        return backbone.final_norm(hidden)

    def backbone(self) -> nn.Module:
        raise NotImplementedError


class CrammedMaskedLM(CrammedEncoder):
    """ModernBERT's masked LM in cramming's layout: token logits (B, N, vocab)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.lm = ModernBertForMaskedLM(crammed_bert_config(spec))
        self.lm.head = nn.Identity()  # cramming's skip_head_transform: the final norm feeds the decoder
        if spec.resolved_num_kv_heads != spec.num_heads:  # grouped-query attention in every layer
            for index, layer in enumerate(self.lm.model.layers):
                layer.attn = GroupedQueryModernBertAttention(self.lm.config, index, spec.num_kv_heads)
                layer.attn.apply(self.lm._init_weights)

    def backbone(self) -> nn.Module:
        return self.lm.model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.lm.decoder(self.encode(input_ids, attention_mask))

    def classifier(self, num_labels: int) -> CrammedClassifier:
        """A sequence classifier with a copy of this encoder's weights (the model itself is left as it is)."""
        return CrammedClassifier(copy.deepcopy(self.lm.model), num_labels)


class CrammedClassifier(CrammedEncoder):
    """The pretrained encoder, its [CLS] position's final state (cramming's GLUE ``pooler: zero_index``), then
    ModernBERT's prediction head (dense, GELU, norm), dropout and a linear layer to ``num_labels`` outputs
    (1 for a regression such as STS-B). Returns (B, num_labels)."""

    def __init__(self, encoder: nn.Module, num_labels: int):
        super().__init__()
        self.encoder = encoder
        config = encoder.config
        self.head = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        for module in (self.head.dense, self.classifier):
            nn.init.normal_(module.weight, std=config.initializer_range)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def backbone(self) -> nn.Module:
        return self.encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        first = self.encode(input_ids, attention_mask)[:, 0]
        return self.classifier(self.drop(self.head(first)))


def build_crammed_bert(spec: ModelSpec) -> nn.Module:
    return CrammedMaskedLM(spec)


def reference_crammed_bert_params(spec: ModelSpec) -> int:
    """HF's own ModernBertForMaskedLM of this config (its attention: the reference holds without grouping),
    on the meta device, less its prediction head, which cramming's layout skips."""
    with torch.device("meta"):
        stock = ModernBertForMaskedLM(crammed_bert_config(spec))
    return stock_params(stock) - stock_params(stock.head)


def crammed_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each layer's ``attn`` (Wqkv and Wo), in depth order."""
    return [(f"model.layers.{i}.attn", layer.attn) for i, layer in enumerate(model.backbone().layers)]


def crammed_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"model.layers.{i}.mlp", layer.mlp) for i, layer in enumerate(model.backbone().layers)]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rope_float64(x: torch.Tensor, theta: float) -> torch.Tensor:
    """RoPE in its rotate-half form on (heads, N, d) at positions 0 … N-1, in float64: x·cos + rotate_half(x)·sin
    with angle position · θ^(-2j/d) for j < d/2, repeated for the second half."""
    tokens, dim = x.shape[-2], x.shape[-1]
    inverse = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=x.device) / dim)
    angles = torch.arange(tokens, dtype=torch.float64, device=x.device)[:, None] * inverse
    angles = torch.cat((angles, angles), dim=-1)
    return x * angles.cos() + rotate_half(x) * angles.sin()


def crammed_block(attention: nn.Module, hidden: torch.Tensor, n_samples: int, mask: torch.Tensor) -> PerImageBlocks:
    """A per sample, as the module docstring defines it, in float64; one (1, N_i, h·d) block per sample."""
    heads, head_dim = attention.config.num_attention_heads, attention.head_dim
    theta = attention.config.rope_parameters["full_attention"]["rope_theta"]
    weight = attention.Wqkv.weight.double()
    kv_width = (weight.shape[0] - heads * head_dim) // 2  # kv heads · d; h · d without grouping
    groups = heads * head_dim // kv_width  # query head i reads kv head ⌊i / groups⌋
    blocks = []
    for sample, keep in zip(hidden, mask, strict=True):
        qkv = sample[keep].double() @ weight.T  # (N, (h + 2·kv)·d), no bias
        q, k, v = (
            part.view(len(part), -1, head_dim).transpose(0, 1)
            for part in qkv.split([heads * head_dim, kv_width, kv_width], dim=-1)
        )
        k, v = k.repeat_interleave(groups, dim=0), v.repeat_interleave(groups, dim=0)
        attended = softmax_attention(rope_float64(q, theta), rope_float64(k, theta), v, head_dim**-0.5)
        blocks.append(concat_heads(attended).unsqueeze(0))
    return PerImageBlocks(blocks)


def crammed_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [
        KappaLayer(name, "self", module, crammed_block, needs_mask=True)
        for name, module in crammed_attention_layers(model)
    ]


CRAMMED_BERT = Family(
    name="crammed_bert",
    **FAMILY_RULES["crammed_bert"].family_fields(),
    description=FAMILY_DESCRIPTIONS["crammed_bert"],
    build=build_crammed_bert,
    attention_layers=crammed_attention_layers,
    mlp_layers=crammed_mlp_layers,
    kappa_layers=crammed_kappa_layers,
    num_tokens=sequence_tokens,
    reference_params=reference_crammed_bert_params,
    example_input=sequence_input,
    example=dict(depth=2, num_heads=4, embed_dim=32, mlp_dim=48, seq_len=16, vocab_size=60, num_classes=60),
)
