"""Data for a trial. Nothing here downloads: data is embedded (digits) or read from a local root.

Two kinds of source:
- *in memory* (digits, CIFAR): the whole split is a pair of arrays. The driver can load them once and
  share them through Ray's object store (:func:`load_arrays`); batches are cut and augmented on the
  trial's device, which keeps small-image training from being bound by a DataLoader.
- *on disk* (ImageNet-style class folders): a torchvision ``ImageFolder`` and a ``DataLoader`` with
  timm's usual train and eval transforms, read by each worker from a shared file system.

Token sequences (ListOps, generated or LRA's files) are in memory too (:class:`SequenceSplits`), batched as
``{"input_ids", "attention_mask"}`` dicts by :class:`SequenceBatches`; ``workers/listops.py`` defines the data.
Language-model data (MQAR, TinyStories; ``workers/lm_data.py`` defines them) has a label per token
(:class:`LMSplits`, batched by :class:`LMBatches`).
"""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from workers import listops, lm_data
from workers.config import LM_DATA_SETS, MLM_DATA_SETS, SEQUENCE_DATA_SETS, DataSpec, ListOpsSpec, MQARSpec, TextSpec
from workers.data_common import DataMeta, DataNotFoundError, keep_first_rows, require_same_length

if TYPE_CHECKING:  # workers.mlm_data imports this module; it is imported where used
    from workers.mlm_data import MLMBatches, MLMSplits

CIFAR_ROOT_ENV = "CIFAR_ROOT"
IMAGENET_ROOT_ENV = "IMAGENET_ROOT"
LRA_ROOT_ENV = listops.LRA_ROOT_ENV
TINYSTORIES_ROOT_ENV = lm_data.TINYSTORIES_ROOT_ENV
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


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


@dataclass(frozen=True)
class SequenceSplits:
    """A token-sequence data set in memory (ListOps), plain numpy like :class:`ArraySplits`.

    ``ids_*``: (N, seq_len) token ids, each row's first ``seq_len`` ids then 0 (padding), stored as uint8
    when the vocabulary fits (it does for ListOps: 8× less to hold and to share than int64); ``lengths_*``:
    int64 (N,), real tokens per row after truncation (the attention mask is ``position < length``);
    ``y_*``: int64 (N,) labels 0 … num_classes-1. ``*_train`` is the training split, ``*_eval`` the held-out
    split named by ``eval_split`` (``val`` or ``test``) that the headline metric is scored on. Token ids are
    ``workers.listops``'s fixed vocabulary (``vocab_size`` ids, 0 pads).
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
    vocab_size: int = listops.VOCAB_SIZE
    num_classes: int = listops.NUM_CLASSES

    def __post_init__(self):
        if self.vocab_size <= 256:  # ids 0 … 255 fit a byte; batches are widened to int64 on the device
            object.__setattr__(self, "ids_train", np.asarray(self.ids_train, dtype=np.uint8))
            object.__setattr__(self, "ids_eval", np.asarray(self.ids_eval, dtype=np.uint8))


@dataclass(frozen=True)
class LMSplits:
    """A language-model data set in memory (MQAR, TinyStories), plain numpy like :class:`SequenceSplits`.

    ``ids_*``: (N, seq_len) token ids in the smallest unsigned type that holds ``vocab_size`` ids;
    ``labels_*``: int64 (N, seq_len), the token to predict at each position, ``lm_data.IGNORE_INDEX`` (-100)
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
        dtype = lm_data.smallest_uint(self.vocab_size)
        for name in ("ids_train", "ids_eval"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        for name in ("labels_train", "labels_eval"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))

    @property
    def num_classes(self) -> int:
        return self.vocab_size  # one class per token id


# --- loading ----------------------------------------------------------------------------------------------


