"""GLUE (Wang et al. 2019, *GLUE: A Multi-Task Benchmark and Analysis Platform for Natural Language
Understanding*): the on-disk loader, the per-task metrics, and a generated GLUE-layout task with a generated
pretraining corpus, so that a Crammed-BERT pipeline can run on a CPU with no files. Nothing is downloaded.

**Layout** (as the GLUE download script ``download_glue_data.py`` writes it): a root folder (``glue_data/``,
given by ``data.glue.root`` or ``$GLUE_DIR``) holding one folder per task, ``CoLA``, ``SST-2``, ``MRPC``, ``QQP``,
``STS-B``, ``MNLI``, ``QNLI``, ``RTE``, ``WNLI``, each with ``train.tsv`` and ``dev.tsv``; MNLI has
``dev_matched.tsv`` and ``dev_mismatched.tsv`` instead of ``dev.tsv`` (tasks ``mnli`` and ``mnli_mm`` share the
folder and ``train.tsv``). Test files are not read (GLUE's test labels are not public).

**Columns** (0-based; the processors of HF transformers' ``data/processors/glue.py``, ``_create_examples``,
use the same positions). Every file has a header line except CoLA's. Where there is a header, each column
is found by its header name; only when the header lacks that name is the position below used (a negative
position counts from the end of the header). CoLA is read by position.

=========  ======  ===========================  ===========================  ========================  ==========
task       header  sentence a                   sentence b                   label                     metric
=========  ======  ===========================  ===========================  ========================  ==========
cola       no      3                            –                            1 (0/1)                   MCC
sst2       yes     ``sentence`` (0)             –                            ``label`` (1)             accuracy
mrpc       yes     ``#1 String`` (3)            ``#2 String`` (4)            ``Quality`` (0)           F1
qqp        yes     ``question1`` (3)            ``question2`` (4)            ``is_duplicate`` (5)      F1
stsb       yes     ``sentence1`` (7)            ``sentence2`` (8)            ``score`` (last), 0…5     Spearman
mnli(_mm)  yes     ``sentence1`` (8)            ``sentence2`` (9)            ``gold_label`` (last)     accuracy
qnli       yes     ``question`` (1)             ``sentence`` (2)             ``label`` (last)          accuracy
rte, wnli  yes     ``sentence1`` (1)            ``sentence2`` (2)            ``label`` (last)          accuracy
=========  ======  ===========================  ===========================  ========================  ==========

Class indices follow HF's ``get_labels()`` order: MNLI ``contradiction, entailment, neutral``; QNLI and RTE
``entailment, not_entailment``; the others ``0, 1``. STS-B is a regression on the float score.

**Reading.** :mod:`csv` with a tab delimiter and ``QUOTE_NONE`` (GLUE files hold stray ``"`` that are text,
not quoting), UTF-8 (a leading byte-order mark is dropped). Blank lines are ignored. A row with too few
columns for the columns read (QQP's ``train.tsv`` has a few lines broken by stray newlines) is skipped and
counted (:attr:`GlueExamples.skipped_rows`), as HF's QQP processor skips them. A label that is not one of the
task's labels (or, for STS-B, not a number) is an error naming the file, the line and the value.

**Metrics** are computed here in plain numpy and returned in percent (×100, as GLUE reports them):
accuracy; F1 of class 1 (MRPC and QQP); Matthews correlation (CoLA); Spearman rank correlation (STS-B).
The GLUE average is the plain mean of the tasks' scores (:func:`glue_average`).

**Generated data** (for smoke runs): :func:`generated_corpus` gives English-like sentences from a small fixed
grammar, for masked-LM pretraining; :func:`write_generated_glue` writes the task ``synthetic`` (folder
``SYNTHETIC``, SST-2's layout and metric) whose label is the sentence's sentiment.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from workers.data.cache import atomic_file
from workers.rank_correlation import average_ranks, spearman_rho
from workers.vocabulary import did_you_mean

__all__ = [
    "GLUE_ROOT_ENV",
    "GLUE_TASKS",
    "Column",
    "GlueExamples",
    "GlueFormatError",
    "GlueTask",
    "accuracy_pct",
    "average_ranks",
    "f1_pct",
    "generated_corpus",
    "get_task",
    "glue_average",
    "glue_root",
    "matthews_pct",
    "read_glue_split",
    "spearman_pct",
    "split_path",
    "synthetic_rows",
    "task_score",
    "write_generated_glue",
]

GLUE_ROOT_ENV = "GLUE_DIR"
SPLITS = ("train", "dev")
METRICS = ("accuracy", "f1", "mcc", "spearman")
STSB_MIN_SCORE, STSB_MAX_SCORE = 0.0, 5.0

Split = Literal["train", "dev"]


class GlueFormatError(ValueError):
    """A GLUE file's content is not what its task's layout says (the message names file, line and value)."""


# --- the task registry -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """Where a field is: by ``header`` name when the file has a header naming it, else at ``position``
    (0-based; negative counts from the end of the header)."""

    header: str | None
    position: int


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task's files, columns, labels and metric (see the module docstring's table).

    ``labels`` is the label strings in class-index order, or None for the regression task (STS-B).
    """

    name: str
    directory: str
    train_file: str
    dev_file: str
    has_header: bool
    text_a: Column
    text_b: Column | None
    label: Column
    labels: tuple[str, ...] | None
    metric: str

    @property
    def is_regression(self) -> bool:
        """True for STS-B: the label is a float score and the model has a single output."""
        return self.labels is None

    @property
    def num_labels(self) -> int:
        """The classifier's output size: the number of classes, or 1 for a regression."""
        return 1 if self.labels is None else len(self.labels)

    def file_name(self, split: Split) -> str:
        """The file of ``split`` ("train" or "dev") inside :attr:`directory`."""
        if split not in SPLITS:
            raise ValueError(f"GLUE split must be one of {SPLITS}, but got {split!r}")
        return self.train_file if split == "train" else self.dev_file


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")
NLI = ("contradiction", "entailment", "neutral")  # HF's MnliProcessor.get_labels() order
SENTENCE, LABEL = Column("sentence", 0), Column("label", 1)  # SST-2's header (also the generated task's)
MNLI_A, MNLI_B, MNLI_LABEL = Column("sentence1", 8), Column("sentence2", 9), Column("gold_label", -1)
PAIR_A, PAIR_B, LAST_LABEL = Column("sentence1", 1), Column("sentence2", 2), Column("label", -1)


