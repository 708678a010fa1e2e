"""Where a text data set's documents come from, read lazily in order, and what a cache key sees of them.

A :class:`TextSource` is one of four layouts:

- ``text``: one plain-text file per split under a root (the data set's :class:`TextFiles`: the file names and
  how a file splits into documents: :func:`read_lines`, one per non-empty line, or :func:`read_separated`,
  the text between separator tokens);
- ``saved``: a HF ``datasets`` ``DatasetDict`` saved with ``save_to_disk`` (``dataset_dict.json``,
  ``train/`` and ``validation/``, a ``text`` column), read with ``datasets.load_from_disk`` (local files
  only); each document is a row's ``text``, stripped, empty ones skipped;
- ``hub``: a Hub repository's ``text`` column through ``datasets``' cache (``workers/data/hub.py``);
- ``generated``: documents the data set makes itself, per split.

A root holding both the text files and a saved DatasetDict is read as ``text`` (:func:`find_layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from workers.data.cache import files_identity
from workers.data.hub import iter_text

if TYPE_CHECKING:
    from workers.data.hub import HubSplits

Layout = Literal["text", "saved", "hub", "generated"]
SAVED_MARKER = "dataset_dict.json"  # what DatasetDict.save_to_disk writes at the top
SAVED_SPLITS = {"train": "train", "val": "validation"}
TEXT_COLUMN = "text"
ENCODE_BATCH = 1024  # documents per encode_batch call (and per batch read from a saved split)


def read_lines(path: Path) -> Iterator[str]:
    """The non-empty lines of a text file, stripped: one document each."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            document = line.strip()
            if document:
                yield document


def read_separated(separator: str) -> Callable[[Path], Iterator[str]]:
    """A reader of files whose documents are the text between ``separator`` tokens (normally each on a line
    of its own), stripped, empty ones skipped."""

    def read(path: Path) -> Iterator[str]:
        with path.open(encoding="utf-8", errors="replace") as handle:
            parts: list[str] = []
            for line in handle:
                while separator in line:
                    before, line = line.split(separator, 1)
                    parts.append(before)
                    document = "".join(parts).strip()
                    parts = []
                    if document:
                        yield document
                parts.append(line)
            document = "".join(parts).strip()
            if document:
                yield document

    return read


@dataclass(frozen=True)
class TextFiles:
    """A data set's ``text`` layout: the file of each split (``train``, ``val``) and how a file is read."""

    names: dict[str, str]
    read: Callable[[Path], Iterator[str]] = read_lines

    def missing(self, root: Path) -> list[str]:
        return [name for name in self.names.values() if not (root / name).is_file()]


def has_saved_layout(root: Path) -> bool:
    """A ``save_to_disk`` DatasetDict: ``dataset_dict.json``, ``train/`` and ``validation/``."""
    return (root / SAVED_MARKER).is_file() and all((root / split).is_dir() for split in SAVED_SPLITS.values())


def missing_saved(root: Path) -> list[str]:
    """What the saved layout lacks under ``root`` (for error messages)."""
    wanted = (SAVED_MARKER, *(f"{split}/" for split in SAVED_SPLITS.values()))
    return [name for name in wanted if not (root / name).exists()]


def find_layout(root: Path, files: TextFiles) -> Layout | None:
    """``"text"`` (all of ``files``), ``"saved"`` (a ``save_to_disk`` DatasetDict folder), or None."""
    if not files.missing(root):
        return "text"
    return "saved" if has_saved_layout(root) else None


def missing_layout(root: Path, files: TextFiles) -> str:
    """What neither folder layout found under ``root``, in words (for the error message)."""
    return (
        f"the text layout lacks {', '.join(files.missing(root))}; "
        f"the saved layout lacks {', '.join(missing_saved(root))}"
    )


def iter_saved(root: Path, split: str, what: str) -> Iterator[str]:
    """The documents of one split of a ``save_to_disk`` folder: each row's ``text``, stripped, empty ones
    skipped."""
    import datasets

    folder = root / SAVED_SPLITS[split]
    dataset = datasets.load_from_disk(str(folder))
    if TEXT_COLUMN not in dataset.column_names:
        raise ValueError(
            f"{what}: the saved split {folder} has no {TEXT_COLUMN!r} column (columns: "
            f"{', '.join(dataset.column_names)}); it must hold the text in a column named {TEXT_COLUMN!r}"
        )
    for batch in dataset.select_columns([TEXT_COLUMN]).iter(batch_size=ENCODE_BATCH):
        for text in batch[TEXT_COLUMN]:
            document = (text or "").strip()
            if document:
                yield document


def saved_split_identity(root: Path, split: str) -> list[list]:
    """:func:`files_identity` of a saved split's files; not the cache-*.arrow files that datasets may write
    beside them later."""
    folder = root / SAVED_SPLITS[split]
    return files_identity(sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("cache-")))


@dataclass(frozen=True)
class TextSource:
    """Where one text data set's documents are read from (``what``: the data set's name, for messages).

    ``root`` and ``files`` for the ``text`` and ``saved`` layouts, ``hub`` for ``hub``, ``generated`` (a
    split's documents) and ``generated_identity`` (what they depend on) for ``generated``."""

    layout: Layout
    what: str
    root: Path | None = None
    files: TextFiles | None = None
    hub: HubSplits | None = None
    generated: Callable[[str], Iterable[str]] | None = None
    generated_identity: tuple = field(default=())

    def documents(self, split: str) -> Iterator[str]:
        """The documents of ``split`` (``train`` or ``val``) in order, read lazily."""
        if self.layout == "text":
            return self.files.read(self.root / self.files.names[split])
        if self.layout == "saved":
            return iter_saved(self.root, split, self.what)
        if self.layout == "hub":
            return iter_text(self.hub.load(split), TEXT_COLUMN, self.what)
        return iter(self.generated(split))

    def identity(self, split: str) -> list:
        """What ``split`` is read from, for cache keys: [path, size, mtime_ns] of every file, the Hub's
        repository, revision and split, or the generated documents' ``generated_identity``."""
        if self.layout == "text":
            return files_identity([self.root / self.files.names[split]])
        if self.layout == "saved":
            return saved_split_identity(self.root, split)
        if self.layout == "hub":
            return [self.hub.identity(), self.hub.split_name(split)]
        return ["generated", *self.generated_identity]


def first_chars(documents: Iterable[str], limit: int) -> Iterator[str]:
    """Whole documents until ``limit`` characters have been given."""
    seen = 0
    for document in documents:
        if seen >= limit:
            return
        seen += len(document)
        yield document


def batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    """Lists of ``size`` items (the last possibly shorter)."""
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
