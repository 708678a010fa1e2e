"""Masked-LM data (Crammed BERT; Geiping & Goldstein 2023, arXiv 2212.14034): a pretraining corpus, its
WordPiece tokenizer, packed windows, BERT's masking, and the GLUE tasks encoded with the same tokenizer for
fine-tuning. Nothing is downloaded, ever.

**Corpus** (``data.corpus``, :class:`CorpusSpec`). ``source: folder`` reads ``data.root`` or
``$MLM_CORPUS_ROOT`` in either layout (the first one found, in this order):

- *text*: ``train.txt`` and ``valid.txt``, one document per non-empty line (stripped);
- *saved*: a HF ``datasets`` ``DatasetDict`` saved with ``save_to_disk`` (``dataset_dict.json``, ``train/`` and
  ``validation/``, a ``text`` column), read with ``datasets.load_from_disk`` (local files only); each
  document is a row's ``text``, stripped (empty ones skipped).

``source: generated`` takes ``generated_sentences`` sentences of ``workers.data.glue.generated_corpus`` (seed
``corpus.seed``), one document each; the last ``max(1, n // 10)`` are the validation split, the rest the
training split. No files.

**Tokenizer**: a ``tokenizer.json`` (``corpus.tokenizer``, absolute or relative to the root; else the root's
``tokenizer.json``) read with HF ``tokenizers``; it must have the five tokens of :data:`SPECIAL_TOKENS`, and
its vocabulary size is its largest id + 1. With none, a WordPiece as cramming's (BERT's normaliser:
lower-cased, accents stripped, control characters cleaned; BERT's pre-tokeniser; ``[UNK]`` for unknown
words) of ``corpus.vocab_size`` ids (default :data:`CRAMMING_VOCAB_SIZE`, 32,768) is trained here on the
first ``TOKENIZER_TRAIN_CHARS`` characters of training documents (whole documents), with the special tokens
as ids 0 … 4, and saved under the cache folder. A small corpus can give fewer ids than asked: the size used
is the real one, largest id + 1. A ``vocab_size`` below what the trainer keeps anyway (every character it
saw) is an error, since models are planned with the size asked (:meth:`MLMCorpusData.vocab_size`). Trial rows name
it ``file:<path>`` or ``trained:wordpiece-<vocab_size asked>-<first 12 hex of the SHA-256 of its JSON>``.

**Packing** (cramming's ``include_sep_token_in_corpus``; no ``[CLS]`` in the corpus): each split's documents,
in order, each encoded without special tokens and followed by ``[SEP]``, form one stream of ids;
``corpus.train_tokens`` / ``corpus.val_tokens`` keep its first that many ids (documents are read only until
the stream is that long). The stream is cut into non-overlapping windows of ``seq_len`` ids (window w is
``stream[w·L : (w+1)·L]``), the remainder dropped. No padding: every position is a real token.

**Masking** (:func:`mask_tokens`, BERT's rule): each non-special token is selected with probability
``corpus.mask_prob`` (cramming: 0.25) and scored; a selected token becomes ``[MASK]`` with probability 0.8, a
uniformly random non-special token with 0.1, and stays itself with 0.1. Training batches are masked afresh
every time they are drawn (dynamic masking, from the trial's generator); the validation windows are masked
once at load with ``torch.Generator().manual_seed(corpus.seed)``, before ``limit_val`` keeps the first
windows, so every trial scores the same masked tokens.

**GLUE** (``data.glue``, :class:`GlueSpec`): each task's train and dev split read with
``workers.data.glue.read_glue_split`` from ``glue.root`` or ``$GLUE_DIR`` (or the generated task ``synthetic``,
written under the cache folder), each example encoded as ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``,
truncated longest-first to ``seq_len`` and right-padded with ``[PAD]`` (:func:`encode_glue_examples`).

**Cache**: the packed streams are kept as ``.npz`` (ids in the smallest unsigned type that holds the
vocabulary) under ``$SWEEP_CACHE_DIR/mlm_corpus/`` (``workers/data/cache.py``), keyed
by a hash of the corpus's files (path, size, mtime; or the generated corpus's size and seed), the tokenizer
(description and the SHA-256 of its JSON) and the token caps; ``seq_len`` is not in the key. Written to a
temporary file and renamed; a cache folder that cannot be written is logged and the data returned anyway.
GLUE encodings and the validation masking are not cached (they are fast).

**Speed** (this machine, 2 CPU cores shared with other work): encoding with a trained WordPiece
(``encode_batch``) about 0.7 million tokens/s; training the WordPiece on 180,000 generated sentences 3.7 s,
once per machine; GLUE encoding about 40,000 examples/s at seq_len 128; :func:`mask_tokens` on a 128 × 128
batch 0.8 ms on the CPU. A cached load is a file read plus the GLUE encoding.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data import glue as glue_files
from workers.data import text as corpus_text
from workers.data.base import BatchSource, DataNotFoundError, LanguageDataSpec, Modality, folder_hash, keep_first_rows
from workers.data.batches import TokenWindowBatches
from workers.data.cache import cache_dir, hash_key, read_arrays, write_arrays
from workers.data.hub import HubSource, HubSplits, check_hub_fields, fetch_line, iter_text
from workers.data.splits import IGNORE_INDEX, smallest_uint

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

MLM_CORPUS_ROOT_ENV = "MLM_CORPUS_ROOT"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0 … 4 in a tokenizer trained here
CRAMMING_VOCAB_SIZE = 32768  # cramming's WordPiece size: the default for a tokenizer trained here
TEXT_FILES = {"train": "train.txt", "val": "valid.txt"}
GENERATED_VAL_DIVISOR = 10  # generated corpus: the last n // 10 sentences (at least 1) are the val split
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of selected tokens: [MASK], a random token; the rest stay themselves
MLM_CACHE_FORMAT = 1  # bump when reading, tokenising or packing changes: old cache files are then not read

Layout = Literal["text", "saved", "generated", "hub"]


@dataclass(frozen=True)
class SpecialIds:
    """The ids of ``[PAD] [UNK] [CLS] [SEP] [MASK]`` in the tokenizer used (0 … 4 in one trained here)."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    def all(self) -> tuple[int, ...]:
        """The five ids, in :data:`SPECIAL_TOKENS` order."""
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


