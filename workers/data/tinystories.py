"""TinyStories (Eldan & Li 2023, arXiv 2305.07759) under ``data.root`` or ``$TINYSTORIES_ROOT``, in either
layout (the first one found, in this order):

- *text*: the release's ``TinyStories-train.txt`` and ``TinyStories-valid.txt``, stories separated by
  ``<|endoftext|>`` (normally on a line of its own); each story is its text between separators, stripped of
  surrounding whitespace (empty ones skipped);
- *saved*: a HF ``datasets`` ``DatasetDict`` saved with ``save_to_disk`` (``dataset_dict.json``, ``train/``
  and ``validation/``, a ``text`` column), read with ``datasets.load_from_disk`` (local files only); each
  story is a row's ``text``, stripped.

Per split it gives ``ids`` (N, seq_len) token ids and ``labels`` (N, seq_len) int64, where ``labels[n, t]`` is
the token the model must predict from its output at position ``t`` (having seen ``ids[n, :t+1]``);
``workers.data.splits.LMSplits`` holds them and ``workers.data.batches.LMBatches`` batches them. Nothing is
downloaded.

*Tokenizer*: a ``tokenizer.json`` (``data.text.tokenizer``, absolute or relative to the data root; else the
data root's ``tokenizer.json``) read with HF ``tokenizers``; it must have the token ``<|endoftext|>``, and its
vocabulary size is its largest id + 1. With none, a byte-level BPE (GPT-2's pre-tokenisation, the 256 byte
symbols, ``<|endoftext|>`` as id 0, ``data.text.vocab_size`` in all, default 4,096) is trained here with
``tokenizers`` on the first ``TOKENIZER_TRAIN_CHARS`` (20 M) characters of training stories (whole stories)
and saved under the cache folder, so later loads and trials reuse it. Trial rows name it: ``file:<path>`` or
``trained:bytelevel-bpe-<vocab_size>-<first 12 hex of the SHA-256 of its JSON>``.

*Packing* (GPT-style): each split's stories, in order, each followed by ``<|endoftext|>``, form one stream
of token ids; ``text.train_tokens`` / ``text.val_tokens`` keep its first that many ids (stories are read only
until the stream is that long: the training file is 2 GB). The stream is cut into windows of seq_len + 1
ids that start every seq_len ids (window w is ``stream[w·L : w·L + L + 1]``, so consecutive windows share
one id and every id after the first is a target exactly once); ``ids`` is a window's first L ids and
``labels`` its last L (the next token at every position, all scored). A stream of n ids gives
(n - 1) // L windows; the tail is dropped.

*Cache*: the streams are kept as ``.npz`` (ids in the smallest unsigned type that holds the vocabulary)
under ``$SWEEP_CACHE_DIR/tinystories/`` (``workers/data/cache.py``), keyed by a hash
of each split's files (path, size, mtime), the tokenizer (its description and the SHA-256 of its JSON) and
the token caps; ``seq_len`` is not in the key (packing is a reshape, done on load). Written to a temporary
file and renamed, so a torn file is never read; a cache folder that cannot be written is logged and the
data returned anyway.

**Speed** (this machine, 2 CPU cores shared with other work, Python 3.11, best of 3): tokenising with a
trained 4,096-token BPE (``encode_batch``): 0.7-1.3 million tokens/s (source text and synthetic stories);
training that BPE on 20 M characters: 3-7 s, once per machine. TinyStories' whole training file (about
2 GB, some 500 M tokens) would take roughly 10 minutes to tokenise, and the packed labels (int64) take 8
bytes per token in memory: cap ``train_tokens`` for anything but a large machine. A cached load is a file
read (5 M tokens: 0.04 s).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data.base import BatchSource, DataNotFoundError, LanguageDataSpec, keep_first_rows
from workers.data.batches import LMBatches
from workers.data.cache import cache_dir, hash_key, read_arrays, write_arrays
from workers.data.hub import HubSourced, HubSplits, iter_text
from workers.data.splits import LMSplits, smallest_uint
from workers.data.text import (
    ENCODE_BATCH,
    TEXT_COLUMN,
    TOKENIZER_TRAIN_CHARS,
    batched,
    cached_tokenizer,
    files_identity,
    first_chars,
    given_tokenizer,
    has_saved_layout,
    iter_saved,
    missing_saved,
    saved_split_identity,
    vocab_size_of,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

TINYSTORIES_ROOT_ENV = "TINYSTORIES_ROOT"
EOT = "<|endoftext|>"
TEXT_FILES = {"train": "TinyStories-train.txt", "val": "TinyStories-valid.txt"}
TEXT_DEFAULT_VOCAB_SIZE = 4096  # a byte-level BPE trained here when no tokenizer.json is given
HUB_REPO = "roneneldan/TinyStories"  # source: hub, when data.hub.repo is left out
TEXT_CACHE_FORMAT = 1  # bump when reading, tokenising or packing changes: old cache files are then not read


# --- files ----------------------------------------------------------------------------------------------------


def find_layout(root: Path) -> str | None:
    """``"text"`` (the release's two text files), ``"saved"`` (a ``save_to_disk`` DatasetDict folder), or None."""
    if all((root / name).is_file() for name in TEXT_FILES.values()):
        return "text"
    return "saved" if has_saved_layout(root) else None


def missing_layout(root: Path) -> str:
    """What neither layout found under ``root``, in words (for the error message)."""
    text = [name for name in TEXT_FILES.values() if not (root / name).is_file()]
    return f"the text layout lacks {', '.join(text)}; the saved layout lacks {', '.join(missing_saved(root))}"


def _iter_text_file(path: Path) -> Iterator[str]:
    """Stories of a release text file: the text between ``<|endoftext|>`` separators, stripped."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        parts: list[str] = []
        for line in handle:
            while EOT in line:
                before, line = line.split(EOT, 1)
                parts.append(before)
                story = "".join(parts).strip()
                parts = []
                if story:
                    yield story
            parts.append(line)
        story = "".join(parts).strip()
        if story:
            yield story


def iter_stories(root: Path | HubSplits, layout: str, split: str) -> Iterator[str]:
    """The stories of ``split`` (``train`` or ``val``) in file order, read lazily (``root`` is the repository
    for the ``hub`` layout)."""
    if layout == "hub":
        return iter_text(root.load(split), TEXT_COLUMN, "tinystories")
    if layout == "text":
        return _iter_text_file(root / TEXT_FILES[split])
    if layout == "saved":
        return iter_saved(root, split, "tinystories")
    raise ValueError(f"unknown TinyStories layout {layout!r}; expected 'text' or 'saved'")


def split_identity(root: Path | HubSplits, layout: str, split: str) -> list:
    """[path, size, mtime_ns] of every file a split is read from (the cache key's view of the data); for the
    Hub, the repository, revision and split."""
    if layout == "hub":
        return [root.identity(), root.split_name(split)]
    if layout == "text":
        return files_identity([root / TEXT_FILES[split]])
    return saved_split_identity(root, split)


# --- tokenizer ------------------------------------------------------------------------------------------------


def read_tokenizer(path: Path) -> tuple[Tokenizer, int, int]:
    """(tokenizer, id of ``<|endoftext|>``, vocabulary size = largest id + 1) of a tokenizer.json."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    eot = tokenizer.token_to_id(EOT)
    if eot is None:
        raise ValueError(
            f"tinystories: the tokenizer {path} has no {EOT!r} token; stories are joined with it, so the "
            "tokenizer must have it (GPT-2's does), or leave out the tokenizer to train one here"
        )
    return tokenizer, eot, vocab_size_of(tokenizer)


def check_tokenizer_vocab(text: TextSpec, path: Path, vocab_size: int) -> None:
    """``ValueError`` when ``text.vocab_size`` is set and differs from the size of the tokenizer read, or
    ``text.expected_vocab_size`` (what the plan was counted with) does."""
    if text.vocab_size is not None and text.vocab_size != vocab_size:
        raise ValueError(
            f"tinystories: text.vocab_size is for a tokenizer trained here, but {path} is read and has its own, "
            f"and they differ: (vocab_size={text.vocab_size}, tokenizer's={vocab_size}); remove one of them"
        )
    if text.expected_vocab_size is not None and text.expected_vocab_size != vocab_size:
        raise ValueError(
            f"tinystories: the tokenizer {path} has {vocab_size} ids, but the space plans with "
            f"text.expected_vocab_size={text.expected_vocab_size}; use the tokenizer the space expects, or set "
            "expected_vocab_size to the tokenizer's size"
        )


def train_tokenizer(stories: Iterable[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE (GPT-2's pre-tokenisation and decoder) with ``<|endoftext|>`` as id 0, trained with HF
    ``tokenizers`` on ``stories``: at most ``vocab_size`` ids (fewer when the text allows fewer merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(batched(stories, ENCODE_BATCH), trainer)
    return tokenizer


def trained_tokenizer(root: Path, layout: str, vocab_size: int, folder: Path) -> tuple[Tokenizer, str]:
    """(tokenizer, description) of the BPE trained on this root's training text, read from ``folder`` when
    trained before (keyed by the training files' identity, ``vocab_size`` and the characters read), else
    trained and saved there."""
    identity = {
        "format": TEXT_CACHE_FORMAT,
        "train": split_identity(root, layout, "train"),
        "vocab_size": vocab_size,
        "chars": TOKENIZER_TRAIN_CHARS,
    }

    def train() -> Tokenizer:
        log.info("TinyStories: training a %d-token byte-level BPE on %s", vocab_size, root)
        return train_tokenizer(first_chars(iter_stories(root, layout, "train"), TOKENIZER_TRAIN_CHARS), vocab_size)

    tokenizer, digest = cached_tokenizer(identity, folder, "tokenizer", train, "TinyStories")
    return tokenizer, f"trained:bytelevel-bpe-{vocab_size}-{digest[:12]}"


def tinystories_tokenizer(root: Path, layout: str, text: TextSpec, folder: Path):
    """``(tokenizer, end-of-text id, vocab_size, description, hash)``: the given tokenizer file
    (``data.text.tokenizer``; the hash is of its bytes), or one trained on the training split (cached in
    ``folder``; the description names its settings and serves as the hash)."""
    given = given_tokenizer(text.tokenizer, root if isinstance(root, Path) else None)
    if given is not None:
        if not given.is_file():
            raise FileNotFoundError(f"tinystories: the tokenizer file {given} (data.text.tokenizer) does not exist")
        tokenizer, eot_id, vocab_size = read_tokenizer(given)
        check_tokenizer_vocab(text, given, vocab_size)
        return tokenizer, eot_id, vocab_size, f"file:{given.resolve()}", hashlib.sha256(given.read_bytes()).hexdigest()
    vocab_size = text.vocab_size or TEXT_DEFAULT_VOCAB_SIZE
    tokenizer, description = trained_tokenizer(root, layout, vocab_size, folder)
    actual = vocab_size_of(tokenizer)
    if actual > vocab_size:
        raise ValueError(f"tinystories: trained tokenizer has {actual} ids, more than vocab_size={vocab_size}")
    return tokenizer, tokenizer.token_to_id(EOT), vocab_size, description, description


# --- tokenising and packing -----------------------------------------------------------------------------------


def encode_stories(
    tokenizer: Tokenizer, stories: Iterable[str], eot_id: int, max_tokens: int | None, dtype: np.dtype
) -> np.ndarray:
    """One stream of token ids: each story's ids followed by ``eot_id``; stories are read only until the
    stream has ``max_tokens`` ids (None: all), and it is cut there."""
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    parts: list[np.ndarray] = []
    total = 0

    def flush(batch: list[str]) -> None:
        nonlocal total
        encoded = [encoding.ids for encoding in encode(batch)]
        count = sum(len(ids) for ids in encoded) + len(encoded)
        flat = np.empty(count, dtype=dtype)
        offset = 0
        for ids in encoded:
            flat[offset : offset + len(ids)] = ids
            offset += len(ids)
            flat[offset] = eot_id
            offset += 1
        parts.append(flat)
        total += count

    batch: list[str] = []
    for story in stories:
        batch.append(story)
        if len(batch) == ENCODE_BATCH:
            flush(batch)
            batch = []
            if max_tokens is not None and total >= max_tokens:
                break
    else:
        if batch:
            flush(batch)
    stream = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    return stream[:max_tokens] if max_tokens is not None else stream


def pack_windows(stream: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, labels), each (W, seq_len), W = (len(stream) - 1) // seq_len: window w is
    ``stream[w·seq_len : w·seq_len + seq_len + 1]``, ids its first seq_len ids (the stream's dtype) and
    labels its last seq_len (int64, all scored)."""
    windows = max(len(stream) - 1, 0) // seq_len
    span = windows * seq_len
    ids = stream[:span].reshape(windows, seq_len)
    labels = stream[1 : span + 1].astype(np.int64).reshape(windows, seq_len)
    return ids, labels


def load_tinystories_streams(
    root: Path, layout: str, text: TextSpec, directory: str | os.PathLike | None = None
) -> tuple[dict[str, np.ndarray], str, int]:
    """``({"train": stream, "val": stream}, tokenizer description, vocab_size)`` for the TinyStories folder
    ``root`` in ``layout``, from the cache when these files, tokenizer and caps were tokenised before, else
    tokenised (training the tokenizer first when none is given) and stored. ``directory`` defaults to
    ``$SWEEP_CACHE_DIR/tinystories``."""
    folder = Path(directory).expanduser() if directory is not None else cache_dir("tinystories")
    tokenizer, eot_id, vocab_size, description, tokenizer_hash = tinystories_tokenizer(root, layout, text, folder)
    identity = {
        "format": TEXT_CACHE_FORMAT,
        "train": split_identity(root, layout, "train"),
        "val": split_identity(root, layout, "val"),
        "tokenizer": [description, tokenizer_hash],
        "caps": [text.train_tokens, text.val_tokens],
    }
    key = hash_key(identity)
    path = folder / f"tinystories-{key}.npz"
    cached = read_arrays(path, key, "TinyStories")
    if cached is not None:
        return cached, description, vocab_size
    dtype = smallest_uint(vocab_size)
    streams = {
        split: encode_stories(tokenizer, iter_stories(root, layout, split), eot_id, cap, dtype)
        for split, cap in (("train", text.train_tokens), ("val", text.val_tokens))
    }
    write_arrays(path, key, streams, "TinyStories")
    return streams, description, vocab_size


# --- the data set ---------------------------------------------------------------------------------------------


class TextSpec(StrictModel):
    """How the text is tokenised and capped (``data.text``).

    ``tokenizer``: a ``tokenizer.json`` (HF ``tokenizers``; absolute, or relative to the data root); left
    out, the data root's ``tokenizer.json`` when there is one, else a byte-level BPE of ``vocab_size``
    (default 4,096) trained here on the training text and cached. ``train_tokens`` / ``val_tokens``: keep
    the first that many token ids of each split's stream (None: the whole split)."""

    tokenizer: str | None = Field(default=None, description="tokenizer.json to read instead of training one")
    vocab_size: int | None = Field(default=None, ge=257, description="trained tokenizer: 256 bytes + merges + 1")
    train_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the training text")
    val_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the validation text")
    expected_vocab_size: int | None = Field(
        default=None,
        ge=2,
        description="the given tokenizer's vocabulary size (GPT-2's: 50,257), to plan without the data; "
        "checked against the tokenizer when it is read",
    )

    @model_validator(mode="after")
    def _one_tokenizer(self) -> TextSpec:
        if self.tokenizer is not None and self.vocab_size is not None:
            raise ValueError(
                "vocab_size is for a tokenizer trained here; a given tokenizer.json has its own, but got "
                f"(tokenizer={self.tokenizer!r}, vocab_size={self.vocab_size})"
            )
        return self


class TinyStoriesData(HubSourced, LanguageDataSpec):
    """``data: {name: tinystories, seq_len: L, text: {…}}`` (``text`` None: :class:`TextSpec`'s defaults),
    under ``data.root`` or ``$TINYSTORIES_ROOT``. ``limit_train`` / ``limit_val`` keep the first windows."""

    name: Literal["tinystories"] = "tinystories"
    root_env: ClassVar[str] = TINYSTORIES_ROOT_ENV
    hub_repo: ClassVar[str] = HUB_REPO
    text: TextSpec | None = Field(default=None, description="tokenizer and caps; None means TextSpec()'s")

    @property
    def text_options(self) -> TextSpec:
        return self.text or TextSpec()

    def vocab_size(self) -> int:
        """The given tokenizer.json's size (largest id + 1; read when the file is there: ``text.tokenizer``,
        or ``tokenizer.json`` in the data root; when it is not there, ``text.expected_vocab_size``), else
        ``text.vocab_size`` (default ``TEXT_DEFAULT_VOCAB_SIZE``), the size of the tokenizer trained here."""
        text = self.text_options
        path = given_tokenizer(text.tokenizer, self.optional_root() if self.source == "folder" else None)
        if path is not None and path.is_file():
            size = read_tokenizer(path)[2]
            check_tokenizer_vocab(text, path, size)
            return size
        if path is not None and text.expected_vocab_size is not None:  # not there yet: plan with the stated size
            return text.expected_vocab_size
        if path is not None:  # given, and not there: its size cannot be known
            raise FileNotFoundError(
                f"tinystories: the tokenizer file {path} (data.text.tokenizer) does not exist, so the vocabulary "
                "size cannot be known; a relative path is read from the data root (data.root or "
                f"${TINYSTORIES_ROOT_ENV})"
            )
        return text.vocab_size or TEXT_DEFAULT_VOCAB_SIZE

    def require_local(self) -> Path | None:
        if self.source == "hub":  # read through the datasets cache: a missing split is a one-line error at load
            return None
        root = self.resolve_root()
        if find_layout(root) is None:
            raise DataNotFoundError(
                f"tinystories: expected under {root} either the release's {' and '.join(TEXT_FILES.values())} "
                f"or a datasets folder saved with save_to_disk (dataset_dict.json, train/, validation/); "
                f"{missing_layout(root)}. Point `data.root` / ${TINYSTORIES_ROOT_ENV} at the folder that "
                "holds them. Nothing is downloaded."
            )
        tokenizer = given_tokenizer(self.text_options.tokenizer, root)
        if tokenizer is not None and not tokenizer.is_file():
            raise DataNotFoundError(
                f"tinystories: the tokenizer file {tokenizer} (data.text.tokenizer; a relative path is read from "
                f"the data root, `data.root` / ${TINYSTORIES_ROOT_ENV}) does not exist. Leave it out to use the "
                "root's tokenizer.json or train one here. Nothing is downloaded."
            )
        return root

    def load_arrays(self) -> LMSplits:
        """Tokenised, packed into windows of ``seq_len`` + 1 ids and cached (:func:`load_tinystories_streams`)."""
        root = self.require_local()
        where, layout = (self.hub_splits(), "hub") if self.source == "hub" else (root, find_layout(root))
        streams, description, vocab_size = load_tinystories_streams(where, layout, self.text_options)
        packed = {}
        for split, stream in streams.items():
            ids, labels = pack_windows(stream, self.seq_len)
            if not len(ids):
                raise ValueError(
                    f"tinystories: the {split} split gives {len(stream)} token ids, fewer than seq_len + 1 = "
                    f"{self.seq_len + 1}, so not one window; raise data.text.{split}_tokens or lower seq_len"
                )
            packed[split] = ids, labels
        splits = LMSplits("tinystories", *packed["train"], *packed["val"], vocab_size, self.seq_len, description)
        return keep_first_rows(splits, self)

    def open_batches(self, device: torch.device, arrays: LMSplits | None = None) -> BatchSource:
        return LMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
