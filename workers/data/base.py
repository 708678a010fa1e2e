"""What every data set shares: the config fields and methods each one's spec inherits, the interface of a
batch source, the metadata a model is built from, and the error for data that is not on this machine.

A data set is one pydantic class (its config, ``data:`` in a space) whose methods say how the data is found,
loaded and batched; ``workers/data/registry.py`` lists them. The bases here give the fields and behaviour
that kinds of data sets share:

- :class:`DataSetSpec`: every data set (``root``, ``num_workers``, ``limit_train``, ``limit_val``);
- :class:`ImageDataSpec`: images (``img_size``); the model gets the size, channels and classes;
- :class:`SequenceDataSpec`: token sequences (``seq_len``, ``eval_split``); the model gets the padded length,
  the vocabulary and the classes from the data set.

Nothing here imports a data set module, so each of them can import this one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.metrics import METRICS

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

Modality = Literal["image", "sequence", "causal_lm", "masked_lm"]


class DataNotFoundError(FileNotFoundError):
    """A data set that must be on local disk is not there. The message says where it looked and how to
    point the tool elsewhere; the tool does not download such data."""


@dataclass(frozen=True)
class DataMeta:
    """What the model needs to know about the data: its input shape and number of classes.

    Token sequences set ``seq_len`` (tokens per sample, padding included) and ``vocab_size``; their
    ``in_chans`` and ``img_size`` are placeholders (1), not read for sequence models. ``val_size`` counts the
    held-out split scored (``eval_split``). Language-model data also names its tokenizer (``tokenizer``:
    ``file:<path>`` or ``trained:…``; None for generated ids). ``identity``: what the trial records as
    ``data_identity`` when the batches are not the data set's own (``workers/data/stand_in.py``)."""

    num_classes: int
    in_chans: int
    img_size: int
    train_size: int
    val_size: int
    seq_len: int | None = None
    vocab_size: int | None = None
    tokenizer: str | None = None
    identity: str | None = None  # set by a source other than the data set's own (stand-in data), else None


class BatchSource(Protocol):
    """What the training loop, the probes and data-parallel training read from a data set. Inputs are an
    image tensor (B, C, H, W) or a dict of (B, seq_len) tensors (``workers/batch.py``); labels are (B,) class
    indices, or (B, seq_len) token ids for language models. Every batch is on the trial's device."""

    @property
    def meta(self) -> DataMeta: ...

    def steps_per_epoch(self, batch_size: int) -> int:
        """Training batches per epoch (the ragged last one dropped: every step has the same shape)."""
        ...

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        """One epoch of shuffled (inputs, labels); the order (and augmentation) comes from ``generator``."""
        ...

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        """The held-out split in order, the last batch possibly smaller."""
        ...

    def probe_images(self, count: int) -> Any:
        """The first ``count`` held-out inputs: a fixed batch, the same for every trial and epoch."""
        ...


