"""Language-model data: a label per token. Multi-query associative recall (generated) and TinyStories (read
from a local folder, tokenised and packed). Nothing is downloaded, ever.

Both give, per split, ``ids`` (N, seq_len) token ids and ``labels`` (N, seq_len) int64, where ``labels[n, t]``
is the token the model must predict from its output at position ``t`` (having seen ``ids[n, :t+1]``), and
``IGNORE_INDEX`` (-100) marks a position that is not scored. ``workers.data.LMSplits`` holds them and
``workers.data.LMBatches`` batches them.

**MQAR** (multi-query associative recall; Arora, Eyuboglu et al. 2023, *Zoology: Measuring and Improving
Recall in Efficient Language Models*, arXiv 2312.04927; the generator follows the rules of Zoology's
``zoology/data/multiquery_ar.py``, ``multiquery_ar``, written again here with a numpy ``Generator``).
With vocabulary size V, ``num_kv_pairs`` = k and sequence length L (``data.seq_len``, the input length):

- *keys* are k distinct tokens from 1 … V//2 - 1 (0 is never a key), *values* k distinct tokens from
  V//2 … V-1, both uniform without replacement, and the i-th key is paired with the i-th value;
- positions 0 … 2k-1 are the context: ``key_1 value_1 key_2 value_2 … key_k value_k``;
- the rest, positions 2k … L-1, is the query region. Every key is queried exactly once there, at position
  ``2k + 2·g`` for a *gap* g from 0 … S-1, S = (L - 2k) // 2. The k gaps are drawn one after another
  without replacement, each with P(g) ∝ (g + 1)^(power_a - 1) among the gaps not yet drawn (Zoology's power
  law: ``power_a`` = 1 is uniform, Zoology's default 0.01 favours queries soon after the context), and the
  i-th gap drawn is the i-th key's, as in Zoology (so for power_a < 1 earlier pairs tend to be queried
  sooner);
- every other query-region position holds a uniform random token from 0 … V-1 (Zoology's
  ``random_non_queries``; such a token may equal a key, and is not scored);
- **scored positions**: exactly the k query positions, whose label is the value paired with the key
  there (the model reads the key and must answer its value); every other label is -100.

Rules (Zoology's): L even, 4k ≤ L (so S ≥ k), k ≤ V//2 - 1. Zoology also asserts V > L; nothing here needs
it, so it is not required. Defaults (``workers.config.MQARSpec``): Zoology's k = 8, power_a = 0.01, 100,000
train and 3,000 val rows, but V = 256 (Zoology: 8,192) so that CPU models stay small. Rows are generated in
blocks of ``MQAR_BLOCK_ROWS``, block b of split s from ``numpy.random.default_rng([seed, s, b])`` (train s = 0,
val s = 1): deterministic given the seed, train and val independent, any number of rows, and a smaller
``train_rows`` is a prefix of a larger one. Vectorised numpy: distinct keys and values by Floyd's algorithm
across the rows of a block, the gaps by the Gumbel-top-k trick (the k largest of log-weight + Gumbel noise,
in descending order, are distributed exactly as k draws one at a time without replacement, in draw
order). Not cached: generating is about as fast as reading a cache would be (see **Speed**).

**TinyStories** (Eldan & Li 2023, arXiv 2305.07759) under ``data.root`` or ``$TINYSTORIES_ROOT``, in either
layout (the first one found, in this order):

- *text*: the release's ``TinyStories-train.txt`` and ``TinyStories-valid.txt``, stories separated by
  ``<|endoftext|>`` (normally on a line of its own); each story is its text between separators, stripped of
  surrounding whitespace (empty ones skipped);
- *saved*: a HF ``datasets`` ``DatasetDict`` saved with ``save_to_disk`` (``dataset_dict.json``, ``train/``
  and ``validation/``, a ``text`` column), read with ``datasets.load_from_disk`` (local files only); each
  story is a row's ``text``, stripped.

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
under ``$SWEEP_CACHE_DIR/tinystories/`` (default ``~/.cache/heads-for-depth/tinystories/``), keyed by a hash
of each split's files (path, size, mtime), the tokenizer (its description and the SHA-256 of its JSON) and
the token caps; ``seq_len`` is not in the key (packing is a reshape, done on load). Written to a temporary
file and renamed, so a torn file is never read; a cache folder that cannot be written is logged and the
data returned anyway.

**Speed** (this machine, 2 CPU cores shared with other work, Python 3.11, best of 3): MQAR at L = 64, k = 8,
V = 256: about 500,000 rows/s (Zoology's 100,000 training rows in 0.2 s); L = 256, k = 16, V = 8,192: about
140,000 rows/s; L = 512, k = 64, V = 8,192: about 40,000 rows/s. Tokenising with a trained 4,096-token BPE
(``encode_batch``): 0.7-1.3 million tokens/s (source text and synthetic stories); training that BPE on 20 M
characters: 3-7 s, once per machine. TinyStories' whole training file (about 2 GB, some 500 M tokens) would
take roughly 10 minutes to tokenise, and the packed labels (int64) take 8 bytes per token in memory: cap
``train_tokens`` for anything but a large machine. A cached load is a file read (5 M tokens: 0.04 s).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workers.config import MQAR_DEFAULT_VOCAB_SIZE, TEXT_DEFAULT_VOCAB_SIZE, DataSpec, MQARSpec, TextSpec, check_mqar
from workers.listops import CACHE_DIR_ENV, DEFAULT_CACHE_ROOT, _atomic_file

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "EOT",
    "IGNORE_INDEX",
    "MQAR_DEFAULT_VOCAB_SIZE",
    "TEXT_DEFAULT_VOCAB_SIZE",
    "TINYSTORIES_ROOT_ENV",
    "check_mqar",
    "find_layout",
    "generate_mqar",
    "iter_stories",
    "lm_vocab_size",
    "load_tinystories_streams",
    "mqar_splits",
    "pack_windows",
    "smallest_uint",
    "train_tokenizer",
]

log = logging.getLogger(__name__)

IGNORE_INDEX = -100  # a label that is not scored (as torch's CrossEntropyLoss ignore_index)

# --- MQAR -------------------------------------------------------------------------------------------------

MQAR_BLOCK_ROWS = 4096  # rows per generator block: each block has its own seeded Generator
TRAIN_STREAM, VAL_STREAM = 0, 1


def smallest_uint(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds ids 0 … vocab_size - 1."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


def _distinct(rng: np.random.Generator, rows: int, low: int, high: int, count: int) -> np.ndarray:
    """(rows, count) int64: per row ``count`` distinct integers from low … high-1, a uniform subset in uniform
    order. Floyd's algorithm, vectorised over the rows (a boolean "taken" table per block), then shuffled."""
    n = high - low
    taken = np.zeros((rows, n), dtype=bool)
    out = np.empty((rows, count), dtype=np.int64)
    index = np.arange(rows)
    for step, j in enumerate(range(n - count, n)):
        draw = rng.integers(0, j + 1, size=rows)
        pick = np.where(taken[index, draw], j, draw)  # j itself is never taken yet: every pick so far is < j
        taken[index, pick] = True
        out[:, step] = pick
    return rng.permuted(out, axis=1) + low


