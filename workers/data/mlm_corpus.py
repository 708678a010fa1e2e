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
``tokenizer.json``) read with HF ``tokenizers``; it must have BERT's five special tokens (``[PAD] [UNK] [CLS]
[SEP] [MASK]``), and its vocabulary size is its largest id + 1. With none, a WordPiece as cramming's (BERT's normaliser:
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

The reading, tokenising, packing and caching are ``workers/data/text/``'s; this module says which files,
tokenizer recipe, separator and packing, and does the masking.

**Masking** (``mlm_batches.mask_tokens``, BERT's rule): each non-special token is selected with probability
``corpus.mask_prob`` (cramming: 0.25) and scored; a selected token becomes ``[MASK]`` with probability 0.8, a
uniformly random non-special token with 0.1, and stays itself with 0.1. Training batches are masked afresh
every time they are drawn (dynamic masking, from the trial's generator); the validation windows are masked
once at load with ``torch.Generator().manual_seed(corpus.seed)``, before ``limit_val`` keeps the first
windows, so every trial scores the same masked tokens.

**GLUE** (``data.glue``, ``workers.data.glue_encoding.GlueSpec``): each task's train and dev split read with
``workers.data.glue.read_glue_split`` from ``glue.root`` or ``$GLUE_DIR`` (or the generated task ``synthetic``,
written under the cache folder), each example encoded as ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``,
truncated longest-first to ``seq_len`` and right-padded with ``[PAD]``
(``workers.data.glue_encoding.encode_glue_examples``).

**Cache**: the packed streams are kept as ``.npz`` (ids in the smallest unsigned type that holds the
vocabulary) under ``$SWEEP_CACHE_DIR/mlm_corpus/`` (``workers/data/cache.py``), keyed
by a hash of the corpus's files (path, size, mtime; or the generated corpus's size and seed), the tokenizer
(description and the SHA-256 of its JSON) and the token caps; ``seq_len`` is not in the key. Written to a
temporary file and renamed; a cache folder that cannot be written is logged and the data returned anyway.
GLUE encodings and the validation masking are not cached (they are fast).

**Speed** (this machine, 2 CPU cores shared with other work): encoding with a trained WordPiece
(``encode_batch``) about 0.7 million tokens/s; training the WordPiece on 180,000 generated sentences 3.7 s,
once per machine; GLUE encoding about 40,000 examples/s at seq_len 128; ``mlm_batches.mask_tokens`` on a 128 × 128
batch 0.8 ms on the CPU. A cached load is a file read plus the GLUE encoding.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data import glue as glue_files
from workers.data.base import BatchSource, DataNotFoundError, LanguageDataSpec, Modality, folder_hash, keep_first_rows
from workers.data.cache import cache_dir
from workers.data.glue_encoding import GlueArrays, GlueSpec, glue_hub, load_glue_arrays, require_glue
from workers.data.hub import HubSource, HubSplits, check_hub_fields, fetch_line
from workers.data.splits import smallest_uint
from workers.data.text.documents import TextFiles, TextSource, find_layout, missing_layout
from workers.data.text.streams import block_windows, cached_streams
from workers.data.text.tokenizer import (
    BERT_SPECIAL_TOKENS,
    WORDPIECE,
    SpecialIds,
    TextTokenizer,
    given_tokenizer,
    read_tokenizer,
    trained_tokenizer,
)

if TYPE_CHECKING:  # torch is imported where batches are opened (workers/data/mlm_batches.py)
    import torch

MLM_CORPUS_ROOT_ENV = "MLM_CORPUS_ROOT"
CRAMMING_VOCAB_SIZE = 32768  # cramming's WordPiece size: the default for a tokenizer trained here
TEXT_FILES = TextFiles({"train": "train.txt", "val": "valid.txt"})  # one document per non-empty line
GENERATED_VAL_DIVISOR = 10  # generated corpus: the last n // 10 sentences (at least 1) are the val split
MLM_CACHE_FORMAT = 1  # bump when reading, tokenising or packing changes: old cache files are then not read
MISSING_SPECIALS_FIX = (
    f"a masked-LM tokenizer needs all of {' '.join(BERT_SPECIAL_TOKENS)} (BERT's has them), or leave out "
    "data.corpus.tokenizer (and the root's tokenizer.json) to train a WordPiece here"
)


# --- corpus ---------------------------------------------------------------------------------------------------


def corpus_source(spec: MLMCorpusData) -> TextSource:
    """Where the corpus is: generated, the Hub, or a folder in either layout; a :class:`DataNotFoundError`
    naming the folder, both layouts and ``$MLM_CORPUS_ROOT`` when the folder is unset or holds neither."""
    corpus = spec.corpus_options
    if corpus.source == "generated":
        split = functools.partial(_generated_split, corpus)
        return TextSource(
            "generated", "mlm_corpus", generated=split, generated_identity=(corpus.generated_sentences, corpus.seed)
        )
    if corpus.source == "hub":
        return TextSource("hub", "mlm_corpus", hub=spec.corpus_hub())
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
    layout = find_layout(root, TEXT_FILES)
    if layout is None:
        raise DataNotFoundError(
            f"mlm_corpus: expected under {root} either {layouts}; {missing_layout(root, TEXT_FILES)}. Point "
            f"`data.root` / ${MLM_CORPUS_ROOT_ENV} at the folder that holds them. Nothing is downloaded."
        )
    return TextSource(layout, "mlm_corpus", root=root, files=TEXT_FILES)


@functools.lru_cache(maxsize=2)
def _generated_sentences(count: int, seed: int) -> tuple[str, ...]:
    """``workers.data.glue.generated_corpus``, kept: the tokenizer and both splits read it (20,000: 0.3 s)."""
    return tuple(glue_files.generated_corpus(count, seed))


def _generated_split(corpus: CorpusSpec, split: str) -> tuple[str, ...]:
    """The generated corpus's ``train`` (all but the last n // 10 sentences) or ``val`` (those) documents."""
    sentences = _generated_sentences(corpus.generated_sentences, corpus.seed)
    cut = len(sentences) - max(1, len(sentences) // GENERATED_VAL_DIVISOR)
    return sentences[:cut] if split == "train" else sentences[cut:]


def load_mlm_tokenizer(corpus: CorpusSpec, source: TextSource, folder: Path | None = None) -> TextTokenizer:
    """The given tokenizer.json (``corpus.tokenizer``, relative to the root, else the root's tokenizer.json;
    truncation and padding switched off, as packing and GLUE encoding cut and pad themselves), else the
    WordPiece trained here (cached in ``folder``, default ``$SWEEP_CACHE_DIR/mlm_corpus``)."""
    given = given_tokenizer(corpus.tokenizer, source.root)
    if given is None:
        folder = folder if folder is not None else cache_dir("mlm_corpus")
        asked = corpus.vocab_size or CRAMMING_VOCAB_SIZE
        return trained_tokenizer(source, WORDPIECE, asked, folder, MLM_CACHE_FORMAT, "data.corpus.vocab_size")
    if not given.is_file():
        raise DataNotFoundError(
            f"mlm_corpus: the tokenizer file {given} (data.corpus.tokenizer; a relative path is read from "
            f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist; leave it out to train a WordPiece here"
        )
    read = read_tokenizer(given, BERT_SPECIAL_TOKENS, "mlm_corpus", MISSING_SPECIALS_FIX)
    read.tokenizer.no_truncation()
    read.tokenizer.no_padding()
    return read


def load_mlm_streams(
    corpus: CorpusSpec, source: TextSource, tokenizer: TextTokenizer, folder: Path | None = None
) -> dict[str, np.ndarray]:
    """``{"train": stream, "val": stream}``: each document without special tokens, then ``[SEP]``
    (``workers.data.text.streams.cached_streams``; cached in ``folder``, default ``$SWEEP_CACHE_DIR/mlm_corpus``)."""
    folder = folder if folder is not None else cache_dir("mlm_corpus")
    caps = {"train": corpus.train_tokens, "val": corpus.val_tokens}
    return cached_streams(source, tokenizer, tokenizer.bert_ids.sep, caps, folder, "mlm", MLM_CACHE_FORMAT)


# --- masking ---------------------------------------------------------------------------------------------------


def mask_validation(windows: np.ndarray, corpus: CorpusSpec, specials: SpecialIds, vocab_size: int):
    """(masked ids in ``windows``' dtype, labels int64) of the validation windows, masked once by
    ``mlm_batches.mask_tokens`` with ``torch.Generator().manual_seed(corpus.seed)``: the same for every trial."""
    import torch

    from workers.data.mlm_batches import mask_tokens  # imports torch

    generator = torch.Generator().manual_seed(corpus.seed)
    ids = torch.as_tensor(windows.astype(np.int64))
    inputs, labels = mask_tokens(ids, generator, corpus.mask_prob, specials, vocab_size)
    return inputs.numpy().astype(windows.dtype), labels.numpy()


# --- splits and batches ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLMSplits:
    """A masked-LM data set in memory, plain numpy like ``workers.data.splits.LMSplits``.

    ``ids_train``: (N, seq_len) unmasked training windows (masked per batch by ``mlm_batches.MLMBatches``);
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
    """``block_windows`` (``workers.data.text.streams``), or a ``ValueError`` naming the knob when the split
    gives no window."""
    windows = block_windows(stream, seq_len)
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
    source = corpus_source(spec)
    tokenizer = load_mlm_tokenizer(corpus, source, folder)
    streams = load_mlm_streams(corpus, source, tokenizer, folder)
    train = _windows(streams["train"], spec.seq_len, "train", corpus)
    val_ids, val_labels = mask_validation(
        _windows(streams["val"], spec.seq_len, "val", corpus), corpus, tokenizer.bert_ids, tokenizer.vocab_size
    )
    splits = MLMSplits(
        "mlm_corpus",
        train,
        val_ids,
        val_labels,
        tokenizer.vocab_size,
        spec.seq_len,
        tokenizer.description,
        tokenizer.bert_ids,
        corpus.mask_prob,
        load_glue_arrays(glue, tokenizer, spec.seq_len, corpus.seed, folder),
        model_vocab_size=max(spec.vocab_size(), tokenizer.vocab_size),
    )
    return keep_first_rows(splits, spec)


# --- the data set -----------------------------------------------------------------------------------------------


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
        path = given_tokenizer(corpus.tokenizer, root)
        if path is None:
            return corpus.vocab_size or CRAMMING_VOCAB_SIZE
        if not path.is_file():
            raise DataNotFoundError(
                f"mlm_corpus: the tokenizer file {path} (data.corpus.tokenizer; a relative path is read from "
                f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist, so the vocabulary size cannot be known; "
                "leave it out to train a WordPiece here"
            )
        return read_tokenizer(path, BERT_SPECIAL_TOKENS, "mlm_corpus", MISSING_SPECIALS_FIX).vocab_size

    def require_local(self) -> Path | None:
        """The corpus root once the corpus, the given tokenizer file and the GLUE files are all there (None for
        a generated corpus); otherwise a :class:`DataNotFoundError` saying what is missing. Reads no data."""
        root = corpus_source(
            self
        ).root  # None for the Hub's corpus (read through the datasets cache) or a generated one
        given = given_tokenizer(self.corpus_options.tokenizer, root)
        if given is not None and not given.is_file():
            raise DataNotFoundError(
                f"mlm_corpus: the tokenizer file {given} (data.corpus.tokenizer; a relative path is read from "
                f"`data.root` / ${MLM_CORPUS_ROOT_ENV}) does not exist; leave it out to train a WordPiece here. "
                "Nothing is downloaded."
            )
        require_glue(self.glue_options)
        return root

    def load_arrays(self) -> MLMSplits:
        return load_mlm_arrays(self)

    def open_batches(self, device: torch.device, arrays: MLMSplits | None = None) -> BatchSource:
        from workers.data.mlm_batches import MLMBatches  # imports torch

        return MLMBatches(arrays if arrays is not None else self.load_arrays(), self, device)