def _task(
    name: str,
    directory: str,
    text_a: Column,
    text_b: Column | None,
    label: Column,
    labels: tuple[str, ...] | None,
    metric: str,
    *,
    dev_file: str = "dev.tsv",
    has_header: bool = True,
) -> GlueTask:
    return GlueTask(name, directory, "train.tsv", dev_file, has_header, text_a, text_b, label, labels, metric)


GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in (
        _task("cola", "CoLA", Column(None, 3), None, Column(None, 1), BINARY, "mcc", has_header=False),
        _task("sst2", "SST-2", SENTENCE, None, LABEL, BINARY, "accuracy"),
        _task("mrpc", "MRPC", Column("#1 String", 3), Column("#2 String", 4), Column("Quality", 0), BINARY, "f1"),
        _task("qqp", "QQP", Column("question1", 3), Column("question2", 4), Column("is_duplicate", 5), BINARY, "f1"),
        _task("stsb", "STS-B", Column("sentence1", 7), Column("sentence2", 8), Column("score", -1), None, "spearman"),
        _task("mnli", "MNLI", MNLI_A, MNLI_B, MNLI_LABEL, NLI, "accuracy", dev_file="dev_matched.tsv"),
        _task("mnli_mm", "MNLI", MNLI_A, MNLI_B, MNLI_LABEL, NLI, "accuracy", dev_file="dev_mismatched.tsv"),
        _task("qnli", "QNLI", Column("question", 1), Column("sentence", 2), LAST_LABEL, ENTAILMENT, "accuracy"),
        _task("rte", "RTE", PAIR_A, PAIR_B, LAST_LABEL, ENTAILMENT, "accuracy"),
        _task("wnli", "WNLI", PAIR_A, PAIR_B, LAST_LABEL, BINARY, "accuracy"),
        _task("synthetic", "SYNTHETIC", SENTENCE, None, LABEL, BINARY, "accuracy"),
    )
}


