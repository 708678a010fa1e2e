"""The GLUE tasks encoded for fine-tuning a masked-LM encoder (``data.glue``; Crammed BERT): where the tasks
are read from (``workers/data/glue.py``), and each example as ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``,
a and b encoded without special tokens, truncated longest-first to ``seq_len`` and right-padded with
``[PAD]`` (:func:`encode_glue_examples`). Not cached: about 40,000 examples/s at seq_len 128 on this
machine's 2 shared cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data import glue as glue_files
from workers.data.base import DataNotFoundError
from workers.data.cache import cache_dir
from workers.data.hub import HubSource, HubSplits
from workers.data.splits import smallest_uint
from workers.data.text.documents import ENCODE_BATCH
from workers.data.text.streams import encode_texts
from workers.data.text.tokenizer import TextTokenizer

if TYPE_CHECKING:  # torch is imported where batches are made: validating a space needs none
    import torch

CRAMMING_GLUE_TASKS = ("mnli", "mnli_mm", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte")  # cramming: no WNLI


class GlueSpec(StrictModel):
    """The GLUE tasks a pretrained encoder is fine-tuned and scored on (``data.glue``; ``workers/data/glue.py``,
    ``workers/finetune.py``).

    ``root``: the ``glue_data`` folder (``<TASK>/{train,dev}.tsv``), or ``$GLUE_DIR``. ``tasks``: cramming's
    eight tasks with MNLI's matched and mismatched dev sets counted apart (their GLUE average). ``generated``:
    write the generated ``synthetic`` task (``generated_train_rows`` / ``generated_dev_rows``) under the cache
    instead of reading a root; it only checks that the pipeline runs. ``limit_train`` / ``limit_dev``: keep
    the first rows of each task's split."""

    root: str | None = None
    hub: HubSource | None = Field(default=None, description="read the tasks from the Hub (repo default nyu-mll/glue)")
    tasks: Annotated[list[str], Field(min_length=1)] = Field(default_factory=lambda: list(CRAMMING_GLUE_TASKS))
    generated: bool = False
    generated_train_rows: int = Field(default=2000, ge=2)
    generated_dev_rows: int = Field(default=500, ge=2)
    limit_train: int | None = Field(default=None, ge=1)
    limit_dev: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _known_tasks(self) -> GlueSpec:
        unknown = [task for task in self.tasks if task not in glue_files.GLUE_TASKS]
        if unknown:
            raise ValueError(f"unknown GLUE tasks {unknown}; known: {', '.join(glue_files.GLUE_TASKS)}")
        if self.generated and self.tasks != ["synthetic"]:
            raise ValueError(
                f"generated GLUE data is the one task 'synthetic', but got (tasks={self.tasks}); "
                "set tasks: [synthetic], or generated: false and a root"
            )
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks must be unique, but got {self.tasks}")
        if self.hub is not None and (self.generated or self.root is not None):
            raise ValueError("glue: hub reads the tasks from the Hub; leave out root and generated with it")
        return self


@dataclass(frozen=True)
class GlueArrays:
    """One GLUE task encoded for fine-tuning. ``ids_*``: (N, seq_len) in the smallest unsigned type that holds
    the vocabulary, ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` then ``[PAD]``; ``lengths_*``: int32 (N,),
    real tokens per row; ``labels_*``: int64 class indices, or float32 scores for STS-B (``num_labels`` 1).
    ``metric`` is the task's GLUE metric (``workers.data.glue``); ``skipped_rows`` counts the rows of both files
    dropped for having too few columns."""

    task: str
    metric: str
    num_labels: int
    ids_train: np.ndarray
    lengths_train: np.ndarray
    labels_train: np.ndarray
    ids_dev: np.ndarray
    lengths_dev: np.ndarray
    labels_dev: np.ndarray
    skipped_rows: int

    @property
    def is_regression(self) -> bool:
        """True for STS-B: float labels and one output."""
        return self.labels_train.dtype.kind == "f"


