"""Masked-LM data: both corpus layouts, the tokenizer (trained here or read), the packing checked against a
stream built here, BERT's masking statistics, the fixed validation masking, GLUE encoding checked against
tokens computed here, the generated pipeline end to end, and the wiring in workers.data."""

import numpy as np
import pytest
import torch

from tests.workers.data.test_glue_encoding import longest_first
from workers.data import mlm_corpus
from workers.data.base import DataNotFoundError
from workers.data.glue import generated_corpus
from workers.data.mlm_batches import MLMBatches, mask_tokens
from workers.data.mlm_corpus import MLM_CORPUS_ROOT_ENV, load_mlm_arrays
from workers.data.registry import data_spec, load_arrays, open_batches
from workers.data.splits import IGNORE_INDEX
from workers.data.text.tokenizer import BERT_SPECIAL_TOKENS, train_wordpiece

CPU = torch.device("cpu")
DOCUMENTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Crème brûlée is a dessert; CAFÉ owners serve it.",
    "Masked language models predict hidden words from their context.",
    "A small corpus gives a small vocabulary, and that is fine here.",
    "Packing joins documents with a separator between them.",
    "Every window has the same number of tokens.",
] * 4
VALID = ["The lazy dog sleeps while the fox runs.", "Models read words; models predict words."] * 3
GENERATED_GLUE = {"generated": True, "tasks": ["synthetic"], "generated_train_rows": 40, "generated_dev_rows": 10}


def mlm_spec(root=None, seq_len=8, corpus=None, glue=None, **fields):
    """An mlm_corpus DataSpec: a 120-id WordPiece trained here and the generated GLUE task unless told."""
    corpus = {"vocab_size": 120, **(corpus or {})}
    glue = GENERATED_GLUE if glue is None else glue
    return data_spec(name="mlm_corpus", root=root, seq_len=seq_len, corpus=corpus, glue=glue, **fields)


def write_text_corpus(root, train=DOCUMENTS, valid=VALID):
    """train.txt and valid.txt, one document a line, with blank lines and stray spaces that must be dropped."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text("\n\n".join(f"  {doc} " for doc in train) + "\n", encoding="utf-8")
    (root / "valid.txt").write_text("\n".join(valid) + "\n\n", encoding="utf-8")
    return root


def expected_stream(tokenizer, documents, sep_id):
    """Each document's ids without special tokens, then [SEP], concatenated: the packing rule, built here."""
    stream = []
    for document in documents:
        stream += [*tokenizer.encode(document, add_special_tokens=False).ids, sep_id]
    return np.asarray(stream)


# --- corpus layouts and packing ---------------------------------------------------------------------------------


