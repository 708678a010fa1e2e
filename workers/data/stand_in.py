"""Stand-in data: random batches with the shapes, dtypes and value ranges a data set gives a model, built from
its config alone (``DataSetSpec.model_fields_from_data``: image size, channels and classes, or sequence
length, vocabulary and classes), with no file read and no download.

``sweep preflight --stand-in-data`` runs a config's training step and probes on these where the data lives on
the cluster, not on the machine that checks: a model, dtype or probe error shows on random numbers as it
would on the real data; a missing file or a loader's error does not (the preflight's data row says so).

Per modality (``DataSetSpec.modality``), B samples per batch, every draw from one generator seeded 0:

- ``image``: inputs (B, in_chans, img_size, img_size) float32 from N(0, 1), the range of normalised pixels;
  labels (B,) int64, uniform over the classes;
- ``sequence``: ``{"input_ids": (B, seq_len) int64 uniform over the vocabulary, "attention_mask": (B, seq_len)
  int64, 1 on each row's first n positions, n uniform in [seq_len // 2, seq_len], 0 after}``; labels (B,);
- ``causal_lm``: the mask all ones; labels (B, seq_len), a token id at every position;
- ``masked_lm``: the mask all ones; labels a token id where a position is masked (probability
  ``MASKED_SHARE``, at least one per row), -100 elsewhere; and each GLUE task of ``data.glue.tasks``, with
  ``rows`` training and dev rows of random ids, lengths and labels over the task's classes (float scores in
  [0, 5] for STS-B), batched by the same code as the real tasks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from workers.data.base import DataMeta, DataSetSpec
from workers.data.glue import get_task
from workers.data.glue_encoding import GlueArrays, glue_batches
from workers.data.splits import IGNORE_INDEX

if TYPE_CHECKING:  # torch is imported where batches are made: validating a space needs none
    import torch

IDENTITY = "stand-in: random batches of the data set's shapes"  # the trial's data_identity: never real data
MASKED_SHARE = 0.25  # cramming's mask_prob; how many labels a masked-LM batch scores changes no shape


class StandInData:
    """The in-memory data a trial opens instead of the data set (``workers.data.registry.open_batches``
    builds :class:`StandInBatches` from it on the trial's device)."""

    def __init__(self, spec: DataSetSpec, rows: int):
        self.spec, self.rows = spec, rows

    def open(self, device: torch.device) -> StandInBatches:
        return StandInBatches(self.spec, device, self.rows)


class StandInBatches:
    """A ``workers.data.base.BatchSource`` of ``rows`` random training and held-out samples (the module
    docstring defines them), held on ``device``."""

    def __init__(self, spec: DataSetSpec, device: torch.device, rows: int):
        import torch

        self.modality = spec.modality
        self.fields = spec.model_fields_from_data()
        self.rows, self.device = rows, device
        self.generator = torch.Generator().manual_seed(0)
        self.train = self._split()
        self.val = self._split()
        tasks = spec.glue_options.tasks if self.modality == "masked_lm" else []
        self.glue = {task: self._glue_task(task) for task in tasks}

    # --- what the model reads -------------------------------------------------------------------------------

    @property
    def meta(self) -> DataMeta:
        f = self.fields
        if self.modality == "image":
            return DataMeta(f["num_classes"], f["in_chans"], f["img_size"], self.rows, self.rows, identity=IDENTITY)
        return DataMeta(f["num_classes"], 1, 1, self.rows, self.rows, f["seq_len"], f["vocab_size"], identity=IDENTITY)

    def steps_per_epoch(self, batch_size: int) -> int:
        return self.rows // batch_size

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        import torch

        order = torch.randperm(self.rows, generator=generator)
        for start in range(0, self.rows // batch_size * batch_size, batch_size):
            yield self._take(self.train, order[start : start + batch_size])

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        for start in range(0, self.rows, batch_size):
            yield self._take(self.val, slice(start, start + batch_size))

    def probe_images(self, count: int):
        return self._take(self.val, slice(0, count))[0]

    # --- GLUE, for masked language models -------------------------------------------------------------------

    @property
    def glue_tasks(self) -> list[str]:
        return list(self.glue)

    def glue_arrays(self, task: str) -> GlueArrays:
        return self.glue[task]

    def glue_batches(self, task: str, split, batch_size: int, generator: torch.Generator | None = None):
        return glue_batches(self.glue[task], split, batch_size, self.device, generator)

    # --- drawing --------------------------------------------------------------------------------------------

    def _draw_int(self, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        import torch

        return torch.randint(0, high, shape, generator=self.generator)

    def _split(self) -> tuple:
        """(inputs, labels) of ``rows`` samples, on the device."""
        import torch

        n, f = self.rows, self.fields
        if self.modality == "image":
            size = f["img_size"]
            images = torch.randn((n, f["in_chans"], size, size), generator=self.generator)
            return images.to(self.device), self._draw_int(f["num_classes"], (n,)).to(self.device)
        seq_len, vocab = f["seq_len"], f["vocab_size"]
        ids = self._draw_int(vocab, (n, seq_len))
        mask = torch.ones((n, seq_len), dtype=torch.int64)
        if self.modality == "sequence":
            lengths = torch.randint(seq_len // 2, seq_len + 1, (n,), generator=self.generator)
            mask = (torch.arange(seq_len) < lengths[:, None]).to(torch.int64)
            labels = self._draw_int(f["num_classes"], (n,))
        elif self.modality == "causal_lm":
            labels = self._draw_int(vocab, (n, seq_len))
        else:
            labels = self._masked_labels(ids)
        inputs = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
        return inputs, labels.to(self.device)

    def _masked_labels(self, ids: torch.Tensor) -> torch.Tensor:
        import torch

        masked = torch.rand(ids.shape, generator=self.generator) < MASKED_SHARE
        masked[:, 0] = True  # a row with nothing scored would make the mean loss 0/0
        return torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))

    def _take(self, split: tuple, index) -> tuple:
        inputs, labels = split
        if isinstance(inputs, dict):
            return {name: tensor[index] for name, tensor in inputs.items()}, labels[index]
        return inputs[index], labels[index]

    def _glue_task(self, name: str) -> GlueArrays:
        task, n, seq_len = get_task(name), self.rows, self.fields["seq_len"]
        rng = np.random.default_rng(0)

        def labels() -> np.ndarray:
            if task.is_regression:
                return rng.uniform(0.0, 5.0, n).astype(np.float32)
            return rng.integers(0, task.num_labels, n, dtype=np.int64)

        def ids() -> np.ndarray:
            return rng.integers(0, self.fields["vocab_size"], (n, seq_len), dtype=np.int64)

        def lengths() -> np.ndarray:
            return rng.integers(2, seq_len + 1, n, dtype=np.int64).astype(np.int32)

        return GlueArrays(name, task.metric, task.num_labels, ids(), lengths(), labels(), ids(), lengths(), labels(), 0)