def _mqar_block(
    rng: np.random.Generator, rows: int, seq_len: int, vocab_size: int, num_kv_pairs: int, power_a: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block of MQAR rows, as the module docstring defines them: ``(ids, positions, values)``, ids
    (rows, seq_len) in :func:`smallest_uint`, and per row the k query positions and the value scored at each
    (the labels are -100 elsewhere)."""
    half, k = vocab_size // 2, num_kv_pairs
    dtype = smallest_uint(vocab_size)
    keys = _distinct(rng, rows, 1, half, k)
    values = _distinct(rng, rows, half, vocab_size, k)
    space = (seq_len - 2 * k) // 2
    log_weights = (power_a - 1.0) * np.log(np.arange(1, space + 1, dtype=np.float64))
    scores = log_weights + rng.gumbel(size=(rows, space))  # Gumbel-top-k: k gaps without replacement
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    gaps = np.take_along_axis(top, order, axis=1)  # in draw order: the i-th drawn gap is the i-th key's
    ids = rng.integers(0, vocab_size, size=(rows, seq_len), dtype=dtype)  # filler; context and queries go over it
    ids[:, 0 : 2 * k : 2] = keys
    ids[:, 1 : 2 * k : 2] = values
    positions = 2 * k + 2 * gaps
    np.put_along_axis(ids, positions, keys.astype(dtype), axis=1)
    return ids, positions, values


def generate_mqar(
    rows: int,
    seq_len: int,
    *,
    vocab_size: int = MQAR_DEFAULT_VOCAB_SIZE,
    num_kv_pairs: int = 8,
    power_a: float = 0.01,
    seed: int = 0,
    stream: int = TRAIN_STREAM,
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` MQAR sequences: ids (rows, seq_len) in :func:`smallest_uint`, labels (rows, seq_len) int64
    with ``IGNORE_INDEX`` where not scored. ``stream`` separates splits (0 train, 1 val) under one seed."""
    check_mqar(vocab_size, num_kv_pairs, seq_len)
    if rows < 0 or seed < 0 or stream < 0 or power_a <= 0:
        raise ValueError(
            f"mqar: rows >= 0, seed >= 0, stream >= 0 and power_a > 0 must hold, but got (rows={rows}, "
            f"seed={seed}, stream={stream}, power_a={power_a})"
        )
    ids = np.empty((rows, seq_len), dtype=smallest_uint(vocab_size))
    labels = np.full((rows, seq_len), IGNORE_INDEX, dtype=np.int64)
    for block, start in enumerate(range(0, rows, MQAR_BLOCK_ROWS)):
        rng = np.random.default_rng([seed, stream, block])  # always a whole block: a prefix is the same rows
        block_ids, positions, values = _mqar_block(rng, MQAR_BLOCK_ROWS, seq_len, vocab_size, num_kv_pairs, power_a)
        count = min(MQAR_BLOCK_ROWS, rows - start)
        ids[start : start + count] = block_ids[:count]
        np.put_along_axis(labels[start : start + count], positions[:count], values[:count], axis=1)
    return ids, labels


def mqar_splits(options: MQARSpec, seq_len: int) -> dict[str, np.ndarray]:
    """``{"train_ids", "train_labels", "val_ids", "val_labels"}`` for ``options`` at ``seq_len``."""
    arrays = {}
    for split, rows, stream in (("train", options.train_rows, TRAIN_STREAM), ("val", options.val_rows, VAL_STREAM)):
        ids, labels = generate_mqar(
            rows,
            seq_len,
            vocab_size=options.vocab_size,
            num_kv_pairs=options.num_kv_pairs,
            power_a=options.power_a,
            seed=options.seed,
            stream=stream,
        )
        arrays[f"{split}_ids"], arrays[f"{split}_labels"] = ids, labels
    return arrays


# --- TinyStories: files -------------------------------------------------------------------------------------

TINYSTORIES_ROOT_ENV = "TINYSTORIES_ROOT"
EOT = "<|endoftext|>"
TEXT_FILES = {"train": "TinyStories-train.txt", "val": "TinyStories-valid.txt"}
SAVED_MARKER = "dataset_dict.json"  # what DatasetDict.save_to_disk writes at the top
SAVED_SPLITS = {"train": "train", "val": "validation"}
TEXT_COLUMN = "text"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_TRAIN_CHARS = 20_000_000  # characters of training stories a tokenizer is trained on
ENCODE_BATCH = 1024  # stories per encode_batch call
TEXT_CACHE_FORMAT = 1  # bump when reading, tokenising or packing changes: old cache files are then not read


def find_layout(root: Path) -> str | None:
    """``"text"`` (the release's two text files), ``"saved"`` (a ``save_to_disk`` DatasetDict folder), or None."""
    if all((root / name).is_file() for name in TEXT_FILES.values()):
        return "text"
    if (root / SAVED_MARKER).is_file() and all((root / split).is_dir() for split in SAVED_SPLITS.values()):
        return "saved"
    return None


def missing_layout(root: Path) -> str:
    """What neither layout found under ``root``, in words (for the error message)."""
    text = [name for name in TEXT_FILES.values() if not (root / name).is_file()]
    saved = [name for name in (SAVED_MARKER, *(f"{s}/" for s in SAVED_SPLITS.values())) if not (root / name).exists()]
    return f"the text layout lacks {', '.join(text)}; the saved layout lacks {', '.join(saved)}"


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


def _iter_saved(root: Path, split: str) -> Iterator[str]:
    """Stories of one split of a ``save_to_disk`` folder: each row's ``text``, stripped."""
    import datasets

    folder = root / SAVED_SPLITS[split]
    dataset = datasets.load_from_disk(str(folder))  # local files only
    if TEXT_COLUMN not in dataset.column_names:
        raise ValueError(
            f"tinystories: the saved split {folder} has no {TEXT_COLUMN!r} column (columns: "
            f"{', '.join(dataset.column_names)}); it must hold the stories' text in a column named {TEXT_COLUMN!r}"
        )
    for batch in dataset.select_columns([TEXT_COLUMN]).iter(batch_size=ENCODE_BATCH):
        for text in batch[TEXT_COLUMN]:
            story = (text or "").strip()
            if story:
                yield story


def iter_stories(root: Path, layout: str, split: str) -> Iterator[str]:
    """The stories of ``split`` (``train`` or ``val``) in file order, read lazily."""
    if layout == "text":
        return _iter_text_file(root / TEXT_FILES[split])
    if layout == "saved":
        return _iter_saved(root, split)
    raise ValueError(f"unknown TinyStories layout {layout!r}; expected 'text' or 'saved'")


def split_identity(root: Path, layout: str, split: str) -> list[list]:
    """[path, size, mtime_ns] of every file a split is read from (the cache key's view of the data)."""
    if layout == "text":
        paths = [root / TEXT_FILES[split]]
    else:
        folder = root / SAVED_SPLITS[split]
        # the saved files; not the cache-*.arrow files that datasets may write beside them later
        paths = sorted(path for path in folder.rglob("*") if path.is_file() and not path.name.startswith("cache-"))
    identity = []
    for path in paths:
        stat = path.stat()
        identity.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return identity


# --- TinyStories: tokenizer ---------------------------------------------------------------------------------


def tinystories_root(spec: DataSpec) -> Path | None:
    """``data.root`` or ``$TINYSTORIES_ROOT``, or None when neither is set (not checked further)."""
    root = spec.root or os.environ.get(TINYSTORIES_ROOT_ENV)
    return Path(root).expanduser() if root else None


def tokenizer_file(text: TextSpec, root: Path | None) -> Path | None:
    """The tokenizer.json to read: ``text.tokenizer`` (relative to the data root when there is one), else
    the data root's ``tokenizer.json`` when it exists, else None (one is trained here). The given path is
    returned whether or not it exists; the caller reports a missing one."""
    if text.tokenizer is not None:
        path = Path(text.tokenizer).expanduser()
        return path if path.is_absolute() or root is None else root / path
    if root is not None and (root / TOKENIZER_FILE).is_file():
        return root / TOKENIZER_FILE
    return None


def _vocab_size_of(tokenizer: Tokenizer) -> int:
    return max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1


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
    return tokenizer, eot, _vocab_size_of(tokenizer)


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

    def batches() -> Iterator[list[str]]:
        batch: list[str] = []
        for story in stories:
            batch.append(story)
            if len(batch) == ENCODE_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    tokenizer.train_from_iterator(batches(), trainer)
    return tokenizer


def _first_chars(stories: Iterable[str], limit: int) -> Iterator[str]:
    """Whole stories until ``limit`` characters have been given."""
    seen = 0
    for story in stories:
        if seen >= limit:
            return
        seen += len(story)
        yield story


def trained_tokenizer(root: Path, layout: str, vocab_size: int, folder: Path) -> tuple[Tokenizer, str]:
    """(tokenizer, description) of the BPE trained on this root's training text, read from ``folder`` when
    trained before (keyed by the training files' identity, ``vocab_size`` and the characters read), else
    trained and saved there."""
    from tokenizers import Tokenizer

    identity = {
        "format": TEXT_CACHE_FORMAT,
        "train": split_identity(root, layout, "train"),
        "vocab_size": vocab_size,
        "chars": TOKENIZER_TRAIN_CHARS,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    path = folder / f"tokenizer-{key}.json"
    tokenizer = None
    if path.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(path))
            log.info("TinyStories: read the tokenizer %s", path)
        except Exception as exc:  # a torn or foreign file: train again
            log.warning("TinyStories: cached tokenizer %s is unreadable (%s); training again", path, exc)
    if tokenizer is None:
        log.info("TinyStories: training a %d-token byte-level BPE on %s", vocab_size, root)
        tokenizer = train_tokenizer(
            _first_chars(iter_stories(root, layout, "train"), TOKENIZER_TRAIN_CHARS), vocab_size
        )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with _atomic_file(path, "w", encoding="utf-8") as handle:
                handle.write(tokenizer.to_str())
        except OSError as exc:
            log.warning("TinyStories: could not save the tokenizer to %s (%s); continuing without", path, exc)
    digest = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:12]
    return tokenizer, f"trained:bytelevel-bpe-{vocab_size}-{digest}"