def load_digits_arrays(spec: DataSpec) -> ArraySplits:
    """scikit-learn's bundled 8×8 digits (1,797 images, 10 classes, pixel values 0…16).

    Split once with a stratified shuffle seeded by ``spec.split_seed`` (not the trial seed), so every
    trial of a sweep is scored on the same held-out images. Pixels are rescaled to uint8 0…255.
    No augmentation: a flipped or shifted 8×8 digit is often another digit.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    x_train, x_val, y_train, y_val = train_test_split(
        images, labels, test_size=spec.val_fraction, random_state=spec.split_seed, stratify=labels
    )
    mean = float(x_train.mean() / 255.0)
    std = float(x_train.std() / 255.0)
    return ArraySplits("digits", x_train, y_train, x_val, y_val, 10, (mean,), (std,), augment=False)


def resolve_root(spec: DataSpec, env_var: str) -> Path:
    """The data root: ``data.root`` if given, else ``$env_var``; a clear error if neither is set."""
    root = spec.root or os.environ.get(env_var)
    if not root:
        raise DataNotFoundError(
            f"data set {spec.name!r} is read from local disk and no root is set: set `data.root` in the "
            f"config (sweep: --data-root) or the environment variable {env_var}. Nothing is downloaded."
        )
    return Path(root).expanduser()


CIFAR_LAYOUT = {
    # name: (folder, training batch files, test batch file, label key, classes)
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], "test_batch", b"labels", 10),
    "cifar100": ("cifar-100-python", ["train"], "test", b"fine_labels", 100),
}


def read_cifar_batches(paths: list[Path], label_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels from CIFAR's pickled batches (the python version).

    Read directly rather than through torchvision's class, which checks MD5 sums of the official
    archive files and so cannot read a subset or a locally produced copy.
    """
    images, labels = [], []
    for path in paths:
        with path.open("rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[label_key], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def require_local_data(spec: DataSpec) -> Path | None:
    """The data set's root once every file or folder it needs is there (None for the embedded digits);
    otherwise a :class:`DataNotFoundError` naming the path and how to point elsewhere. Reads nothing,
    so the driver can check in seconds before anything starts."""
    if spec.name in ("digits", "listops", "mqar"):
        return None  # embedded, or generated here
    if spec.name in MLM_DATA_SETS:
        from workers.mlm_data import require_mlm_data

        return require_mlm_data(spec)  # corpus, tokenizer and GLUE files; None when all are generated
    checks = {"tinystories": require_tinystories, "lra_listops": require_lra_listops, "imagefolder": require_folders}
    return checks.get(spec.name, require_cifar)(spec)


def require_tinystories(spec: DataSpec) -> Path:
    root = resolve_root(spec, TINYSTORIES_ROOT_ENV)
    if lm_data.find_layout(root) is None:
        raise DataNotFoundError(
            f"tinystories: expected under {root} either the release's {' and '.join(lm_data.TEXT_FILES.values())} "
            f"or a datasets folder saved with save_to_disk ({lm_data.SAVED_MARKER}, train/, validation/); "
            f"{lm_data.missing_layout(root)}. Point `data.root` / ${TINYSTORIES_ROOT_ENV} at the folder that "
            "holds them. Nothing is downloaded."
        )
    tokenizer = lm_data.tokenizer_file(spec.text or TextSpec(), root)
    if tokenizer is not None and not tokenizer.is_file():
        raise DataNotFoundError(
            f"tinystories: the tokenizer file {tokenizer} (data.text.tokenizer; a relative path is read from "
            f"the data root, `data.root` / ${TINYSTORIES_ROOT_ENV}) does not exist. Leave it out to use the "
            "root's tokenizer.json or train one here. Nothing is downloaded."
        )
    return root


def require_lra_listops(spec: DataSpec) -> Path:
    root = resolve_root(spec, LRA_ROOT_ENV)
    missing = [name for name in listops.SPLIT_FILES.values() if not (root / name).is_file()]
    if missing:
        raise DataNotFoundError(
            f"lra_listops: expected LRA's ListOps files under {root}, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing. Point `data.root` / ${LRA_ROOT_ENV} at the folder "
            "holding basic_train.tsv, basic_val.tsv and basic_test.tsv (LRA's release: "
            "lra_release/listops-1000/), or write generated ones with `sweep data export listops --rows N "
            "--out DIR`. Nothing is downloaded."
        )
    return root


def require_folders(spec: DataSpec) -> Path:
    root = resolve_root(spec, IMAGENET_ROOT_ENV)
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise DataNotFoundError(
                f"imagefolder: expected class folders under {root / split}, which does not exist. "
                f"Point `data.root` / ${IMAGENET_ROOT_ENV} at a folder holding train/ and val/. "
                "Nothing is downloaded."
            )
    return root


def require_cifar(spec: DataSpec) -> Path:
    root = resolve_root(spec, CIFAR_ROOT_ENV)
    folder, train_files, test_file, _, _ = CIFAR_LAYOUT[spec.name]
    missing = [name for name in [*train_files, test_file] if not (root / folder / name).is_file()]
    if missing:
        raise DataNotFoundError(
            f"{spec.name}: expected torchvision's extracted folder {root / folder} "
            f"with {', '.join(missing)}, which is missing. Put the extracted archive under {root}, "
            f"or point `data.root` / ${CIFAR_ROOT_ENV} at the folder that holds {folder}/. "
            "Nothing is downloaded."
        )
    return root


def load_cifar_arrays(spec: DataSpec) -> ArraySplits:
    """CIFAR-10/100 in torchvision's on-disk layout (``cifar-10-batches-py`` / ``cifar-100-python``)."""
    root = require_local_data(spec)
    folder, train_files, test_file, label_key, classes = CIFAR_LAYOUT[spec.name]
    x_train, y_train = read_cifar_batches([root / folder / name for name in train_files], label_key)
    x_val, y_val = read_cifar_batches([root / folder / test_file], label_key)
    return ArraySplits(spec.name, x_train, y_train, x_val, y_val, classes, CIFAR_MEAN, CIFAR_STD, augment=True)


def load_listops_arrays(spec: DataSpec) -> SequenceSplits:
    """ListOps generated with LRA's grammar (``spec.listops``, LRA's options when None) at ``spec.seq_len``,
    through the disk cache (``workers.listops.load_or_generate``): generated once per machine, then read.
    ``limit_train`` / ``limit_val`` keep the first rows of the training and eval splits."""
    options = spec.listops or ListOpsSpec()
    arrays = listops.load_or_generate(
        options.options(), options.seed, options.train_rows, options.val_rows, options.test_rows, spec.seq_len
    )
    held_out = spec.eval_split
    splits = SequenceSplits(
        "listops",
        arrays["train_ids"],
        arrays["train_lengths"],
        arrays["train_labels"],
        arrays[f"{held_out}_ids"],
        arrays[f"{held_out}_lengths"],
        arrays[f"{held_out}_labels"],
        held_out,
        spec.seq_len,
    )
    return keep_first_rows(splits, spec)


def load_lra_listops_arrays(spec: DataSpec) -> SequenceSplits:
    """LRA's ``basic_train.tsv`` and the eval split's ``basic_<eval_split>.tsv`` under ``data.root`` or
    ``$LRA_ROOT``, tokenised as LRA does and truncated to ``seq_len`` (its first tokens kept), padded with 0.
    ``limit_train`` / ``limit_val`` read only the first rows."""
    root = require_local_data(spec)
    parts = []
    for split, limit in (("train", spec.limit_train), (spec.eval_split, spec.limit_val)):
        rows = listops.read_tsv(root / listops.SPLIT_FILES[split], limit)
        ids, lengths = listops.encode_batch((source for source, _ in rows), spec.seq_len)
        parts += [ids, lengths, np.fromiter((label for _, label in rows), dtype=np.int64, count=len(rows))]
    return SequenceSplits("lra_listops", *parts, spec.eval_split, spec.seq_len)


def load_mqar_arrays(spec: DataSpec) -> LMSplits:
    """Multi-query associative recall generated at ``spec.seq_len`` with ``spec.mqar`` (``MQARSpec()``'s
    defaults when None); ``limit_train`` / ``limit_val`` keep the first rows."""
    options = spec.mqar or MQARSpec()
    arrays = lm_data.mqar_splits(options, spec.seq_len)
    splits = LMSplits(
        "mqar",
        arrays["train_ids"],
        arrays["train_labels"],
        arrays["val_ids"],
        arrays["val_labels"],
        options.vocab_size,
        spec.seq_len,
    )
    return keep_first_rows(splits, spec)


def load_tinystories_arrays(spec: DataSpec) -> LMSplits:
    """TinyStories under ``data.root`` or ``$TINYSTORIES_ROOT`` (either layout), tokenised, packed into windows
    of ``seq_len`` + 1 ids and cached (``workers.lm_data.load_tinystories_streams``); ``limit_train`` /
    ``limit_val`` keep the first windows."""
    root = require_local_data(spec)
    streams, description, vocab_size = lm_data.load_tinystories_streams(
        root, lm_data.find_layout(root), spec.text or TextSpec()
    )
    packed = {}
    for split, stream in streams.items():
        ids, labels = lm_data.pack_windows(stream, spec.seq_len)
        if not len(ids):
            raise ValueError(
                f"tinystories: the {split} split gives {len(stream)} token ids, fewer than seq_len + 1 = "
                f"{spec.seq_len + 1}, so not one window; raise data.text.{split}_tokens or lower seq_len"
            )
        packed[split] = ids, labels
    splits = LMSplits("tinystories", *packed["train"], *packed["val"], vocab_size, spec.seq_len, description)
    return keep_first_rows(splits, spec)


def load_arrays(spec: DataSpec) -> ArraySplits | SequenceSplits | LMSplits | MLMSplits | None:
    """The in-memory splits for ``spec`` (:class:`SequenceSplits` for token sequences, :class:`LMSplits` for
    language-model data, ``workers.mlm_data.MLMSplits`` for masked-LM data), or None for on-disk image data
    sets (read per worker)."""
    if spec.name in MLM_DATA_SETS:
        from workers.mlm_data import load_mlm_arrays

        return load_mlm_arrays(spec)
    if spec.name == "mqar":
        return load_mqar_arrays(spec)
    if spec.name == "tinystories":
        return load_tinystories_arrays(spec)
    if spec.name == "listops":
        return load_listops_arrays(spec)
    if spec.name == "lra_listops":
        return load_lra_listops_arrays(spec)
    if spec.name == "digits":
        splits = load_digits_arrays(spec)
    elif spec.name in ("cifar10", "cifar100"):
        splits = load_cifar_arrays(spec)
    else:
        return None
    return limit_splits(splits, spec)


def limit_splits(splits: ArraySplits, spec: DataSpec) -> ArraySplits:
    """Keep the first ``limit_train`` / ``limit_val`` images (quick checks on big data sets)."""
    train_n = spec.limit_train or len(splits.y_train)
    val_n = spec.limit_val or len(splits.y_val)
    return ArraySplits(
        splits.name,
        splits.x_train[:train_n],
        splits.y_train[:train_n],
        splits.x_val[:val_n],
        splits.y_val[:val_n],
        splits.num_classes,
        splits.mean,
        splits.std,
        splits.augment,
    )


# --- batches ----------------------------------------------------------------------------------------------


class TensorBatches:
    """Batches from in-memory splits, held on the trial's device as normalised float32."""

    def __init__(self, splits: ArraySplits, spec: DataSpec, device: torch.device):
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
        order = torch.randperm(len(self.y_train), generator=generator).to(self.device)
        for start in range(0, self.steps_per_epoch(batch_size) * batch_size, batch_size):
            index = order[start : start + batch_size]
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

    def __init__(self, splits: SequenceSplits, spec: DataSpec, device: torch.device):
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
        order = torch.randperm(len(self.y_train), generator=generator).to(self.device)
        for start in range(0, self.steps_per_epoch(batch_size) * batch_size, batch_size):
            index = order[start : start + batch_size]
            yield self._inputs(self.ids_train[index], self.lengths_train[index]), self.y_train[index]

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        """The eval split (``data.eval_split``) in order, the last batch possibly smaller."""
        for start in range(0, len(self.y_val), batch_size):
            window = slice(start, start + batch_size)
            yield self._inputs(self.ids_val[window], self.lengths_val[window]), self.y_val[window]

    def probe_images(self, count: int) -> dict[str, torch.Tensor]:
        """The first ``count`` eval rows: a fixed batch, the same for every trial and epoch."""
        return self._inputs(self.ids_val[:count], self.lengths_val[:count])


class LMBatches:
    """Batches of language-model windows from :class:`LMSplits`, held on the trial's device (ids in their
    compact type, widened to int64 per batch; labels int64). Inputs are dicts
    ``{"input_ids": (B, seq_len) int64, "attention_mask": (B, seq_len) int64, all 1}`` (no padding); labels
    are (B, seq_len) int64, -100 where not scored. The same interface as :class:`SequenceBatches`."""

    def __init__(self, splits: LMSplits, spec: DataSpec, device: torch.device):
        require_same_length(splits, spec)
        self.splits = splits
        self.device = device
        self.ids_train = self._ids(splits.ids_train)
        self.y_train = torch.as_tensor(splits.labels_train, dtype=torch.long, device=device)
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
        return DataMeta(s.num_classes, 1, 1, len(self.y_train), len(self.y_val), s.seq_len, s.vocab_size, s.tokenizer)

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.y_train) // batch_size  # drop the ragged last batch: every step the same shape

    def train_batches(self, batch_size: int, generator: torch.Generator) -> Iterator[tuple]:
        """One epoch of shuffled training windows; the order comes from ``generator`` (the trial seed)."""
        order = torch.randperm(len(self.y_train), generator=generator).to(self.device)
        for start in range(0, self.steps_per_epoch(batch_size) * batch_size, batch_size):
            index = order[start : start + batch_size]
            yield self._inputs(self.ids_train[index]), self.y_train[index]

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        """The val windows in order, the last batch possibly smaller."""
        for start in range(0, len(self.y_val), batch_size):
            window = slice(start, start + batch_size)
            yield self._inputs(self.ids_val[window]), self.y_val[window]

    def probe_images(self, count: int) -> dict[str, torch.Tensor]:
        """The first ``count`` val windows: a fixed batch, the same for every trial and epoch."""
        return self._inputs(self.ids_val[:count])


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


