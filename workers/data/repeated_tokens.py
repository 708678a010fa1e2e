"""Repeated random tokens, generated here: the copying task that induction heads solve (Olsson, Elhage, Nanda
et al. 2022, "In-context Learning and Induction Heads", Transformer Circuits Thread; their test of induction
is a sequence of random tokens repeated, on which a model with an induction head predicts the second copy
from the first: "[A][B] … [A] → [B]"). Elhage et al. 2021 ("A Mathematical Framework for Transformer
Circuits") show why one attention layer cannot do it: the head must find the token *after* the earlier copy
of the current token, which takes a previous-token head in one layer composed with a match-and-copy head in
the next (K-composition). Nothing is downloaded.

Each row, with vocabulary V, length L (``data.seq_len``) and a period T drawn uniformly from ``min_period``
… ``max_period`` per row (T varies so that no fixed positional offset gives the answer: a one-layer model
could otherwise copy from position p - T + 1 with a positional head):

- x = T distinct tokens, uniform among the V;
- positions 0 … L-2T-1: filler, uniform among the tokens not in x (so every token of x occurs exactly twice
  and its earlier copy is unambiguous);
- positions L-2T … L-T-1: x; positions L-T … L-1: x again;
- **scored positions**: the second copy's positions L-T+j for j = 0 … T-2, each labelled x_{j+1} (the next
  token, which only the first copy tells); T-1 answers per row. The label elsewhere is -100.

Chance: without the circuit the answer is still one of the T tokens of x, so the in-context guess is about
1/T; :meth:`RepeatedTokensData.outcomes` gives T at the mean period (100 / T percent). A model without an induction
head can still do better than that: the rows end at a fixed position, so the answer sits T - 1 places back for
one of the few periods, and it is a first-copy token not yet repeated (one block reached 47.5% where this
guess is 12.5%: search_spaces/known_induction_two_layers.yaml). Rules: 2 · max_period ≤ L,
max_period < V, 2 ≤ min_period ≤ max_period. Rows are built in seeded blocks (``workers/data/generated.py``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from workers.data.generated import BlockMaker, GeneratedLMData, GeneratedSpec, distinct_per_row, unscored


class RepeatedTokensSpec(GeneratedSpec):
    """The generator's options (``data.repeated_tokens``); the length is ``data.seq_len``."""

    vocab_size: int = Field(default=64, ge=3)
    min_period: int = Field(default=6, ge=2, description="shortest repeated sequence T")
    max_period: int = Field(default=16, ge=2, description="longest repeated sequence T (2T <= seq_len)")


def repeated_tokens_block(rng: np.random.Generator, rows: int, seq_len: int, options: RepeatedTokensSpec):
    """One block of rows as the module docstring defines them: (ids, labels), both (rows, seq_len) int64."""
    vocab, low, high = options.vocab_size, options.min_period, options.max_period
    order = distinct_per_row(rng, rows, vocab, vocab)  # per row a permutation: x first, the filler's tokens after
    periods = rng.integers(low, high + 1, size=rows)
    starts = seq_len - 2 * periods  # where the first copy begins
    position = np.arange(seq_len)[None, :]
    offset = position - starts[:, None]  # position relative to the first copy
    in_copies = offset >= 0
    index_in_x = np.where(in_copies, offset % periods[:, None], 0)
    filler_choice = periods[:, None] + (rng.random((rows, seq_len)) * (vocab - periods[:, None])).astype(np.int64)
    take = np.where(in_copies, index_in_x, filler_choice)
    ids = np.take_along_axis(order, take, axis=1)
    labels = unscored(rows, seq_len)
    second = offset >= periods[:, None]  # positions of the second copy
    scored = second & (index_in_x < periods[:, None] - 1)
    next_token = np.take_along_axis(order, np.minimum(index_in_x + 1, vocab - 1), axis=1)
    labels[scored] = next_token[scored]
    return ids, labels


def check_repeated_tokens(options: RepeatedTokensSpec, seq_len: int) -> None:
    """``ValueError`` stating the rule and the values when rows of this shape cannot be built."""
    low, high, vocab = options.min_period, options.max_period, options.vocab_size
    if low > high:
        raise ValueError(f"repeated_tokens: min_period <= max_period must hold, but got ({low}, {high}); swap them")
    if 2 * high > seq_len:
        raise ValueError(
            f"repeated_tokens: 2 * max_period <= seq_len must hold (two copies fit), but got (max_period={high}, "
            f"seq_len={seq_len}); lower max_period or raise seq_len"
        )
    if high >= vocab:
        raise ValueError(
            f"repeated_tokens: max_period < vocab_size must hold (distinct tokens, and one left for filler), but "
            f"got (max_period={high}, vocab_size={vocab})"
        )


class RepeatedTokensData(GeneratedLMData):
    """``data: {name: repeated_tokens, seq_len: L, repeated_tokens: {…}}`` (None: the defaults)."""

    name: Literal["repeated_tokens"] = "repeated_tokens"
    repeated_tokens: RepeatedTokensSpec | None = Field(default=None, description="generator options")

    @model_validator(mode="after")
    def _shape_possible(self) -> RepeatedTokensData:
        check_repeated_tokens(self.options, self.seq_len)
        return self

    @property
    def options(self) -> RepeatedTokensSpec:
        return self.repeated_tokens or RepeatedTokensSpec()

    def vocab_size(self) -> int:
        return self.options.vocab_size

    def block_maker(self) -> BlockMaker:
        return lambda rng, rows: repeated_tokens_block(rng, rows, self.seq_len, self.options)

    def outcomes(self) -> float:
        """The in-context guess: one of the T tokens of x, at the mean period T̄ = (min + max) / 2."""
        return (self.options.min_period + self.options.max_period) / 2
