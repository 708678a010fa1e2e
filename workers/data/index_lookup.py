"""Index lookup, generated here: a task whose attention pattern is a full-rank permutation, for the low-rank
bottleneck of Bhojanapalli, Yun, Rawat, Reddi & Kumar 2020 ("Low-Rank Bottleneck in Multi-head Attention
Models", ICML, arXiv 2002.07028). Their Theorem 1: a head of size d_h < n (n tokens) cannot express every
n × n attention matrix (its score matrix XW_QW_Kᵀ Xᵀ has rank at most d_h), and their experiments (BERT on
LM1B, SQuAD, MNLI; Section 5, Tables 1-2) show that setting the head size to the sequence length, apart from
the number of heads ("fixed head size"), beats the usual d_model / heads at equal heads. Here the attention a
correct model must form is a permutation of n positions: full rank n, so a head of size d_h < n has to shape
it through a rank-d_h score matrix. Nothing is downloaded.

Each row, with n = ``data.seq_len`` / 2 and C content tokens (``content_vocab``):

- positions 0 … n-1: content tokens c_0 … c_{n-1}, uniform among 0 … C-1 (independent, repeats allowed);
- positions n … 2n-1: pointer tokens, C + π(0) … C + π(n-1) for a uniform random permutation π of 0 … n-1
  (pointer token C + i means "the content at position i");
- **scored positions**: every pointer position n + j, labelled c_{π(j)}: n answers per row. The label
  elsewhere is -100.

The vocabulary is C + n (content, then pointers). Chance: without the lookup a model can still answer with
one of the n content tokens in the row, about 1/n (:meth:`IndexLookupData.outcomes`: n, so 100 / n percent).
Rules: seq_len even, ≥ 4. Rows are built in seeded blocks (``workers/data/generated.py``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from workers.data.generated import BlockMaker, GeneratedLMData, GeneratedSpec, distinct_per_row, unscored


class IndexLookupSpec(GeneratedSpec):
    """The generator's options (``data.index_lookup``); the length is ``data.seq_len`` = 2n."""

    content_vocab: int = Field(default=32, ge=2, description="content tokens 0 … C-1; pointers follow them")


def index_lookup_block(rng: np.random.Generator, rows: int, seq_len: int, options: IndexLookupSpec):
    """One block of rows as the module docstring defines them: (ids, labels), both (rows, seq_len) int64."""
    n, content_vocab = seq_len // 2, options.content_vocab
    content = rng.integers(0, content_vocab, size=(rows, n))
    pointers = distinct_per_row(rng, rows, n, n)  # a uniform permutation per row
    ids = np.concatenate([content, content_vocab + pointers], axis=1)
    labels = unscored(rows, seq_len)
    labels[:, n:] = np.take_along_axis(content, pointers, axis=1)
    return ids, labels


class IndexLookupData(GeneratedLMData):
    """``data: {name: index_lookup, seq_len: 2n, index_lookup: {…}}`` (None: the defaults)."""

    name: Literal["index_lookup"] = "index_lookup"
    index_lookup: IndexLookupSpec | None = Field(default=None, description="generator options")

    @model_validator(mode="after")
    def _shape_possible(self) -> IndexLookupData:
        if self.seq_len % 2 or self.seq_len < 4:
            raise ValueError(
                f"index_lookup: seq_len must be even and >= 4 (n content tokens, then n pointers), but got "
                f"(seq_len={self.seq_len})"
            )
        return self

    @property
    def options(self) -> IndexLookupSpec:
        return self.index_lookup or IndexLookupSpec()

    def vocab_size(self) -> int:
        return self.options.content_vocab + self.seq_len // 2

    def block_maker(self) -> BlockMaker:
        return lambda rng, rows: index_lookup_block(rng, rows, self.seq_len, self.options)

    def outcomes(self) -> float:
        """The in-context guess: one of the row's n content tokens (n = seq_len / 2)."""
        return self.seq_len // 2
