"""A text data set's tokenizer (workers/data/text/tokenizer.py): a tokenizer.json written here is read with the
ids it was written with and its largest id + 1 as the vocabulary size; which file is read; the two recipes
trained on a few sentences; a trained one is cached under its key and read back instead of trained again."""

import hashlib
import re
from pathlib import Path

import pytest

from workers.data.text import tokenizer as text_tokenizer
from workers.data.text.documents import TextSource
from workers.data.text.tokenizer import (
    BERT_SPECIAL_TOKENS,
    BYTELEVEL_BPE,
    EOT,
    WORDPIECE,
    given_tokenizer,
    read_tokenizer,
    train_bytelevel_bpe,
    trained_tokenizer,
)

SENTENCES = [
    "Once upon a time there was a little fox.",
    "The fox liked to run in the green forest.",
    "One day the fox met a small bird, and they became friends.",
] * 4


def write_word_level(path, vocab: dict[str, int]) -> None:
    """A word-level tokenizer.json (split on whitespace and punctuation) with exactly the ids in ``vocab``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))


def test_a_tokenizer_file_is_read_with_its_own_ids_and_its_largest_id_plus_one(tmp_path):
    vocab = {"[PAD]": 7, "[UNK]": 3, "[CLS]": 0, "[SEP]": 1, "[MASK]": 2, "fox": 4, "runs": 40}  # 8 to 39 unused
    path = tmp_path / "words.json"
    write_word_level(path, vocab)
    read = read_tokenizer(path, BERT_SPECIAL_TOKENS, "corpus", "add them")
    assert read.special_ids == (7, 3, 0, 1, 2) and read.bert_ids.all() == (7, 3, 0, 1, 2)
    assert read.bert_ids.mask == 2 and read.bert_ids.pad == 7
    assert read.vocab_size == 41
    assert read.description == f"file:{path.resolve()}"
    assert read.key == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read.tokenizer.encode("fox runs", add_special_tokens=False).ids == [4, 40]
    message = f"corpus: the tokenizer {path} lacks the special tokens {EOT}, [BOS]; fix"
    with pytest.raises(ValueError, match=re.escape(message)):
        read_tokenizer(path, (EOT, "[PAD]", "[BOS]"), "corpus", "fix")


def test_the_tokenizer_read_is_the_one_named_else_the_roots_else_none(tmp_path):
    assert given_tokenizer("t.json", tmp_path) == tmp_path / "t.json"  # relative to the root, existing or not
    assert given_tokenizer(str(tmp_path / "elsewhere.json"), tmp_path / "root") == tmp_path / "elsewhere.json"
    assert given_tokenizer("t.json", None) == Path("t.json")
    assert given_tokenizer(None, tmp_path) is None  # nothing there: one is trained
    assert given_tokenizer(None, None) is None
    (tmp_path / "tokenizer.json").write_text("{}")
    assert given_tokenizer(None, tmp_path) == tmp_path / "tokenizer.json"


def test_a_byte_level_bpe_has_the_separator_first_and_round_trips_any_text():
    tokenizer = train_bytelevel_bpe(iter(SENTENCES), 300)
    assert tokenizer.token_to_id(EOT) == 0
    assert max(tokenizer.get_vocab().values()) < 300
    text = "A fox — naïve, 42 times! Ünïcode" + EOT  # bytes never seen in training still encode
    ids = tokenizer.encode(text).ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert len(tokenizer.encode("the fox").ids) < len(b"the fox")  # merges were learnt


def generated_source(documents):
    return TextSource("generated", "toy", generated=lambda split: iter(documents), generated_identity=("toy", 1))


def test_a_trained_tokenizer_is_cached_under_its_key_and_read_back(tmp_path, monkeypatch):
    trained = []

    def counting(documents, vocab_size):
        trained.append(vocab_size)
        return text_tokenizer.train_wordpiece(documents, vocab_size)

    monkeypatch.setitem(text_tokenizer.TRAINERS, "wordpiece", counting)
    source = generated_source(SENTENCES)
    first = trained_tokenizer(source, WORDPIECE, 80, tmp_path, 1, "data.corpus.vocab_size")
    assert trained == [80] and first.special_ids == (0, 1, 2, 3, 4) and first.vocab_size <= 80
    saved = list(tmp_path.glob("wordpiece-*.json"))
    assert len(saved) == 1
    assert first.key == hashlib.sha256(saved[0].read_text().encode()).hexdigest()
    assert first.description == f"trained:wordpiece-80-{first.key[:12]}"
    again = trained_tokenizer(source, WORDPIECE, 80, tmp_path, 1, "data.corpus.vocab_size")
    assert trained == [80] and again.key == first.key  # read, not trained
    trained_tokenizer(source, WORDPIECE, 80, tmp_path, 2, "data.corpus.vocab_size")  # another cache format
    assert trained == [80, 80] and len(list(tmp_path.glob("wordpiece-*.json"))) == 2


def test_a_trainer_that_keeps_more_ids_than_asked_names_the_setting_to_raise(tmp_path):
    source = generated_source(SENTENCES)
    size = trained_tokenizer(source, BYTELEVEL_BPE, 10_000, tmp_path, 1, "data.text.vocab_size").vocab_size
    with pytest.raises(ValueError, match=r"has 257 ids, more than data\.text\.vocab_size=100.*at least 257"):
        trained_tokenizer(source, BYTELEVEL_BPE, 100, tmp_path, 1, "data.text.vocab_size")  # 256 bytes + EOT
    assert size > 257  # with room, the merges are kept
