"""TinyStories (workers/data/tinystories.py) read from both layouts (text files, a saved DatasetDict) with a
word-level tokenizer written here or a byte-level BPE trained here: the expected token stream written out,
the cache, the token caps and the errors."""

import json
import os

import numpy as np
import pytest

from tests.helpers import TRAIN_STORIES, VAL_STORIES, WORDS, write_text_layout
from workers.data import tinystories
from workers.data.base import DataNotFoundError
from workers.data.registry import data_spec, load_arrays
from workers.data.text import streams as text_streams
from workers.data.text import tokenizer as text_tokenizer
from workers.data.text.documents import TextSource, find_layout
from workers.data.tinystories import TextSpec


def write_saved_layout(root, train=TRAIN_STORIES, val=VAL_STORIES):
    import datasets

    datasets.disable_progress_bars()
    splits = {"train": train, "validation": val}
    datasets.DatasetDict({name: datasets.Dataset.from_dict({"text": s}) for name, s in splits.items()}).save_to_disk(
        str(root)
    )
    return root


def write_word_tokenizer(path, with_eot=True):
    """A word-level tokenizer.json (split on whitespace and punctuation): ids given here, so the expected
    stream can be written out without the module."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, ".": 1, **{word: i + 2 for i, word in enumerate(dict.fromkeys(WORDS))}}
    if with_eot:
        vocab["<|endoftext|>"] = len(vocab) + 10  # a gap: the vocabulary size is the largest id + 1
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return vocab


def expected_stream(stories, vocab):
    """Each story's word ids then <|endoftext|>: the word-level tokenisation written out here."""
    stream = []
    for story in stories:
        stream += [vocab[word] for word in story.replace(".", " .").split()] + [vocab["<|endoftext|>"]]
    return np.array(stream)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(folder))
    monkeypatch.delenv("TINYSTORIES_ROOT", raising=False)
    return folder


@pytest.mark.parametrize("layout", ["text", "saved"])
def test_tinystories_from_a_given_tokenizer_in_either_layout(tmp_path, cache, layout):
    root = (write_text_layout if layout == "text" else write_saved_layout)(tmp_path / "ts")
    assert find_layout(root, tinystories.TEXT_FILES) == layout
    vocab = write_word_tokenizer(tmp_path / "words.json")
    spec = data_spec(name="tinystories", root=str(root), seq_len=8, text={"tokenizer": str(tmp_path / "words.json")})
    splits = load_arrays(spec)
    assert splits.tokenizer == f"file:{(tmp_path / 'words.json').resolve()}"
    assert splits.vocab_size == max(vocab.values()) + 1 == spec.vocab_size()
    assert splits.ids_train.dtype == np.uint8
    for stories, ids, labels in (
        (TRAIN_STORIES, splits.ids_train, splits.labels_train),
        (VAL_STORIES, splits.ids_eval, splits.labels_eval),
    ):
        stream = expected_stream(stories, vocab)
        windows = (len(stream) - 1) // 8
        assert ids.shape == labels.shape == (windows, 8)
        assert np.array_equal(ids.ravel(), stream[: windows * 8])
        assert np.array_equal(labels.ravel(), stream[1 : windows * 8 + 1])  # the next token everywhere
        assert np.array_equal(ids[:, 1:], labels[:, :-1])  # labels are the inputs shifted by one
        assert np.array_equal(ids[1:, 0], labels[:-1, -1])  # windows overlap by one id: every id a target once


def test_tinystories_trains_a_tokenizer_once_and_caches_everything(tmp_path, cache, monkeypatch):
    root = write_text_layout(tmp_path / "ts")
    monkeypatch.setenv("TINYSTORIES_ROOT", str(root))
    spec = data_spec(name="tinystories", seq_len=16, text={"vocab_size": 300})
    assert spec.vocab_size() == 300
    assert (data_spec(name="tinystories", seq_len=16)).vocab_size() == tinystories.TEXT_DEFAULT_VOCAB_SIZE
    splits = load_arrays(spec)
    assert splits.tokenizer.startswith("trained:bytelevel-bpe-300-")
    assert splits.vocab_size == 300 and splits.ids_train.dtype == np.uint16
    assert int(splits.ids_train.max()) < 300 and int(splits.labels_train.max()) < 300
    saved = list((cache / "tinystories").glob("tokenizer-*.json"))
    assert len(saved) == 1
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(saved[0]))
    eot = tokenizer.token_to_id("<|endoftext|>")
    assert eot == 0
    text = tokenizer.decode(splits.ids_train[:4].ravel().tolist(), skip_special_tokens=False)
    assert text.startswith(TRAIN_STORIES[0] + "<|endoftext|>" + TRAIN_STORIES[1])  # byte-level: lossless
    assert int((splits.ids_train == eot).sum() + (splits.labels_train[-1, -1] == eot)) >= 1

    def fail(*args, **kwargs):
        raise AssertionError("tokenised again")

    monkeypatch.setattr(text_streams, "encode_stream", fail)
    monkeypatch.setitem(text_tokenizer.TRAINERS, "bytelevel-bpe", fail)
    again = load_arrays(spec)
    assert again.tokenizer == splits.tokenizer
    assert np.array_equal(again.ids_train, splits.ids_train) and np.array_equal(again.labels_eval, splits.labels_eval)
    other_len = load_arrays(spec.model_copy(update={"seq_len": 8}))  # packing is done on load: still cached
    assert other_len.ids_train.shape[1] == 8
    os.utime(root / "TinyStories-valid.txt", ns=(1, 1))  # the file changed: its identity with it
    with pytest.raises(AssertionError, match="tokenised again"):
        load_arrays(spec)