def glue_batches(
    arrays: GlueArrays,
    split: Literal["train", "dev"],
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> Iterator[tuple]:
    """Batches of one split of an encoded task: ``({"input_ids": (B, seq_len) int64, "attention_mask":
    (B, seq_len) int64, 1 on the first lengths[i] positions, 0 after}, labels (B,))`` on ``device``, labels
    int64 (float32 for STS-B). Shuffled by ``generator`` when given, else in order; the last batch possibly
    smaller."""
    import torch

    if split not in ("train", "dev"):
        raise ValueError(f"GLUE split must be 'train' or 'dev', but got {split!r}")
    ids, lengths, labels = (getattr(arrays, f"{name}_{split}") for name in ("ids", "lengths", "labels"))
    positions = torch.arange(ids.shape[1], device=device)
    order = torch.randperm(len(ids), generator=generator).numpy() if generator is not None else None
    for start in range(0, len(ids), batch_size):
        index = order[start : start + batch_size] if order is not None else slice(start, start + batch_size)
        batch_ids = torch.as_tensor(ids[index].astype(np.int64), device=device)
        batch_lengths = torch.as_tensor(lengths[index].astype(np.int64), device=device)
        mask = (positions < batch_lengths[:, None]).to(torch.int64)
        yield {"input_ids": batch_ids, "attention_mask": mask}, torch.as_tensor(labels[index], device=device)


def truncate_pair(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """Tokens kept of a and b when at most ``budget`` fit, longest-first: one token at a time is dropped
    from the end of the longer of the two (of b when they are equal) until ``kept_a + kept_b <= budget``.
    The closed form of that loop: the shorter side is kept whole when it fits in half the budget, else a
    keeps ⌈budget/2⌉ and b ⌊budget/2⌋."""
    if len_a + len_b <= budget:
        return len_a, len_b
    if len_a > len_b and budget - len_b >= len_b:
        return budget - len_b, len_b
    if len_b >= len_a and budget - len_a >= len_a:
        return len_a, budget - len_a
    return (budget + 1) // 2, budget // 2


def encode_glue_examples(
    tokenizer: TextTokenizer, text_a: list[str], text_b: list[str] | None, seq_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids (N, seq_len) in the smallest unsigned type, lengths int32 (N,)): each example as
    ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` (a and b encoded without special tokens), a and b cut by
    :func:`truncate_pair` (a alone: its first tokens) so the whole fits ``seq_len``, then ``[PAD]``."""
    specials = tokenizer.bert_ids
    extra = 2 if text_b is None else 3
    if seq_len < extra + 1:
        raise ValueError(
            f"mlm_corpus: GLUE examples need seq_len >= {extra + 1} ([CLS], [SEP]s and a token), but got "
            f"(seq_len={seq_len})"
        )
    ids = np.full((len(text_a), seq_len), specials.pad, dtype=smallest_uint(tokenizer.vocab_size))
    lengths = np.zeros(len(text_a), dtype=np.int32)
    for start in range(0, len(text_a), ENCODE_BATCH):
        batch_a = encode_texts(tokenizer.tokenizer, text_a[start : start + ENCODE_BATCH])
        batch_b = None if text_b is None else encode_texts(tokenizer.tokenizer, text_b[start : start + ENCODE_BATCH])
        for offset, a in enumerate(batch_a):
            if batch_b is None:
                row = [specials.cls, *a[: seq_len - extra], specials.sep]
            else:
                b = batch_b[offset]
                keep_a, keep_b = truncate_pair(len(a), len(b), seq_len - extra)
                row = [specials.cls, *a[:keep_a], specials.sep, *b[:keep_b], specials.sep]
            ids[start + offset, : len(row)] = row
            lengths[start + offset] = len(row)
    return ids, lengths


def generated_glue_root(glue: GlueSpec, seed: int, folder: Path | None = None) -> Path:
    """Write the generated task ``synthetic`` under ``<folder>/glue-generated-<train>-<dev>-<seed>`` (folder:
    ``$SWEEP_CACHE_DIR/mlm_corpus``) and return that GLUE root."""
    folder = folder if folder is not None else cache_dir("mlm_corpus")
    root = folder / f"glue-generated-{glue.generated_train_rows}-{glue.generated_dev_rows}-{seed}"
    glue_files.write_generated_glue(root, glue.generated_train_rows, glue.generated_dev_rows, seed=seed)
    return root


def _encoded_split(read, task: str, split: str, limit: int | None, tokenizer: TextTokenizer, seq_len: int):
    """(ids, lengths, labels, skipped rows) of one split of one task, its first ``limit`` rows; ``read(task,
    split)`` gives its examples."""
    examples = read(task, split)
    text_a = examples.text_a[:limit]
    text_b = examples.text_b[:limit] if examples.text_b is not None else None
    ids, lengths = encode_glue_examples(tokenizer, text_a, text_b, seq_len)
    return ids, lengths, examples.labels[:limit], examples.skipped_rows


def load_glue_arrays(
    glue: GlueSpec, tokenizer: TextTokenizer, seq_len: int, seed: int, folder: Path | None = None
) -> dict[str, GlueArrays]:
    """Every task of ``glue.tasks``, in that order, encoded by :func:`encode_glue_examples`; read from
    ``glue.root`` or ``$GLUE_DIR``, or the generated task written under ``folder`` with ``seed``. Tasks with
    the same training file (``mnli``, ``mnli_mm``) share one encoding of it."""
    read = glue_reader(glue, seed, folder)
    trains: dict[tuple[str, str], tuple] = {}
    arrays = {}
    for name in glue.tasks:
        task = glue_files.get_task(name)
        source = (task.directory, task.train_file)
        if source not in trains:
            trains[source] = _encoded_split(read, name, "train", glue.limit_train, tokenizer, seq_len)
        train = trains[source]
        dev = _encoded_split(read, name, "dev", glue.limit_dev, tokenizer, seq_len)
        arrays[name] = GlueArrays(name, task.metric, task.num_labels, *train[:3], *dev[:3], train[3] + dev[3])
    return arrays


def glue_reader(glue: GlueSpec, seed: int, folder: Path | None):
    """``read(task, split) -> GlueExamples`` for where the tasks are: the Hub, the generated task (written
    under ``folder`` with ``seed``), or ``glue.root`` / ``$GLUE_DIR``."""
    if glue.hub is not None:
        hub = glue_hub(glue)
        return lambda task, split: glue_files.read_hub_split(hub, task, split)
    root = generated_glue_root(glue, seed, folder) if glue.generated else glue_files.glue_root(glue.root)
    return lambda task, split: glue_files.read_glue_split(root, task, split)


def glue_hub(glue: GlueSpec) -> HubSplits:
    return HubSplits(glue.hub.repo or glue_files.HUB_REPO, glue.hub, "glue")


def require_glue(glue: GlueSpec) -> None:
    """:class:`DataNotFoundError` naming the first missing GLUE file (or the unset root); nothing for the
    generated task, which is written at load, nor for the Hub's, read through the datasets cache."""
    if glue.generated or glue.hub is not None:
        return
    try:
        root = glue_files.glue_root(glue.root)
    except FileNotFoundError as exc:
        raise DataNotFoundError(f"mlm_corpus: {exc}") from None
    for name in glue.tasks:
        for split in glue_files.SPLITS:
            path = glue_files.split_path(root, name, split)
            if not path.is_file():
                raise DataNotFoundError(
                    f"mlm_corpus: the GLUE file {path} ({name}, {split}) does not exist; set `data.glue.root` or "
                    f"${glue_files.GLUE_ROOT_ENV} to the glue_data folder (<TASK>/train.tsv, dev.tsv; MNLI: "
                    "dev_matched.tsv, dev_mismatched.tsv), or drop the task from data.glue.tasks. "
                    "Nothing is downloaded."
                )