def get_task(name: str) -> GlueTask:
    """The registered task called ``name``; ``ValueError`` listing the known tasks (closest first) otherwise."""
    task = GLUE_TASKS.get(name)
    if task is not None:
        return task
    hint = did_you_mean(name, GLUE_TASKS)
    raise ValueError(f"unknown GLUE task {name!r}; {hint}known tasks: {', '.join(GLUE_TASKS)}")


# --- reading ---------------------------------------------------------------------------------------------


@dataclass
class GlueExamples:
    """One split of one task: ``text_a`` (and ``text_b`` for sentence-pair tasks, else None), ``labels``
    (N,) int64 class indices, or float32 scores for STS-B, and ``skipped_rows``, the rows dropped for having
    too few columns."""

    task: str
    text_a: list[str]
    text_b: list[str] | None
    labels: np.ndarray
    skipped_rows: int = 0

    def __len__(self) -> int:
        return len(self.text_a)


def _layout_hint() -> str:
    return (
        "expected the layout glue_data/<TASK>/{train,dev}.tsv as download_glue_data.py writes it (MNLI: "
        f"train.tsv, dev_matched.tsv, dev_mismatched.tsv); set `data.glue.root` or ${GLUE_ROOT_ENV} to the "
        "glue_data folder. Nothing is downloaded; `write_generated_glue` writes the generated task SYNTHETIC."
    )


def glue_root(configured: str | os.PathLike | None = None) -> Path:
    """The GLUE root folder: ``configured`` (``data.glue.root``) when given, else ``$GLUE_DIR``;
    ``FileNotFoundError`` when neither is set."""
    if configured is not None and str(configured) != "":
        return Path(configured).expanduser()
    from_env = os.environ.get(GLUE_ROOT_ENV, "")
    if from_env:
        return Path(from_env).expanduser()
    raise FileNotFoundError(f"no GLUE root is set: {_layout_hint()}")


def split_path(root: str | os.PathLike, task: str, split: Split) -> Path:
    """The file holding ``split`` of ``task`` under ``root`` (it need not exist)."""
    spec = get_task(task)
    return Path(root) / spec.directory / spec.file_name(split)


def _require_file(root: Path, path: Path) -> None:
    """``FileNotFoundError`` naming the first missing piece of ``path`` (root, task folder or file)."""
    if path.is_file():
        return
    if not root.is_dir():
        missing = f"GLUE root {root} is not a folder (looking for {path})"
    elif not path.parent.is_dir():
        missing = f"GLUE task folder {path.parent} does not exist (looking for {path})"
    else:
        missing = f"GLUE file {path} does not exist"
    raise FileNotFoundError(f"{missing}; {_layout_hint()}")


def _resolve(column: Column, header: list[str] | None) -> int:
    """The 0-based index of ``column`` in rows of a file with this header (None: no header)."""
    if header is not None and column.header is not None and column.header in header:
        return header.index(column.header)
    if column.position >= 0:
        return column.position
    if header is None:
        raise ValueError(f"a negative column position ({column.position}) needs a header line to count from")
    return len(header) + column.position


