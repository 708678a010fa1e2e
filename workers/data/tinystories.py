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

The reading, tokenising, packing and caching are ``workers/data/text/``'s; this module says which files,
tokenizer recipe, separator and packing.

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

import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data.base import BatchSource, DataNotFoundError, LanguageDataSpec, keep_first_rows
from workers.data.cache import cache_dir
from workers.data.hub import HubFile, HubSourced, hub_file
from workers.data.splits import LMSplits
from workers.data.text.documents import TextFiles, TextSource, find_layout, missing_layout, read_separated
from workers.data.text.streams import cached_streams, next_token_windows
from workers.data.text.tokenizer import (
    BYTELEVEL_BPE,
    EOT,
    TextTokenizer,
    given_tokenizer,
    read_tokenizer,
    trained_tokenizer,
)

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

log = logging.getLogger(__name__)

TINYSTORIES_ROOT_ENV = "TINYSTORIES_ROOT"
TEXT_FILES = TextFiles({"train": "TinyStories-train.txt", "val": "TinyStories-valid.txt"}, read_separated(EOT))
TEXT_DEFAULT_VOCAB_SIZE = 4096  # a byte-level BPE trained here when no tokenizer.json is given
HUB_REPO = "roneneldan/TinyStories"  # source: hub, when data.hub.repo is left out
TEXT_CACHE_FORMAT = 1  # bump when reading, tokenising or packing changes: old cache files are then not read
MISSING_EOT_FIX = (
    f"stories are joined with {EOT!r}, so the tokenizer must have it (GPT-2's does), or leave out the tokenizer "
    "to train one here"
)


def read_story_tokenizer(path: Path, text: TextSpec) -> TextTokenizer:
    """The tokenizer.json at ``path``, which must hold ``<|endoftext|>``, checked against the space's sizes
    (:func:`check_tokenizer_vocab`)."""
    tokenizer = read_tokenizer(path, (EOT,), "tinystories", MISSING_EOT_FIX)
    check_tokenizer_vocab(text, path, tokenizer.vocab_size)
    return tokenizer


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


def story_tokenizer(source: TextSource, text: TextSpec, folder: Path) -> TextTokenizer:
    """The given tokenizer file (``data.text.tokenizer``, else the root's tokenizer.json), or a byte-level BPE
    trained on the training split (cached in ``folder``). A trained one keeps the size asked as its
    ``vocab_size`` (the model's and the ids' dtype's), and its description as its cache key."""
    if text.tokenizer_hub is not None:  # fetched by `sweep data fetch`, read from the cache (offline flags honoured)
        return read_story_tokenizer(hub_file(text.tokenizer_hub, "tinystories", download=True), text)
    given = given_tokenizer(text.tokenizer, source.root)
    if given is not None:
        if not given.is_file():
            raise FileNotFoundError(f"tinystories: the tokenizer file {given} (data.text.tokenizer) does not exist")
        return read_story_tokenizer(given, text)
    asked = text.vocab_size or TEXT_DEFAULT_VOCAB_SIZE
    trained = trained_tokenizer(source, BYTELEVEL_BPE, asked, folder, TEXT_CACHE_FORMAT, "text.vocab_size")
    # Stream caches written before workers/data/text/ existed hold the description here: kept, so they are read.
    return dataclasses.replace(trained, vocab_size=asked, key=trained.description)


def load_tinystories_streams(
    source: TextSource, text: TextSpec, directory: str | os.PathLike | None = None
) -> tuple[dict[str, np.ndarray], str, int]:
    """``({"train": stream, "val": stream}, tokenizer description, vocab_size)``: each story (encoded with the
    tokenizer's own template) followed by ``<|endoftext|>`` (``workers.data.text.streams.cached_streams``),
    cached in ``directory`` (default ``$SWEEP_CACHE_DIR/tinystories``)."""
    folder = Path(directory).expanduser() if directory is not None else cache_dir("tinystories")
    tokenizer = story_tokenizer(source, text, folder)
    caps = {"train": text.train_tokens, "val": text.val_tokens}
    eot_id = tokenizer.special_ids[0]
    streams = cached_streams(source, tokenizer, eot_id, caps, folder, "tinystories", TEXT_CACHE_FORMAT, True)
    return streams, tokenizer.description, tokenizer.vocab_size


