"""What the generated token tasks share (``repeated_tokens``, ``index_lookup``, ``nearest_neighbor``): rows built
in seeded blocks, so a data set is deterministic given its seed, train and val are independent streams, and a
smaller ``train_rows`` is a prefix of a larger one; and the language-model data set class that serves them.

Each task's module defines its options (a :class:`GeneratedSpec`), a function that builds one block of rows
from a ``numpy.random.Generator``, and its data set class (a :class:`GeneratedLMData`). Labels follow the
language-model convention of ``workers/data/splits.py``: ``labels[p]`` is what the model must output at
position p (it sees positions 0 … p), ``IGNORE_INDEX`` (-100) where nothing is scored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from workers.config import StrictModel
from workers.data.base import BatchSource, LanguageDataSpec, keep_first_rows
from workers.data.splits import IGNORE_INDEX, LMSplits, smallest_uint

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

BLOCK_ROWS = 4096  # rows per generator block: block b of stream s from numpy.random.default_rng([seed, s, b])
TRAIN_STREAM, VAL_STREAM = 0, 1

# (rng, rows) -> (ids (rows, seq_len) int64, labels (rows, seq_len) int64 with IGNORE_INDEX where not scored)
BlockMaker = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


class GeneratedSpec(StrictModel):
    """Options every generated task has: how many rows of each split, and the generation seed."""

    train_rows: int = Field(default=50_000, ge=1)
    val_rows: int = Field(default=2_000, ge=1)
    seed: int = Field(default=0, ge=0, description="generation seed of the data set, shared by every trial")


def generate_rows(make_block: BlockMaker, rows: int, seed: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` rows of a task, block by block: always whole blocks of :data:`BLOCK_ROWS` (so that fewer rows
    are a prefix of more), each from its own ``default_rng([seed, stream, block])``."""
    if rows < 0 or seed < 0 or stream < 0:
        raise ValueError(f"rows, seed and stream must be >= 0, but got (rows={rows}, seed={seed}, stream={stream})")
    id_blocks, label_blocks = [], []
    for block, start in enumerate(range(0, rows, BLOCK_ROWS)):
        ids, labels = make_block(np.random.default_rng([seed, stream, block]), BLOCK_ROWS)
        count = min(BLOCK_ROWS, rows - start)
        id_blocks.append(ids[:count])
        label_blocks.append(labels[:count])
    if not id_blocks:
        return np.empty((0, 0), dtype=np.int64), np.empty((0, 0), dtype=np.int64)
    return np.concatenate(id_blocks), np.concatenate(label_blocks)


def distinct_per_row(rng: np.random.Generator, rows: int, vocab_size: int, count: int) -> np.ndarray:
    """(rows, count) int64: per row ``count`` distinct tokens of 0 … vocab_size-1, uniform, in uniform order
    (the first ``count`` of a uniform random permutation of the vocabulary)."""
    return np.argsort(rng.random((rows, vocab_size)), axis=1)[:, :count]


def unscored(rows: int, seq_len: int) -> np.ndarray:
    """Labels with nothing scored yet: (rows, seq_len) of ``IGNORE_INDEX``."""
    return np.full((rows, seq_len), IGNORE_INDEX, dtype=np.int64)


class GeneratedLMData(LanguageDataSpec):
    """A generated task served as a causal language model. Subclasses give ``name``, their options field,
    :meth:`options`, :meth:`vocab_size` and :meth:`block_maker`."""

    @property
    def options(self) -> GeneratedSpec:
        raise NotImplementedError

    def block_maker(self) -> BlockMaker:
        raise NotImplementedError

    def load_arrays(self) -> LMSplits:
        options, make_block = self.options, self.block_maker()
        train_ids, train_labels = generate_rows(make_block, options.train_rows, options.seed, TRAIN_STREAM)
        val_ids, val_labels = generate_rows(make_block, options.val_rows, options.seed, VAL_STREAM)
        dtype = smallest_uint(self.vocab_size())
        splits = LMSplits(
            self.name,
            train_ids.astype(dtype),
            train_labels,
            val_ids.astype(dtype),
            val_labels,
            self.vocab_size(),
            self.seq_len,
        )
        return keep_first_rows(splits, self)

    def open_batches(self, device: torch.device, arrays: LMSplits | None = None) -> BatchSource:
        from workers.data.batches import LMBatches  # imports torch

        return LMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