def _parse_label(spec: GlueTask, value: str, path: Path, line: int) -> int | float:
    """The class index of a label string, or the float score for STS-B; :class:`GlueFormatError` naming file,
    line and value otherwise."""
    value = value.strip()
    if spec.labels is None:
        try:
            return float(value)
        except ValueError:
            raise GlueFormatError(
                f"{path}, line {line}: {spec.name} label {value!r} is not a number (expected a score "
                f"{STSB_MIN_SCORE:g}…{STSB_MAX_SCORE:g})"
            ) from None
    try:
        return spec.labels.index(value)
    except ValueError:
        raise GlueFormatError(
            f"{path}, line {line}: unknown {spec.name} label {value!r}; known labels: {', '.join(spec.labels)}"
        ) from None


def read_glue_split(root: str | os.PathLike, task: str, split: Split) -> GlueExamples:
    """``split`` ("train" or "dev") of ``task`` under the GLUE root ``root``, read as the module docstring says.

    ``ValueError`` for an unknown task or split; ``FileNotFoundError`` naming the expected path, the layout and
    ``data.glue.root`` / ``$GLUE_DIR`` when the file is missing; :class:`GlueFormatError` for a bad label.
    """
    spec = get_task(task)
    root = Path(root)
    path = split_path(root, task, split)
    _require_file(root, path)
    text_a: list[str] = []
    text_b: list[str] | None = None if spec.text_b is None else []
    labels: list[int | float] = []
    skipped = 0
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None) if spec.has_header else None
        columns = [spec.text_a, spec.label] + ([spec.text_b] if spec.text_b is not None else [])
        index_a, index_label, *rest = (_resolve(column, header) for column in columns)
        index_b = rest[0] if rest else None
        needed = max(index_a, index_label, -1 if index_b is None else index_b) + 1
        try:
            for row in reader:
                if not row:
                    continue
                if len(row) < needed:
                    skipped += 1
                    continue
                labels.append(_parse_label(spec, row[index_label], path, reader.line_num))
                text_a.append(row[index_a])
                if text_b is not None:
                    text_b.append(row[index_b])
        except csv.Error as error:
            raise GlueFormatError(f"{path}, line {reader.line_num}: unreadable TSV row ({error})") from None
    dtype = np.float32 if spec.is_regression else np.int64
    return GlueExamples(spec.name, text_a, text_b, np.asarray(labels, dtype=dtype), skipped)


# --- metrics ---------------------------------------------------------------------------------------------