@dataclass(frozen=True)
class MLMTokenizer:
    """The tokenizer of a masked-LM data set: ``vocab_size`` = largest id + 1; ``description`` as the module
    docstring says; ``digest`` the SHA-256 of its JSON (a cache key)."""

    tokenizer: Tokenizer
    specials: SpecialIds
    vocab_size: int
    description: str
    digest: str


# --- corpus files ---------------------------------------------------------------------------------------------


def find_corpus_layout(root: Path) -> Layout | None:
    """``"text"`` (``train.txt`` and ``valid.txt``), ``"saved"`` (a ``save_to_disk`` DatasetDict), or None."""
    if all((root / name).is_file() for name in TEXT_FILES.values()):
        return "text"
    return "saved" if corpus_text.has_saved_layout(root) else None


def _missing_layout(root: Path) -> str:
    """What neither layout found under ``root``, in words."""
    text = [name for name in TEXT_FILES.values() if not (root / name).is_file()]
    return (
        f"the text layout lacks {', '.join(text)}; the saved layout lacks {', '.join(corpus_text.missing_saved(root))}"
    )


def locate_corpus(spec: MLMCorpusData) -> tuple[Path | None, Layout]:
    """(root, layout) of the corpus: (None, "generated") for a generated one; else the folder and its layout,
    or a :class:`DataNotFoundError` naming the folder, both layouts and ``$MLM_CORPUS_ROOT``."""
    if spec.corpus_options.source == "generated":
        return None, "generated"
    if spec.corpus_options.source == "hub":
        return spec.corpus_hub(), "hub"
    root = spec.optional_root()
    layouts = (
        "train.txt and valid.txt (one document per line), or a datasets folder saved with save_to_disk "
        "(dataset_dict.json, train/, validation/, a text column)"
    )
    if root is None:
        raise DataNotFoundError(
            f"mlm_corpus: no corpus folder is set: set `data.root` in the config (sweep: --data-root) or "
            f"${MLM_CORPUS_ROOT_ENV} to a folder holding {layouts}, or set data.corpus.source: generated. "
            "Nothing is downloaded."
        )
    layout = find_corpus_layout(root)
    if layout is None:
        raise DataNotFoundError(
            f"mlm_corpus: expected under {root} either {layouts}; {_missing_layout(root)}. Point `data.root` / "
            f"${MLM_CORPUS_ROOT_ENV} at the folder that holds them. Nothing is downloaded."
        )
    return root, layout


@functools.lru_cache(maxsize=2)
def _generated_sentences(count: int, seed: int) -> tuple[str, ...]:
    """``workers.data.glue.generated_corpus``, kept: the tokenizer and both splits read it (20,000: 0.3 s)."""
    return tuple(glue_files.generated_corpus(count, seed))


