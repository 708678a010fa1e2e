"""GPT-2 (Radford et al. 2019) as a causal language model, from HF ``transformers`` (``GPT2Config``,
``GPT2LMHeadModel``), with head_dim settable apart from d_model for the width control, and grouped-query
attention (``num_kv_heads``).

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

num_kv_heads (grouped-query attention, Ainslie et al. 2023, "GQA"): kv key/value heads, kv dividing h, each
shared by the h/kv query heads of its group (kv = 1 is multi-query attention). Built with
:class:`GroupedQueryGPT2Attention`: c_attn maps n_embd to (h + 2·kv) · head_dim (q, then k, then v), and
HF's KV cache in ``generate`` holds kv heads, not h: 2 · depth · kv · head_dim numbers per token of context.
Initialised as HF initialises GPT-2. num_kv_heads unset or equal to h is HF's own GPT-2, unchanged.
Closed forms per block, C = n_embd, d = head_dim, N = tokens in the window (tests check them):
    attention parameters   C·(h+2kv)·d + (h+2kv)·d  (c_attn, bias)  +  h·d·C + C  (c_proj, bias)
    attention forward FLOPs per token (matmuls, 2 per multiply-add)
                           2·C·(h+2kv)·d (c_attn) + 2·N·h·d (Q Kᵀ) + 2·N·h·d (P V) + 2·h·d·C (c_proj)
Grouping saves only the k and v projections' 4·C·(h−kv)·d FLOPs per token and their parameters: every
query head still scores every key (the causal mask skips nothing in these kernels). What it saves at
decoding time is cache: 2·kv·d numbers per token per block instead of 2·h·d, read at every generated token.

κ definition (kind ``causal``), per block and per probe window of N tokens:
    Q_i ∈ R^{N×d}   query head i (i = 0 … h-1), c_attn's first h·d outputs
    K_j, V_j ∈ R^{N×d}   key and value head j (j = 0 … kv-1), its next two kv·d
    g(i) = ⌊i / (h/kv)⌋   the key/value head query head i reads (g(i) = i without grouping)
    A_i = softmax(mask(Q_i K_{g(i)}ᵀ / √d)) V_{g(i)}, mask: position t attends to positions ≤ t
    A = [A_1 … A_h] ∈ R^{N×h·d}   (before the output projection c_proj)
With grouping A still has h blocks, one per query head, even where heads share K and V: A is exactly what
c_proj receives (the block's output is A·W_proj), so this κ is that of the same operator as in the MHA
model of equal h and d, and the two compare column for column. The alternative, one block per key/value
head (N × kv·d), would drop the query heads' own contributions (heads sharing V_j still weight it
differently, so their A_i differ) and change A's width with kv, confounding κ with width: Theorem 3.2's
(√D + √N)/(√D − √N) is about D = h·d, the width the output projection reads. Heads of one group weight
the same V_j with their own attention P_i (A_i = P_i V_{g(i)}), so A is generally of full rank as without
grouping; where a group's query heads attend alike (P_i ≈ P_i'), their blocks coincide and κ grows: the
redundancy sharing K/V risks shows in κ, as it should.
A is recomputed in float64 from the block's input and its weights.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.cache_utils import Cache
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention, eager_attention_forward
from transformers.pytorch_utils import Conv1D

from workers.config import ModelSpec
from workers.families import FAMILY_DESCRIPTIONS
from workers.families.base import Family, KappaLayer, concat_heads, stock_params
from workers.families.rules import FAMILY_RULES, check_gpt2  # noqa: F401 (re-exported)
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


class GroupedQueryGPT2Attention(FixedHeadDimGPT2Attention):
    """GPT-2's attention with grouped-query attention (GQA): ``num_kv_heads`` key/value heads, each shared by
    g = n_head / num_kv_heads query heads. c_attn maps n_embd to (n_head + 2 · num_kv_heads) · head_dim
    (q, then k, then v); c_proj maps n_head · head_dim back to n_embd.

    K and V stay at num_kv_heads heads up to the attention function, so HF's KV cache holds only those (that
    is GQA's point). The attention functions expand them: HF's sdpa path reads ``num_key_value_groups`` (as
    Llama's attention does: ``enable_gqa`` or ``repeat_kv``), and the eager path here repeats them before
    GPT-2's own eager function (which knows nothing of groups). Only self-attention: the family builds no
    cross-attention, and ``reorder_and_upcast_attn`` (off in GPT-2's config) is not supported."""

    def __init__(self, config: GPT2Config, layer_idx: int, head_dim: int, num_kv_heads: int):
        super().__init__(config, layer_idx, head_dim)
        if config.reorder_and_upcast_attn:
            raise ValueError("grouped-query GPT-2 attention does not support reorder_and_upcast_attn")
        self.num_kv_heads = num_kv_heads
        self.num_key_value_groups = self.num_heads // num_kv_heads  # read by HF's sdpa_attention_forward
        kv_width = num_kv_heads * head_dim
        self.split_size = [self.num_heads * head_dim, kv_width, kv_width]  # q, k, v along c_attn's output
        self.c_attn = Conv1D(sum(self.split_size), self.embed_dim)

    def forward(
        self,
        hidden_states: torch.Tensor,
        cache: Cache | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch_tokens = hidden_states.shape[:-1]
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=-1)
        query, key, value = (x.view(*batch_tokens, -1, self.head_dim).transpose(1, 2) for x in (query, key, value))
        if cache is not None:  # (B, num_kv_heads, tokens so far, head_dim) each
            key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, grouped_eager_attention)
        output, weights = attend(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attn_dropout.p if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        output = self.c_proj(output.reshape(*output.shape[:-2], -1).contiguous())
        return self.resid_dropout(output), weights


def grouped_eager_attention(module: GroupedQueryGPT2Attention, query, key, value, attention_mask, **kwargs):
    """GPT-2's eager attention after each key/value head is repeated for its group of query heads (Llama's
    ``repeat_kv``: head j of the h expanded ones is kv head ⌊j / g⌋)."""
    groups = module.num_key_value_groups
    return eager_attention_forward(
        module, query, repeat_kv(key, groups), repeat_kv(value, groups), attention_mask, **kwargs
    )


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
    grouped = spec.resolved_num_kv_heads != spec.num_heads
    if not grouped and (spec.head_dim is None or spec.head_dim * spec.num_heads == spec.embed_dim):
        return CausalLM(GPT2LMHeadModel(config))
    lm = GPT2LMHeadModel(one_head(config))  # every block's attention is replaced below
    lm.config.n_head = spec.num_heads
    for index, block in enumerate(lm.transformer.h):
        if grouped:
            block.attn = GroupedQueryGPT2Attention(lm.config, index, spec.resolved_head_dim, spec.num_kv_heads)
        else:
            block.attn = FixedHeadDimGPT2Attention(lm.config, index, spec.head_dim)
        block.attn.apply(lm._init_weights)
    return CausalLM(lm)


def reference_gpt2_params(spec: ModelSpec) -> int:
    """HF's own GPT2LMHeadModel of this config (its attention, whatever head_dim and num_kv_heads say: the
    reference holds for head_dim = embed_dim / num_heads without grouping), on the meta device."""
    with torch.device("meta"):
        return stock_params(GPT2LMHeadModel(gpt2_config(spec)))


def gpt2_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``attn`` (c_attn for q, k, v; c_proj), in depth order."""
    return [(f"transformer.h.{i}.attn", block.attn) for i, block in enumerate(model.lm.transformer.h)]


def gpt2_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(f"transformer.h.{i}.mlp", block.mlp) for i, block in enumerate(model.lm.transformer.h)]


def causal_block(attention: GPT2Attention, hidden: torch.Tensor, n_windows: int) -> torch.Tensor:
    """A per window, as the module docstring defines it, in float64: (windows, 1, N, h·d)."""
    batch, tokens, _ = hidden.shape
    qkv = hidden.double() @ attention.c_attn.weight.double() + attention.c_attn.bias.double()  # Conv1D: x W + b
    q, k, v = (  # k, v: (windows, kv heads, N, d); kv heads = h unless grouped
        part.view(batch, tokens, -1, attention.head_dim).transpose(1, 2)
        for part in qkv.split(attention.split_size, dim=-1)
    )
    groups = attention.num_heads // k.shape[1]  # query head i reads kv head ⌊i / groups⌋
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-2, -1)) * attention.scaling
    future = torch.ones(tokens, tokens, dtype=torch.bool, device=hidden.device).triu(1)
    weights = torch.softmax(scores.masked_fill(future, -math.inf), dim=-1)
    return concat_heads(weights @ v).unsqueeze(1)


def gpt2_kappa_layers(model: nn.Module) -> list[KappaLayer]:
    return [KappaLayer(name, "causal", module, causal_block) for name, module in gpt2_attention_layers(model)]


GPT2 = Family(
    name="gpt2",
    **FAMILY_RULES["gpt2"].family_fields(),
    description=FAMILY_DESCRIPTIONS["gpt2"],
    build=build_gpt2,
    attention_layers=gpt2_attention_layers,
    mlp_layers=gpt2_mlp_layers,
    kappa_layers=gpt2_kappa_layers,
    num_tokens=sequence_tokens,
    reference_params=reference_gpt2_params,
    example_input=sequence_input,
    example=dict(depth=2, num_heads=4, embed_dim=32, mlp_dim=64, seq_len=16, vocab_size=50, num_classes=50),
    output_projections=lambda model: [block.attn.c_proj for block in model.lm.transformer.h],
)