def _pair(pred: Sequence | np.ndarray, labels: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as 1-D arrays of equal, non-zero length; ``ValueError`` stating the shapes otherwise."""
    pred, labels = np.asarray(pred), np.asarray(labels)
    if pred.ndim != 1 or labels.ndim != 1 or len(pred) != len(labels) or len(pred) == 0:
        raise ValueError(
            "predictions and labels must be 1-D, of the same non-zero length (class indices: take argmax(-1) of "
            f"logits), but got shapes (predictions={pred.shape}, labels={labels.shape})"
        )
    return pred, labels


def accuracy_pct(pred, labels) -> float:
    """Percent of positions where ``pred`` equals ``labels``."""
    pred, labels = _pair(pred, labels)
    return float(np.mean(pred == labels) * 100.0)


def f1_pct(pred, labels) -> float:
    """Binary F1 of class 1 in percent: 2·TP / (2·TP + FP + FN), with 0 when TP + FP + FN = 0 (no predicted
    and no true positives; sklearn's ``f1_score`` with ``zero_division=0``). Values must be 0 or 1."""
    pred, labels = _pair(pred, labels)
    for name, values in (("predictions", pred), ("labels", labels)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"f1: {name} must be 0 or 1, but got values {np.unique(values)[:10].tolist()}")
    pred, labels = pred == 1, labels == 1
    true_pos = int(np.sum(pred & labels))
    denominator = 2 * true_pos + int(np.sum(pred & ~labels)) + int(np.sum(~pred & labels))
    return 0.0 if denominator == 0 else 100.0 * 2 * true_pos / denominator


def matthews_pct(pred, labels) -> float:
    """Matthews correlation in percent, for any number of classes (Gorodkin's R_K; the binary MCC for 2):
    with s samples, c correct, t_k and p_k the true and predicted counts of class k,
    (c·s − Σ t_k p_k) / √((s² − Σ p_k²)(s² − Σ t_k²)); 0 when the denominator is 0 (one side constant), as
    sklearn's ``matthews_corrcoef``."""
    pred, labels = _pair(pred, labels)
    _, codes = np.unique(np.concatenate([pred, labels]), return_inverse=True)
    codes, n = codes.reshape(-1), len(pred)
    classes = int(codes.max()) + 1
    pred_counts = np.bincount(codes[:n], minlength=classes).astype(np.float64)
    true_counts = np.bincount(codes[n:], minlength=classes).astype(np.float64)
    s, c = float(n), float(np.sum(pred == labels))
    covariance = c * s - float(true_counts @ pred_counts)
    denominator = (s * s - float(pred_counts @ pred_counts)) * (s * s - float(true_counts @ true_counts))
    return 0.0 if denominator == 0 else 100.0 * covariance / np.sqrt(denominator)


def spearman_pct(pred, target) -> float:
    """Spearman rank correlation in percent: :func:`workers.rank_correlation.spearman_rho` × 100, so NaN, as
    scipy's ``spearmanr``, when one side is constant (the correlation is undefined) or any value is NaN;
    :func:`task_score` turns that NaN into 0."""
    pred, target = _pair(pred, target)
    return 100.0 * spearman_rho(pred, target)


METRIC_FUNCTIONS = {"accuracy": accuracy_pct, "f1": f1_pct, "mcc": matthews_pct, "spearman": spearman_pct}


def task_score(task_name: str, predictions, labels) -> float:
    """The task's GLUE metric in percent. ``predictions`` are class indices (take argmax(-1) of logits) for
    classification tasks and float scores for STS-B; ``labels`` as :func:`read_glue_split` gives them.

    A NaN Spearman (constant predictions, or NaN from a diverged model) scores 0.0: such predictions carry no
    ranking information, 0 is the score of an uninformative ranking, and a NaN would poison the GLUE average.
    """
    spec = get_task(task_name)
    if spec.is_regression:
        score = spearman_pct(np.asarray(predictions, dtype=np.float64), np.asarray(labels, dtype=np.float64))
        return 0.0 if np.isnan(score) else score
    predictions = np.asarray(predictions)
    if predictions.dtype.kind == "f" and not np.all(np.mod(predictions, 1) == 0):
        raise ValueError(
            f"{spec.name}: predictions must be class indices (whole numbers; take argmax(-1) of logits), but got "
            f"{predictions.dtype} values such as {predictions.reshape(-1)[:3].tolist()}"
        )
    return float(METRIC_FUNCTIONS[spec.metric](predictions, labels))


def glue_average(scores: dict[str, float]) -> float:
    """The plain mean of the given tasks' scores (percent), as Crammed BERT reports its GLUE average: the
    mean over the tasks that were run, where ``mnli`` and ``mnli_mm`` count as two tasks. ``ValueError`` for
    no scores, an unknown task name or a score that is not finite."""
    if not scores:
        raise ValueError("glue_average needs at least one task's score, but got none")
    for name, score in scores.items():
        get_task(name)
        if not np.isfinite(score):
            raise ValueError(f"glue_average: the score of {name} must be finite, but got {score!r}")
    return float(np.mean([float(score) for score in scores.values()]))


# --- generated data --------------------------------------------------------------------------------------

DETERMINERS = ("the", "a", "this", "that", "every", "one")
NOUNS = (
    "dog", "cat", "teacher", "child", "movie", "book", "song", "city", "garden", "friend", "robot", "river",
    "story", "farmer", "window", "letter",
)  # fmt: skip
VERBS = ("sees", "finds", "holds", "reads", "watches", "follows", "visits", "carries", "paints", "remembers")
NEUTRAL_ADJECTIVES = ("small", "old", "red", "quiet", "tall", "new", "green", "round", "early", "wooden")
POSITIVE_WORDS = ("good", "great", "wonderful", "happy", "bright", "lovely", "excellent", "pleasant", "kind")
NEGATIVE_WORDS = ("bad", "terrible", "awful", "sad", "dull", "boring", "horrible", "ugly", "cruel")
NEGATION = "not"
NEGATION_P = 0.3  # how often the predicate is negated in the generated task
CORPUS_STREAM, TRAIN_STREAM, DEV_STREAM = 0, 1, 2
SYNTHETIC_HEADER = ("sentence", "label")


def _pick(rng: np.random.Generator, words: Sequence[str]) -> str:
    return words[int(rng.integers(len(words)))]


def _noun_phrase(rng: np.random.Generator) -> str:
    """``<determiner> [<neutral adjective>] <noun>`` (an adjective half the time)."""
    words = [_pick(rng, DETERMINERS)]
    if rng.random() < 0.5:
        words.append(_pick(rng, NEUTRAL_ADJECTIVES))
    words.append(_pick(rng, NOUNS))
    return " ".join(words)


def _predicate(rng: np.random.Generator, positive: bool, negated: bool) -> str:
    """``is [not] <sentiment word>``, the word from the positive or the negative list."""
    word = _pick(rng, POSITIVE_WORDS if positive else NEGATIVE_WORDS)
    return f"is {NEGATION} {word}" if negated else f"is {word}"


def _sentiment_sentence(rng: np.random.Generator, positive: bool, negated: bool) -> str:
    """A sentence whose only sentiment word is in its predicate: ``<np> is [not] <word> .`` or
    ``<np> <verb> <np> and it is [not] <word> .``."""
    if rng.random() < 0.5:
        return f"{_noun_phrase(rng)} {_predicate(rng, positive, negated)} ."
    clause = f"{_noun_phrase(rng)} {_pick(rng, VERBS)} {_noun_phrase(rng)}"
    return f"{clause} and it {_predicate(rng, positive, negated)} ."


def _corpus_sentence(rng: np.random.Generator) -> str:
    """A transitive sentence (``<np> <verb> <np> .``) or a sentiment sentence (any polarity, "not" 30%)."""
    if rng.random() < 0.4:
        return f"{_noun_phrase(rng)} {_pick(rng, VERBS)} {_noun_phrase(rng)} ."
    return _sentiment_sentence(rng, positive=rng.random() < 0.5, negated=rng.random() < NEGATION_P)


def _check_count(name: str, value: int, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} >= {low} must hold (a whole number), but got ({name}={value!r})")


def generated_corpus(num_sentences: int, seed: int) -> list[str]:
    """``num_sentences`` lowercase English-like sentences (SST-2's style: words and the final "." separated by
    spaces) from the fixed grammar above: transitive sentences and ``is [not] <adjective>`` sentences with
    positive and negative words. Deterministic given ``seed``; a smaller count is a prefix of a larger one."""
    _check_count("num_sentences", num_sentences, 0)
    rng = np.random.default_rng([seed, CORPUS_STREAM])
    return [_corpus_sentence(rng) for _ in range(num_sentences)]


def synthetic_rows(num_rows: int, seed: int, stream: int) -> list[tuple[str, int]]:
    """(sentence, label) rows of the generated task: label 1 when the sentence's sentiment word is positive
    and not negated, or negative and negated by "not"; 0 otherwise. Labels come in shuffled pairs (one 0, one
    1 per two rows), so the classes are balanced to within one row; the polarity follows from the label and a
    negation drawn with probability ``NEGATION_P``."""
    rng = np.random.default_rng([seed, stream])
    rows = []
    for index in range(num_rows):
        if index % 2 == 0:
            first = int(rng.integers(2))
        label = first if index % 2 == 0 else 1 - first
        negated = bool(rng.random() < NEGATION_P)
        positive = bool(label) != negated
        rows.append((_sentiment_sentence(rng, positive, negated), label))
    return rows


def write_generated_glue(root: str | os.PathLike, train_rows: int, dev_rows: int, seed: int) -> Path:
    """Write the generated task ``synthetic`` under ``root``: ``SYNTHETIC/train.tsv`` and ``SYNTHETIC/dev.tsv``
    in SST-2's layout (header ``sentence<TAB>label``, "\\n" line ends), each file written to a temporary file
    and renamed. Returns the task folder. Train and dev are drawn independently from ``seed``.

    This task only checks that a pipeline runs end to end: its label is a function of which words occur (a
    sentiment word and whether "not" occurs), so even a bag-of-words model with one hidden layer can learn it
    perfectly; a good score on it says nothing about language understanding.
    """
    _check_count("train_rows", train_rows, 1)
    _check_count("dev_rows", dev_rows, 1)
    folder = Path(root) / GLUE_TASKS["synthetic"].directory
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows, stream in (("train.tsv", train_rows, TRAIN_STREAM), ("dev.tsv", dev_rows, DEV_STREAM)):
        with atomic_file(folder / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
            writer.writerow(SYNTHETIC_HEADER)
            writer.writerows(synthetic_rows(rows, seed, stream))
    return folder


# --- from the Hub ------------------------------------------------------------------------------------------

HUB_REPO = "nyu-mll/glue"  # data.glue.hub.repo when left out
# task: (the repository's config, its dev split, its text columns); train splits are all "train"
HUB_TASKS = {
    "cola": ("cola", "validation", ("sentence", None)),
    "sst2": ("sst2", "validation", ("sentence", None)),
    "mrpc": ("mrpc", "validation", ("sentence1", "sentence2")),
    "qqp": ("qqp", "validation", ("question1", "question2")),
    "stsb": ("stsb", "validation", ("sentence1", "sentence2")),
    "mnli": ("mnli", "validation_matched", ("premise", "hypothesis")),
    "mnli_mm": ("mnli", "validation_mismatched", ("premise", "hypothesis")),
    "qnli": ("qnli", "validation", ("question", "sentence")),
    "rte": ("rte", "validation", ("sentence1", "sentence2")),
    "wnli": ("wnli", "validation", ("sentence1", "sentence2")),
}


def hub_label_map(task: GlueTask, names: list[str] | None) -> np.ndarray | None:
    """For each of the repository's class ids, this task's class index: by name where the task's labels are
    names (MNLI's order differs: the Hub's entailment, neutral, contradiction against HF's processors'
    contradiction, entailment, neutral), else the id itself (the 0/1 tasks). None for STS-B's scores."""
    if task.labels is None:
        return None
    if names and set(task.labels) <= set(names):
        return np.array([task.labels.index(name) for name in names], dtype=np.int64)
    return np.arange(len(task.labels), dtype=np.int64)


def read_hub_split(hub, task_name: str, split: Split) -> GlueExamples:
    """One split of one task from the Hub's GLUE (``hub``: a ``workers.data.hub.HubSplits``), as
    :func:`read_glue_split` gives it from files: the same texts, and labels in this module's class order."""
    task = get_task(task_name)
    if task_name not in HUB_TASKS:
        raise ValueError(f"GLUE task {task_name!r} is not in the Hub's GLUE; known: {', '.join(HUB_TASKS)}")
    config, dev_split, (column_a, column_b) = HUB_TASKS[task_name]
    rows = hub.load("train" if split == "train" else dev_split, config)
    feature = rows.features.get("label")
    mapping = hub_label_map(task, getattr(feature, "names", None))
    raw = np.asarray(rows["label"])
    labels = raw.astype(np.float32) if mapping is None else mapping[raw.astype(np.int64)]
    text_b = list(rows[column_b]) if column_b else None
    return GlueExamples(task_name, list(rows[column_a]), text_b, labels)
