"""GLUE encoded for fine-tuning (workers/data/glue_encoding.py): longest-first truncation against the
one-token-at-a-time loop, and GLUE's TSVs written here encoded with a word-level tokenizer written here, each
row's ids written out by hand; the batches' masks; the task list's rules; a missing file named."""

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from workers.data.base import DataNotFoundError
from workers.data.glue_encoding import GlueSpec, glue_batches, load_glue_arrays, require_glue, truncate_pair
from workers.data.text.tokenizer import BERT_SPECIAL_TOKENS, read_tokenizer

CPU = torch.device("cpu")
WORDS = ["a", "the", "dog", "cat", "fox", "sleeps", "runs", "is", "here", "good", "bad", "film", "very"]
VOCAB = {token: i for i, token in enumerate([*BERT_SPECIAL_TOKENS, *WORDS])}  # [PAD] 0 … [MASK] 4, "a" 5 …
PAD, CLS, SEP = VOCAB["[PAD]"], VOCAB["[CLS]"], VOCAB["[SEP]"]


def longest_first(a, b, budget):
    """HF's longest_first truncation, one token at a time (the longer loses one; b on a tie)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def test_truncate_pair_is_the_one_at_a_time_loop():
    for len_a in range(12):
        for len_b in range(12):
            for budget in range(16):
                a, b = longest_first(range(len_a), range(len_b), budget)
                assert truncate_pair(len_a, len_b, budget) == (len(a), len(b)), (len_a, len_b, budget)


def ids(text: str) -> list[int]:
    """The word-level encoding, written out: one id per space-separated word."""
    return [VOCAB[word] for word in text.split()]


RTE = [  # (a, b, label): the second pair is cut, b (the longer) first
    ("the dog sleeps", "a cat", "entailment"),
    ("a dog", "the very very very good fox is here", "not_entailment"),
]
SST2 = [("a very very very very good film", 1), ("bad", 0)]
STSB = [("a dog", "a cat", 1.5)]
MNLI = [("a dog", "the dog", "entailment"), ("a fox", "a cat", "contradiction")]


def write_glue(root):
    """RTE (pairs), SST-2 (single sentences), STS-B (scores) and MNLI (one train, two dev sets) in GLUE's
    layout: a header, tab-separated columns."""
    rte = ["index\tsentence1\tsentence2\tlabel", *(f"{i}\t{a}\t{b}\t{y}" for i, (a, b, y) in enumerate(RTE))]
    mnli = ["sentence1\tsentence2\tgold_label", *(f"{a}\t{b}\t{y}" for a, b, y in MNLI)]
    files = {
        "RTE/train.tsv": rte,
        "RTE/dev.tsv": rte[:2],
        "SST-2/train.tsv": ["sentence\tlabel", *(f"{a}\t{y}" for a, y in SST2)],
        "SST-2/dev.tsv": ["sentence\tlabel", "good film\t1"],
        "STS-B/train.tsv": ["sentence1\tsentence2\tscore", *(f"{a}\t{b}\t{y}" for a, b, y in STSB)],
        "STS-B/dev.tsv": ["sentence1\tsentence2\tscore", "the fox\tthe fox\t5.0"],
        "MNLI/train.tsv": mnli,
        "MNLI/dev_matched.tsv": mnli[:2],
        "MNLI/dev_mismatched.tsv": [mnli[0], "a cat\ta cat\tneutral", "broken"],
    }
    for name, lines in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def tokenizer(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    word_level = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    word_level.save(str(tmp_path / "words.json"))
    return read_tokenizer(tmp_path / "words.json", BERT_SPECIAL_TOKENS, "test", "")


def padded(row: list[int], seq_len: int) -> list[int]:
    return row + [PAD] * (seq_len - len(row))


def test_glue_files_are_encoded_as_cls_a_sep_b_sep_cut_longest_first_and_padded(tmp_path, tokenizer):
    seq_len = 9
    glue = GlueSpec(root=str(write_glue(tmp_path / "glue")), tasks=["rte", "sst2", "stsb", "mnli", "mnli_mm"])
    arrays = load_glue_arrays(glue, tokenizer, seq_len, seed=0)
    assert list(arrays) == glue.tasks
    rte = arrays["rte"]
    first = [CLS, *ids("the dog sleeps"), SEP, *ids("a cat"), SEP]
    second = [CLS, *ids("a dog"), SEP, *ids("the very very very"), SEP]  # 2 + 8 words > 9 - 3: b keeps 4
    assert rte.ids_train.tolist() == [padded(first, seq_len), padded(second, seq_len)]
    assert rte.ids_train.dtype == np.uint8 and rte.lengths_train.dtype == np.int32
    assert rte.lengths_train.tolist() == [len(first), seq_len] and rte.labels_train.tolist() == [0, 1]
    assert (rte.metric, rte.num_labels, rte.is_regression) == ("accuracy", 2, False)
    assert rte.ids_dev.tolist() == [padded(first, seq_len)]
    sst2 = arrays["sst2"]
    assert sst2.ids_train.tolist() == [
        [CLS, *ids("a very very very very good film")[:7], SEP],  # one sentence: its first seq_len - 2 words
        padded([CLS, VOCAB["bad"], SEP], seq_len),
    ]
    assert sst2.lengths_dev.tolist() == [4] and sst2.labels_train.tolist() == [1, 0]
    stsb = arrays["stsb"]
    assert stsb.is_regression and stsb.labels_train.dtype == np.float32 and stsb.labels_dev.tolist() == [5.0]
    assert (stsb.metric, stsb.num_labels) == ("spearman", 1)
    mnli, mnli_mm = arrays["mnli"], arrays["mnli_mm"]
    assert mnli.ids_train is mnli_mm.ids_train  # one encoding of the shared train.tsv
    assert mnli.ids_dev.tolist() == [padded([CLS, *ids("a dog"), SEP, *ids("the dog"), SEP], seq_len)]
    assert mnli_mm.ids_dev.tolist() == [padded([CLS, *ids("a cat"), SEP, *ids("a cat"), SEP], seq_len)]
    assert mnli_mm.labels_dev.tolist() == [2]  # neutral: HF's order is contradiction, entailment, neutral
    assert (mnli.skipped_rows, mnli_mm.skipped_rows) == (0, 1)  # the dev row with one column
    limited = load_glue_arrays(glue.model_copy(update={"tasks": ["rte"], "limit_train": 1}), tokenizer, seq_len, 0)
    assert limited["rte"].ids_train.tolist() == [padded(first, seq_len)]
    with pytest.raises(ValueError, match=r"seq_len >= 4"):
        load_glue_arrays(glue, tokenizer, 3, seed=0)


def test_batches_mask_the_padding_and_a_generator_shuffles_the_rows(tmp_path, tokenizer):
    glue = GlueSpec(root=str(write_glue(tmp_path / "glue")), tasks=["mnli"])
    mnli = load_glue_arrays(glue, tokenizer, 9, seed=0)["mnli"]
    (inputs, labels), *rest = list(glue_batches(mnli, "train", 8, CPU))
    assert rest == [] and labels.tolist() == [1, 0]  # entailment, contradiction: the file's order
    assert torch.equal(inputs["input_ids"], torch.as_tensor(mnli.ids_train.astype(np.int64)))
    expected_mask = [[1] * length + [0] * (9 - length) for length in mnli.lengths_train.tolist()]
    assert inputs["attention_mask"].tolist() == expected_mask and inputs["attention_mask"].dtype == torch.int64
    orders = set()
    for seed in range(8):
        batches = list(glue_batches(mnli, "train", 1, CPU, torch.Generator().manual_seed(seed)))
        orders.add(tuple(int(labels[0]) for _, labels in batches))
    assert orders == {(1, 0), (0, 1)}  # both orders, each row once
    with pytest.raises(ValueError, match="'test'"):
        next(glue_batches(mnli, "test", 1, CPU))


def test_the_task_list_rules_and_a_missing_file_named(tmp_path, monkeypatch):
    with pytest.raises(ValidationError, match=r"unknown GLUE tasks \['rtee'\]"):
        GlueSpec(tasks=["rte", "rtee"])
    with pytest.raises(ValidationError, match="tasks must be unique"):
        GlueSpec(tasks=["rte", "rte"])
    with pytest.raises(ValidationError, match=r"generated GLUE data is the one task 'synthetic'"):
        GlueSpec(generated=True, tasks=["rte"])
    root = write_glue(tmp_path / "glue")
    require_glue(GlueSpec(root=str(root), tasks=["rte", "mnli_mm"]))
    (root / "MNLI" / "dev_mismatched.tsv").unlink()
    with pytest.raises(DataNotFoundError, match=r"MNLI/dev_mismatched\.tsv \(mnli_mm, dev\) does not exist"):
        require_glue(GlueSpec(root=str(root), tasks=["rte", "mnli_mm"]))
    monkeypatch.delenv("GLUE_DIR", raising=False)
    with pytest.raises(DataNotFoundError, match="no GLUE root is set"):
        require_glue(GlueSpec(tasks=["rte"]))
    require_glue(GlueSpec(generated=True, tasks=["synthetic"]))  # written at load: nothing to find