def _generated_split(corpus: CorpusSpec, split: str) -> tuple[str, ...]:
    """The generated corpus's ``train`` (all but the last n // 10 sentences) or ``val`` (those) documents."""
    sentences = _generated_sentences(corpus.generated_sentences, corpus.seed)
    cut = len(sentences) - max(1, len(sentences) // GENERATED_VAL_DIVISOR)
    return sentences[:cut] if split == "train" else sentences[cut:]


def _iter_text_lines(path: Path) -> Iterator[str]:
    """The non-empty lines of a text file, stripped: one document each."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            document = line.strip()
            if document:
                yield document


def iter_documents(root: Path | None, layout: Layout, split: str, corpus: CorpusSpec) -> Iterator[str]:
    """The documents of ``split`` (``train`` or ``val``) in order, read lazily."""
    if layout == "text":
        return _iter_text_lines(root / TEXT_FILES[split])
    if layout == "saved":
        return corpus_text.iter_saved(root, split, "mlm_corpus")
    if layout == "generated":
        return iter(_generated_split(corpus, split))
    if layout == "hub":
        return iter_text(root.load(split), corpus_text.TEXT_COLUMN, "mlm_corpus")
    raise ValueError(f"unknown mlm_corpus layout {layout!r}; expected 'text', 'saved', 'generated' or 'hub'")


def split_identity(root: Path | None, layout: Layout, split: str, corpus: CorpusSpec) -> list:
    """What a split is read from, for cache keys: [path, size, mtime_ns] of every file, or the generated
    corpus's [size, seed]."""
    if layout == "generated":
        return ["generated", corpus.generated_sentences, corpus.seed]
    if layout == "hub":
        return [root.identity(), root.split_name(split)]
    if layout == "saved":
        return corpus_text.saved_split_identity(root, split)
    return corpus_text.files_identity([root / TEXT_FILES[split]])


# --- tokenizer --------------------------------------------------------------------------------------------------


def special_ids(tokenizer: Tokenizer, where: str) -> SpecialIds:
    """The ids of :data:`SPECIAL_TOKENS` in ``tokenizer``; ``ValueError`` naming the missing ones and ``where``."""
    ids = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    missing = [token for token, index in ids.items() if index is None]
    if missing:
        raise ValueError(
            f"mlm_corpus: the tokenizer {where} lacks the special tokens {', '.join(missing)}; a masked-LM "
            f"tokenizer needs all of {' '.join(SPECIAL_TOKENS)} (BERT's has them), or leave out "
            "data.corpus.tokenizer (and the root's tokenizer.json) to train a WordPiece here"
        )
    return SpecialIds(*(ids[token] for token in SPECIAL_TOKENS))


def read_mlm_tokenizer(path: Path) -> MLMTokenizer:
    """A tokenizer.json with the five special tokens, truncation and padding switched off (packing and GLUE
    encoding cut and pad themselves)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    specials = special_ids(tokenizer, str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return MLMTokenizer(tokenizer, specials, corpus_text.vocab_size_of(tokenizer), f"file:{path.resolve()}", digest)


def train_wordpiece(documents: Iterable[str], vocab_size: int) -> Tokenizer:
    """Cramming's WordPiece, trained with HF ``tokenizers`` on ``documents``: BERT's normaliser (lower-case,
    accents stripped, text cleaned) and pre-tokeniser, ``[UNK]`` for unknown words, :data:`SPECIAL_TOKENS` as
    ids 0 … 4, at most ``vocab_size`` ids (fewer when the text has fewer words), unless the characters seen
    alone exceed it (the trainer keeps them all)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tokenizer.train_from_iterator(documents, trainer)
    return tokenizer


def trained_wordpiece(
    root: Path | None, layout: Layout, corpus: CorpusSpec, vocab_size: int, folder: Path
) -> MLMTokenizer:
    """The WordPiece trained on this corpus's training text: read from ``folder`` when trained before (keyed
    by the training split's identity, ``vocab_size`` and the characters read), else trained and saved there."""
    identity = {
        "format": MLM_CACHE_FORMAT,
        "train": split_identity(root, layout, "train", corpus),
        "vocab_size": vocab_size,
        "chars": corpus_text.TOKENIZER_TRAIN_CHARS,
    }

    def train() -> Tokenizer:
        log.info("mlm_corpus: training a %d-token WordPiece on the %s corpus", vocab_size, layout)
        documents = corpus_text.first_chars(
            iter_documents(root, layout, "train", corpus), corpus_text.TOKENIZER_TRAIN_CHARS
        )
        return train_wordpiece(documents, vocab_size)

    tokenizer, digest = corpus_text.cached_tokenizer(identity, folder, "wordpiece", train, "mlm_corpus")
    description = f"trained:wordpiece-{vocab_size}-{digest[:12]}"
    return MLMTokenizer(
        tokenizer, special_ids(tokenizer, description), corpus_text.vocab_size_of(tokenizer), description, digest
    )


def load_mlm_tokenizer(
    corpus: CorpusSpec, root: Path | None, layout: Layout, folder: Path | None = None
) -> MLMTokenizer:
    """The given tokenizer.json (``corpus.tokenizer``, relative to the root, else the root's tokenizer.json),
    else the WordPiece trained here (cached in ``folder``, default ``$SWEEP_CACHE_DIR/mlm_corpus``)."""
    given = corpus_text.given_tokenizer(corpus.tokenizer, root if isinstance(root, Path) else None)
    if given is not None:
        if not given.is_file():
            raise DataNotFoundError(
                f"mlm_corpus: the tokenizer file {given} (data.corpus.tokenizer; a relative path is read from "
                f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist; leave it out to train a WordPiece here"
            )
        return read_mlm_tokenizer(given)
    folder = folder if folder is not None else cache_dir("mlm_corpus")
    asked = corpus.vocab_size or CRAMMING_VOCAB_SIZE
    trained = trained_wordpiece(root, layout, corpus, asked, folder)
    if (
        trained.vocab_size > asked
    ):  # models are planned with the size asked (MLMCorpusData.vocab_size): it must hold every id
        raise ValueError(
            f"mlm_corpus: the WordPiece trained here has {trained.vocab_size} ids, more than "
            f"data.corpus.vocab_size={asked} (the trainer keeps every character of the text); raise "
            f"data.corpus.vocab_size to at least {trained.vocab_size}"
        )
    return trained


# --- packing ---------------------------------------------------------------------------------------------------


def _encode(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    """The ids of each text, without special tokens."""
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]


def encode_documents(
    tokenizer: Tokenizer, documents: Iterable[str], sep_id: int, max_tokens: int | None, dtype: np.dtype
) -> np.ndarray:
    """One stream of ids: each document's ids (no special tokens added) followed by ``sep_id``; documents are
    read only until the stream has ``max_tokens`` ids (None: all), and it is cut there."""
    parts: list[np.ndarray] = []
    total = 0
    for batch in corpus_text.batched(documents, corpus_text.ENCODE_BATCH):
        encoded = _encode(tokenizer, batch)
        ends = np.cumsum([len(ids) + 1 for ids in encoded])  # one past each document's [SEP]
        flat = np.full(int(ends[-1]), sep_id, dtype=dtype)
        words = np.ones(len(flat), dtype=bool)
        words[ends - 1] = False
        flat[words] = np.fromiter(chain.from_iterable(encoded), dtype=dtype, count=len(flat) - len(encoded))
        parts.append(flat)
        total += len(flat)
        if max_tokens is not None and total >= max_tokens:
            break
    stream = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    return stream[:max_tokens] if max_tokens is not None else stream


def pack_mlm_windows(stream: np.ndarray, seq_len: int) -> np.ndarray:
    """(W, seq_len) windows, W = len(stream) // seq_len: window w is ``stream[w·seq_len : (w+1)·seq_len]``;
    the remainder is dropped."""
    windows = len(stream) // seq_len
    return stream[: windows * seq_len].reshape(windows, seq_len)


def load_mlm_streams(
    corpus: CorpusSpec, root: Path | None, layout: Layout, tokenizer: MLMTokenizer, folder: Path | None = None
) -> dict[str, np.ndarray]:
    """``{"train": stream, "val": stream}`` of the corpus packed as the module docstring says, read from the
    cache in ``folder`` (default ``$SWEEP_CACHE_DIR/mlm_corpus``) when these files, tokenizer and caps were packed
    before, else tokenised and stored there."""
    folder = folder if folder is not None else cache_dir("mlm_corpus")
    identity = {
        "format": MLM_CACHE_FORMAT,
        "train": split_identity(root, layout, "train", corpus),
        "val": split_identity(root, layout, "val", corpus),
        "tokenizer": [tokenizer.description, tokenizer.digest],
        "caps": [corpus.train_tokens, corpus.val_tokens],
    }
    key = hash_key(identity)
    path = folder / f"mlm-{key}.npz"
    cached = read_arrays(path, key, "mlm_corpus")
    if cached is not None:
        return cached
    dtype = smallest_uint(tokenizer.vocab_size)
    streams = {
        split: encode_documents(
            tokenizer.tokenizer, iter_documents(root, layout, split, corpus), tokenizer.specials.sep, cap, dtype
        )
        for split, cap in (("train", corpus.train_tokens), ("val", corpus.val_tokens))
    }
    write_arrays(path, key, streams, "mlm_corpus")
    return streams


# --- masking ---------------------------------------------------------------------------------------------------


def mask_tokens(
    ids: torch.Tensor, generator: torch.Generator, mask_prob: float, specials: SpecialIds, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of ``ids`` (B, L) int64: ``(inputs, labels)``, both (B, L) int64 on ``ids``' device.

    *Candidates* are the positions whose id is none of the five special ids. Each candidate is *selected*
    independently with probability ``mask_prob``. A row with candidates but none selected gets one of its
    candidates selected, uniformly: a batch whose labels were all ignored would make the mean loss 0/0 = NaN
    (and a row with nothing scored is wasted), so no row with a candidate is ever left without a label.
    ``labels`` is the original id at selected positions and ``IGNORE_INDEX`` (-100) everywhere else. Each
    selected position of ``inputs`` becomes ``[MASK]`` with probability 0.8, a uniformly random non-special id
    (0 … vocab_size-1 less the five) with probability 0.1, and keeps its id with probability 0.1; every other
    position keeps its id.

    The random numbers (three uniform (B, L) tensors and one (B, L) tensor of replacement draws, always all
    four, in that order) come from ``generator`` on the CPU and are then moved to ``ids``' device, so the
    result depends only on the generator's state and the ids, never on the device.
    """
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_tokens: 0 < mask_prob < 1 must hold, but got (mask_prob={mask_prob})")
    if ids.dim() != 2:
        raise ValueError(f"mask_tokens: ids must be (batch, length), but got shape {tuple(ids.shape)}")
    device, shape = ids.device, tuple(ids.shape)
    special = torch.tensor(specials.all(), dtype=torch.long, device=device)
    ordinary = torch.ones(vocab_size, dtype=torch.bool, device=device)
    ordinary[special] = False
    ordinary_ids = torch.arange(vocab_size, device=device)[ordinary]
    select_u = torch.rand(shape, generator=generator).to(device)
    fallback_u = torch.rand(shape, generator=generator).to(device)
    action_u = torch.rand(shape, generator=generator).to(device)
    random_pick = torch.randint(0, max(len(ordinary_ids), 1), shape, generator=generator).to(device)

    candidates = ~torch.isin(ids, special)
    selected = candidates & (select_u < mask_prob)
    needs_one = candidates.any(dim=1) & ~selected.any(dim=1)
    fallback = torch.where(candidates, fallback_u, torch.full_like(fallback_u, -1.0)).argmax(dim=1)
    rows = needs_one.nonzero().squeeze(1)
    selected[rows, fallback[rows]] = True

    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    inputs = ids.clone()
    to_mask = selected & (action_u < MASK_SHARE)
    to_random = selected & (action_u >= MASK_SHARE) & (action_u < MASK_SHARE + RANDOM_SHARE)
    inputs[to_mask] = specials.mask
    inputs[to_random] = ordinary_ids[random_pick[to_random]]
    return inputs, labels


def mask_validation(windows: np.ndarray, corpus: CorpusSpec, specials: SpecialIds, vocab_size: int):
    """(masked ids in ``windows``' dtype, labels int64) of the validation windows, masked once by
    :func:`mask_tokens` with ``torch.Generator().manual_seed(corpus.seed)``: the same for every trial."""
    generator = torch.Generator().manual_seed(corpus.seed)
    ids = torch.as_tensor(windows.astype(np.int64))
    inputs, labels = mask_tokens(ids, generator, corpus.mask_prob, specials, vocab_size)
    return inputs.numpy().astype(windows.dtype), labels.numpy()


# --- GLUE ------------------------------------------------------------------------------------------------------


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
    tokenizer: MLMTokenizer, text_a: list[str], text_b: list[str] | None, seq_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids (N, seq_len) in the smallest unsigned type, lengths int32 (N,)): each example as
    ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` (a and b encoded without special tokens), a and b cut by
    :func:`truncate_pair` (a alone: its first tokens) so the whole fits ``seq_len``, then ``[PAD]``."""
    specials = tokenizer.specials
    extra = 2 if text_b is None else 3
    if seq_len < extra + 1:
        raise ValueError(
            f"mlm_corpus: GLUE examples need seq_len >= {extra + 1} ([CLS], [SEP]s and a token), but got "
            f"(seq_len={seq_len})"
        )
    ids = np.full((len(text_a), seq_len), specials.pad, dtype=smallest_uint(tokenizer.vocab_size))
    lengths = np.zeros(len(text_a), dtype=np.int32)
    for start in range(0, len(text_a), corpus_text.ENCODE_BATCH):
        batch_a = _encode(tokenizer.tokenizer, text_a[start : start + corpus_text.ENCODE_BATCH])
        batch_b = (
            _encode(tokenizer.tokenizer, text_b[start : start + corpus_text.ENCODE_BATCH])
            if text_b is not None
            else None
        )
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


def _encoded_split(read, task: str, split: str, limit: int | None, tokenizer, seq_len: int):
    """(ids, lengths, labels, skipped rows) of one split of one task, its first ``limit`` rows; ``read(task,
    split)`` gives its examples."""
    examples = read(task, split)
    text_a = examples.text_a[:limit]
    text_b = examples.text_b[:limit] if examples.text_b is not None else None
    ids, lengths = encode_glue_examples(tokenizer, text_a, text_b, seq_len)
    return ids, lengths, examples.labels[:limit], examples.skipped_rows


def load_glue_arrays(
    glue: GlueSpec, tokenizer: MLMTokenizer, seq_len: int, seed: int, folder: Path | None = None
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


def _require_glue(glue: GlueSpec) -> None:
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


# --- splits and batches ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLMSplits:
    """A masked-LM data set in memory, plain numpy like ``workers.data.splits.LMSplits``.

    ``ids_train``: (N, seq_len) unmasked training windows (masked per batch by :class:`MLMBatches`);
    ``ids_eval`` / ``labels_eval``: the validation windows masked once (:func:`mask_validation`) and their
    labels, int64, -100 where not scored. Ids are in the smallest unsigned type that holds ``vocab_size``.
    ``tokenizer`` describes the tokenizer, ``specials`` its special ids, ``mask_prob`` the share masked;
    ``glue`` the fine-tuning tasks by name, in ``data.glue.tasks`` order. ``vocab_size`` is the tokenizer's
    (random replacements are drawn from its ids); ``model_vocab_size`` the vocabulary the model is built with,
    the planned one (:meth:`MLMCorpusData.vocab_size`): a WordPiece trained here may have fewer ids than asked, and the
    model keeps the asked size so that the plan and the trial count the same parameters (the ids the
    tokenizer never produces just go unused). None means ``vocab_size``."""

    name: str
    ids_train: np.ndarray
    ids_eval: np.ndarray
    labels_eval: np.ndarray
    vocab_size: int
    seq_len: int
    tokenizer: str
    specials: SpecialIds
    mask_prob: float
    glue: dict[str, GlueArrays]
    eval_split: str = "val"
    model_vocab_size: int | None = None

    def __post_init__(self):
        dtype = smallest_uint(self.vocab_size)
        for name in ("ids_train", "ids_eval"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        object.__setattr__(self, "labels_eval", np.asarray(self.labels_eval, dtype=np.int64))

    @property
    def num_classes(self) -> int:
        return self.model_vocab_size or self.vocab_size  # one class per token id the model knows


def _windows(stream: np.ndarray, seq_len: int, split: str, corpus: CorpusSpec) -> np.ndarray:
    """:func:`pack_mlm_windows`, or a ``ValueError`` naming the knob when the split gives no window."""
    windows = pack_mlm_windows(stream, seq_len)
    if not len(windows):
        knob = "generated_sentences" if corpus.source == "generated" else f"{split}_tokens (or add text)"
        raise ValueError(
            f"mlm_corpus: the {split} split gives {len(stream)} token ids, fewer than seq_len = {seq_len}, so not "
            f"one window; raise data.corpus.{knob} or lower seq_len"
        )
    return windows


def load_mlm_arrays(spec: MLMCorpusData, directory: str | os.PathLike | None = None) -> MLMSplits:
    """The masked-LM data set of ``spec`` (the module docstring defines every step): the corpus packed into
    windows of ``spec.seq_len``, the validation windows masked once, and the GLUE tasks encoded. The cache is
    ``directory`` (default ``$SWEEP_CACHE_DIR/mlm_corpus``). ``limit_train`` / ``limit_val`` keep the first
    windows."""
    corpus, glue = spec.corpus_options, spec.glue_options
    folder = Path(directory).expanduser() if directory is not None else cache_dir("mlm_corpus")
    spec.require_local()
    root, layout = locate_corpus(spec)
    tokenizer = load_mlm_tokenizer(corpus, root, layout, folder)
    streams = load_mlm_streams(corpus, root, layout, tokenizer, folder)
    train = _windows(streams["train"], spec.seq_len, "train", corpus)
    val_ids, val_labels = mask_validation(
        _windows(streams["val"], spec.seq_len, "val", corpus), corpus, tokenizer.specials, tokenizer.vocab_size
    )
    splits = MLMSplits(
        "mlm_corpus",
        train,
        val_ids,
        val_labels,
        tokenizer.vocab_size,
        spec.seq_len,
        tokenizer.description,
        tokenizer.specials,
        corpus.mask_prob,
        load_glue_arrays(glue, tokenizer, spec.seq_len, corpus.seed, folder),
        model_vocab_size=max(spec.vocab_size(), tokenizer.vocab_size),
    )
    return keep_first_rows(splits, spec)


class MLMBatches(TokenWindowBatches):
    """Batches of masked-LM windows from :class:`MLMSplits` (``workers.data.batches.TokenWindowBatches``):
    training windows are masked afresh per batch (:func:`mask_tokens`, from the trial's generator);
    validation windows are the fixed masked ones. The GLUE tasks stay in host memory and are moved to the
    device a batch at a time (:meth:`glue_batches`)."""

    def __init__(self, splits: MLMSplits, spec: MLMCorpusData, device: torch.device):
        super().__init__(splits, spec, device)
        self.positions = torch.arange(splits.seq_len, device=device)

    def training_batch(self, index: torch.Tensor, generator: torch.Generator) -> tuple:
        """The windows at ``index`` masked by :func:`mask_tokens`; the masking comes from ``generator``."""
        s = self.splits
        inputs, labels = mask_tokens(self.ids_train[index].long(), generator, s.mask_prob, s.specials, s.vocab_size)
        return self._inputs(inputs), labels

    # --- GLUE fine-tuning ---

    @property
    def glue_tasks(self) -> list[str]:
        """The GLUE tasks loaded, in ``data.glue.tasks`` order."""
        return list(self.splits.glue)

    def glue_arrays(self, task: str) -> GlueArrays:
        """The encoded task ``task``; ``KeyError`` naming the tasks loaded otherwise."""
        if task not in self.splits.glue:
            loaded = ", ".join(self.splits.glue)
            raise KeyError(f"GLUE task {task!r} was not loaded; loaded: {loaded} (data.glue.tasks)")
        return self.splits.glue[task]

    def glue_batches(
        self, task: str, split: Literal["train", "dev"], batch_size: int, generator: torch.Generator | None = None
    ) -> Iterator[tuple]:
        """Batches of one split of a GLUE task: ``({"input_ids": (B, seq_len) int64, "attention_mask":
        (B, seq_len) int64, 1 on the first lengths[i] positions, 0 after}, labels (B,))``, labels int64 (float32
        for STS-B). Shuffled by ``generator`` when given, else in order; the last batch possibly smaller."""
        if split not in ("train", "dev"):
            raise ValueError(f"GLUE split must be 'train' or 'dev', but got {split!r}")
        arrays = self.glue_arrays(task)
        ids, lengths, labels = (getattr(arrays, f"{name}_{split}") for name in ("ids", "lengths", "labels"))
        order = torch.randperm(len(ids), generator=generator).numpy() if generator is not None else None
        for start in range(0, len(ids), batch_size):
            index = order[start : start + batch_size] if order is not None else slice(start, start + batch_size)
            batch_ids = torch.as_tensor(ids[index].astype(np.int64), device=self.device)
            batch_lengths = torch.as_tensor(lengths[index].astype(np.int64), device=self.device)
            mask = (self.positions < batch_lengths[:, None]).long()
            yield {"input_ids": batch_ids, "attention_mask": mask}, torch.as_tensor(labels[index], device=self.device)


# --- the data set -----------------------------------------------------------------------------------------------

CRAMMING_GLUE_TASKS = ("mnli", "mnli_mm", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte")  # cramming: no WNLI


class CorpusSpec(StrictModel):
    """The masked-LM pretraining text (``data.corpus``; the module docstring defines every step).

    ``source``: ``folder`` reads ``data.root`` (or ``$MLM_CORPUS_ROOT``): ``train.txt`` and ``valid.txt``, one
    document per non-empty line, or a ``datasets`` ``DatasetDict`` saved to disk (``train`` and ``validation``
    splits, a ``text`` column); ``generated`` writes ``generated_sentences`` sentences of a small English-like
    grammar (``workers.data.glue.generated_corpus``), for runs with no files. ``tokenizer``: a
    ``tokenizer.json`` with ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (absolute, or relative to the root); left out,
    the root's ``tokenizer.json`` when there is one, else a WordPiece of ``vocab_size`` ids (cramming's:
    32,768, lower-cased, accents stripped) trained here on the training text and cached. ``mask_prob``: the
    share of tokens masked (cramming: 0.25), each replaced by ``[MASK]`` with probability 0.8, by a random
    token with 0.1, kept with 0.1. ``seed``: generation and the fixed masking of the validation split."""

    source: Literal["folder", "generated", "hub"] = "folder"
    hub: HubSource | None = Field(default=None, description="source: hub: repo (a text column), revision")
    generated_sentences: int = Field(default=20_000, ge=10, description="source: generated only")
    tokenizer: str | None = Field(default=None, description="tokenizer.json to read instead of training one")
    vocab_size: int | None = Field(default=None, ge=16, description="WordPiece trained here (default 32,768)")
    train_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the training text")
    val_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the validation text")
    mask_prob: float = Field(default=0.25, gt=0.0, lt=1.0, description="share of tokens masked (cramming: 0.25)")
    seed: int = Field(default=0, ge=0, description="generation and validation masking seed, shared by every trial")

    @model_validator(mode="after")
    def _hub_given(self) -> CorpusSpec:
        check_hub_fields(self.source, self.hub, "mlm_corpus")
        if self.hub is not None and self.hub.repo is None:
            raise ValueError("mlm_corpus: data.corpus.hub.repo names the corpus's repository (no default)")
        return self

    @model_validator(mode="after")
    def _one_tokenizer(self) -> CorpusSpec:
        if self.tokenizer is not None and self.vocab_size is not None:
            raise ValueError(
                "vocab_size is for a tokenizer trained here; a given tokenizer.json has its own, but got "
                f"(tokenizer={self.tokenizer!r}, vocab_size={self.vocab_size})"
            )
        return self


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


class MLMCorpusData(LanguageDataSpec):
    """``data: {name: mlm_corpus, seq_len: L, corpus: {…}, glue: {…}}``: masked-LM pretraining text under
    ``data.root`` (or ``$MLM_CORPUS_ROOT``), or generated, then the GLUE tasks (Crammed BERT). ``corpus`` /
    ``glue`` None: :class:`CorpusSpec`'s / :class:`GlueSpec`'s defaults."""

    modality: ClassVar[Modality] = "masked_lm"
    name: Literal["mlm_corpus"] = "mlm_corpus"
    root_env: ClassVar[str] = MLM_CORPUS_ROOT_ENV
    corpus: CorpusSpec | None = Field(default=None, description="pretraining text; None means CorpusSpec()'s")
    glue: GlueSpec | None = Field(default=None, description="fine-tuning tasks; None means GlueSpec()'s")

    @property
    def corpus_options(self) -> CorpusSpec:
        return self.corpus or CorpusSpec()

    @property
    def glue_options(self) -> GlueSpec:
        return self.glue or GlueSpec()

    def corpus_hub(self) -> HubSplits:
        return HubSplits(self.corpus_options.hub.repo, self.corpus_options.hub, "mlm_corpus", (("val", "validation"),))

    def data_identity(self) -> str:
        """The corpus's and the GLUE tasks' identities (each: hub, folder or generated)."""
        corpus, glue = self.corpus_options, self.glue_options
        if corpus.source == "hub":
            text = self.corpus_hub().identity()
        elif corpus.source == "generated":
            text = "generated:mlm_corpus"
        else:
            text = super().data_identity()
        if glue.hub is not None:
            tasks = glue_hub(glue).identity()
        elif glue.generated:
            tasks = "generated:glue"
        else:
            root = glue_files.glue_root(glue.root).resolve()
            tasks = f"folder:{root}#{folder_hash(str(root))}"
        return f"corpus {text}; glue {tasks}"

    def fetch(self) -> list[str]:
        lines = []
        if self.corpus_options.source == "hub":
            lines += [fetch_line(self.corpus_hub(), split) for split in ("train", "val")]
        if self.glue_options.hub is not None:
            hub = glue_hub(self.glue_options)
            for task in self.glue_options.tasks:
                config, dev, _ = glue_files.HUB_TASKS[task]
                lines += [fetch_line(hub, split, config) for split in ("train", dev)]
        return lines or super().fetch()

    def vocab_size(self) -> int:
        """The vocabulary size to plan a model with, without reading the corpus: the given tokenizer.json's
        (largest id + 1; a :class:`DataNotFoundError` when ``corpus.tokenizer`` names a file that is not
        there), else ``corpus.vocab_size`` (default 32,768), the size asked of the WordPiece trained here (its
        real size, known after training, can be smaller; a larger one is an error at load)."""
        corpus = self.corpus_options
        root = self.optional_root() if corpus.source == "folder" else None
        path = corpus_text.given_tokenizer(corpus.tokenizer, root)
        if path is None:
            return corpus.vocab_size or CRAMMING_VOCAB_SIZE
        if not path.is_file():
            raise DataNotFoundError(
                f"mlm_corpus: the tokenizer file {path} (data.corpus.tokenizer; a relative path is read from "
                f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist, so the vocabulary size cannot be known; "
                "leave it out to train a WordPiece here"
            )
        return read_mlm_tokenizer(path).vocab_size

    def require_local(self) -> Path | None:
        """The corpus root once the corpus, the given tokenizer file and the GLUE files are all there (None for
        a generated corpus); otherwise a :class:`DataNotFoundError` saying what is missing. Reads no data."""
        root, _ = locate_corpus(self)
        root = root if isinstance(root, Path) else None  # the Hub's corpus is read through the datasets cache
        given = corpus_text.given_tokenizer(self.corpus_options.tokenizer, root)
        if given is not None and not given.is_file():
            raise DataNotFoundError(
                f"mlm_corpus: the tokenizer file {given} (data.corpus.tokenizer; a relative path is read from "
                f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist; leave it out to train a WordPiece here. "
                "Nothing is downloaded."
            )
        _require_glue(self.glue_options)
        return root

    def load_arrays(self) -> MLMSplits:
        return load_mlm_arrays(self)

    def open_batches(self, device: torch.device, arrays: MLMSplits | None = None) -> BatchSource:
        return MLMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