# Batches each DataLoader worker keeps decoded ahead (torch's default is 2). JPEG decode times vary from image
# to image; a deeper queue absorbs that, and N workers × 4 batches of 224 px images is still small.
LOADER_PREFETCH_BATCHES = 4


def loader_workers(num_workers: int | None, cpus: int) -> int:
    """DataLoader worker processes: ``num_workers`` when given (``data.num_workers``, ``--data-workers``),
    else the trial's ``cpus`` minus one, the one left for the training process (1 CPU: 0 workers, so the
    training process loads the data itself)."""
    return max(cpus - 1, 0) if num_workers is None else num_workers


def loader_settings(num_workers: int | None, cpus: int, device_type: str) -> dict:
    """Keyword arguments for an on-disk data set's ``torch.utils.data.DataLoader``.

    - ``num_workers``: :func:`loader_workers`;
    - ``pin_memory``: on CUDA only, so batches are copied to the device asynchronously (page-locked host
      memory is useless without a device to copy to);
    - ``persistent_workers`` and ``prefetch_factor`` (:data:`LOADER_PREFETCH_BATCHES` batches per worker):
      only with workers (torch rejects them without); workers outlive an epoch, so an epoch does not start
      by forking and importing again.
    """
    workers = loader_workers(num_workers, cpus)
    settings: dict = {"num_workers": workers, "pin_memory": device_type == "cuda"}
    if workers > 0:
        settings.update(persistent_workers=True, prefetch_factor=LOADER_PREFETCH_BATCHES)
    return settings


