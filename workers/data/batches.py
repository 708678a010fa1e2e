"""Batch sources for data held in memory: the whole split lives on the trial's device and batches are cut
(and augmented) there, which keeps small-image and token training from being bound by a DataLoader. Each
implements ``workers.data.base.BatchSource``.

- :class:`TensorBatches`: images from :class:`~workers.data.splits.ArraySplits`, normalised float32;
- :class:`SequenceBatches`: token sequences to classify, with a padding mask;
- :class:`TokenWindowBatches`: token windows with a label per token, no padding; :class:`LMBatches` (causal
  LM) and ``workers.data.mlm_batches.MLMBatches`` (masked LM) differ only in where a training batch's labels
  come from.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from workers.data.base import DataMeta, DataSetSpec, SequenceDataSpec, require_same_length
from workers.data.splits import ArraySplits, LMSplits, SequenceSplits


def epoch_indices(count: int, batch_size: int, generator: torch.Generator, device: torch.device) -> Iterator:
    """One epoch's batches of sample indices, on ``device``: a permutation of ``count`` drawn from ``generator``
    (the trial seed) cut into ``count // batch_size`` batches, the ragged last one dropped, so every step has
    the same shape."""
    order = torch.randperm(count, generator=generator).to(device)
    for start in range(0, count // batch_size * batch_size, batch_size):
        yield order[start : start + batch_size]


class TensorBatches:
    """Batches from in-memory splits, held on the trial's device as normalised float32."""

    def __init__(self, splits: ArraySplits, spec: DataSetSpec, device: torch.device):
        self.splits = splits
        self.img_size = spec.img_size or splits.native_size
        self.device = device
        self.x_train = self._prepare(splits.x_train)
        self.y_train = torch.as_tensor(splits.y_train, device=device)
        self.x_val = self._prepare(splits.x_val)
        self.y_val = torch.as_tensor(splits.y_val, device=device)

    def _prepare(self, images: np.ndarray) -> torch.Tensor:
        x = torch.as_tensor(images, device=self.device).float().div_(255.0)
        if self.img_size != x.shape[-1]:
            x = F.interpolate(x, size=(self.img_size, self.img_size), mode="bilinear", align_corners=False)
        mean = torch.tensor(self.splits.mean, device=self.device).view(1, -1, 1, 1)
        std = torch.tensor(self.splits.std, device=self.device).view(1, -1, 1, 1)
        return (x - mean) / std

    @property
    def meta(self) -> DataMeta:
        return DataMeta(
            self.splits.num_classes, self.splits.in_chans, self.img_size, len(self.y_train), len(self.y_val)
        )

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.y_train) // batch_size  # drop the ragged last batch: every step the same shape

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        """One epoch of shuffled training batches; the order comes from ``generator`` (the trial seed)."""
        for index in epoch_indices(len(self.y_train), batch_size, generator, self.device):
            images = self.x_train[index]
            if self.splits.augment:
                images = random_crop_flip(images, generator)
            yield images, self.y_train[index]

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        for start in range(0, len(self.y_val), batch_size):
            yield self.x_val[start : start + batch_size], self.y_val[start : start + batch_size]

    def probe_images(self, count: int) -> torch.Tensor:
        """The first ``count`` validation images: a fixed batch, the same for every trial and epoch."""
        return self.x_val[:count]