def test_text_layout_packs_documents_with_sep_into_windows(tmp_path):
    root = write_text_corpus(tmp_path / "corpus")
    spec = mlm_spec(root=str(root))
    splits = load_mlm_arrays(spec)
    source = mlm_corpus.corpus_source(spec)
    assert source.layout == "text"
    assert list(source.documents("train")) == DOCUMENTS
    tokenizer = mlm_corpus.load_mlm_tokenizer(spec.corpus, source)
    assert splits.tokenizer == tokenizer.description and splits.vocab_size == tokenizer.vocab_size
    train = expected_stream(tokenizer.tokenizer, DOCUMENTS, tokenizer.bert_ids.sep)
    windows = len(train) // spec.seq_len
    assert windows > 0 and splits.ids_train.shape == (windows, spec.seq_len)
    np.testing.assert_array_equal(splits.ids_train.reshape(-1), train[: windows * spec.seq_len])
    assert splits.ids_train.dtype == np.uint8 and splits.num_classes == splits.vocab_size
    val = expected_stream(tokenizer.tokenizer, VALID, tokenizer.bert_ids.sep)
    val_windows = torch.as_tensor(val[: len(val) // 8 * 8].reshape(-1, 8))
    generator = torch.Generator().manual_seed(spec.corpus.seed)  # the validation split is masked once, so
    masked, labels = mask_tokens(val_windows, generator, 0.25, tokenizer.bert_ids, tokenizer.vocab_size)
    np.testing.assert_array_equal(splits.ids_eval, masked.numpy())
    np.testing.assert_array_equal(splits.labels_eval, labels.numpy())

    capped = load_mlm_arrays(mlm_spec(root=str(root), corpus={"train_tokens": 21}, limit_train=2))
    np.testing.assert_array_equal(capped.ids_train.reshape(-1), train[:16])  # 21 ids: two windows of 8
    streams = mlm_corpus.load_mlm_streams(spec.corpus.model_copy(update={"train_tokens": 21}), source, tokenizer)
    np.testing.assert_array_equal(streams["train"], train[:21])


def test_saved_layout_reads_the_text_column(tmp_path):
    datasets = pytest.importorskip("datasets")
    root = tmp_path / "saved"
    splits = {
        "train": datasets.Dataset.from_dict({"text": [f" {doc}" for doc in DOCUMENTS] + ["  "], "id": [0] * 25}),
        "validation": datasets.Dataset.from_dict({"text": VALID, "id": [1] * len(VALID)}),
    }
    datasets.DatasetDict(splits).save_to_disk(str(root))
    spec = mlm_spec(root=str(root))
    source = mlm_corpus.corpus_source(spec)
    assert source.layout == "saved"
    assert list(source.documents("train")) == DOCUMENTS
    assert list(source.documents("val")) == VALID
    loaded = load_mlm_arrays(spec)
    tokenizer = mlm_corpus.load_mlm_tokenizer(spec.corpus, source)
    train = expected_stream(tokenizer.tokenizer, DOCUMENTS, tokenizer.bert_ids.sep)
    np.testing.assert_array_equal(loaded.ids_train.reshape(-1), train[: loaded.ids_train.size])


def test_missing_corpus_names_the_layouts_and_the_env_var(tmp_path, monkeypatch):
    monkeypatch.delenv(MLM_CORPUS_ROOT_ENV, raising=False)
    with pytest.raises(DataNotFoundError, match=f"no corpus folder.*{MLM_CORPUS_ROOT_ENV}.*source: generated"):
        load_arrays(mlm_spec())
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(MLM_CORPUS_ROOT_ENV, str(empty))
    with pytest.raises(DataNotFoundError, match=rf"{empty}.*lacks train\.txt, valid\.txt.*dataset_dict\.json"):
        mlm_spec().require_local()
    with pytest.raises(FileNotFoundError, match=MLM_CORPUS_ROOT_ENV):
        load_mlm_arrays(mlm_spec())
    write_text_corpus(empty)
    assert mlm_spec().require_local() == empty  # found through the environment variable
    with pytest.raises(DataNotFoundError, match=r"nope\.json.*data\.corpus\.tokenizer"):
        mlm_spec(corpus={"tokenizer": "nope.json", "vocab_size": None}).require_local()
    monkeypatch.delenv("GLUE_DIR", raising=False)
    with pytest.raises(DataNotFoundError, match=r"GLUE root.*GLUE_DIR"):
        mlm_spec(glue={"tasks": ["rte"]}).require_local()
    with pytest.raises(DataNotFoundError, match=r"RTE/train\.tsv.*GLUE_DIR"):
        mlm_spec(glue={"tasks": ["rte"], "root": str(tmp_path)}).require_local()


def test_a_vocab_size_below_the_alphabet_is_rejected():
    with pytest.raises(ValueError, match=r"has \d+ ids, more than data.corpus.vocab_size=16.*at least \d+"):
        load_mlm_arrays(mlm_spec(corpus={"source": "generated", "generated_sentences": 50, "vocab_size": 16}))


def test_no_window_says_which_knob_to_turn():
    with pytest.raises(ValueError, match=r"train split gives \d+ token ids.*generated_sentences or lower seq_len"):
        load_mlm_arrays(mlm_spec(seq_len=512, corpus={"source": "generated", "generated_sentences": 10}))


# --- tokenizer --------------------------------------------------------------------------------------------------


def test_trained_wordpiece_has_the_specials_first_and_normalises(tmp_path):
    spec = mlm_spec(root=str(write_text_corpus(tmp_path)))
    tokenizer = mlm_corpus.load_mlm_tokenizer(spec.corpus, mlm_corpus.corpus_source(spec)).tokenizer
    assert [tokenizer.token_to_id(token) for token in BERT_SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert tokenizer.normalizer.normalize_str("Crème BRÛLÉE") == "creme brulee"
    encode = tokenizer.encode
    assert encode("CAFÉ Crème", add_special_tokens=False).ids == encode("cafe creme", add_special_tokens=False).ids
    again = mlm_corpus.load_mlm_tokenizer(spec.corpus, mlm_corpus.corpus_source(spec))  # read from the cache
    assert again.description.startswith("trained:wordpiece-120-") and again.tokenizer.to_str() == tokenizer.to_str()


def test_a_given_tokenizer_must_have_every_special_token(tmp_path):
    root = write_text_corpus(tmp_path)
    lacking = train_wordpiece(DOCUMENTS, 100)
    vocab = {token: index for token, index in lacking.get_vocab().items() if token != "[MASK]"}
    from tokenizers import Tokenizer, models

    without_mask = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    without_mask.save(str(root / "no_mask.json"))
    with pytest.raises(ValueError, match=r"no_mask\.json lacks the special tokens \[MASK\]"):
        load_mlm_arrays(mlm_spec(root=str(root), corpus={"tokenizer": "no_mask.json", "vocab_size": None}))

    lacking.save(str(root / "tokenizer.json"))  # the root's tokenizer.json is read when none is named
    splits = load_mlm_arrays(mlm_spec(root=str(root), corpus={"vocab_size": None}))
    assert splits.tokenizer == f"file:{(root / 'tokenizer.json').resolve()}"
    assert splits.vocab_size == max(lacking.get_vocab().values()) + 1
    assert mlm_spec(root=str(root), corpus={"vocab_size": None}).vocab_size() == splits.vocab_size
    assert mlm_spec(root=str(tmp_path / "none"), corpus={"vocab_size": 300}).vocab_size() == 300
    with pytest.raises(DataNotFoundError, match=r"gone\.json.*vocabulary size cannot be known"):
        mlm_spec(root=str(root), corpus={"tokenizer": "gone.json", "vocab_size": None}).vocab_size()


# --- masking ---------------------------------------------------------------------------------------------------


def test_validation_masking_is_the_same_on_every_load():
    spec = mlm_spec(seq_len=16, corpus={"source": "generated", "generated_sentences": 400, "seed": 5})
    first, second = load_mlm_arrays(spec), load_mlm_arrays(spec)  # the second from the cache
    np.testing.assert_array_equal(first.ids_eval, second.ids_eval)
    np.testing.assert_array_equal(first.labels_eval, second.labels_eval)
    assert (first.ids_eval == first.specials.mask).any()
    assert ((first.labels_eval != IGNORE_INDEX).sum(axis=1) >= 1).all()
    limited = load_mlm_arrays(spec.model_copy(update={"limit_val": 3}))
    np.testing.assert_array_equal(limited.labels_eval, first.labels_eval[:3])  # limit_val keeps the same masks


# --- GLUE -------------------------------------------------------------------------------------------------------


LONG_SENTENCE = "a dull boring film with a dull plot and a dull cast and dull music"
RTE_ROWS = [
    ("The dog sleeps.", "A dog is asleep in the garden next to the old wooden house.", "entailment"),
    ("Masked language models predict hidden words from their context quite well.", "Models predict.", "entailment"),
    ("A fox.", "A dog.", "not_entailment"),
    ("Packing joins documents with a separator and more words.", "Every window holds many tokens.", "not_entailment"),
]


def write_glue_root(root):
    """RTE (pairs), SST-2 (single sentences), STS-B (scores) and MNLI (shared train) in GLUE's layout."""
    rte = enumerate(RTE_ROWS)
    files = {
        "RTE/train.tsv": ["index\tsentence1\tsentence2\tlabel", *(f"{i}\t{a}\t{b}\t{y}" for i, (a, b, y) in rte)],
        "SST-2/train.tsv": ["sentence\tlabel", "a lovely film\t1", f"{LONG_SENTENCE}\t0"],
        "SST-2/dev.tsv": ["sentence\tlabel", "good\t1"],
        "STS-B/train.tsv": ["sentence1\tsentence2\tscore", "a dog\ta cat\t1.5", "the fox\tthe fox\t5.0"],
        "STS-B/dev.tsv": ["sentence1\tsentence2\tscore", "a dog\ta dog\t4.25"],
        "MNLI/train.tsv": ["sentence1\tsentence2\tgold_label", "a dog\ta cat\tneutral", "a\tb\tentailment"],
        "MNLI/dev_matched.tsv": ["sentence1\tsentence2\tgold_label", "a dog\ta dog\tentailment"],
        "MNLI/dev_mismatched.tsv": ["sentence1\tsentence2\tgold_label", "x\ty\tcontradiction", "broken"],
    }
    files["RTE/dev.tsv"] = files["RTE/train.tsv"]
    for name, lines in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_glue_examples_are_cls_a_sep_b_sep_truncated_longest_first_and_padded(tmp_path):
    corpus_root = write_text_corpus(tmp_path / "corpus")
    glue_root = write_glue_root(tmp_path / "glue")
    tasks = ["rte", "sst2", "stsb", "mnli", "mnli_mm"]
    seq_len = 14
    spec = mlm_spec(root=str(corpus_root), seq_len=seq_len, glue={"root": str(glue_root), "tasks": tasks})
    splits = load_mlm_arrays(spec)
    tokenizer = mlm_corpus.load_mlm_tokenizer(spec.corpus, mlm_corpus.corpus_source(spec))
    s, encode = tokenizer.bert_ids, tokenizer.tokenizer.encode
    assert list(splits.glue) == tasks
    rte = splits.glue["rte"]
    assert rte.ids_train.shape == (len(RTE_ROWS), seq_len) and rte.lengths_train.dtype == np.int32
    assert rte.labels_train.tolist() == [0, 0, 1, 1] and rte.metric == "accuracy" and rte.num_labels == 2
    truncated = 0
    for row, (a, b, _) in enumerate(RTE_ROWS):
        ids_a, ids_b = encode(a, add_special_tokens=False).ids, encode(b, add_special_tokens=False).ids
        kept_a, kept_b = longest_first(ids_a, ids_b, seq_len - 3)
        truncated += len(kept_a) + len(kept_b) < len(ids_a) + len(ids_b)
        expected = [s.cls, *kept_a, s.sep, *kept_b, s.sep]
        assert rte.lengths_train[row] == len(expected)
        assert rte.ids_train[row].tolist() == expected + [s.pad] * (seq_len - len(expected))
    assert truncated >= 2  # both sides of the rule are exercised
    sst2 = splits.glue["sst2"]
    long = encode(LONG_SENTENCE, add_special_tokens=False).ids
    assert len(long) > seq_len - 2 and sst2.lengths_train.tolist()[1] == seq_len  # truncated to fit
    assert sst2.ids_train[1].tolist() == [s.cls, *long[: seq_len - 2], s.sep]
    lovely = [s.cls, *encode("a lovely film", add_special_tokens=False).ids, s.sep]
    assert sst2.ids_train[0].tolist() == lovely + [s.pad] * (seq_len - len(lovely))
    assert sst2.lengths_dev.tolist() == [len(encode("good", add_special_tokens=False).ids) + 2]
    stsb = splits.glue["stsb"]
    assert stsb.labels_train.dtype == np.float32 and stsb.num_labels == 1 and stsb.metric == "spearman"
    mnli, mnli_mm = splits.glue["mnli"], splits.glue["mnli_mm"]
    assert mnli.ids_train is mnli_mm.ids_train  # one encoding of the shared train.tsv
    assert mnli_mm.labels_dev.tolist() == [0] and mnli_mm.skipped_rows == 1

    limits = {"root": str(glue_root), "tasks": ["rte"], "limit_train": 2, "limit_dev": 1}
    limited = load_mlm_arrays(mlm_spec(root=str(corpus_root), seq_len=seq_len, glue=limits))
    assert len(limited.glue["rte"].ids_train) == 2 and len(limited.glue["rte"].labels_dev) == 1

    batches = MLMBatches(splits, spec, CPU)
    assert batches.glue_tasks == tasks and batches.glue_arrays("stsb") is stsb
    inputs, labels = next(batches.glue_batches("stsb", "train", 8))
    assert labels.dtype == torch.float32 and inputs["input_ids"].dtype == torch.int64
    with pytest.raises(KeyError, match="loaded: rte, sst2"):
        batches.glue_arrays("cola")


# --- end to end -------------------------------------------------------------------------------------------------


def test_generated_source_runs_end_to_end_through_open_batches():
    spec = mlm_spec(seq_len=16, corpus={"source": "generated", "generated_sentences": 600})
    assert spec.require_local() is None  # generated corpus and GLUE: nothing on disk needed
    sentences = generated_corpus(600, 0)
    source = mlm_corpus.corpus_source(spec)
    assert list(source.documents("train")) == sentences[:540]
    assert list(source.documents("val")) == sentences[540:]  # the last 10%
    batches = open_batches(spec, CPU)
    assert isinstance(batches, MLMBatches)
    meta = batches.meta
    splits = batches.splits
    assert meta.num_classes == meta.vocab_size == splits.vocab_size and meta.seq_len == 16
    assert meta.tokenizer.startswith("trained:wordpiece-120-") and meta.val_size == len(splits.ids_eval)
    assert batches.steps_per_epoch(8) == len(splits.ids_train) // 8
    epoch = list(batches.train_batches(8, torch.Generator().manual_seed(0)))
    assert len(epoch) == batches.steps_per_epoch(8)
    inputs, labels = epoch[0]
    assert inputs["input_ids"].shape == labels.shape == (8, 16)
    assert inputs["input_ids"].dtype == inputs["attention_mask"].dtype == labels.dtype == torch.int64
    assert (inputs["attention_mask"] == 1).all() and (labels != IGNORE_INDEX).any()
    assert (inputs["input_ids"] == splits.specials.mask).any()
    same = next(batches.train_batches(8, torch.Generator().manual_seed(0)))
    assert torch.equal(same[0]["input_ids"], inputs["input_ids"]) and torch.equal(same[1], labels)
    val = list(batches.val_batches(50))
    assert sum(len(y) for _, y in val) == meta.val_size
    assert torch.equal(val[0][1], torch.as_tensor(splits.labels_eval[:50]))
    assert torch.equal(batches.probe_images(3)["input_ids"], torch.as_tensor(splits.ids_eval[:3]).long())

    assert batches.glue_tasks == ["synthetic"]
    synthetic = batches.glue_arrays("synthetic")
    dev = list(batches.glue_batches("synthetic", "dev", 4))
    assert [len(y) for _, y in dev] == [4, 4, 2]  # in order, the last batch smaller
    first_inputs, first_labels = dev[0]
    assert torch.equal(first_labels, torch.as_tensor(synthetic.labels_dev[:4]))
    lengths = torch.as_tensor(synthetic.lengths_dev[:4]).long()
    assert torch.equal(first_inputs["attention_mask"].sum(dim=1), lengths)
    assert torch.equal(first_inputs["attention_mask"], (torch.arange(16) < lengths[:, None]).long())
    shuffled = list(batches.glue_batches("synthetic", "train", 16, torch.Generator().manual_seed(0)))
    assert sum(len(y) for _, y in shuffled) == 40
    all_ids = torch.cat([x["input_ids"] for x, _ in shuffled])
    assert not torch.equal(all_ids, torch.as_tensor(synthetic.ids_train).long())
    assert sorted(map(tuple, all_ids.tolist())) == sorted(map(tuple, synthetic.ids_train.astype(int).tolist()))
