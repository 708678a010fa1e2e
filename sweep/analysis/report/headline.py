"""The metric a report judges on (its name, direction and tolerance), found once per report."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.metrics import DEFAULT_TOLERANCE, METRICS, tolerance_unit


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


def find_headline(con, space: str) -> Headline:
    """The space's headline metric: the one its latest sweep recorded when its trials carry it, else the
    one most of its trials carry; with the tolerance its verdicts use."""
    name, mode = con.execute(
        """SELECT c.metric, any_value(c.metric_mode) FROM configs c LEFT JOIN space_settings s USING (space)
           WHERE c.space = ? GROUP BY c.metric
           ORDER BY bool_or(c.metric = s.metric) DESC NULLS LAST, count(*) DESC LIMIT 1""",
        [space],
    ).fetchone()
    row = con.execute("SELECT max(tolerance) FROM vs_baseline WHERE space = ? AND metric = ?", [space, name]).fetchone()
    return Headline(name, mode, row[0] if row and row[0] is not None else DEFAULT_TOLERANCE)
