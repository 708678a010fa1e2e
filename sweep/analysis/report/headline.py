"""The metric a report judges on (its name, direction and tolerance: :class:`sweep.headline.Headline`), found once
per report from the views."""

from __future__ import annotations

from sweep.headline import Headline
from workers.metrics import DEFAULT_TOLERANCE


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
    tolerance = row[0] if row and row[0] is not None else DEFAULT_TOLERANCE
    return Headline(name=name, mode=mode, tolerance=tolerance)