class TextSpec(StrictModel):
    """How the text is tokenised and capped (``data.text``).

    ``tokenizer``: a ``tokenizer.json`` (HF ``tokenizers``; absolute, or relative to the data root); left
    out, the data root's ``tokenizer.json`` when there is one, else a byte-level BPE of ``vocab_size``
    (default 4,096) trained here on the training text and cached. ``train_tokens`` / ``val_tokens``: keep
    the first that many token ids of each split's stream (None: the whole split)."""

    tokenizer: str | None = Field(default=None, description="tokenizer.json to read instead of training one")
    tokenizer_hub: HubFile | None = Field(
        default=None, description="a tokenizer.json from the Hub instead (repo, pinned revision), e.g. GPT-2's"
    )
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
        if self.tokenizer_hub is not None and (self.tokenizer is not None or self.vocab_size is not None):
            raise ValueError(
                "tokenizer_hub names the tokenizer; leave out tokenizer and vocab_size with it, but got "
                f"(tokenizer={self.tokenizer!r}, vocab_size={self.vocab_size})"
            )
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
        if text.tokenizer_hub is not None:
            return self.hub_tokenizer_vocab_size(text)
        path = given_tokenizer(text.tokenizer, self.optional_root() if self.source == "folder" else None)
        if path is not None and path.is_file():
            return read_story_tokenizer(path, text).vocab_size
        if path is not None and text.expected_vocab_size is not None:  # not there yet: plan with the stated size
            return text.expected_vocab_size
        if path is not None:  # given, and not there: its size cannot be known
            raise FileNotFoundError(
                f"tinystories: the tokenizer file {path} (data.text.tokenizer) does not exist, so the vocabulary "
                "size cannot be known; a relative path is read from the data root (data.root or "
                f"${TINYSTORIES_ROOT_ENV})"
            )
        return text.vocab_size or TEXT_DEFAULT_VOCAB_SIZE

    def hub_tokenizer_vocab_size(self, text: TextSpec) -> int:
        """The Hub tokenizer's size when it is in the cache, else ``text.expected_vocab_size``: planning never
        downloads."""
        cached = hub_file(text.tokenizer_hub, "tinystories", download=False)
        if cached is not None:
            return read_story_tokenizer(cached, text).vocab_size
        if text.expected_vocab_size is not None:
            return text.expected_vocab_size
        hub = text.tokenizer_hub
        raise FileNotFoundError(
            f"tinystories: the tokenizer {hub.repo}@{hub.revision} ({hub.filename}) is not in the Hub cache, so the "
            "vocabulary size cannot be known; run `sweep data fetch SPACE`, or set text.expected_vocab_size"
        )

    def fetch(self) -> list[str]:
        """The splits' lines, and the Hub tokenizer's (downloaded, or found in the cache) when there is one."""
        lines = super().fetch()
        hub = self.text_options.tokenizer_hub
        if hub is not None:
            path = hub_file(hub, "tinystories", download=True)
            size = read_story_tokenizer(path, self.text_options).vocab_size
            lines.append(f"tinystories tokenizer: {size:,} ids, {path} (hub:{hub.repo}@{hub.revision})")
        return lines

    def require_local(self) -> Path | None:
        if self.source == "hub":  # read through the datasets cache: a missing split is a one-line error at load
            return None
        root = self.resolve_root()
        if find_layout(root, TEXT_FILES) is None:
            raise DataNotFoundError(
                f"tinystories: expected under {root} either the release's {' and '.join(TEXT_FILES.names.values())} "
                f"or a datasets folder saved with save_to_disk (dataset_dict.json, train/, validation/); "
                f"{missing_layout(root, TEXT_FILES)}. Point `data.root` / ${TINYSTORIES_ROOT_ENV} at the folder that "
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

    def text_source(self) -> TextSource:
        """Where the stories are: the Hub, or the data root in its layout (checked by :meth:`require_local`)."""
        root = self.require_local()
        if self.source == "hub":
            return TextSource("hub", "tinystories", hub=self.hub_splits())
        return TextSource(find_layout(root, TEXT_FILES), "tinystories", root=root, files=TEXT_FILES)

    def load_arrays(self) -> LMSplits:
        """Tokenised, packed into windows of ``seq_len`` + 1 ids and cached (:func:`load_tinystories_streams`)."""
        streams, description, vocab_size = load_tinystories_streams(self.text_source(), self.text_options)
        packed = {}
        for split, stream in streams.items():
            ids, labels = next_token_windows(stream, self.seq_len)
            if not len(ids):
                raise ValueError(
                    f"tinystories: the {split} split gives {len(stream)} token ids, fewer than seq_len + 1 = "
                    f"{self.seq_len + 1}, so not one window; raise data.text.{split}_tokens or lower seq_len"
                )
            packed[split] = ids, labels
        splits = LMSplits("tinystories", *packed["train"], *packed["val"], vocab_size, self.seq_len, description)
        return keep_first_rows(splits, self)

    def open_batches(self, device: torch.device, arrays: LMSplits | None = None) -> BatchSource:
        from workers.data.batches import LMBatches  # imports torch

        return LMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