class DataSetSpec(StrictModel):
    """Fields every data set takes, and the methods each one defines (the registry calls only these).

    ``root`` is where an on-disk data set lives (else its environment variable); ``num_workers`` the
    DataLoader processes of on-disk data sets (None: the trial's CPUs minus one,
    ``workers.data.loading.loader_settings``); ``limit_train`` / ``limit_val`` keep only the first rows of the
    training and held-out splits. ``root`` and ``num_workers`` describe the machine, not the experiment, so
    they are not part of a config's id."""

    modality: ClassVar[Modality]
    root_env: ClassVar[str | None] = None  # the environment variable naming the root, for on-disk data

    root: str | None = None
    num_workers: int | None = Field(
        default=None,
        ge=0,
        description="DataLoader worker processes for on-disk data sets (imagefolder); None: the trial's CPUs "
        "minus one for the training process (workers.data.loading.loader_settings); sweep/trial --data-workers",
    )
    limit_train: int | None = Field(default=None, ge=1, description="use only the first N training samples")
    limit_val: int | None = Field(default=None, ge=1, description="use only the first N held-out samples")

    def model_fields_from_data(self) -> dict:
        """The model fields this data set decides, known without reading it: image size, channels and
        classes, or for token sequences the padded length, vocabulary and classes."""
        raise NotImplementedError

    def known_train_size(self) -> int | None:
        """Training samples per epoch where known without reading the data (before ``limit_train``), for
        ``sweep plan``'s time estimate; None where only reading it would tell."""
        return None

    def outcomes(self) -> float | None:
        """How many equally likely answers a model that learned nothing guesses among: by default the classes
        the head predicts (digits and CIFAR-10: 10, ListOps' 10 values, a language model's vocabulary). A
        data set whose uninformed guess is better than uniform over its classes says so by overriding this
        (MQAR: the k values in the context). A float where it is a mean (repeated_tokens' mean period). Known
        without reading the data, like :meth:`model_fields_from_data`; None where it is not known."""
        classes = self.model_fields_from_data().get("num_classes")
        return classes if classes and classes >= 1 else None

    def chance_score(self, metric: str) -> float | None:
        """The score of a model that learned nothing, in ``metric``'s units: the metric's ``chance`` of
        :meth:`outcomes` (``workers/metrics.py``: top-1 and accuracy 100 / outcomes percent, top-5
        500 / outcomes at most 100, validation loss ln(outcomes) nats, perplexity the outcomes). None for a
        metric with no single chance level (GLUE's average) or a data set whose outcomes are not known."""
        rule = METRICS[metric].chance if metric in METRICS else None
        outcomes = self.outcomes()
        return rule(outcomes) if rule is not None and outcomes is not None else None

    def tiny_copy(self, rows: int) -> DataSetSpec:
        """This data set cut to ``rows`` training and held-out samples (``limit_train`` / ``limit_val``), for a
        check of its loading in seconds (``sweep preflight``); a data set generated here whose full generation
        takes minutes also generates no more than it keeps."""
        return self.model_copy(update={"limit_train": rows, "limit_val": rows})

    def require_local(self) -> Path | None:
        """The data set's root once every file it needs is there (None for embedded or generated data);
        otherwise a :class:`DataNotFoundError` naming the path and how to point elsewhere. Reads nothing,
        so the driver can check in seconds before anything starts."""
        return None

    def load_arrays(self) -> Any:
        """The whole data set in memory (plain numpy, ``workers/data/splits.py``), which the driver loads
        once and shares through Ray's object store; None for data read from disk by each trial."""
        return None

    def open_batches(self, device: torch.device, arrays: Any = None) -> BatchSource:
        """The trial's batch source on ``device``, from ``arrays`` when the driver loaded them."""
        raise NotImplementedError

    def data_identity(self) -> str:
        """What the trial read, for its row: ``folder:<root>#<hash>`` for data on disk (the hash, SHA-256 over
        every file's relative path and size, tells two copies apart without reading them), else
        ``generated:<name>`` (the options are in the config id). Data sets from the Hub say
        ``hub:<repo>@<revision>``."""
        if self.root_env is None:
            return f"generated:{self.name}"
        root = self.resolve_root().resolve()
        return f"folder:{root}#{folder_hash(str(root))}"

    def fetch(self) -> list[str]:
        """Download (or find in the cache) what the data set needs, one line per part: what, rows, bytes and
        where. Data on disk or generated here has nothing to fetch: say where it is read from."""
        where = "generated here" if self.root_env is None else f"read from {self.require_local()}"
        return [f"{self.name}: nothing to fetch ({where})"]

    def resolve_root(self) -> Path:
        """The data root: ``root`` if given, else ``$<root_env>``; a clear error if neither is set."""
        root = self.root or (os.environ.get(self.root_env) if self.root_env else None)
        if not root:
            raise DataNotFoundError(
                f"data set {self.name!r} is read from local disk and no root is set: set `data.root` in the "
                f"config (sweep: --data-root) or the environment variable {self.root_env}. Nothing is downloaded."
            )
        return Path(root).expanduser()

    def optional_root(self) -> Path | None:
        """``root`` or ``$<root_env>``, or None when neither is set (not checked further)."""
        root = self.root or (os.environ.get(self.root_env) if self.root_env else None)
        return Path(root).expanduser() if root else None


