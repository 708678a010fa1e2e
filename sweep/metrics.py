"""Headline metrics as the driver words and prints them. The metrics themselves (direction, unit, bounds,
which data sets report them) are defined once in ``workers/metrics.py``, which both sides import; this
module re-exports them for the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.metrics import (
    DEFAULT_METRIC,
    DEFAULT_TOLERANCE,
    METRICS,
    MODALITY_METRICS,
    Metric,
    epoch_key,
    natural_mode,
    record_key,
)

__all__ = [
    "DEFAULT_METRIC",
    "DEFAULT_TOLERANCE",
    "METRICS",
    "MODALITY_METRICS",
    "Headline",
    "Metric",
    "direction_words",
    "epoch_key",
    "format_delta",
    "format_score",
    "natural_mode",
    "record_key",
    "tolerance_unit",
]  # fmt: skip


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


@dataclass(frozen=True)
class Headline:
    """The metric a report judges on: its name, direction (max | min) and the tolerance its verdicts used."""

    name: str
    mode: str
    tolerance: float

    @property
    def label(self) -> str:
        info = METRICS.get(self.name)
        return info.label if info else self.name

    @property
    def unit(self) -> str:
        return tolerance_unit(self.name)

    @property
    def worse(self) -> str:
        return "below" if self.mode == "max" else "above"
