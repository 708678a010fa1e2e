"""Headline metrics: what a space is judged on, which direction is better, and which data sets report it.

A space names one headline metric (``metric: {name, mode, tolerance}``); every trials row carries that
name (``metric``), its direction (``metric_mode``) and its value (``score``), and the analysis judges
"the trade holds" on ``score`` in the metric's own units and direction. This registry is the one place
that knows the metrics: their natural direction, their unit, and the data sets that report them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricInfo:
    """One known headline metric.

    ``mode``: ``max`` when higher is better, ``min`` when lower is. ``unit``: what its values and its
    tolerance are counted in. ``default_tolerance``: the tolerance a space gets when it names none
    (None: a space must choose one, as there is no sensible default in that unit). ``decimals``: how
    many the report prints.
    """

    name: str
    mode: str
    unit: str
    label: str
    description: str
    default_tolerance: float | None
    decimals: int


# The tolerance, in points, of a metric counted in percent or points when neither the space nor the query
# gives one (sweep/views/core.sql falls back to the same number; tests/test_metrics.py checks they agree).
DEFAULT_TOLERANCE = 0.5

METRICS: dict[str, MetricInfo] = {
    info.name: info
    for info in (
        MetricInfo("top1", "max", "percent", "top-1", "top-1 accuracy on held-out images", DEFAULT_TOLERANCE, 1),
        MetricInfo("top5", "max", "percent", "top-5", "top-5 accuracy on held-out images", DEFAULT_TOLERANCE, 1),
        MetricInfo(
            "accuracy",
            "max",
            "percent",
            "accuracy",
            "sequence classification accuracy (e.g. ListOps)",
            DEFAULT_TOLERANCE,
            1,
        ),
        MetricInfo("val_loss", "min", "nats", "validation loss", "mean held-out cross-entropy", None, 3),
        MetricInfo("perplexity", "min", "", "perplexity", "exp(val_loss) on held-out text", None, 2),
        MetricInfo("glue_avg", "max", "points", "GLUE average", "mean GLUE score over the tasks", DEFAULT_TOLERANCE, 1),
    )
}
PERCENT_METRICS = tuple(name for name, info in METRICS.items() if info.unit == "percent")

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


def natural_mode(name: str) -> str | None:
    """``max`` or ``min`` for a known metric, None for one this registry does not know."""
    info = METRICS.get(name)
    return info.mode if info else None


def epoch_key(name: str) -> str:
    """The key of a metric in a per-epoch row: ``val_top1``, ``val_accuracy``; ``val_loss`` keeps its name."""
    return name if name.startswith("val_") else "val_" + name


def record_key(epoch_key: str) -> str:
    """The inverse of :func:`epoch_key`: ``val_top1`` → ``top1``; ``val_loss`` keeps its name."""
    return epoch_key if epoch_key == "val_loss" else epoch_key.removeprefix("val_")


def direction_words(mode: str) -> str:
    return "higher is better" if mode == "max" else "lower is better"


def tolerance_unit(name: str) -> str:
    """The unit a tolerance on ``name`` is written in: points for percentages, else the metric's unit."""
    info = METRICS.get(name)
    if info is None:
        return "units"
    return "points" if info.unit in ("percent", "points") else info.unit


def format_score(value: float | None, name: str) -> str:
    """A score as the report prints it: ``90.0%``, ``0.412 nats``, ``12.35``."""
    if value is None:
        return "n/a"
    info = METRICS.get(name)
    decimals = info.decimals if info else 3
    suffix = {"percent": "%", "nats": " nats", "points": " points"}.get(info.unit if info else "", "")
    return f"{value:.{decimals}f}{suffix}"


def format_delta(value: float | None, name: str) -> str:
    """A signed difference in the metric's units, with the metric's precision: ``+1.2``, ``-0.034``."""
    if value is None:
        return "n/a"
    info = METRICS.get(name)
    return f"{value:+.{info.decimals if info else 3}f}"
