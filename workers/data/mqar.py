"""Multi-query associative recall, generated here: a language-model task with a label per token. Nothing is
downloaded; not cached (generating is about as fast as reading a cache would be).

**MQAR** (multi-query associative recall; Arora, Eyuboglu et al. 2023, *Zoology: Measuring and Improving
Recall in Efficient Language Models*, arXiv 2312.04927; the generator follows the rules of Zoology's
``zoology/data/multiquery_ar.py``, ``multiquery_ar``, written again here with a numpy ``Generator``).
With vocabulary size V, ``num_kv_pairs`` = k and sequence length L (``data.seq_len``, the input length):

- *keys* are k distinct tokens from 1 … V//2 - 1 (0 is never a key), *values* k distinct tokens from
  V//2 … V-1, both uniform without replacement, and the i-th key is paired with the i-th value;
- positions 0 … 2k-1 are the context: ``key_1 value_1 key_2 value_2 … key_k value_k``;
- the rest, positions 2k … L-1, is the query region. Every key is queried exactly once there, at position
  ``2k + 2·g`` for a *gap* g from 0 … S-1, S = (L - 2k) // 2. The k gaps are drawn one after another
  without replacement, each with P(g) ∝ (g + 1)^(power_a - 1) among the gaps not yet drawn (Zoology's power
  law: ``power_a`` = 1 is uniform, Zoology's default 0.01 favours queries soon after the context), and the
  i-th gap drawn is the i-th key's, as in Zoology (so for power_a < 1 earlier pairs tend to be queried
  sooner);
- every other query-region position holds a uniform random token from 0 … V-1 (Zoology's
  ``random_non_queries``; such a token may equal a key, and is not scored);
- **scored positions**: exactly the k query positions, whose label is the value paired with the key
  there (the model reads the key and must answer its value); every other label is -100.

Rules (Zoology's): L even, 4k ≤ L (so S ≥ k), k ≤ V//2 - 1. Zoology also asserts V > L; nothing here needs
it, so it is not required. Defaults (:class:`MQARSpec`): Zoology's k = 8, power_a = 0.01, 100,000
train and 3,000 val rows, but V = 256 (Zoology: 8,192) so that CPU models stay small. Rows are generated in
blocks of ``MQAR_BLOCK_ROWS``, block b of split s from ``numpy.random.default_rng([seed, s, b])`` (train s = 0,
val s = 1): deterministic given the seed, train and val independent, any number of rows, and a smaller
``train_rows`` is a prefix of a larger one. Vectorised numpy: distinct keys and values by Floyd's algorithm
across the rows of a block, the gaps by the Gumbel-top-k trick (the k largest of log-weight + Gumbel noise,
in descending order, are distributed exactly as k draws one at a time without replacement, in draw
order). Not cached: generating is about as fast as reading a cache would be (see **Speed**).

**Speed** (this machine, 2 CPU cores shared with other work, Python 3.11, best of 3): MQAR at L = 64, k = 8,
V = 256: about 500,000 rows/s (Zoology's 100,000 training rows in 0.2 s); L = 256, k = 16, V = 8,192: about
140,000 rows/s; L = 512, k = 64, V = 8,192: about 40,000 rows/s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data.base import BatchSource, LanguageDataSpec, keep_first_rows
from workers.data.splits import IGNORE_INDEX, LMSplits, smallest_uint

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

MQAR_DEFAULT_VOCAB_SIZE = 256  # small, for CPU runs; Zoology's default is 8,192


MQAR_BLOCK_ROWS = 4096  # rows per generator block: each block has its own seeded Generator
TRAIN_STREAM, VAL_STREAM = 0, 1


def _distinct(rng: np.random.Generator, rows: int, low: int, high: int, count: int) -> np.ndarray:
    """(rows, count) int64: per row ``count`` distinct integers from low … high-1, a uniform subset in uniform
    order. Floyd's algorithm, vectorised over the rows (a boolean "taken" table per block), then shuffled."""
    n = high - low
    taken = np.zeros((rows, n), dtype=bool)
    out = np.empty((rows, count), dtype=np.int64)
    index = np.arange(rows)
    for step, j in enumerate(range(n - count, n)):
        draw = rng.integers(0, j + 1, size=rows)
        pick = np.where(taken[index, draw], j, draw)  # j itself is never taken yet: every pick so far is < j
        taken[index, pick] = True
        out[:, step] = pick
    return rng.permuted(out, axis=1) + low


