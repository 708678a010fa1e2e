"""The held-out metrics a trial reports, defined once for both sides (torch-free: the driver's analysis
commands import it without loading a model library).

A :class:`Metric` says what the worker emits under its name (``workers/train.py`` ``evaluate``; GLUE's in
``workers/finetune.py``), its direction and unit, the bounds a value must lie in, and whether it is scored
after every evaluation (then the epochs rows carry it as ``val_<name>``, :func:`epoch_key`). Everything else
is derived from :data:`METRICS`: the trials and epochs columns (``sweep/results/schema.py``), the sink's epoch
columns (``sweep/results/sink.py``), the importer's bounds (``sweep/results/importer.py``), the metrics Optuna
objectives and schedulers may use (``sweep/space/model.py``), and how the report prints a value (``sweep/headline.py``).
Adding a metric is one entry here (and the code in the worker that computes it).

A space names one headline metric (``metric: {name, mode, tolerance}``); every trials row carries that
name (``metric``), its direction (``metric_mode``) and its value (``score``), and the analysis judges
"the trade holds" on ``score`` in the metric's own units and direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """One metric a trial reports, a trials column of type float64.

    ``mode``: ``max`` when higher is better, ``min`` when lower is. ``unit``: what its values and a
    tolerance on it are counted in (``percent``: a value must lie in [0, 100]). ``default_tolerance``: the
    tolerance a space gets when it names none (None: a space must choose one, as there is no sensible
    default in that unit). ``decimals``: how many the report prints. ``non_negative``: a value below 0 is
    rejected on import. ``per_epoch``: scored after every evaluation (an epochs column ``val_<name>``, and
    usable by an early-stopping scheduler). ``chance``: the score of a model that learned nothing, as a
    function of the number of equally likely answers it guesses among (a data set's
    ``DataSetSpec.outcomes``); None for a metric with no single chance level (GLUE's average mixes accuracy,
    F1 and correlations).
    """

    name: str
    mode: str
    unit: str
    label: str
    description: str
    default_tolerance: float | None
    decimals: int
    non_negative: bool = False
    per_epoch: bool = True
    chance: Callable[[float], float] | None = None

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """(lowest, highest) value a row may hold; None: unbounded on that side."""
        if self.unit == "percent":
            return 0.0, 100.0
        return (0.0 if self.non_negative else None), None


def top_k_chance(k: int) -> Callable[[float], float]:
    """Uniform guessing among ``outcomes`` answers, right when the answer is among ``k`` guesses:
    100 · min(k, outcomes) / outcomes percent (top-1: 100 / outcomes; top-5: 500 / outcomes, at most 100)."""
    return lambda outcomes: min(100.0, 100.0 * k / outcomes)


def uniform_loss(outcomes: float) -> float:
    """The cross-entropy of a uniform prediction over ``outcomes`` answers: ln(outcomes) nats."""
    return math.log(outcomes)


def uniform_perplexity(outcomes: float) -> float:
    """exp of :func:`uniform_loss`: the number of answers itself."""
    return float(outcomes)


# The tolerance, in points, of a metric counted in percent or points when neither the space nor the query
# gives one (sweep/analysis/views/verdicts.sql falls back to the same number; tests/workers/test_metrics.py checks
# they agree).
DEFAULT_TOLERANCE = 0.5

METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(
            "top1",
            "max",
            "percent",
            "top-1",
            "top-1 accuracy on held-out images",
            DEFAULT_TOLERANCE,
            1,
            chance=top_k_chance(1),
        ),
        Metric(
            "top5",
            "max",
            "percent",
            "top-5",
            "top-5 accuracy on held-out images",
            DEFAULT_TOLERANCE,
            1,
            chance=top_k_chance(5),
        ),
        Metric(
            "accuracy",
            "max",
            "percent",
            "accuracy",
            "sequence classification accuracy (e.g. ListOps)",
            DEFAULT_TOLERANCE,
            1,
            chance=top_k_chance(1),
        ),
        Metric(
            "val_loss",
            "min",
            "nats",
            "validation loss",
            "mean held-out cross-entropy",
            None,
            3,
            non_negative=True,
            chance=uniform_loss,
        ),
        Metric(
            "perplexity",
            "min",
            "",
            "perplexity",
            "exp(val_loss) on held-out text",
            None,
            2,
            non_negative=True,
            chance=uniform_perplexity,
        ),
        Metric(
            "glue_avg",
            "max",
            "points",
            "GLUE average",
            "mean GLUE score over the tasks",
            DEFAULT_TOLERANCE,
            1,
            per_epoch=False,
        ),
    )
}

IMAGE_METRICS = ("top1", "top5", "val_loss")
SEQUENCE_CLASSIFICATION_METRICS = ("accuracy", "val_loss")
LANGUAGE_MODEL_METRICS = ("val_loss", "perplexity", "accuracy")  # per held-out token; accuracy: argmax is right
# Masked LMs: the GLUE average after fine-tuning, and the masked-token loss, perplexity and accuracy of pretraining.
MASKED_LM_METRICS = ("glue_avg", *LANGUAGE_MODEL_METRICS)
# Which headline metrics a data set's trials report, by what it gives a model (its class's ``modality``).
MODALITY_METRICS: dict[str, tuple[str, ...]] = {
    "image": IMAGE_METRICS,
    "sequence": SEQUENCE_CLASSIFICATION_METRICS,
    "causal_lm": LANGUAGE_MODEL_METRICS,
    "masked_lm": MASKED_LM_METRICS,
}

DEFAULT_METRIC = "top1"


def epoch_metrics() -> tuple[str, ...]:
    """The metrics scored after every evaluation, in :data:`METRICS` order."""
    return tuple(name for name, metric in METRICS.items() if metric.per_epoch)


def natural_mode(name: str) -> str | None:
    """``max`` or ``min`` for a known metric, None for one this registry does not know."""
    metric = METRICS.get(name)
    return metric.mode if metric else None


def epoch_key(name: str) -> str:
    """The key of a metric in a per-epoch row: ``val_top1``, ``val_accuracy``; ``val_loss`` keeps its name."""
    return name if name.startswith("val_") else "val_" + name


def score_of(record: Mapping[str, Any], metric: str) -> Any:
    """A trial's headline score, taken from its record: the worker's final record (``workers/trial.py``)
    holds it under the metric's own name (``top1``, ``val_loss``); a trials row (an imported file) may give
    it as ``score`` instead, which wins. None where neither is there. The sink, the trackers and the importer
    all read it here."""
    score = record.get("score")
    return record.get(metric) if score is None else score


def epoch_score(epoch_row: Mapping[str, Any], metric: str) -> Any:
    """The headline metric's value in one epoch row (``val_<name>``, :func:`epoch_key`): the epochs table's
    ``val_score``, and the score of a trial that ended without a final record."""
    return epoch_row.get(epoch_key(metric))


def record_key(epoch_key: str) -> str:
    """The inverse of :func:`epoch_key`: ``val_top1`` → ``top1``; ``val_loss`` keeps its name."""
    return epoch_key if epoch_key == "val_loss" else epoch_key.removeprefix("val_")


@dataclass(frozen=True)
class Cost:
    """A cost a trial records beside its metrics (a trials column), as a claim may name it
    (``sweep/questions/expectations.py``). ``mode``: ``min`` when less is better (parameters, FLOPs, bytes,
    milliseconds), ``max`` when more is (samples per second). ``exact``: the same for every seed of a config,
    counted rather than measured (parameters, FLOPs, KV-cache bytes), so two configs compare without
    statistics. ``per_device``: measured on the trial's device (throughput, latency, peak memory), so two
    configs compare only within one device."""

    name: str
    mode: str
    unit: str
    exact: bool = False
    per_device: bool = False


COSTS: dict[str, Cost] = {
    cost.name: cost
    for cost in (
        Cost("params", "min", "parameters", exact=True),
        Cost("flops_per_sample", "min", "FLOPs", exact=True),
        Cost("kv_cache_bytes_per_token", "min", "bytes", exact=True),
        Cost("peak_mem_bytes", "min", "bytes", per_device=True),
        Cost("train_samples_per_s", "max", "samples/s", per_device=True),
        Cost("infer_samples_per_s", "max", "samples/s", per_device=True),
        Cost("latency_b1_ms", "min", "ms", per_device=True),
        Cost("token_latency_ms", "min", "ms", per_device=True),
    )
}