def test_token_caps_read_only_the_stories_needed(tmp_path, cache, monkeypatch):
    root = write_text_layout(tmp_path / "ts")
    write_word_tokenizer(root / "tokenizer.json")  # in the root: used without being named
    read = []
    original = TextSource.documents

    def counting(*args):
        for story in original(*args):
            read.append(story)
            yield story

    monkeypatch.setattr(TextSource, "documents", counting)
    monkeypatch.setattr(text_streams, "ENCODE_BATCH", 4)
    spec = data_spec(name="tinystories", root=str(root), seq_len=4, text={"train_tokens": 41, "val_tokens": 9})
    splits = load_arrays(spec)
    assert splits.tokenizer == f"file:{(root / 'tokenizer.json').resolve()}"
    assert splits.ids_train.shape == (10, 4) and splits.ids_eval.shape == (2, 4)  # (41 - 1) // 4, (9 - 1) // 4
    assert len(read) < 20  # a few batches of 4 stories, not all 230
    vocab = json.loads((root / "tokenizer.json").read_text())["model"]["vocab"]
    assert np.array_equal(splits.labels_train.ravel(), expected_stream(TRAIN_STORIES, vocab)[1:41])


def test_the_same_stories_in_both_layouts_give_the_same_data(tmp_path, cache):
    text_root, saved_root = write_text_layout(tmp_path / "text"), write_saved_layout(tmp_path / "saved")
    loaded = [load_arrays(data_spec(name="tinystories", root=str(r), seq_len=8)) for r in (text_root, saved_root)]
    assert loaded[0].tokenizer.startswith("trained:") and loaded[0].tokenizer == loaded[1].tokenizer
    assert np.array_equal(loaded[0].ids_train, loaded[1].ids_train)
    assert np.array_equal(loaded[0].labels_eval, loaded[1].labels_eval)


def test_tinystories_errors_name_what_is_missing(tmp_path, cache):
    with pytest.raises(DataNotFoundError, match="TINYSTORIES_ROOT"):
        data_spec(name="tinystories", seq_len=8).require_local()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "TinyStories-train.txt").write_text("a story\n")
    with pytest.raises(DataNotFoundError, match=r"TinyStories-valid\.txt.*dataset_dict\.json.*\$TINYSTORIES_ROOT"):
        load_arrays(data_spec(name="tinystories", root=str(empty), seq_len=8))
    root = write_text_layout(tmp_path / "ts")
    missing = data_spec(name="tinystories", root=str(root), seq_len=8, text={"tokenizer": "nope.json"})
    with pytest.raises(DataNotFoundError, match=r"ts/nope\.json.*does not exist"):
        missing.require_local()
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        missing.vocab_size()
    write_word_tokenizer(tmp_path / "no_eot.json", with_eot=False)
    with pytest.raises(ValueError, match=r"no_eot\.json lacks the special tokens <\|endoftext\|>"):
        load_arrays(missing.model_copy(update={"text": TextSpec(tokenizer=str(tmp_path / "no_eot.json"))}))
    with pytest.raises(ValueError, match=r"fewer than seq_len \+ 1 = 1001"):
        load_arrays(data_spec(name="tinystories", root=str(root), seq_len=1000, text={"val_tokens": 50}))
    size = max(write_word_tokenizer(root / "tokenizer.json").values()) + 1
    with pytest.raises(ValueError, match=rf"they differ: \(vocab_size=300, tokenizer's={size}\)"):
        (data_spec(name="tinystories", root=str(root), seq_len=8, text={"vocab_size": 300})).vocab_size()