def _mqar_block(
    rng: np.random.Generator, rows: int, seq_len: int, vocab_size: int, num_kv_pairs: int, power_a: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block of MQAR rows, as the module docstring defines them: ``(ids, positions, values)``, ids
    (rows, seq_len) in :func:`smallest_uint`, and per row the k query positions and the value scored at each
    (the labels are -100 elsewhere)."""
    half, k = vocab_size // 2, num_kv_pairs
    dtype = smallest_uint(vocab_size)
    keys = _distinct(rng, rows, 1, half, k)
    values = _distinct(rng, rows, half, vocab_size, k)
    space = (seq_len - 2 * k) // 2
    log_weights = (power_a - 1.0) * np.log(np.arange(1, space + 1, dtype=np.float64))
    scores = log_weights + rng.gumbel(size=(rows, space))  # Gumbel-top-k: k gaps without replacement
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    gaps = np.take_along_axis(top, order, axis=1)  # in draw order: the i-th drawn gap is the i-th key's
    ids = rng.integers(0, vocab_size, size=(rows, seq_len), dtype=dtype)  # filler; context and queries go over it
    ids[:, 0 : 2 * k : 2] = keys
    ids[:, 1 : 2 * k : 2] = values
    positions = 2 * k + 2 * gaps
    np.put_along_axis(ids, positions, keys.astype(dtype), axis=1)
    return ids, positions, values


def generate_mqar(
    rows: int,
    seq_len: int,
    *,
    vocab_size: int = MQAR_DEFAULT_VOCAB_SIZE,
    num_kv_pairs: int = 8,
    power_a: float = 0.01,
    seed: int = 0,
    stream: int = TRAIN_STREAM,
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` MQAR sequences: ids (rows, seq_len) in :func:`smallest_uint`, labels (rows, seq_len) int64
    with ``IGNORE_INDEX`` where not scored. ``stream`` separates splits (0 train, 1 val) under one seed."""
    check_mqar(vocab_size, num_kv_pairs, seq_len)
    if rows < 0 or seed < 0 or stream < 0 or power_a <= 0:
        raise ValueError(
            f"mqar: rows >= 0, seed >= 0, stream >= 0 and power_a > 0 must hold, but got (rows={rows}, "
            f"seed={seed}, stream={stream}, power_a={power_a})"
        )
    ids = np.empty((rows, seq_len), dtype=smallest_uint(vocab_size))
    labels = np.full((rows, seq_len), IGNORE_INDEX, dtype=np.int64)
    for block, start in enumerate(range(0, rows, MQAR_BLOCK_ROWS)):
        rng = np.random.default_rng([seed, stream, block])  # always a whole block: a prefix is the same rows
        block_ids, positions, values = _mqar_block(rng, MQAR_BLOCK_ROWS, seq_len, vocab_size, num_kv_pairs, power_a)
        count = min(MQAR_BLOCK_ROWS, rows - start)
        ids[start : start + count] = block_ids[:count]
        np.put_along_axis(labels[start : start + count], positions[:count], values[:count], axis=1)
    return ids, labels


def mqar_splits(options: MQARSpec, seq_len: int) -> dict[str, np.ndarray]:
    """``{"train_ids", "train_labels", "val_ids", "val_labels"}`` for ``options`` at ``seq_len``."""
    arrays = {}
    for split, rows, stream in (("train", options.train_rows, TRAIN_STREAM), ("val", options.val_rows, VAL_STREAM)):
        ids, labels = generate_mqar(
            rows,
            seq_len,
            vocab_size=options.vocab_size,
            num_kv_pairs=options.num_kv_pairs,
            power_a=options.power_a,
            seed=options.seed,
            stream=stream,
        )
        arrays[f"{split}_ids"], arrays[f"{split}_labels"] = ids, labels
    return arrays


# --- the data set ---------------------------------------------------------------------------------------


def check_mqar(vocab_size: int, num_kv_pairs: int, seq_len: int) -> None:
    """``ValueError`` stating the rule and the values when MQAR sequences of this shape cannot be built."""
    if seq_len % 2:
        raise ValueError(f"mqar: seq_len must be even (Zoology's rule), but got (seq_len={seq_len})")
    if 4 * num_kv_pairs > seq_len:
        raise ValueError(
            "mqar: 4 * num_kv_pairs <= seq_len must hold (the context of 2k tokens and k query slots, 2 tokens "
            f"apart, must fit), but got (num_kv_pairs={num_kv_pairs}, seq_len={seq_len})"
        )
    if num_kv_pairs > vocab_size // 2 - 1:
        raise ValueError(
            "mqar: num_kv_pairs <= vocab_size // 2 - 1 must hold (distinct keys from 1 … vocab_size//2 - 1), "
            f"but got (num_kv_pairs={num_kv_pairs}, vocab_size={vocab_size})"
        )


class MQARSpec(StrictModel):
    """The generator's options (``data.mqar``). The defaults are Zoology's except ``vocab_size`` (Zoology:
    8,192; 256 here keeps CPU models small). ``seed`` is the data set's generation seed, shared by every
    trial; the sequence length is ``data.seq_len``."""

    vocab_size: int = Field(default=MQAR_DEFAULT_VOCAB_SIZE, ge=4, description="keys: 1 … V/2-1, values: V/2 … V-1")
    num_kv_pairs: int = Field(default=8, ge=1, description="key-value pairs at the start of each sequence")
    power_a: float = Field(default=0.01, gt=0.0, description="gap of each query: P(gap g) ∝ (g+1)^(power_a-1)")
    train_rows: int = Field(default=100_000, ge=1)
    val_rows: int = Field(default=3_000, ge=1)
    seed: int = Field(default=0, ge=0, description="generation seed of the data set, shared by every trial")


class MQARData(LanguageDataSpec):
    """``data: {name: mqar, seq_len: L, mqar: {…}}`` (``mqar`` None: :class:`MQARSpec`'s defaults).
    ``limit_train`` / ``limit_val`` keep the first rows."""

    name: Literal["mqar"] = "mqar"
    mqar: MQARSpec | None = Field(default=None, description="generator options; None means MQARSpec()'s defaults")

    @model_validator(mode="after")
    def _shape_possible(self) -> MQARData:
        options = self.options
        check_mqar(options.vocab_size, options.num_kv_pairs, self.seq_len)
        return self

    @property
    def options(self) -> MQARSpec:
        return self.mqar or MQARSpec()

    def vocab_size(self) -> int:
        return self.options.vocab_size

    def outcomes(self) -> float:
        """MQAR's chance is the in-context guess, not uniform over the vocabulary: a model without the recall
        circuit still learns that an answer is one of the k values in the context (k = ``num_kv_pairs``), so
        it scores 100 / k percent (2 pairs: 50%) and ln(k) nats. Okpekpe & Orvieto's "1 layer does not beat
        chance" means this level."""
        return self.options.num_kv_pairs

    def load_arrays(self) -> LMSplits:
        arrays = mqar_splits(self.options, self.seq_len)
        splits = LMSplits(
            "mqar",
            arrays["train_ids"],
            arrays["train_labels"],
            arrays["val_ids"],
            arrays["val_labels"],
            self.options.vocab_size,
            self.seq_len,
        )
        return keep_first_rows(splits, self)

    def open_batches(self, device: torch.device, arrays: LMSplits | None = None) -> BatchSource:
        from workers.data.batches import LMBatches  # imports torch

        return LMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
