"""Language-model data: MQAR checked by an evaluator written here, TinyStories read from both layouts with a
tokenizer trained here or read from a file, the packing, the cache, the errors, LMBatches and the config
rules."""

import json
import os

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from sweep.errors import SpaceError
from sweep.space.loader import load_space
from tests.helpers import TRAIN_STORIES, VAL_STORIES, WORDS, write_text_layout
from workers.data import tinystories
from workers.data.base import DataNotFoundError
from workers.data.batches import LMBatches
from workers.data.mqar import MQARSpec, generate_mqar
from workers.data.registry import DATA_SET_NAMES, data_spec, load_arrays, modality_of, open_batches
from workers.data.splits import IGNORE_INDEX, LMSplits
from workers.data.text import streams as text_streams
from workers.data.text import tokenizer as text_tokenizer
from workers.data.text.documents import TextSource, find_layout
from workers.data.text.streams import next_token_windows
from workers.data.tinystories import TextSpec

CPU = torch.device("cpu")


# --- MQAR: an evaluator written here, independent of the module ---------------------------------------------


def check_mqar_row(ids, labels, vocab_size, k):
    """Zoology's rules for one row: the context is k (key, value) pairs with distinct keys from the lower
    half (never 0) and distinct values from the upper half; exactly k positions are scored, all in the query
    region at even offsets from it, each holding a context key and labelled with the value that followed
    that key in the context; every context key is queried exactly once."""
    ids, labels = [int(t) for t in ids], [int(t) for t in labels]
    half = vocab_size // 2
    keys, values = ids[0 : 2 * k : 2], ids[1 : 2 * k : 2]
    assert all(1 <= key < half for key in keys) and len(set(keys)) == k
    assert all(half <= value < vocab_size for value in values) and len(set(values)) == k
    assert all(0 <= token < vocab_size for token in ids)
    answer = dict(zip(keys, values, strict=True))
    scored = [t for t, label in enumerate(labels) if label != -100]
    assert len(scored) == k
    for t in scored:
        assert t >= 2 * k and (t - 2 * k) % 2 == 0
        assert ids[t] in answer and labels[t] == answer[ids[t]]
    assert sorted(ids[t] for t in scored) == sorted(keys)
    return [(t - 2 * k) // 2 for t in scored]  # the gaps


@pytest.mark.parametrize(
    ("vocab_size", "k", "seq_len", "power_a"),
    [(256, 8, 64, 0.01), (32, 3, 16, 1.0), (8192, 16, 128, 0.01), (10, 4, 16, 0.5), (300, 5, 20, 2.0)],
)
def test_every_mqar_row_obeys_zoologys_rules(vocab_size, k, seq_len, power_a):
    ids, labels = generate_mqar(300, seq_len, vocab_size=vocab_size, num_kv_pairs=k, power_a=power_a, seed=3)
    assert ids.shape == labels.shape == (300, seq_len)
    assert ids.dtype == (np.uint8 if vocab_size <= 256 else np.uint16) and labels.dtype == np.int64
    for row_ids, row_labels in zip(ids, labels, strict=True):
        check_mqar_row(row_ids, row_labels, vocab_size, k)


def test_mqar_is_deterministic_per_seed_and_split_and_a_prefix_across_sizes():
    first = generate_mqar(500, 32, num_kv_pairs=4, seed=7)
    again = generate_mqar(500, 32, num_kv_pairs=4, seed=7)
    other_seed = generate_mqar(500, 32, num_kv_pairs=4, seed=8)
    val = generate_mqar(500, 32, num_kv_pairs=4, seed=7, stream=1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other_seed[0]) and not np.array_equal(first[1], other_seed[1])
    assert not np.array_equal(first[0], val[0])
    longer = generate_mqar(5000, 32, num_kv_pairs=4, seed=7)  # spans two generator blocks
    assert np.array_equal(longer[0][:500], first[0]) and np.array_equal(longer[1][:500], first[1])
    assert len({row.tobytes() for row in longer[0]}) == 5000  # no repeated sequence


def test_mqar_gaps_follow_the_power_law():
    """With one pair the gap g of the only query has P(g) ∝ (g + 1)^(power_a - 1), written out here; with
    more pairs a small power_a puts queries nearer the context than power_a = 1 (uniform) does."""
    seq_len, rows = 20, 40_000
    space = (seq_len - 2) // 2
    for power_a in (0.01, 1.0, 3.0):
        _, labels = generate_mqar(rows, seq_len, vocab_size=64, num_kv_pairs=1, power_a=power_a, seed=0)
        gaps = ((labels != -100).argmax(axis=1) - 2) // 2
        expected = np.array([(g + 1) ** (power_a - 1) for g in range(space)])
        expected /= expected.sum()
        observed = np.bincount(gaps, minlength=space) / rows
        assert np.abs(observed - expected).max() < 0.015, (power_a, observed, expected)
    near = generate_mqar(2000, 64, num_kv_pairs=8, power_a=0.01, seed=1)[1]
    uniform = generate_mqar(2000, 64, num_kv_pairs=8, power_a=1.0, seed=1)[1]
    mean_position = [np.nonzero(labels != -100)[1].mean() for labels in (near, uniform)]
    assert mean_position[0] < mean_position[1] - 3


def test_mqar_gaps_are_drawn_in_order_one_after_another():
    """Zoology pairs the i-th key with the i-th gap drawn (one at a time, without replacement). For two pairs,
    written out here: P(first gap g) = p(g), P(second gap h) = Σ_{g≠h} p(g) p(h) / (1 - p(g)); with
    power_a = 1 either pair is queried first equally often."""
    seq_len, rows, power_a = 16, 40_000, 0.3
    space = (seq_len - 4) // 2
    ids, labels = generate_mqar(rows, seq_len, vocab_size=64, num_kv_pairs=2, power_a=power_a, seed=4)
    gap = {}
    for pair in (0, 1):
        key = ids[:, 2 * pair][:, None]
        at = ((ids == key) & (labels != -100)).argmax(axis=1)
        gap[pair] = (at - 4) // 2
    p = np.array([(g + 1) ** (power_a - 1) for g in range(space)])
    p /= p.sum()
    second = np.array([sum(p[g] * p[h] / (1 - p[g]) for g in range(space) if g != h) for h in range(space)])
    for pair, expected in ((0, p), (1, second)):
        assert np.abs(np.bincount(gap[pair], minlength=space) / rows - expected).max() < 0.015
    ids, labels = generate_mqar(20_000, 32, vocab_size=64, num_kv_pairs=4, power_a=1.0, seed=2)
    first = (labels != -100).argmax(axis=1)
    slot = (ids[:, 0:8:2] == ids[np.arange(len(ids)), first][:, None]).argmax(axis=1)  # pair queried first
    assert np.abs(np.bincount(slot, minlength=4) / len(ids) - 0.25).max() < 0.02


@pytest.mark.parametrize(
    ("mqar", "seq_len", "message"),
    [
        ({}, 63, r"seq_len must be even.*seq_len=63"),
        ({"num_kv_pairs": 17}, 64, r"4 \* num_kv_pairs <= seq_len.*num_kv_pairs=17, seq_len=64"),
        ({"vocab_size": 16, "num_kv_pairs": 8}, 64, r"num_kv_pairs <= vocab_size // 2 - 1.*vocab_size=16"),
        ({"power_a": 0}, 64, "power_a"),
        ({"rows": 3}, 64, "rows"),
    ],
)
def test_mqar_options_state_the_rule_and_the_values(mqar, seq_len, message):
    with pytest.raises(ValidationError, match=message):
        data_spec(name="mqar", seq_len=seq_len, mqar=mqar)


def test_mqar_data_set_and_batches():
    spec = data_spec(name="mqar", seq_len=32, mqar={"num_kv_pairs": 4, "train_rows": 100, "val_rows": 30, "seed": 5})
    assert spec.require_local() is None
    splits = load_arrays(spec)
    assert isinstance(splits, LMSplits)
    assert (splits.vocab_size, splits.num_classes, splits.seq_len, splits.tokenizer) == (256, 256, 32, None)
    assert splits.ids_train.dtype == np.uint8 and splits.labels_train.dtype == np.int64
    assert splits.ids_train.shape == (100, 32) and splits.ids_eval.shape == (30, 32)
    assert np.array_equal(splits.ids_train, generate_mqar(100, 32, num_kv_pairs=4, seed=5)[0])
    assert np.array_equal(splits.ids_eval, generate_mqar(30, 32, num_kv_pairs=4, seed=5, stream=1)[0])
    batches = open_batches(spec, CPU, splits)
    assert isinstance(batches, LMBatches)
    meta = batches.meta
    assert (meta.num_classes, meta.vocab_size, meta.seq_len, meta.train_size, meta.val_size) == (256, 256, 32, 100, 30)
    assert meta.tokenizer is None
    assert batches.steps_per_epoch(16) == 6
    epoch = list(batches.train_batches(16, torch.Generator().manual_seed(0)))
    assert len(epoch) == 6
    for inputs, labels in epoch:
        assert inputs["input_ids"].shape == inputs["attention_mask"].shape == labels.shape == (16, 32)
        assert inputs["input_ids"].dtype == inputs["attention_mask"].dtype == labels.dtype == torch.int64
        assert bool((inputs["attention_mask"] == 1).all())
        assert int((labels != IGNORE_INDEX).sum()) == 16 * 4
    limited = load_arrays(spec.model_copy(update={"limit_train": 10, "limit_val": 3}))
    assert limited.ids_train.shape == (10, 32) and limited.labels_eval.shape == (3, 32)
    assert spec.vocab_size() == 256
    assert (data_spec(name="mqar", seq_len=64, mqar={"vocab_size": 8192})).vocab_size() == 8192


# --- TinyStories ------------------------------------------------------------------------------------------


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


def test_text_file_stories_are_split_on_the_separator(tmp_path):
    path = tmp_path / "TinyStories-valid.txt"
    path.write_text("One day.\n\nThe end.\n<|endoftext|>\n  Second.<|endoftext|>\n<|endoftext|>\nThird\n", "utf-8")
    assert list(tinystories.TEXT_FILES.read(path)) == ["One day.\n\nThe end.", "Second.", "Third"]


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


def test_packing_windows():
    stream = np.arange(23, dtype=np.uint16)
    ids, labels = next_token_windows(stream, 5)
    assert ids.shape == labels.shape == (4, 5) and ids.dtype == np.uint16 and labels.dtype == np.int64
    assert ids[1].tolist() == [5, 6, 7, 8, 9] and labels[1].tolist() == [6, 7, 8, 9, 10]
    assert labels[-1, -1] == 20  # 21 and 22 do not fill a window
    assert next_token_windows(np.arange(5), 5)[0].shape == (0, 5)


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


def test_lm_batches_with_wide_ids(tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50_000, size=(12, 6))
    splits = LMSplits("tinystories", ids, ids + 1, ids[:5], ids[:5] + 1, 50_257, 6, "file:/x/tokenizer.json")
    assert splits.ids_train.dtype == np.uint16 and splits.labels_train.dtype == np.int64
    spec = data_spec(name="tinystories", root=str(tmp_path), seq_len=6)
    batches = LMBatches(splits, spec, CPU)
    assert batches.meta.tokenizer == "file:/x/tokenizer.json" and batches.meta.num_classes == 50_257
    val = list(batches.val_batches(2))
    assert [len(labels) for _, labels in val] == [2, 2, 1]
    assert torch.equal(torch.cat([inputs["input_ids"] for inputs, _ in val]), torch.as_tensor(ids[:5]))
    assert torch.equal(torch.cat([labels for _, labels in val]), torch.as_tensor(ids[:5] + 1))
    probe = batches.probe_images(3)
    assert probe["input_ids"].dtype == torch.int64 and torch.equal(probe["input_ids"], torch.as_tensor(ids[:3]))
    assert probe["attention_mask"].shape == (3, 6) and bool((probe["attention_mask"] == 1).all())
    first = list(batches.train_batches(4, torch.Generator().manual_seed(1)))
    again = list(batches.train_batches(4, torch.Generator().manual_seed(1)))
    assert len(first) == 3 and all(torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    assert sorted(torch.cat([labels[:, 0] for _, labels in first]).tolist()) == sorted((ids[:, 0] + 1).tolist())
    with pytest.raises(ValueError, match=r"seq_len=6.*seq_len=8"):
        LMBatches(splits, spec.model_copy(update={"seq_len": 8}), CPU)


# --- config -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "mqar"}, "seq_len is required"),
        ({"name": "tinystories"}, "seq_len is required"),
        ({"name": "tinystories", "seq_len": 8, "mqar": {}}, r"tinystories\.mqar\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "text": {}}, r"mqar\.text\n\s+Extra inputs are not permitted"),
        ({"name": "listops", "seq_len": 8, "text": {}}, r"listops\.text\n\s+Extra inputs are not permitted"),
        ({"name": "digits", "mqar": {}}, r"digits\.mqar\n\s+Extra inputs are not permitted"),
        ({"name": "cifar10", "text": {}}, r"cifar10\.text\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "eval_split": "test"}, r"val split only.*eval_split='test'"),
        ({"name": "mqar", "seq_len": 8, "img_size": 8}, r"mqar\.img_size\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "listops": {}}, r"mqar\.listops\n\s+Extra inputs are not permitted"),
        (
            {"name": "tinystories", "seq_len": 8, "text": {"tokenizer": "t.json", "vocab_size": 512}},
            r"vocab_size is for a tokenizer trained here.*tokenizer='t.json', vocab_size=512",
        ),
        ({"name": "tinystories", "seq_len": 8, "text": {"vocab_size": 100}}, "vocab_size"),
        ({"name": "tinystories", "seq_len": 8, "text": {"vocab": 100}}, "vocab"),
    ],
)
def test_data_spec_rules_for_language_models(data, message):
    with pytest.raises(ValidationError, match=message):
        data_spec(**data)


def test_a_key_of_another_data_set_is_reported_with_the_data_sets_that_take_it(tmp_path):
    """What a user sees: the file, the key path without pydantic's union tag, and where the key belongs."""
    path = tmp_path / "space.yaml"
    path.write_text(
        "question: q\nmodel: {family: gpt2, embed_dim: 16, mlp_dim: 32}\naxes: {depth: [1], num_heads: [2]}\n"
        "baseline: {depth: 1, num_heads: 2}\nmetric: {name: val_loss, tolerance: 0.1}\n"
        "data: {name: tinystories, seq_len: 8, mqar: {num_kv_pairs: 2}, img_sise: 8}\n"
    )
    with pytest.raises(SpaceError) as raised:
        load_space(str(path))
    message = str(raised.value)
    assert "data.mqar: mqar is not a field of data set 'tinystories'; it is for mqar" in message
    assert "set data.name to a data set that takes it" in message
    assert "data.img_sise: Extra inputs are not permitted" in message  # a typo: no data set takes it


def test_an_unknown_data_set_names_the_known_ones(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        "question: q\nmodel: {embed_dim: 16, mlp_dim: 32}\naxes: {depth: [1], num_heads: [2]}\n"
        "baseline: {depth: 1, num_heads: 2}\ndata: {name: mqa, seq_len: 8}\n"
    )
    with pytest.raises(SpaceError, match=r"data\.name: must name a registered data set.*got 'mqa'.*did you mean mqar"):
        load_space(str(path))


def test_data_spec_dumps():
    causal = {name for name in DATA_SET_NAMES if modality_of(name) == "causal_lm"}
    assert causal == {"mqar", "tinystories", "repeated_tokens", "index_lookup", "nearest_neighbor"}  # known answers
    assert not set(data_spec(name="cifar10").model_dump()) & {"seq_len", "eval_split", "listops", "mqar", "text"}
    assert not set(data_spec(name="listops", seq_len=8).model_dump()) & {"mqar", "text"}  # ListOps ids unchanged
    mqar = data_spec(name="mqar", seq_len=64, mqar={"num_kv_pairs": 4})
    assert "mqar" in mqar.model_dump() and "text" not in mqar.model_dump()
    assert data_spec(**mqar.model_dump()) == mqar
    text = data_spec(name="tinystories", seq_len=64, text={"train_tokens": 1000})
    assert "text" in text.model_dump() and "mqar" not in text.model_dump()
    assert data_spec(**text.model_dump()) == text
    assert MQARSpec() == MQARSpec(vocab_size=256, num_kv_pairs=8, power_a=0.01, train_rows=100_000, val_rows=3_000)
