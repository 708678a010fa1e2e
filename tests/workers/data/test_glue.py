"""GLUE: the metrics against sklearn and scipy, the loader on small files in each real task's layout, the
error messages, the generated task and corpus, task_score and glue_average."""

import math

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from workers.data import glue
from workers.data.glue import (
    GLUE_ROOT_ENV,
    GLUE_TASKS,
    GlueFormatError,
    accuracy_pct,
    f1_pct,
    generated_corpus,
    glue_average,
    glue_root,
    matthews_pct,
    read_glue_split,
    spearman_pct,
    task_score,
    write_generated_glue,
)

SEEDS = range(40)
# sklearn warns when only one class occurs on both sides (its confusion matrix is then 1×1); expected here
pytestmark = pytest.mark.filterwarnings("ignore:A single label was found:UserWarning")

# --- metrics against sklearn / scipy ---------------------------------------------------------------------


def random_classes(rng, n, classes):
    """Class indices, sometimes all one class (constant), sometimes from a narrower range than the other side."""
    kind = rng.integers(4)
    if kind == 0:
        return np.full(n, rng.integers(classes))
    if kind == 1:
        return rng.integers(0, max(1, classes - 1), size=n)
    return rng.integers(0, classes, size=n)


@pytest.mark.parametrize("seed", SEEDS)
def test_accuracy_f1_mcc_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    pred, labels = random_classes(rng, n, 2), random_classes(rng, n, 2)
    assert accuracy_pct(pred, labels) == pytest.approx(100 * accuracy_score(labels, pred), abs=1e-9)
    assert f1_pct(pred, labels) == pytest.approx(100 * f1_score(labels, pred, zero_division=0), abs=1e-9)
    assert matthews_pct(pred, labels) == pytest.approx(100 * matthews_corrcoef(labels, pred), abs=1e-9)
    classes = int(rng.integers(3, 6))
    pred, labels = random_classes(rng, n, classes), random_classes(rng, n, classes)
    assert accuracy_pct(pred, labels) == pytest.approx(100 * accuracy_score(labels, pred), abs=1e-9)
    assert matthews_pct(pred, labels) == pytest.approx(100 * matthews_corrcoef(labels, pred), abs=1e-9)


@pytest.mark.parametrize(
    ("pred", "labels"),
    [
        ([0, 0, 0], [0, 0, 0]),  # no predicted and no true positives: F1 0 (zero_division=0)
        ([1, 1, 1], [1, 1, 1]),  # all correct, one class: F1 100, MCC 0 (denominator 0)
        ([1, 1, 1, 1], [0, 1, 0, 1]),  # constant predictions
        ([0, 0, 0, 0], [0, 1, 0, 1]),
        ([1, 0, 1, 0], [0, 1, 0, 1]),  # all wrong: MCC -100
        ([1, 0, 1, 0], [1, 0, 1, 0]),
    ],
)
def test_binary_edge_cases_match_sklearn(pred, labels):
    assert f1_pct(pred, labels) == pytest.approx(100 * f1_score(labels, pred, zero_division=0))
    assert matthews_pct(pred, labels) == pytest.approx(100 * matthews_corrcoef(labels, pred))


