"""Every row a report shows, queried once (:func:`gather`): the analysis views on the space's headline metric,
and the few columns of ``trials`` and ``epochs`` the shared sections read. The sections are functions of
these rows; none queries for itself (a question's section reads its own views: ``sweep/questions/``)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.analysis.hints import Hints
from sweep.analysis.report.edge import EdgeReport, gather_edge
from sweep.headline import Headline
from sweep.markdown import query

KAPPA_EPOCHS_SQL = """
SELECT t.config_id, t.family, t.depth, t.num_heads, t.head_dim, e.epoch, avg(e.kappa_mean) AS kappa_mean
FROM epochs e JOIN trials t USING (space, trial_id)
WHERE t.space = $1 AND t.metric = $2 AND t.status = 'ok' AND e.kappa_mean IS NOT NULL
GROUP BY ALL ORDER BY t.config_id, e.epoch
"""


@dataclass
class ReportData:
    """Everything the report shows for one space, on its headline metric: rows of the analysis views, and
    the columns of ``trials`` the theory and loader-bound sections read."""

    space: str
    trials: int
    profile: str | None
    configs: list[dict]
    verdicts: list[dict]
    front: list[dict]
    depth_edges: list[dict]
    head_dim_edges: list[dict]
    kappa: list[dict]
    kappa_epochs: list[dict]
    matched: list[dict]
    kappa_metric: list[dict]
    infeasible: list[dict]
    unlearned: list[dict]  # FROM unlearned_seeds: seeds at chance whose siblings learned
    tokens_per_sample: list[int]  # the distinct num_tokens its trials recorded
    data_wait_fractions: list[float]  # each trial's, where recorded
    device_s: list[float | None]  # each trial's device-seconds (trials.device_s), None where not recorded
    # the commands the report prints, with the results location, the space's name or file and the profile
    hints: Hints | None = None
    edge: EdgeReport | None = None  # an edge search's verdicts and columns (report/edge.py); None for other searches


def count_trials(con, space: str) -> int:
    """Rows of ``trials`` for ``space``, whatever their status."""
    return con.execute("SELECT count(*) FROM trials WHERE space = ?", [space]).fetchone()[0]


def recorded_question(con, space: str) -> str | None:
    """The question the space's latest sweep recorded (``space_settings``), or None."""
    recorded = con.execute("SELECT question FROM space_settings WHERE space = ?", [space]).fetchone()
    return recorded[0] if recorded else None


def tokens_per_sample(con, space: str) -> list[int]:
    """The distinct tokens per sample (``num_tokens``) the space's trials recorded, NULLs left out."""
    return [row[0] for row in con.execute(
        "SELECT DISTINCT num_tokens FROM trials WHERE space = ? AND num_tokens IS NOT NULL", [space]
    ).fetchall()]  # fmt: skip


def data_wait_fractions(con, space: str) -> list[float]:
    """Each trial's ``data_wait_fraction`` (its steady-state step time's share spent waiting for batches), NULLs
    left out; none for results written before the column existed."""
    if "data_wait_fraction" not in [column[0] for column in con.execute("FROM trials LIMIT 0").description]:
        return []
    return [row[0] for row in con.execute(
        "SELECT data_wait_fraction FROM trials WHERE space = ? AND data_wait_fraction IS NOT NULL", [space]
    ).fetchall()]  # fmt: skip


def gather(con, space: str, headline: Headline, trials: int) -> ReportData:
    """Query every view the report reads, once."""
    key = (space, headline.name)
    on_metric = "WHERE space = ? AND metric = ?"
    by_shape = f"{on_metric} ORDER BY depth, num_heads, head_dim"
    latest = con.execute(
        "SELECT profile FROM spaces WHERE space = ? ORDER BY written_at DESC LIMIT 1", [space]
    ).fetchone()
    return ReportData(
        space=space,
        trials=trials,
        profile=latest[0] if latest else None,
        configs=query(con, f"FROM configs {by_shape}", *key),
        verdicts=query(con, f"FROM vs_baseline {by_shape}", *key),
        front=query(con, f"FROM pareto {on_metric}", *key),
        depth_edges=query(con, f"FROM depth_edge {on_metric}", *key),
        head_dim_edges=query(con, f"FROM head_dim_edge {on_metric}", *key),
        kappa=query(con, f"FROM kappa_vs_heads {on_metric}", *key),
        kappa_epochs=query(con, KAPPA_EPOCHS_SQL, *key),
        matched=query(con, f"FROM matched_budget {on_metric}", *key),
        kappa_metric=query(con, f"FROM kappa_accuracy {on_metric}", *key),
        infeasible=query(con, "FROM infeasible WHERE space = ?", space),
        unlearned=query(con, f"FROM unlearned_seeds {on_metric}", *key),
        tokens_per_sample=tokens_per_sample(con, space),
        data_wait_fractions=data_wait_fractions(con, space),
        device_s=[row["device_s"] for row in query(con, "SELECT device_s FROM trials WHERE space = ?", space)],
        edge=gather_edge(con, space, headline),
    )
