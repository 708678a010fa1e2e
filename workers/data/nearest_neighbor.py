"""Nearest-neighbour retrieval, generated here: the target of Amsel, Yehudai & Bruna 2025 ("Quality over
Quantity in Attention Layers: When Adding More Heads Hurts", ICLR 2025, arXiv 2407.16153). Their target maps
points on the unit sphere to the point nearest a query (largest inner product); one attention head of full
rank (its W_Q W_Kᵀ of rank d) represents it, while heads of rank r < d need a number of heads exponential in
d - r (their Theorems 2-3), and their Section 7 experiments (transformer encoders, H = d / r heads) show
accuracy falling as heads are added at fixed d. Written for token inputs here: the points are the rows of a
fixed random codebook, one per token, which the model must learn from the answers. Nothing is downloaded.

With V tokens, codebook dimension m (``code_dim``), N candidates (``num_candidates``) and L = ``data.seq_len``:

- codebook: u_t for every token t, i.i.d. standard normal in R^m, scaled to unit length, drawn from
  ``default_rng([seed, 2])`` (shared by both splits; streams 0 and 1 are the rows');
- positions 0 … N-1: candidates, N distinct tokens, uniform;
- positions N … L-1: queries, L - N distinct tokens, uniform among those that are not candidates;
- **scored positions**: every query position, labelled with the candidate t that maximises ⟨u_query, u_t⟩
  (its nearest neighbour on the sphere): L - N answers per row. The label elsewhere is -100.

The task is a nearest-neighbour search in an m-dimensional space: a head whose query-key product has rank
≥ m can score every candidate by ⟨u_query, u_t⟩; a rank-r head with r < m scores through an r-dimensional
projection, which orders the candidates wrongly for part of the queries. Chance: the in-context guess, one of
the N candidates (:meth:`NearestNeighborData.outcomes`: N, so 100 / N percent). Rules: N ≥ 2, L > N, L ≤ V.
Rows are built in seeded blocks (``workers/data/generated.py``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from workers.data.generated import BlockMaker, GeneratedLMData, GeneratedSpec, distinct_per_row, unscored

CODEBOOK_STREAM = 2  # the codebook's generator: default_rng([seed, CODEBOOK_STREAM])


class NearestNeighborSpec(GeneratedSpec):
    """The generator's options (``data.nearest_neighbor``); the length is ``data.seq_len``."""

    vocab_size: int = Field(default=64, ge=3)
    code_dim: int = Field(default=16, ge=1, description="m: the dimension of the sphere the tokens sit on")
    num_candidates: int = Field(default=8, ge=2, description="N: candidates first, the queries after them")


def codebook(options: NearestNeighborSpec) -> np.ndarray:
    """(V, m) float64: each token's point on the unit sphere S^{m-1}."""
    points = np.random.default_rng([options.seed, CODEBOOK_STREAM]).standard_normal(
        (options.vocab_size, options.code_dim)
    )
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def nearest_neighbor_block(rng: np.random.Generator, rows: int, seq_len: int, options: NearestNeighborSpec, points):
    """One block of rows as the module docstring defines them: (ids, labels), both (rows, seq_len) int64;
    ``points`` is :func:`codebook`'s."""
    n = options.num_candidates
    ids = distinct_per_row(rng, rows, options.vocab_size, seq_len)  # candidates, then queries: all distinct
    candidates, queries = ids[:, :n], ids[:, n:]
    similarity = np.einsum("rqm,rcm->rqc", points[queries], points[candidates])
    labels = unscored(rows, seq_len)
    labels[:, n:] = np.take_along_axis(candidates, similarity.argmax(axis=2), axis=1)
    return ids, labels


class NearestNeighborData(GeneratedLMData):
    """``data: {name: nearest_neighbor, seq_len: L, nearest_neighbor: {…}}`` (None: the defaults)."""

    name: Literal["nearest_neighbor"] = "nearest_neighbor"
    nearest_neighbor: NearestNeighborSpec | None = Field(default=None, description="generator options")

    @model_validator(mode="after")
    def _shape_possible(self) -> NearestNeighborData:
        n, vocab = self.options.num_candidates, self.options.vocab_size
        if not n < self.seq_len <= vocab:
            raise ValueError(
                f"nearest_neighbor: num_candidates < seq_len <= vocab_size must hold (at least one query; every "
                f"token of a row distinct), but got (num_candidates={n}, seq_len={self.seq_len}, vocab_size={vocab})"
            )
        return self

    @property
    def options(self) -> NearestNeighborSpec:
        return self.nearest_neighbor or NearestNeighborSpec()

    def vocab_size(self) -> int:
        return self.options.vocab_size

    def block_maker(self) -> BlockMaker:
        points = codebook(self.options)
        return lambda rng, rows: nearest_neighbor_block(rng, rows, self.seq_len, self.options, points)

    def outcomes(self) -> float:
        """The in-context guess: one of the N candidates."""
        return self.options.num_candidates