def test_multiclass_mcc_with_a_class_only_predicted():
    labels = np.array([0, 1, 2, 2, 1, 0, 2, 2])
    pred = np.array([0, 3, 2, 1, 1, 0, 2, 3])  # class 3 never true
    assert matthews_pct(pred, labels) == pytest.approx(100 * matthews_corrcoef(labels, pred))
    assert matthews_pct(labels, labels) == pytest.approx(100.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    pred = rng.normal(size=n)
    target = np.round(rng.uniform(0, 5, size=n) * 2) / 2  # many ties, like STS-B's scores
    if seed % 3 == 0:
        pred = rng.integers(0, 4, size=n).astype(float)  # ties on both sides
    if seed % 5 == 0:
        pred = target + rng.normal(scale=0.5, size=n)
    expected = spearmanr(pred, target).statistic
    assert glue.average_ranks(pred) == pytest.approx(rankdata(pred))
    if np.isnan(expected):
        assert math.isnan(spearman_pct(pred, target))
    else:
        assert spearman_pct(pred, target) == pytest.approx(100 * expected, abs=1e-9)


def test_spearman_nan_when_constant_and_task_score_zero():
    target = [0.0, 1.0, 2.5, 5.0]
    with pytest.warns(Warning):  # scipy warns that the input is constant and returns NaN
        assert math.isnan(spearmanr([3, 3, 3, 3], target).statistic)
    assert math.isnan(spearman_pct([3, 3, 3, 3], target))
    assert math.isnan(spearman_pct([1, 2, float("nan"), 4], target))
    assert task_score("stsb", [3, 3, 3, 3], target) == 0.0
    assert spearman_pct([4, 3, 2, 1], target) == pytest.approx(-100.0)


def test_metric_shape_and_value_errors():
    with pytest.raises(ValueError, match="argmax"):
        accuracy_pct(np.zeros((3, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="same non-zero length"):
        matthews_pct([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="must be 0 or 1"):
        f1_pct([0, 2], [0, 1])
    with pytest.raises(ValueError, match="class indices"):
        task_score("sst2", [0.2, 0.9], [0, 1])


# --- task_score and glue_average -------------------------------------------------------------------------


def test_task_score_uses_each_tasks_metric():
    rng = np.random.default_rng(0)
    labels, pred = rng.integers(0, 2, size=50), rng.integers(0, 2, size=50)
    expected = {
        "cola": 100 * matthews_corrcoef(labels, pred),
        "mrpc": 100 * f1_score(labels, pred),
        "qqp": 100 * f1_score(labels, pred),
        **{name: 100 * accuracy_score(labels, pred) for name in ("sst2", "qnli", "rte", "wnli", "synthetic")},
    }
    for name, value in expected.items():
        assert task_score(name, pred, labels) == pytest.approx(value), name
    labels3, pred3 = rng.integers(0, 3, size=50), rng.integers(0, 3, size=50)
    for name in ("mnli", "mnli_mm"):
        assert task_score(name, pred3, labels3) == pytest.approx(100 * accuracy_score(labels3, pred3))
    scores, gold = rng.normal(size=50), rng.uniform(0, 5, size=50).astype(np.float32)
    assert task_score("stsb", scores, gold) == pytest.approx(100 * spearmanr(scores, gold).statistic)
    assert {task.metric for task in GLUE_TASKS.values()} == set(glue.METRICS)
    with pytest.raises(ValueError, match="known tasks"):
        task_score("sst-2", pred, labels)


def test_glue_average_is_the_plain_mean_with_mnli_twice():
    scores = {"mnli": 80.0, "mnli_mm": 82.0, "cola": 40.0, "stsb": 86.0}
    assert glue_average(scores) == pytest.approx(72.0)
    with pytest.raises(ValueError, match="at least one"):
        glue_average({})
    with pytest.raises(ValueError, match="did you mean"):
        glue_average({"mnli-mm": 80.0})
    with pytest.raises(ValueError, match="finite"):
        glue_average({"cola": float("nan")})


# --- the loader on each real task's layout ---------------------------------------------------------------

MNLI_TRAIN_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER.replace("label1", "label1\tlabel2\tlabel3\tlabel4\tlabel5")


def mnli_row(index, premise, hypothesis, gold, dev):
    labels = f"{gold}\t{gold}\t{gold}\tneutral\t{gold}" if dev else gold
    parses = "( a )\t( b )\t(ROOT a)\t(ROOT b)"
    return f"{index}\t{index}\t{index}e\tfiction\t{parses}\t{premise}\t{hypothesis}\t{labels}\t{gold}"


FILES = {
    "CoLA/train.tsv": [
        "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.",
        'gj04\t0\t*\tThey drank the pub "dry".',
    ],
    "SST-2/dev.tsv": [
        "sentence\tlabel",
        "it 's a charming and often affecting journey . \t1",
        "unflinchingly bleak\t0",
    ],
    "MRPC/train.tsv": [
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " .\t'
        'Referring to him as " the witness " .',
        "0\t2108705\t2108831\tYucaipa owned Dominick 's .\tYucaipa bought Dominick 's in 1995 .",
    ],
    "QQP/train.tsv": [
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        "0\t1\t2\tWhat is the step by step guide?\tWhat is the guide?\t0",
        '1\t3\t4\tHow do I learn "Python"',  # a question broken by a stray newline: too few columns
        "fast?\tHow to learn Python quickly?\t1",
        "2\t5\t6\tWhy is the sky blue?\tWhat makes the sky blue?\t1",
    ],
    "STS-B/dev.tsv": [
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
        "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard hat is dancing.\t"
        "A man is dancing.\t5.000",
        "1\tmain-captions\tMSRvid\t2012test\t0002\tnone\tnone\tA child is riding a horse.\tA dog barks.\t0.250",
    ],
    "MNLI/train.tsv": [
        MNLI_TRAIN_HEADER,
        mnli_row(0, "The new rights are nice.", "Everyone likes them.", "neutral", False),
        mnli_row(1, "You know it.", "You do not know it.", "contradiction", False),
    ],
    "MNLI/dev_matched.tsv": [
        MNLI_DEV_HEADER,
        mnli_row(0, "Matched premise.", "Matched hypothesis.", "entailment", True),
    ],
    "MNLI/dev_mismatched.tsv": [
        MNLI_DEV_HEADER,
        mnli_row(0, "Mismatched premise.", "Mismatched hypothesis.", "contradiction", True),
        mnli_row(1, "Second premise.", "Second hypothesis.", "neutral", True),
    ],
    "QNLI/dev.tsv": [
        "index\tquestion\tsentence\tlabel",
        "0\tWhen did the third Digimon series begin?\tUnlike the two seasons before it, it is dark.\tnot_entailment",
        "1\tWhat came into force?\tThe new constitution came into force.\tentailment",
    ],
    "RTE/train.tsv": [
        "index\tsentence1\tsentence2\tlabel",
        "0\tNo Weapons of Mass Destruction Found in Iraq Yet.\t"
        "Weapons of Mass Destruction Found in Iraq.\tnot_entailment",
    ],
    "WNLI/dev.tsv": [
        "index\tsentence1\tsentence2\tlabel",
        "0\tThe drain is clogged with hair.\tThe hair is clogged.\t0",
    ],
}


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    for relative, lines in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_cola_has_no_header_and_keeps_quotes(glue_dir):
    examples = read_glue_split(glue_dir, "cola", "train")
    assert examples.text_a == [
        "Our friends won't buy this analysis, let alone the next one we propose.",
        'They drank the pub "dry".',
    ]
    assert examples.text_b is None
    assert examples.labels.tolist() == [1, 0] and examples.labels.dtype == np.int64


def test_sst2(glue_dir):
    examples = read_glue_split(glue_dir, "sst2", "dev")
    assert examples.text_a == ["it 's a charming and often affecting journey . ", "unflinchingly bleak"]
    assert examples.labels.tolist() == [1, 0] and examples.text_b is None


def test_mrpc_label_first_and_stray_quotes(glue_dir):
    examples = read_glue_split(glue_dir, "mrpc", "train")
    assert examples.text_a[0] == 'Amrozi accused his brother , whom he called " the witness " .'
    assert examples.text_b == ['Referring to him as " the witness " .', "Yucaipa bought Dominick 's in 1995 ."]
    assert examples.labels.tolist() == [1, 0]


def test_qqp_skips_and_counts_malformed_rows(glue_dir):
    examples = read_glue_split(glue_dir, "qqp", "train")
    assert examples.text_a == ["What is the step by step guide?", "Why is the sky blue?"]
    assert examples.text_b == ["What is the guide?", "What makes the sky blue?"]
    assert examples.labels.tolist() == [0, 1]
    assert examples.skipped_rows == 2 and len(examples) == 2


def test_stsb_float_scores(glue_dir):
    examples = read_glue_split(glue_dir, "stsb", "dev")
    assert examples.text_a == ["A man with a hard hat is dancing.", "A child is riding a horse."]
    assert examples.text_b == ["A man is dancing.", "A dog barks."]
    assert examples.labels.dtype == np.float32 and examples.labels.tolist() == [5.0, 0.25]
    assert GLUE_TASKS["stsb"].num_labels == 1 and GLUE_TASKS["stsb"].is_regression


def test_mnli_train_matched_and_mismatched(glue_dir):
    train = read_glue_split(glue_dir, "mnli", "train")
    assert train.text_a == ["The new rights are nice.", "You know it."]
    assert train.text_b == ["Everyone likes them.", "You do not know it."]
    assert train.labels.tolist() == [2, 0]  # contradiction, entailment, neutral
    assert read_glue_split(glue_dir, "mnli_mm", "train").text_a == train.text_a  # one MNLI train file
    matched = read_glue_split(glue_dir, "mnli", "dev")
    assert matched.text_a == ["Matched premise."] and matched.labels.tolist() == [1]
    mismatched = read_glue_split(glue_dir, "mnli_mm", "dev")
    assert mismatched.text_b == ["Mismatched hypothesis.", "Second hypothesis."]
    assert mismatched.labels.tolist() == [0, 2]
    assert GLUE_TASKS["mnli"].num_labels == 3


def test_qnli_rte_wnli(glue_dir):
    qnli = read_glue_split(glue_dir, "qnli", "dev")
    assert qnli.text_a == ["When did the third Digimon series begin?", "What came into force?"]
    assert qnli.text_b[1] == "The new constitution came into force."
    assert qnli.labels.tolist() == [1, 0]  # entailment, not_entailment
    rte = read_glue_split(glue_dir, "rte", "train")
    assert rte.text_b == ["Weapons of Mass Destruction Found in Iraq."] and rte.labels.tolist() == [1]
    wnli = read_glue_split(glue_dir, "wnli", "dev")
    assert wnli.text_a == ["The drain is clogged with hair."] and wnli.labels.tolist() == [0]


def test_columns_found_by_header_name_then_position(tmp_path):
    (tmp_path / "RTE").mkdir()
    reordered = "label\tsentence2\tindex\tsentence1\nentailment\tB.\t0\tA.\n"
    (tmp_path / "RTE" / "train.tsv").write_text(reordered, encoding="utf-8")
    examples = read_glue_split(tmp_path, "rte", "train")
    assert (examples.text_a, examples.text_b, examples.labels.tolist()) == (["A."], ["B."], [0])
    unnamed = "c0\tc1\tc2\tc3\n0\tA.\tB.\tnot_entailment\n"  # no known names: HF's positions 1, 2, last
    (tmp_path / "RTE" / "train.tsv").write_text(unnamed, encoding="utf-8")
    examples = read_glue_split(tmp_path, "rte", "train")
    assert (examples.text_a, examples.text_b, examples.labels.tolist()) == (["A."], ["B."], [1])


def test_unknown_label_names_file_line_value_and_labels(tmp_path):
    (tmp_path / "QNLI").mkdir()
    path = tmp_path / "QNLI" / "dev.tsv"
    path.write_text("index\tquestion\tsentence\tlabel\n0\tQ?\tS.\tentailment\n1\tQ?\tS.\tcontradiction\n")
    with pytest.raises(GlueFormatError) as caught:
        read_glue_split(tmp_path, "qnli", "dev")
    message = str(caught.value)
    for part in (str(path), "line 3", "'contradiction'", "entailment, not_entailment"):
        assert part in message
    (tmp_path / "STS-B").mkdir()
    (tmp_path / "STS-B" / "dev.tsv").write_text("sentence1\tsentence2\tscore\nA\tB\thigh\n")
    with pytest.raises(GlueFormatError, match="line 2: stsb label 'high' is not a number"):
        read_glue_split(tmp_path, "stsb", "dev")


def test_missing_files_name_the_path_layout_and_settings(tmp_path):
    cases = [
        (tmp_path / "nowhere", "cola", "train", tmp_path / "nowhere" / "CoLA" / "train.tsv"),
        (tmp_path, "mrpc", "dev", tmp_path / "MRPC" / "dev.tsv"),
        (tmp_path, "mnli", "dev", tmp_path / "MNLI" / "dev_matched.tsv"),
        (tmp_path, "mnli_mm", "dev", tmp_path / "MNLI" / "dev_mismatched.tsv"),
    ]
    (tmp_path / "MRPC").mkdir()
    for root, task, split, expected in cases:
        with pytest.raises(FileNotFoundError) as caught:
            read_glue_split(root, task, split)
        message = str(caught.value)
        for part in (str(expected), "glue_data/<TASK>/{train,dev}.tsv", "dev_matched.tsv", "data.glue.root"):
            assert part in message, (task, message)
        assert f"${GLUE_ROOT_ENV}" in message and GLUE_ROOT_ENV == "GLUE_DIR"


def test_unknown_task_and_split(tmp_path):
    with pytest.raises(ValueError, match=r"unknown GLUE task 'sst-2'; did you mean sst2") as caught:
        read_glue_split(tmp_path, "sst-2", "train")
    assert "known tasks: cola, sst2, mrpc" in str(caught.value)
    with pytest.raises(ValueError, match="split must be one of"):
        read_glue_split(tmp_path, "sst2", "test")


def test_glue_root_from_setting_or_env(tmp_path, monkeypatch):
    monkeypatch.delenv(GLUE_ROOT_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="GLUE_DIR"):
        glue_root(None)
    monkeypatch.setenv(GLUE_ROOT_ENV, str(tmp_path))
    assert glue_root(None) == tmp_path
    assert glue_root(tmp_path / "other") == tmp_path / "other"


def test_registry_matches_the_glue_layout():
    assert list(GLUE_TASKS) == [
        *("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "mnli_mm", "qnli", "rte", "wnli", "synthetic")
    ]
    assert {t.name: t.directory for t in GLUE_TASKS.values()}["stsb"] == "STS-B"
    assert [t.dev_file for t in GLUE_TASKS.values() if t.directory == "MNLI"] == [
        "dev_matched.tsv",
        "dev_mismatched.tsv",
    ]
    assert [t.name for t in GLUE_TASKS.values() if not t.has_header] == ["cola"]
    assert GLUE_TASKS["qnli"].labels == GLUE_TASKS["rte"].labels == ("entailment", "not_entailment")


# --- generated data --------------------------------------------------------------------------------------


def expected_label(sentence):
    words = sentence.split()
    positive = any(word in glue.POSITIVE_WORDS for word in words)
    negative = any(word in glue.NEGATIVE_WORDS for word in words)
    assert positive != negative, sentence  # exactly one polarity
    return int(positive != ("not" in words))


def test_generated_task_round_trips_and_is_deterministic(tmp_path):
    folder = write_generated_glue(tmp_path / "a", train_rows=101, dev_rows=40, seed=3)
    assert folder == tmp_path / "a" / "SYNTHETIC"
    assert sorted(p.name for p in folder.iterdir()) == ["dev.tsv", "train.tsv"]  # no temporary files left
    assert (folder / "train.tsv").read_text().startswith("sentence\tlabel\n")
    train = read_glue_split(tmp_path / "a", "synthetic", "train")
    dev = read_glue_split(tmp_path / "a", "synthetic", "dev")
    assert len(train) == 101 and len(dev) == 40 and train.skipped_rows == 0
    for split in (train, dev):
        assert set(split.labels.tolist()) == {0, 1}
        assert abs(int(split.labels.sum()) * 2 - len(split)) <= 1  # balanced to within one row
        assert split.labels.tolist() == [expected_label(s) for s in split.text_a]
    assert train.text_a != dev.text_a[: len(train)]
    assert sum("not" in s.split() for s in train.text_a) > 10  # negation occurs
    write_generated_glue(tmp_path / "b", train_rows=101, dev_rows=40, seed=3)
    write_generated_glue(tmp_path / "c", train_rows=101, dev_rows=40, seed=4)
    for name in ("train.tsv", "dev.tsv"):
        text = (folder / name).read_bytes()
        assert text == (tmp_path / "b" / "SYNTHETIC" / name).read_bytes()
        assert text != (tmp_path / "c" / "SYNTHETIC" / name).read_bytes()
    with pytest.raises(ValueError, match="train_rows >= 1"):
        write_generated_glue(tmp_path, train_rows=0, dev_rows=4, seed=0)


def test_generated_corpus_is_deterministic_and_varied():
    corpus = generated_corpus(500, seed=7)
    assert corpus == generated_corpus(500, seed=7)
    assert corpus[:100] == generated_corpus(100, seed=7)  # a smaller count is a prefix
    assert corpus != generated_corpus(500, seed=8)
    assert generated_corpus(0, seed=0) == []
    words = {word for sentence in corpus for word in sentence.split()}
    for group in (glue.POSITIVE_WORDS, glue.NEGATIVE_WORDS, glue.VERBS, glue.NOUNS):
        assert words & set(group)
    assert "not" in words
    assert all(sentence.endswith(" .") and "\t" not in sentence for sentence in corpus)
    assert len(set(corpus)) > 400
