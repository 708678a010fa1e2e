"""An edge search's part of the report (``search: {kind: edge}``, issue 40): its verdicts in words, the measured
ones apart from those the monotone assumption implies, each column's edge bracketed by a measured hold and a
measured break, and the contradictions; and the rows the Δ heatmaps draw for it (every lattice config, implied
and untried ones included), from the views ``edge_settings``, ``edge_verdicts`` and ``edge_columns``
(``sweep/analysis/views/edge.sql``)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.headline import Headline, format_delta
from sweep.markdown import query
from sweep.text import plural

# The heatmaps' verdict for each edge verdict (their colours: figures.VERDICT_COLOURS): an open config is as
# undecided as an inconclusive one; a failed one has no score; an untried one no cell of its own (bar an implied one).
HEATMAP_VERDICT = {"holds": "holds", "breaks": "breaks", "baseline": "baseline", "open": "inconclusive",
                   "inconclusive": "inconclusive", "failed": "failed", "untried": "untried"}  # fmt: skip


@dataclass
class EdgeReport:
    """An edge-search space's rows: its settings (``edge_settings``), every lattice config (``edge_verdicts``,
    by column then depth) and every column (``edge_columns``)."""

    settings: dict
    verdicts: list[dict]
    columns: list[dict]


def gather_edge(con, space: str, headline: Headline) -> EdgeReport | None:
    """The edge search's rows of ``space`` on its headline metric, or None when its latest sweep was no edge
    search (``space_settings.search``)."""
    settings = query(con, "FROM edge_settings WHERE space = ? AND metric = ?", space, headline.name)
    if not settings:
        return None
    on = "WHERE space = ? AND metric = ?"
    order = "ORDER BY family, embed_dim, mlp_dim, num_heads, head_dim, num_kv_heads DESC, conditioning"
    verdicts = query(con, f"FROM edge_verdicts {on} {order}, depth", space, headline.name)
    columns = query(con, f"FROM edge_columns {on} {order}", space, headline.name)
    return EdgeReport(settings[0], verdicts, columns)


def cell_words(row: dict, headline: Headline) -> str:
    """One config's state: its measured verdict (with the gain and its interval's half-width where it has one)
    and, apart, its implied verdict and the measured depth it comes from."""
    words = row["verdict_words"]
    if row["verdict"] in ("holds", "breaks", "open", "inconclusive") and row["gain_lo"] is not None:
        half = (row["gain_hi"] - row["gain_lo"]) / 2
        gain = f"gain {format_delta(row['gain'], headline.name)} ± {format_delta(half, headline.name).lstrip('+')}"
        words = words.replace(" (measured)", f" (measured: {gain}, {plural(row['n_seeds'], 'seed')})", 1)
        words = words.replace(" trials finished", f" trials finished, {gain}", 1)
    return f"depth {row['depth']}: {words}"


def column_line(column: dict, cells: list[dict], headline: Headline) -> str:
    """A column's edge (or why it is not found), then every depth's state, one sub-item each."""
    states = "".join(f"\n  - {cell_words(cell, headline)}" for cell in cells)
    return f"- **{column['column_words']}**: {column['description']}.{states}"


def settings_words(settings: dict, headline: Headline) -> str:
    """How the edge search judged: the interval, its level over the looks, the seeds."""
    s = settings
    level = 100 * (1 - s["alpha_per_look"])
    return (
        f"This space ran an **edge search**: seeds go where a verdict is still open. A config is judged on the "
        f"gain (its mean {headline.label} minus the baseline's, positive is better) with a pooled-variance t "
        f"interval at {level:.4g}% (α = {s['alpha']:g} over {plural(s['looks'], 'look')}, one per seed count from "
        f"{s['min_seeds']} to {s['max_seeds']}: Bonferroni, so a verdict keeps its error ≤ α however many seeds it "
        f"got); it **holds** when the interval's low end is ≥ −{headline.tolerance} {headline.unit}, **breaks** when "
        f"its high end is below that, and is open until {s['max_seeds']} trials (then inconclusive)"
        + (
            f", or until even {s['max_seeds']} could not settle it at its gain (stopped for futility: inconclusive, "
            "with about the seeds a side it would need; a stop never gives a verdict, so the error bound holds)"
            if s.get("futility")
            else ""
        )
        + ". Along depth at fixed heads the search assumes a shape that holds implies deeper ones hold and a break "
        "implies shallower ones break: such a verdict is **implied** (never measured), named below with the measured "
        "depth it comes from. Nothing is assumed along heads. Configs never trained are in no other table or "
        "figure of this report (the Pareto front, throughput and κ show nothing for them).\n"
    )


def counts_words(verdicts: list[dict]) -> str:
    """How many configs were measured to a verdict, implied, left open or untried."""
    judged = [r for r in verdicts if r["verdict"] != "baseline"]
    measured = sum(r["verdict"] in ("holds", "breaks") for r in judged)
    implied_only = sum(r["implied"] is not None and r["verdict"] == "untried" for r in judged)
    untried = sum(r["verdict"] == "untried" and r["implied"] is None for r in judged)
    other = len(judged) - measured - implied_only - untried
    return (
        f"Of the {plural(len(judged), 'config')} besides the baseline: {measured} measured to a verdict, "
        f"{implied_only} implied and never trained, {other} trained without a verdict of their own (open, "
        f"inconclusive or failed), {untried} untried with nothing implied.\n"
    )


def edge_section(edge: EdgeReport | None, headline: Headline) -> str:
    """``## The edge search``: how it judged, the counts, the contradictions, and each column in a line."""
    if edge is None:
        return ""
    lines = ["\n## The edge search\n", settings_words(edge.settings, headline), counts_words(edge.verdicts)]
    contradictions = [c["contradiction_words"] for c in edge.columns if c["contradiction"]]
    if contradictions:
        lines.append("Where the measurements contradict the assumption:\n")
        lines += [f"- {words}" for words in contradictions]
        lines.append("")
    lines.append("Each column (every shape axis but depth): its edge, then every depth's verdict:\n")
    for column in edge.columns:
        cells = [r for r in edge.verdicts if r["column_key"] == column["column_key"]]
        lines.append(column_line(column, cells, headline))
    lines.append(
        '\nThe same in SQL: `sweep sql "FROM edge_verdicts"` (a row per config) and `sweep sql "FROM edge_columns"`.\n'
    )
    return "\n".join(lines)


def heatmap_rows(edge: EdgeReport) -> list[dict]:
    """The rows the Δ heatmaps draw for an edge search: one per lattice config (so the grid is the whole lattice;
    a config with no score and nothing implied is an empty cell), in the keys of ``vs_baseline`` they read (delta
    and its interval in the metric's own direction, the verdict in the heatmaps' words, ``evidence``) plus
    ``implied`` and ``implied_from_depth``."""
    rows = []
    for r in edge.verdicts:
        lo, hi = r["gain_lo"], r["gain_hi"]
        if r["metric_mode"] == "min" and lo is not None:  # the delta's own direction: lower is better
            lo, hi = -hi, -lo
        rows.append({
            **r, "delta_lo": lo, "delta_hi": hi, "verdict": HEATMAP_VERDICT[r["verdict"]], "edge_verdict": r["verdict"],
            "evidence": f"edge search: pooled t at the Bonferroni level (df={r['pooled_df']})",
            "point_verdict": None,
        })  # fmt: skip
    return rows