class SequenceBatches:
    """Batches of token sequences from :class:`SequenceSplits`, held on the trial's device (ids in their
    compact storage type, widened to int64 per batch; lengths, from which each batch's attention mask is
    computed). Inputs are dicts
    ``{"input_ids": (B, seq_len) int64, "attention_mask": (B, seq_len) int64, 1 real token, 0 padding}``."""

    def __init__(self, splits: SequenceSplits, spec: SequenceDataSpec, device: torch.device):
        require_same_length(splits, spec)
        self.splits = splits
        self.device = device
        self.ids_train = torch.as_tensor(splits.ids_train, device=device)
        self.lengths_train = torch.as_tensor(splits.lengths_train, dtype=torch.long, device=device)
        self.y_train = torch.as_tensor(splits.y_train, dtype=torch.long, device=device)
        self.ids_val = torch.as_tensor(splits.ids_eval, device=device)
        self.lengths_val = torch.as_tensor(splits.lengths_eval, dtype=torch.long, device=device)
        self.y_val = torch.as_tensor(splits.y_eval, dtype=torch.long, device=device)
        self.positions = torch.arange(splits.seq_len, device=device)

    def _inputs(self, ids: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"input_ids": ids.long(), "attention_mask": (self.positions < lengths[:, None]).long()}

    @property
    def meta(self) -> DataMeta:
        s = self.splits
        return DataMeta(s.num_classes, 1, 1, len(self.y_train), len(self.y_val), s.seq_len, s.vocab_size)

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.y_train) // batch_size  # drop the ragged last batch: every step the same shape

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        """One epoch of shuffled training batches; the order comes from ``generator`` (the trial seed)."""
        for index in epoch_indices(len(self.y_train), batch_size, generator, self.device):
            yield self._inputs(self.ids_train[index], self.lengths_train[index]), self.y_train[index]

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        """The eval split (``data.eval_split``) in order, the last batch possibly smaller."""
        for start in range(0, len(self.y_val), batch_size):
            window = slice(start, start + batch_size)
            yield self._inputs(self.ids_val[window], self.lengths_val[window]), self.y_val[window]

    def probe_images(self, count: int) -> dict[str, torch.Tensor]:
        """The first ``count`` eval rows: a fixed batch, the same for every trial and epoch."""
        return self._inputs(self.ids_val[:count], self.lengths_val[:count])


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random crop after zero padding by ``pad`` pixels, and horizontal flip with probability ½.

    One offset and one flip decision per batch keeps it a few tensor ops on the device; the offsets still
    differ every step. (Per-image offsets would need a gather per image.)
    """
    size = images.shape[-1]
    padded = F.pad(images, (pad, pad, pad, pad))
    top, left = torch.randint(0, 2 * pad + 1, (2,), generator=generator).tolist()
    cropped = padded[..., top : top + size, left : left + size]
    if torch.rand((), generator=generator).item() < 0.5:
        cropped = cropped.flip(-1)
    return cropped


class TokenWindowBatches:
    """Batches of token windows held on the trial's device (ids in their compact type, widened to int64 per
    batch). Inputs are dicts ``{"input_ids": (B, seq_len) int64, "attention_mask": (B, seq_len) int64, all 1}``
    (no padding); labels are (B, seq_len) int64, -100 where not scored. The held-out windows and their labels
    are fixed; a subclass says how a training batch gets its labels (:meth:`training_batch`)."""

    def __init__(self, splits, spec: SequenceDataSpec, device: torch.device):
        require_same_length(splits, spec)
        self.splits = splits
        self.device = device
        self.ids_train = self._ids(splits.ids_train)
        self.ids_val = self._ids(splits.ids_eval)
        self.y_val = torch.as_tensor(splits.labels_eval, dtype=torch.long, device=device)
        self._ones: dict[int, torch.Tensor] = {}

    def _ids(self, ids: np.ndarray) -> torch.Tensor:
        # uint8 stays (every backend indexes it); wider unsigned ids become int32, which every device indexes
        return torch.as_tensor(ids if ids.dtype == np.uint8 else ids.astype(np.int32), device=self.device)

    def _inputs(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        rows = len(ids)
        if rows not in self._ones:
            self._ones[rows] = torch.ones((rows, self.splits.seq_len), dtype=torch.long, device=self.device)
        return {"input_ids": ids.long(), "attention_mask": self._ones[rows]}

    @property
    def meta(self) -> DataMeta:
        s = self.splits
        return DataMeta(
            s.num_classes, 1, 1, len(self.ids_train), len(self.y_val), s.seq_len, s.num_classes, s.tokenizer
        )

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.ids_train) // batch_size  # drop the ragged last batch: every step the same shape

    def training_batch(self, index: torch.Tensor, generator: torch.Generator) -> tuple:
        """(inputs, labels) of the training windows at ``index``."""
        raise NotImplementedError

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        """One epoch of shuffled training windows; the order comes from ``generator`` (the trial seed)."""
        for index in epoch_indices(len(self.ids_train), batch_size, generator, self.device):
            yield self.training_batch(index, generator)

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        """The held-out windows in order, the last batch possibly smaller."""
        for start in range(0, len(self.y_val), batch_size):
            window = slice(start, start + batch_size)
            yield self._inputs(self.ids_val[window]), self.y_val[window]

    def probe_images(self, count: int) -> dict[str, torch.Tensor]:
        """The first ``count`` held-out windows: a fixed batch, the same for every trial and epoch."""
        return self._inputs(self.ids_val[:count])


class LMBatches(TokenWindowBatches):
    """Causal-LM windows from :class:`~workers.data.splits.LMSplits`: every label is stored, training ones
    included (the next token at each position, or -100)."""

    def __init__(self, splits: LMSplits, spec: SequenceDataSpec, device: torch.device):
        super().__init__(splits, spec, device)
        self.y_train = torch.as_tensor(splits.labels_train, dtype=torch.long, device=device)

    def training_batch(self, index: torch.Tensor, generator: torch.Generator) -> tuple:
        return self._inputs(self.ids_train[index]), self.y_train[index]
