"""A text data set's documents as token streams, cut into windows, and kept in the cache.

*Encoding*: a split's documents, in order, each encoded and followed by a separator id, form one stream of
token ids; a cap keeps its first that many ids, and documents are read only until the stream is that long
(a training file can be gigabytes).

*Packing*, two ways: :func:`next_token_windows` (GPT-style: windows of L + 1 ids every L ids, inputs and
next-token labels) and :func:`block_windows` (BERT-style: non-overlapping windows of L ids).

*Cache*: both splits' streams as one ``.npz`` (ids in the smallest unsigned type that holds the vocabulary)
under the data set's cache folder (``workers/data/cache.py``), keyed by a hash of each split's identity
(:meth:`TextSource.identity`), the tokenizer (its description and key) and the caps, with the data set's
format number; ``seq_len`` is not in the key (packing is a reshape, done on load).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workers.data.cache import hash_key, read_arrays, write_arrays
from workers.data.splits import smallest_uint
from workers.data.text.documents import ENCODE_BATCH, TextSource, batched
from workers.data.text.tokenizer import TextTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SPLITS = ("train", "val")


def encode_texts(tokenizer: Tokenizer, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
    """The ids of each text; ``add_special_tokens``: with the tokenizer's own template (its post-processor)."""
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return [encoding.ids for encoding in encode(texts, add_special_tokens=add_special_tokens)]


def encode_stream(
    tokenizer: Tokenizer,
    documents: Iterable[str],
    separator_id: int,
    max_tokens: int | None,
    dtype: np.dtype,
    add_special_tokens: bool = False,
) -> np.ndarray:
    """One stream of ids: each document's ids (:func:`encode_texts`) followed by ``separator_id``; documents
    are read, :data:`ENCODE_BATCH` at a time, only until the stream has ``max_tokens`` ids (None: all), and it
    is cut there."""
    parts: list[np.ndarray] = []
    total = 0
    for batch in batched(documents, ENCODE_BATCH):
        encoded = encode_texts(tokenizer, batch, add_special_tokens)
        ends = np.cumsum([len(ids) + 1 for ids in encoded])  # one past each document's separator
        flat = np.full(int(ends[-1]), separator_id, dtype=dtype)
        words = np.ones(len(flat), dtype=bool)
        words[ends - 1] = False
        flat[words] = np.fromiter(chain.from_iterable(encoded), dtype=dtype, count=len(flat) - len(encoded))
        parts.append(flat)
        total += len(flat)
        if max_tokens is not None and total >= max_tokens:
            break
    stream = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    return stream[:max_tokens] if max_tokens is not None else stream


def next_token_windows(stream: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, labels), each (W, seq_len), W = (len(stream) - 1) // seq_len: window w is
    ``stream[w·seq_len : w·seq_len + seq_len + 1]`` (consecutive windows share one id, so every id after the
    first is a target exactly once), ids its first seq_len ids (the stream's dtype) and labels its last
    seq_len (int64, all scored). The tail is dropped."""
    windows = max(len(stream) - 1, 0) // seq_len
    span = windows * seq_len
    ids = stream[:span].reshape(windows, seq_len)
    labels = stream[1 : span + 1].astype(np.int64).reshape(windows, seq_len)
    return ids, labels


def block_windows(stream: np.ndarray, seq_len: int) -> np.ndarray:
    """(W, seq_len) windows, W = len(stream) // seq_len: window w is ``stream[w·seq_len : (w+1)·seq_len]``;
    the remainder is dropped."""
    windows = len(stream) // seq_len
    return stream[: windows * seq_len].reshape(windows, seq_len)


def cached_streams(
    source: TextSource,
    tokenizer: TextTokenizer,
    separator_id: int,
    caps: dict[str, int | None],
    folder: Path,
    file_prefix: str,
    cache_format: int,
    add_special_tokens: bool = False,
) -> dict[str, np.ndarray]:
    """``{"train": stream, "val": stream}`` of ``source`` (:func:`encode_stream`, each split's ids capped at
    ``caps[split]``), read from ``folder/<file_prefix>-<key>.npz`` when these splits, tokenizer and caps were
    encoded before, else encoded and stored there."""
    identity = {
        "format": cache_format,
        **{split: source.identity(split) for split in SPLITS},
        "tokenizer": [tokenizer.description, tokenizer.key],
        "caps": [caps[split] for split in SPLITS],
    }
    key = hash_key(identity)
    path = folder / f"{file_prefix}-{key}.npz"
    cached = read_arrays(path, key, source.what)
    if cached is not None:
        return cached
    dtype = smallest_uint(tokenizer.vocab_size)
    streams = {
        split: encode_stream(
            tokenizer.tokenizer, source.documents(split), separator_id, caps[split], dtype, add_special_tokens
        )
        for split in SPLITS
    }
    write_arrays(path, key, streams, source.what)
    return streams
