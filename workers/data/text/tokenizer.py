"""A text data set's tokenizer: a ``tokenizer.json`` read with HF ``tokenizers``, or one trained here on the
training text by a recipe (:data:`BYTELEVEL_BPE`, GPT-2's; :data:`WORDPIECE`, cramming's BERT one) and cached.

A tokenizer's vocabulary size is its largest id + 1 (added tokens included). It must hold the data set's
special tokens (``<|endoftext|>``; BERT's five). Trial rows name it ``file:<path>`` or
``trained:<recipe>-<vocab_size asked>-<first 12 hex of the SHA-256 of its JSON>``. A trained one is kept as
``<folder>/<recipe's file prefix>-<key>.json``, the key a hash of the training split's identity, the size
asked, the characters read (the first :data:`TOKENIZER_TRAIN_CHARS` of training text, whole documents) and
the data set's cache format, so later loads and trials read it instead of training again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workers.data.cache import atomic_file, hash_key
from workers.data.text.documents import ENCODE_BATCH, TextSource, batched, first_chars

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_TRAIN_CHARS = 20_000_000  # characters of training text a tokenizer trained here sees
EOT = "<|endoftext|>"  # GPT-2's end of text: the separator of causal-LM streams
BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0 … 4 in a WordPiece trained here


@dataclass(frozen=True)
class SpecialIds:
    """The ids of BERT's ``[PAD] [UNK] [CLS] [SEP] [MASK]`` in the tokenizer used (0 … 4 in one trained here)."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    def all(self) -> tuple[int, ...]:
        """The five ids, in :data:`BERT_SPECIAL_TOKENS` order."""
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


@dataclass(frozen=True)
class TextTokenizer:
    """A tokenizer and what the data sets need of it: the ids of the special tokens asked for (in that order),
    ``vocab_size`` (largest id + 1), ``description`` (the trial row's name of it) and ``key`` (what a stream
    cache key holds of it: the SHA-256 of its JSON)."""

    tokenizer: Tokenizer
    special_ids: tuple[int, ...]
    vocab_size: int
    description: str
    key: str

    @property
    def bert_ids(self) -> SpecialIds:
        """The special ids as BERT's five, for a tokenizer read or trained with :data:`BERT_SPECIAL_TOKENS`."""
        return SpecialIds(*self.special_ids)


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


def special_ids(tokenizer: Tokenizer, tokens: tuple[str, ...], where: str, what: str, fix: str) -> tuple[int, ...]:
    """The ids of ``tokens`` in ``tokenizer``; a ``ValueError`` naming the missing ones, ``where`` the
    tokenizer is and ``fix`` otherwise."""
    ids = {token: tokenizer.token_to_id(token) for token in tokens}
    missing = [token for token, index in ids.items() if index is None]
    if missing:
        raise ValueError(f"{what}: the tokenizer {where} lacks the special tokens {', '.join(missing)}; {fix}")
    return tuple(ids[token] for token in tokens)


def read_tokenizer(path: Path, tokens: tuple[str, ...], what: str, fix: str) -> TextTokenizer:
    """The tokenizer.json at ``path``, which must hold ``tokens`` (:func:`special_ids`)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    ids = special_ids(tokenizer, tokens, str(path), what, fix)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return TextTokenizer(tokenizer, ids, vocab_size_of(tokenizer), f"file:{path.resolve()}", digest)


# --- training -------------------------------------------------------------------------------------------------


def train_bytelevel_bpe(documents: Iterable[str], vocab_size: int) -> Tokenizer:
    """GPT-2's kind of BPE: byte-level pre-tokenisation and decoder, the 256 byte symbols, ``<|endoftext|>``
    as id 0, at most ``vocab_size`` ids (fewer when the text allows fewer merges)."""
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
    tokenizer.train_from_iterator(batched(documents, ENCODE_BATCH), trainer)
    return tokenizer


def train_wordpiece(documents: Iterable[str], vocab_size: int) -> Tokenizer:
    """Cramming's WordPiece: BERT's normaliser (lower-case, accents stripped, text cleaned) and pre-tokeniser,
    ``[UNK]`` for unknown words, :data:`BERT_SPECIAL_TOKENS` as ids 0 … 4, at most ``vocab_size`` ids (fewer
    when the text has fewer words), unless the characters seen alone exceed it (the trainer keeps them all)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=list(BERT_SPECIAL_TOKENS), show_progress=False
    )
    tokenizer.train_from_iterator(documents, trainer)
    return tokenizer


# The trainers by recipe name: looked up when a recipe trains, so a test can replace one.
TRAINERS: dict[str, Callable[[Iterable[str], int], Tokenizer]] = {
    "bytelevel-bpe": train_bytelevel_bpe,
    "wordpiece": train_wordpiece,
}


@dataclass(frozen=True)
class TokenizerRecipe:
    """How a data set trains its tokenizer: the trainer's name (:data:`TRAINERS`; it also names the
    tokenizer in trial rows), the cache file's prefix, the special tokens it must hold, and ``label``, what
    messages call it."""

    name: str
    file_prefix: str
    special_tokens: tuple[str, ...]
    label: str


BYTELEVEL_BPE = TokenizerRecipe("bytelevel-bpe", "tokenizer", (EOT,), "byte-level BPE")
WORDPIECE = TokenizerRecipe("wordpiece", "wordpiece", BERT_SPECIAL_TOKENS, "WordPiece")


def trained_tokenizer(
    source: TextSource, recipe: TokenizerRecipe, vocab_size: int, folder: Path, cache_format: int, knob: str
) -> TextTokenizer:
    """The ``recipe`` tokenizer of ``vocab_size`` ids trained on ``source``'s training split: read from
    ``folder`` when trained before, else trained and saved there. A ``ValueError`` naming ``knob`` (the
    setting of ``vocab_size``) when the trainer kept more ids than asked (models are planned with the size
    asked, so it must hold every id)."""
    identity = {
        "format": cache_format,
        "train": source.identity("train"),
        "vocab_size": vocab_size,
        "chars": TOKENIZER_TRAIN_CHARS,
    }

    def train() -> Tokenizer:
        log.info("%s: training a %d-token %s on the %s text", source.what, vocab_size, recipe.label, source.layout)
        documents = first_chars(source.documents("train"), TOKENIZER_TRAIN_CHARS)
        return TRAINERS[recipe.name](documents, vocab_size)

    tokenizer, digest = cached_tokenizer(identity, folder, recipe.file_prefix, train, source.what)
    description = f"trained:{recipe.name}-{vocab_size}-{digest[:12]}"
    actual = vocab_size_of(tokenizer)
    if actual > vocab_size:
        raise ValueError(
            f"{source.what}: the {recipe.label} trained here has {actual} ids, more than {knob}={vocab_size} (the "
            f"trainer keeps every character of the text); raise {knob} to at least {actual}"
        )
    ids = special_ids(tokenizer, recipe.special_tokens, description, source.what, "the trainer lost them")
    return TextTokenizer(tokenizer, ids, actual, description, digest)


def cached_tokenizer(
    identity: dict, folder: Path, prefix: str, train: Callable[[], Tokenizer], what: str
) -> tuple[Tokenizer, str]:
    """(tokenizer, SHA-256 of its JSON): read from ``folder/<prefix>-<key>.json`` when trained before (``key``
    hashes ``identity``), else ``train()`` and saved there. A cached file that cannot be read is trained
    again; one that cannot be written is a warning."""
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