# --- TinyStories: tokenising and packing ---------------------------------------------------------------------


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


def text_cache_dir() -> Path:
    """``$SWEEP_CACHE_DIR/tinystories`` (default ``~/.cache/heads-for-depth/tinystories``)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_ROOT).expanduser() / "tinystories"


def load_tinystories_streams(
    root: Path, layout: str, text: TextSpec, directory: str | os.PathLike | None = None
) -> tuple[dict[str, np.ndarray], str, int]:
    """``({"train": stream, "val": stream}, tokenizer description, vocab_size)`` for the TinyStories folder
    ``root`` in ``layout``, from the cache when these files, tokenizer and caps were tokenised before, else
    tokenised (training the tokenizer first when none is given) and stored. ``directory`` defaults to
    :func:`text_cache_dir`."""
    folder = Path(directory).expanduser() if directory is not None else text_cache_dir()
    tokenizer, eot_id, vocab_size, description, tokenizer_hash = tinystories_tokenizer(root, layout, text, folder)
    identity = {
        "format": TEXT_CACHE_FORMAT,
        "train": split_identity(root, layout, "train"),
        "val": split_identity(root, layout, "val"),
        "tokenizer": [description, tokenizer_hash],
        "caps": [text.train_tokens, text.val_tokens],
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    path = folder / f"tinystories-{key}.npz"
    cached = read_token_cache(path, key)
    if cached is not None:
        return cached, description, vocab_size
    dtype = smallest_uint(vocab_size)
    streams = {
        split: encode_stories(tokenizer, iter_stories(root, layout, split), eot_id, cap, dtype)
        for split, cap in (("train", text.train_tokens), ("val", text.val_tokens))
    }
    write_token_cache(path, key, streams)
    return streams, description, vocab_size


def tinystories_tokenizer(root: Path, layout: str, text: TextSpec, folder: Path):
    """``(tokenizer, end-of-text id, vocab_size, description, hash)``: the given tokenizer file
    (``data.text.tokenizer``; the hash is of its bytes), or one trained on the training split (cached in
    ``folder``; the description names its settings and serves as the hash)."""
    given = tokenizer_file(text, root)
    if given is not None:
        if not given.is_file():
            raise FileNotFoundError(f"tinystories: the tokenizer file {given} (data.text.tokenizer) does not exist")
        tokenizer, eot_id, vocab_size = read_tokenizer(given)
        check_tokenizer_vocab(text, given, vocab_size)
        return tokenizer, eot_id, vocab_size, f"file:{given.resolve()}", hashlib.sha256(given.read_bytes()).hexdigest()
    vocab_size = text.vocab_size or TEXT_DEFAULT_VOCAB_SIZE
    tokenizer, description = trained_tokenizer(root, layout, vocab_size, folder)
    actual = _vocab_size_of(tokenizer)
    if actual > vocab_size:
        raise ValueError(f"tinystories: trained tokenizer has {actual} ids, more than vocab_size={vocab_size}")
    return tokenizer, tokenizer.token_to_id(EOT), vocab_size, description, description


def read_token_cache(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The cached streams stored under ``key`` at ``path``; None when absent, stale or unreadable."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as stored:
            if str(stored["key"]) == key:
                log.info("TinyStories: read %s", path)
                return {"train": stored["train"], "val": stored["val"]}
    except (OSError, ValueError, KeyError) as exc:
        log.warning("TinyStories: cache file %s is unreadable (%s); tokenising again", path, exc)
    return None


def write_token_cache(path: Path, key: str, streams: dict[str, np.ndarray]) -> None:
    """Store the streams atomically; a cache that cannot be written is a warning, not a failure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _atomic_file(path, "wb") as handle:
            np.savez(handle, key=np.array(key), **streams)
        log.info("TinyStories: cached in %s", path)
    except OSError as exc:
        log.warning("TinyStories: could not write the cache file %s (%s); continuing without it", path, exc)


# --- planning ------------------------------------------------------------------------------------------------


def lm_vocab_size(spec: DataSpec) -> int:
    """The vocabulary size a model needs for a language-model data set, known without reading the data:
    MQAR's ``mqar.vocab_size``; for TinyStories the given tokenizer.json's (largest id + 1; read when the
    file is there: ``text.tokenizer``, or ``tokenizer.json`` in the data root; when it is not there,
    ``text.expected_vocab_size``), else ``text.vocab_size`` (default ``TEXT_DEFAULT_VOCAB_SIZE``), the size
    of the tokenizer trained here."""
    if spec.name == "mqar":
        return (spec.mqar or MQARSpec()).vocab_size
    if spec.name == "tinystories":
        text = spec.text or TextSpec()
        path = tokenizer_file(text, tinystories_root(spec))
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
    raise ValueError(f"lm_vocab_size: {spec.name!r} is not a language-model data set (mqar, tinystories)")
