"""Data sets held in memory, as plain numpy: what the driver loads once and shares through Ray's object store,
and what each trial's batch source (``workers/data/batches.py``) moves to its device.

- :class:`ArraySplits`: images (digits, CIFAR);
- :class:`SequenceSplits`: token sequences to classify (ListOps);
- :class:`LMSplits`: token windows with a label per token (MQAR, TinyStories);
- ``workers.data.mlm_corpus.MLMSplits``: masked-LM windows and the GLUE tasks (Crammed BERT).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

IGNORE_INDEX = -100  # a label that is not scored (as torch's CrossEntropyLoss ignore_index)


def smallest_uint(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds ids 0 … vocab_size - 1."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


@dataclass(frozen=True)
class ArraySplits:
    """A whole data set in memory: images as uint8 (N, C, H, W), labels as int64 (N,).

    Plain numpy, so it can be put in Ray's object store once and read by every trial without a copy.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    augment: bool  # random crop (pad 4 px) and horizontal flip on training batches

    @property
    def in_chans(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def native_size(self) -> int:
        return int(self.x_train.shape[2])

    def first_rows(self, train: int | None, val: int | None) -> ArraySplits:
        """The first ``train`` training and ``val`` held-out images (None: all), for quick checks."""
        return dataclasses.replace(
            self,
            x_train=self.x_train[:train],
            y_train=self.y_train[:train],
            x_val=self.x_val[:val],
            y_val=self.y_val[:val],
        )


@dataclass(frozen=True)
class SequenceSplits:
    """A token-sequence data set in memory (ListOps), plain numpy like :class:`ArraySplits`.

    ``ids_*``: (N, seq_len) token ids, each row's first ``seq_len`` ids then 0 (padding), stored as uint8
    when the vocabulary fits (it does for ListOps: 8× less to hold and to share than int64); ``lengths_*``:
    int64 (N,), real tokens per row after truncation (the attention mask is ``position < length``);
    ``y_*``: int64 (N,) labels 0 … num_classes-1. ``*_train`` is the training split, ``*_eval`` the held-out
    split named by ``eval_split`` (``val`` or ``test``) that the headline metric is scored on. Token ids are
    ``workers.data.listops``'s fixed vocabulary (``vocab_size`` ids, 0 pads).
    """

    name: str
    ids_train: np.ndarray
    lengths_train: np.ndarray
    y_train: np.ndarray
    ids_eval: np.ndarray
    lengths_eval: np.ndarray
    y_eval: np.ndarray
    eval_split: str
    seq_len: int
    vocab_size: int
    num_classes: int

    def __post_init__(self):
        if self.vocab_size <= 256:  # ids 0 … 255 fit a byte; batches are widened to int64 on the device
            object.__setattr__(self, "ids_train", np.asarray(self.ids_train, dtype=np.uint8))
            object.__setattr__(self, "ids_eval", np.asarray(self.ids_eval, dtype=np.uint8))


@dataclass(frozen=True)
class LMSplits:
    """A language-model data set in memory (MQAR, TinyStories), plain numpy like :class:`SequenceSplits`.

    ``ids_*``: (N, seq_len) token ids in the smallest unsigned type that holds ``vocab_size`` ids;
    ``labels_*``: int64 (N, seq_len), the token to predict at each position, ``IGNORE_INDEX`` (-100)
    where nothing is scored. No padding: every position is a real token. ``*_train`` is the training split,
    ``*_eval`` the held-out ``val`` split. ``tokenizer`` describes the tokenizer (TinyStories:
    ``file:<path>`` or ``trained:bytelevel-bpe-<V>-<hash>``; None for generated ids)."""

    name: str
    ids_train: np.ndarray
    labels_train: np.ndarray
    ids_eval: np.ndarray
    labels_eval: np.ndarray
    vocab_size: int
    seq_len: int
    tokenizer: str | None = None
    eval_split: str = "val"

    def __post_init__(self):
        dtype = smallest_uint(self.vocab_size)
        for name in ("ids_train", "ids_eval"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        for name in ("labels_train", "labels_eval"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))

    @property
    def num_classes(self) -> int:
        return self.vocab_size  # one class per token id
