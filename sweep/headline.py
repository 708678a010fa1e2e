"""The headline metric: the one metric a space is judged on, with its direction and tolerance
(:class:`Headline`), and how the driver words and prints its values. The metrics themselves (direction, unit,
bounds, chance level, which data sets report them) are defined once in ``workers/metrics.py``; this module
only reads them.

A space states its headline (``metric: {name, mode, tolerance}``, ``sweep/space/model.py``, filled from the
registry by :func:`with_registry_defaults`); ``sweep import`` reads one from a row or a shipped space
(``sweep/results/importer.py``); the report finds the one its trials were judged on
(``sweep/analysis/report/headline.py``). All three are a :class:`Headline`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from workers.config import StrictModel
from workers.metrics import DEFAULT_METRIC, METRICS


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


class Headline(StrictModel):
    """The metric the analysis judges a space on.

    ``name``: a metric (``top1``, ``accuracy``, ``val_loss`` …; one ``workers/metrics.py`` does not know keeps
    its name). ``mode``: ``max`` (higher is better) or ``min``; None only where neither the row nor the
    registry says. ``tolerance``: how much worse than the baseline, in the metric's own units (points of top-1,
    nats of loss), still counts as "holds"; None: the analysis default (``DEFAULT_TOLERANCE``).
    """

    name: str = Field(default=DEFAULT_METRIC, min_length=1)
    mode: Literal["max", "min"] | None = None
    tolerance: float | None = Field(default=None, gt=0.0)

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


def with_registry_defaults(data: Any) -> Any:
    """A headline as a space file states it, with ``mode`` and ``tolerance`` filled from the metric's
    registry entry where the file leaves them out (``tolerance``: the metric's default, None for a metric in
    units that have none). A before-validator: anything but a dict passes unchanged."""
    if not isinstance(data, dict):
        return data
    info = METRICS.get(str(data.get("name", DEFAULT_METRIC)))
    if info is None:
        return data
    filled = {"mode": info.mode, "tolerance": info.default_tolerance}
    return {**data, **{key: value for key, value in filled.items() if data.get(key) is None}}
