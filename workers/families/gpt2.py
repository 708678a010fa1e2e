"""GPT-2 (Radford et al. 2019) as a causal language model, from HF ``transformers`` (``GPT2Config``,
``GPT2LMHeadModel``), with head_dim settable apart from d_model for the width control.

Shapes: depth (n_layer), num_heads (n_head), embed_dim (n_embd), mlp_dim (n_inner), ``dropout`` (HF's
resid, embd and attn dropout, default 0); seq_len (n_positions) and vocab_size come from the data. The
output layer is tied to the token embedding, as in GPT-2, unless ``tie_embeddings`` is false (then it is a
vocab × n_embd matrix of its own, no bias, as HF's untied ``lm_head``).

head_dim: HF's ``GPT2Attention`` derives it as n_embd / n_head. A different one is built with a small
subclass, :class:`FixedHeadDimGPT2Attention`, put in place of each block's attention and initialised as
HF initialises GPT-2 (normal 0.02, output projection scaled by 1/√(2·n_layer)): q, k and v map n_embd to
n_head · head_dim and the output projection maps that back, nothing else changes. With head_dim equal to
n_embd / n_head the model is HF's own GPT-2, parameter for parameter.

The model takes packed windows (every position is a real token), so no padding mask is passed: HF builds
the causal mask itself. Its output is next-token logits (B, N, vocab).

κ definition (kind ``causal``), per block and per probe window of N tokens:
    Q_i, K_i, V_i ∈ R^{N×d}   head i's query, key and value (c_attn's split)
    A_i = softmax(mask(Q_i K_iᵀ / √d)) V_i, mask: position t attends to positions ≤ t
    A = [A_1 … A_h] ∈ R^{N×h·d}   (before the output projection c_proj)
A is recomputed in float64 from the block's input and its weights.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention
from transformers.pytorch_utils import Conv1D

from workers.config import ModelSpec
from workers.families.base import Family, KappaLayer, SpecProblem, concat_heads
from workers.families.sequence import sequence_input, sequence_tokens


class FixedHeadDimGPT2Attention(GPT2Attention):
    """GPT-2's attention with ``head_dim`` channels per head whatever n_embd is: c_attn maps n_embd to
    3 · n_head · head_dim, c_proj maps n_head · head_dim back to n_embd. HF's forward reads ``split_size``,
    ``head_dim`` and ``scaling``, which are set here."""

    def __init__(self, config: GPT2Config, layer_idx: int, head_dim: int):
        # HF's __init__ insists that n_head divide n_embd: run it with one head, then set the real geometry.
        super().__init__(one_head(config), layer_idx=layer_idx)
        self.config, self.num_heads = config, config.n_head
        width = self.num_heads * head_dim
        self.head_dim, self.split_size = head_dim, width
        self.scaling = head_dim**-0.5 if config.scale_attn_weights else 1.0
        self.c_attn = Conv1D(3 * width, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, width)


class CausalLM(nn.Module):
    """An HF causal LM that takes the tool's inputs dict and returns next-token logits (B, N, vocab)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        # Packed windows have no padding: the mask is all ones, and HF's causal mask is all that is needed.
        # HF's own cache stays on: without a cache and a mask, HF inspects position ids for packed
        # sequences, reading tensor values that FLOP counting on the meta device does not have.
        return self.lm(input_ids=input_ids).logits

    def generate(self, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Exactly ``new_tokens`` more ids after ``input_ids`` (B, P), greedy, with HF's KV cache."""
        return self.lm.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
        )


def gpt2_config(spec: ModelSpec) -> GPT2Config:
    dropout = spec.dropout or 0.0
    return GPT2Config(
        vocab_size=spec.vocab_size,
        n_positions=spec.seq_len,
        n_embd=spec.embed_dim,
        n_layer=spec.depth,
        n_head=spec.num_heads,
        n_inner=spec.mlp_dim,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        tie_word_embeddings=spec.tie_embeddings is not False,
        bos_token_id=None,  # GPT-2's 50256 is outside a smaller vocabulary; the data set owns its tokens
        eos_token_id=None,
    )


def one_head(config: GPT2Config) -> GPT2Config:
    """A copy of ``config`` with one head, which HF's GPT-2 modules accept whatever n_embd is."""
    single = copy.deepcopy(config)
    single.n_head = 1
    return single


def build_gpt2(spec: ModelSpec) -> nn.Module:
    config = gpt2_config(spec)
    if spec.head_dim is None or spec.head_dim * spec.num_heads == spec.embed_dim:
        return CausalLM(GPT2LMHeadModel(config))
    lm = GPT2LMHeadModel(one_head(config))  # every block's attention is replaced below
    lm.config.n_head = spec.num_heads
    for index, block in enumerate(lm.transformer.h):
        block.attn = FixedHeadDimGPT2Attention(lm.config, index, spec.head_dim)
        block.attn.apply(lm._init_weights)
    return CausalLM(lm)


def check_gpt2(spec: ModelSpec) -> list[SpecProblem]:
    problems = []
    if spec.seq_len is None or spec.vocab_size is None:
        problems.append(
            SpecProblem(
                "seq_len",
                spec.seq_len,
                "gpt2 is a language model, so the data set must give seq_len and vocab_size",
                "use a language-model data set (data.name: mqar or tinystories)",
            )
        )
    if spec.head_dim is None and spec.embed_dim % spec.num_heads:
        problems.append(SpecProblem("num_heads", spec.num_heads, "must divide embed_dim", "or set head_dim"))
    return problems


def gpt2_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``attn`` (c_attn for q, k, v; c_proj), in depth order."""
    return [(f"transformer.h.{i}.attn", block.attn) for i, block in enumerate(model.lm.transformer.h)]


def gpt2_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"transformer.h.{i}.mlp", block.mlp) for i, block in enumerate(model.lm.transformer.h)]


def causal_block(attention: GPT2Attention, hidden: torch.Tensor, n_windows: int) -> torch.Tensor:
    """A per window, as the module docstring defines it, in float64: (windows, 1, N, h·d)."""
    batch, tokens, _ = hidden.shape
    qkv = hidden.double() @ attention.c_attn.weight.double() + attention.c_attn.bias.double()  # Conv1D: x W + b
    q, k, v = (
        part.view(batch, tokens, attention.num_heads, attention.head_dim).transpose(1, 2)
        for part in qkv.split(attention.split_size, dim=-1)
    )
    scores = (q @ k.transpose(-2, -1)) * attention.scaling
    future = torch.ones(tokens, tokens, dtype=torch.bool, device=hidden.device).triu(1)
    weights = torch.softmax(scores.masked_fill(future, -math.inf), dim=-1)
    return concat_heads(weights @ v).unsqueeze(1)


def gpt2_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [KappaLayer(name, "causal", module, causal_block) for name, module in gpt2_attention_layers(model)]


GPT2 = Family(
    name="gpt2",
    description="GPT-2 causal language model (HF transformers), Radford et al. 2019; head_dim settable",
    build=build_gpt2,
    attention_layers=gpt2_attention_layers,
    mlp_layers=gpt2_mlp_layers,
    kappa_layers=gpt2_kappa_layers,
    num_tokens=sequence_tokens,
    accepts=("head_dim", "seq_len", "vocab_size", "dropout", "tie_embeddings", "conditioning", "conditioning_weight"),
    check=check_gpt2,
    modality="causal_lm",
    example_input=sequence_input,
)
