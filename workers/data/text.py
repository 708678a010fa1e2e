"""What the text data sets (``tinystories``, ``mlm_corpus``) share: the ``save_to_disk`` folder layout, the
identity of source files for cache keys, the tokenizer file a config names, and the read-or-train cache of
tokenizers trained here."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from workers.data.cache import atomic_file, hash_key

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

SAVED_MARKER = "dataset_dict.json"  # what DatasetDict.save_to_disk writes at the top
SAVED_SPLITS = {"train": "train", "val": "validation"}
TEXT_COLUMN = "text"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_TRAIN_CHARS = 20_000_000  # characters of training text a tokenizer trained here sees
ENCODE_BATCH = 1024  # documents per encode_batch call


def has_saved_layout(root: Path) -> bool:
    """A ``save_to_disk`` DatasetDict: ``dataset_dict.json``, ``train/`` and ``validation/``."""
    return (root / SAVED_MARKER).is_file() and all((root / split).is_dir() for split in SAVED_SPLITS.values())


def missing_saved(root: Path) -> list[str]:
    """What the saved layout lacks under ``root`` (for error messages)."""
    wanted = (SAVED_MARKER, *(f"{split}/" for split in SAVED_SPLITS.values()))
    return [name for name in wanted if not (root / name).exists()]


def iter_saved(root: Path, split: str, what: str) -> Iterator[str]:
    """The documents of one split of a ``save_to_disk`` folder (``datasets.load_from_disk``, local files
    only): each row's ``text``, stripped, empty ones skipped."""
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


def files_identity(paths: Iterable[Path]) -> list[list]:
    """[path, size, mtime_ns] of each file: what a cache key sees of source data."""
    identity = []
    for path in paths:
        stat = path.stat()
        identity.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return identity


def saved_split_identity(root: Path, split: str) -> list[list]:
    """:func:`files_identity` of a saved split's files; not the cache-*.arrow files that datasets may write
    beside them later."""
    folder = root / SAVED_SPLITS[split]
    return files_identity(sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("cache-")))


def given_tokenizer(configured: str | None, root: Path | None) -> Path | None:
    """The tokenizer.json to read: ``configured`` (relative to the data root when there is one), else the
    root's ``tokenizer.json`` when it exists, else None (one is trained here). The configured path is
    returned whether or not it exists; the caller reports a missing one."""
    if configured is not None:
        path = Path(configured).expanduser()
        return path if path.is_absolute() or root is None else root / path
    if root is not None and (root / TOKENIZER_FILE).is_file():
        return root / TOKENIZER_FILE
    return None


def vocab_size_of(tokenizer: Tokenizer) -> int:
    """Largest id + 1, added tokens included."""
    return max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1


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


def cached_tokenizer(
    identity: dict, folder: Path, prefix: str, train: Callable[[], Tokenizer], what: str
) -> tuple[Tokenizer, str]:
    """(tokenizer, SHA-256 of its JSON): read from ``folder/<prefix>-<key>.json`` when trained before (``key``
    hashes ``identity``: the training files, the size asked, the characters read), else ``train()`` and saved
    there. A cached file that cannot be read is trained again; one that cannot be written is a warning."""
    from tokenizers import Tokenizer

    path = folder / f"{prefix}-{hash_key(identity)}.json"
    tokenizer = None
    if path.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(path))
            log.info("%s: read the tokenizer %s", what, path)
        except Exception as exc:  # a torn or foreign file: train again
            log.warning("%s: cached tokenizer %s is unreadable (%s); training again", what, path, exc)
    if tokenizer is None:
        tokenizer = train()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with atomic_file(path, "w", encoding="utf-8") as handle:
                handle.write(tokenizer.to_str())
        except OSError as exc:
            log.warning("%s: could not save the tokenizer to %s (%s); continuing without", what, path, exc)
    return tokenizer, hashlib.sha256(tokenizer.to_str().encode()).hexdigest()