class ImageDataSpec(DataSetSpec):
    """An image data set: ``img_size`` resizes (None keeps the native size). ``native`` is (size, channels,
    classes), known without reading the data."""

    modality: ClassVar[Modality] = "image"
    native: ClassVar[tuple[int, int, int]]

    img_size: int | None = Field(default=None, ge=1, description="resize to this; None keeps the native size")

    def classes(self) -> int:
        return self.native[2]

    def model_fields_from_data(self) -> dict:
        size, chans, _ = self.native
        return {"img_size": self.img_size or size, "in_chans": chans, "num_classes": self.classes()}


class SequenceDataSpec(DataSetSpec):
    """A token-sequence data set: ``seq_len`` tokens per sample after truncation and padding, and the
    held-out split the headline metric is scored on (``eval_split``)."""

    modality: ClassVar[Modality] = "sequence"

    seq_len: int | None = Field(default=None, ge=1, description="tokens per sample after truncation and padding")
    eval_split: Literal["val", "test"] = Field(
        default="val", description="the held-out split the headline metric is scored on"
    )

    @model_validator(mode="after")
    def _length_given(self) -> SequenceDataSpec:
        if self.seq_len is None:
            raise ValueError(
                f"seq_len is required for the sequence data set {self.name!r} (tokens per sample after "
                "truncation and padding; LRA uses 2000), but got (seq_len=None)"
            )
        return self


class LanguageDataSpec(SequenceDataSpec):
    """Text or token data with a label per token (causal language modelling unless a data set says masked):
    scored on ``val``, and the model's classes are its vocabulary."""

    modality: ClassVar[Modality] = "causal_lm"

    @model_validator(mode="after")
    def _val_only(self) -> LanguageDataSpec:
        if self.eval_split != "val":
            raise ValueError(
                f"the language-model data sets have a val split only, but got "
                f"(name={self.name!r}, eval_split={self.eval_split!r})"
            )
        return self

    def vocab_size(self) -> int:
        """The vocabulary a model needs, known without reading the data (a tokenizer file may be read)."""
        raise NotImplementedError

    def model_fields_from_data(self) -> dict:
        vocab = self.vocab_size()  # one class per token id
        return {"seq_len": self.seq_len, "vocab_size": vocab, "num_classes": vocab}


@functools.lru_cache(maxsize=8)
def folder_hash(root: str) -> str:
    """SHA-256 (first 16 hex digits) over the sorted relative path and size of every file under ``root``."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(f"{os.path.relpath(path, root)}\t{os.path.getsize(path)}\n".encode())
    return digest.hexdigest()[:16]


def keep_first_rows(splits, spec: DataSetSpec):
    """Token splits (``SequenceSplits``, ``LMSplits``, ``MLMSplits``) with only the first ``limit_train`` rows
    of every ``*_train`` array and the first ``limit_val`` rows of every ``*_eval`` array."""
    train, held_out = slice(spec.limit_train), slice(spec.limit_val)
    arrays = {field.name: getattr(splits, field.name) for field in dataclasses.fields(splits)}
    kept = {name: value[train] for name, value in arrays.items() if name.endswith("_train")}
    kept |= {name: value[held_out] for name, value in arrays.items() if name.endswith("_eval")}
    return dataclasses.replace(splits, **kept)


def require_same_length(splits, spec: SequenceDataSpec) -> None:
    """Token arrays loaded for one ``seq_len`` cannot serve a config that asks for another."""
    if spec.seq_len is not None and spec.seq_len != splits.seq_len:
        raise ValueError(
            f"the loaded {splits.name} arrays have seq_len={splits.seq_len}, but the config asks for "
            f"seq_len={spec.seq_len}; load them again for this config"
        )