class SeededSamples(torch.utils.data.Dataset):
    """A training set whose random augmentation is a function of (epoch seed, sample index) alone.

    Keys are ``(index, epoch_seed)`` pairs (from :class:`EpochSeededSampler`); before transforming sample
    ``index`` the Python and torch random streams (those timm's and torchvision's transforms draw from) are
    seeded from the pair, and restored afterwards, so loading in the training process (0 workers) leaves the
    trial's own streams (dropout, drop-path) as they were. Hence the same images reach the model whatever the
    number of workers, and persistent workers (whose streams a checkpoint cannot hold) do not make a resumed
    trial differ from an uninterrupted one.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple[int, int]):
        index, epoch_seed = key
        sample_seed = (epoch_seed * 1_000_003 + index) % 2**63
        python_state = random.getstate()
        random.seed(sample_seed)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(sample_seed)
                return self.dataset[index]
        finally:
            random.setstate(python_state)


class EpochSeededSampler(torch.utils.data.Sampler):
    """``(index, epoch_seed)`` keys for :class:`SeededSamples`: each epoch draws a seed and a permutation from
    ``generator`` (the trial's data generator, whose state a checkpoint holds), in the training process."""

    def __init__(self, size: int, generator: torch.Generator):
        self.size = size
        self.generator = generator

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        epoch_seed = int(torch.randint(0, 2**62, (), generator=self.generator))
        for index in torch.randperm(self.size, generator=self.generator).tolist():
            yield index, epoch_seed


class ShareBatchSampler(torch.utils.data.Sampler):
    """One rank's share of each global batch, as lists of keys for a DataLoader's ``batch_sampler``.

    ``sampler``'s keys are cut into global batches of ``batch_size`` (the ragged last one dropped), exactly as
    a DataLoader with ``batch_size`` and ``drop_last=True`` cuts them; of each, only keys
    [rank·B/N, (rank+1)·B/N) are kept (B = ``batch_size``, N = ``world_size``), so the loader decodes only
    those samples. The sampler is iterated whole, so it draws from its generator as a 1-worker loader does
    and every rank sees the same global batches. ``shard=(0, 1)``: the whole global batch."""

    def __init__(self, sampler: torch.utils.data.Sampler, batch_size: int, shard: tuple[int, int] = (0, 1)):
        rank, world_size = shard
        if batch_size % world_size or not 0 <= rank < world_size:
            raise ValueError(f"cannot take share {rank} of {world_size} from a batch of {batch_size}")
        self.batches = torch.utils.data.BatchSampler(sampler, batch_size, drop_last=True)
        share = batch_size // world_size
        self.start, self.stop = rank * share, (rank + 1) * share

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for keys in self.batches:
            yield keys[self.start : self.stop]


class FolderBatches:
    """ImageNet-style ``root/train/<class>/*`` and ``root/val/<class>/*`` through a DataLoader.

    Training uses timm's standard transform (random-resized crop, flip, colour jitter, ImageNet
    normalisation); validation resizes and centre-crops (timm's eval transform, crop 0.875).

    Loader settings follow :func:`loader_settings` with ``cpus``: the trial's CPUs, by default its torch
    thread count (``execute`` sets that from the config's ``threads``, which the sweep sets to the space's
    ``resources.cpus_per_trial``). One training loader per batch size and share, and one validation loader
    per batch size, are kept, so their workers persist across epochs. Training batches are augmented per
    sample as :class:`SeededSamples` says.

    ``train_batches(..., shard=(rank, world_size))`` yields only that rank's share of each global batch and
    decodes only those samples (:class:`ShareBatchSampler`); ``loads_shares`` tells
    ``workers.distributed.ShardedBatches`` so.
    """

    loads_shares = True  # train_batches takes shard=(rank, world_size) and decodes only that share

    def __init__(self, spec: DataSpec, device: torch.device, cpus: int | None = None):
        from timm.data import create_transform
        from torchvision.datasets import ImageFolder

        root = require_local_data(spec)
        self.img_size = spec.img_size or 224
        self.device = device
        self.spec = spec
        self.settings = loader_settings(spec.num_workers, cpus or torch.get_num_threads(), device.type)
        self.train_set = ImageFolder(str(root / "train"), create_transform(self.img_size, is_training=True))
        self.val_set = ImageFolder(str(root / "val"), create_transform(self.img_size, is_training=False))
        if self.train_set.classes != self.val_set.classes:
            raise DataNotFoundError(
                f"imagefolder: train/ and val/ under {root} hold different class folders "
                f"({len(self.train_set.classes)} vs {len(self.val_set.classes)}); they must match"
            )
        if spec.limit_train:
            self.train_set = torch.utils.data.Subset(self.train_set, range(min(spec.limit_train, len(self.train_set))))
        if spec.limit_val:
            self.val_set = torch.utils.data.Subset(self.val_set, range(min(spec.limit_val, len(self.val_set))))
        self._probe: torch.Tensor | None = None
        self._train_loaders: dict[tuple, tuple[torch.utils.data.DataLoader, EpochSeededSampler]] = {}
        self._val_loaders: dict[int, torch.utils.data.DataLoader] = {}

    @property
    def num_classes(self) -> int:
        dataset = self.val_set.dataset if isinstance(self.val_set, torch.utils.data.Subset) else self.val_set
        return len(dataset.classes)

    @property
    def meta(self) -> DataMeta:
        return DataMeta(self.num_classes, 3, self.img_size, len(self.train_set), len(self.val_set))

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.train_set) // batch_size

    def _loader(self, dataset, **options) -> torch.utils.data.DataLoader:
        # The loader's own generator only seeds its workers' streams, which SeededSamples reseeds per sample;
        # a fixed one keeps the loader from drawing on the trial's global torch stream.
        base_seed = torch.Generator().manual_seed(0)
        settings = {**self.settings, **options}
        return torch.utils.data.DataLoader(dataset, generator=base_seed, **settings)

    def train_loader(
        self, batch_size: int, generator: torch.Generator, shard: tuple[int, int] = (0, 1)
    ) -> torch.utils.data.DataLoader:
        """The (persistent) training loader for ``batch_size`` and ``shard`` (:class:`ShareBatchSampler`);
        its next epoch draws from ``generator``."""
        key = (batch_size, shard)
        if key not in self._train_loaders:
            sampler = EpochSeededSampler(len(self.train_set), generator)
            batches = ShareBatchSampler(sampler, batch_size, shard)
            self._train_loaders[key] = (self._loader(SeededSamples(self.train_set), batch_sampler=batches), sampler)
        loader, sampler = self._train_loaders[key]
        sampler.generator = generator  # read in this process when an epoch's iteration starts
        return loader

    def train_batches(
        self, batch_size: int, generator: torch.Generator, shard: tuple[int, int] = (0, 1)
    ) -> Iterator[tuple]:
        """One epoch of global batches of ``batch_size``, or of rank r's share of each, samples
        [r·B/N, (r+1)·B/N) with ``shard=(r, N)``, only those decoded; the order comes from ``generator``."""
        for images, labels in self.train_loader(batch_size, generator, shard):
            yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        if batch_size not in self._val_loaders:
            self._val_loaders[batch_size] = self._loader(self.val_set, batch_size=batch_size, shuffle=False)
        for images, labels in self._val_loaders[batch_size]:
            yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)

    def probe_images(self, count: int) -> torch.Tensor:
        if self._probe is None or len(self._probe) < count:
            images = [self.val_set[i][0] for i in range(min(count, len(self.val_set)))]
            self._probe = torch.stack(images).to(self.device)
        return self._probe[:count]


def open_batches(
    spec: DataSpec, device: torch.device, arrays: ArraySplits | SequenceSplits | LMSplits | MLMSplits | None = None
) -> TensorBatches | FolderBatches | SequenceBatches | LMBatches | MLMBatches:
    """Batch source for a trial. ``arrays`` are in-memory splits the driver already loaded (else loaded
    here); on-disk data sets are opened from their root."""
    if spec.name == "imagefolder":
        return FolderBatches(spec, device)
    if spec.name in MLM_DATA_SETS:  # before SEQUENCE_DATA_SETS, which holds them too
        from workers.mlm_data import MLMBatches

        return MLMBatches(arrays if arrays is not None else load_arrays(spec), spec, device)
    if spec.name in LM_DATA_SETS:
        return LMBatches(arrays if arrays is not None else load_arrays(spec), spec, device)
    if spec.name in SEQUENCE_DATA_SETS:
        return SequenceBatches(arrays if arrays is not None else load_arrays(spec), spec, device)
    return TensorBatches(arrays if arrays is not None else load_arrays(spec), spec, device)
