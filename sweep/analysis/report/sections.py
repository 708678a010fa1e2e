"""The sections every report may show beside the answer, each a function of the gathered rows
(:class:`~sweep.analysis.report.data.ReportData`) that returns its Markdown, or nothing when it has nothing to say:
which shape wins at equal cost, whether κ tracks the metric, κ during training, Theorem 3.2 beside the
measured κ, and the trials that waited for data."""

from __future__ import annotations

import math
from typing import NamedTuple

from sweep.analysis.report.data import ReportData
from sweep.headline import Headline, format_delta
from sweep.markdown import markdown_table
from sweep.plan.theory import parametrisations, prediction, theory_rows
from sweep.text import format_value, shape_words
from workers.rank_correlation import spearman_rho


def equal_cost_section(matched: list[dict], headline: Headline) -> str:
    """At equal cost, which shape wins? Per cost kind, how each config fares against the config nearest to
    it in that cost (``matched_budget``), and the clear wins."""
    if not matched:
        return ""
    lines = ["\n## At equal cost, which shape wins?\n"]
    kinds = {"params": "parameters", "flops": "FLOPs per sample", "train_time": "training time per sample"}
    for kind, words in kinds.items():
        rows = [r for r in matched if r["cost_kind"] == kind]
        if not rows:
            continue
        # Only verdicts with an interval are counted: a single seed's win or loss is a lean, never a result.
        judged = [r for r in rows if r["evidence"] != "single seed"]
        tally = {v: sum(r["verdict"] == v for r in judged) for v in ("wins", "loses", "tie (within tolerance)")}
        single = len(rows) - len(judged)
        wins = [r for r in rows if r["verdict"] == "wins" and r["significant"]]
        text = (
            f"- **{words}**: of {len(rows)} configs matched to their nearest rival, {tally['wins']} win, "
            f"{tally['loses']} lose, {tally['tie (within tolerance)']} tie with 95% confidence; the rest are "
            f"inconclusive{f' ({single} of them on a single seed, which is never a verdict)' if single else ''}."
        )
        for r in sorted(wins, key=lambda r: -(r["gain"] or 0))[:3]:
            text += (
                f" {shape_words(r)} beats {r['matched_depth']} blocks × {r['matched_num_heads']} heads of "
                f"{r['matched_head_dim']} at {r['cost_ratio']:.2f}× its cost (Δ "
                f"{format_delta(r['delta'], headline.name)}, 95% CI {format_delta(r['delta_lo'], headline.name)}…"
                f"{format_delta(r['delta_hi'], headline.name)})."
            )
        lines.append(text)
    lines.append('\nEvery pairing: `sweep sql "FROM matched_budget"`.\n')
    return "\n".join(lines)


def kappa_metric_section(rows: list[dict], headline: Headline) -> str:
    """Does κ track the metric? Spearman's ρ across configs with its bootstrap interval (``kappa_accuracy``)."""
    if not rows:
        return ""
    lines = ["\n## Does κ track the metric?\n"]
    for r in rows:
        if r["scope"] == "across_widths" and only_width(rows, r):
            continue  # one width: across widths is the same configs and the same ρ as the fixed-width line
        where = (
            "across widths"
            if r["scope"] == "across_widths"
            else (f"at fixed width (d_model {r['embed_dim']}, attention {r['attn_dim']}, MLP {r['mlp_dim']})")
        )
        rho = (
            "undefined (no spread)"
            if r["spearman_rho"] is None
            else (f"{r['spearman_rho']:+.2f} (95% bootstrap {r['rho_lo']:+.2f}…{r['rho_hi']:+.2f})")
        )
        lines.append(f"- {r['family']}, {where}: Spearman ρ between final κ and {headline.label} = {rho}, "
                     f"{r['n_configs']} configs.")  # fmt: skip
    return "\n".join(lines) + "\n"


def only_width(rows: list[dict], across: dict) -> bool:
    """``across`` (a family's across-widths row) covers the same configs as its family's one fixed-width row."""
    fixed = [r for r in rows if r["family"] == across["family"] and r["scope"] != "across_widths"]
    return len(fixed) == 1 and fixed[0]["n_configs"] == across["n_configs"]


class KappaTraining(NamedTuple):
    """κ over training: per config its curve of (epoch, κ), the pairs (κ at its first probed epoch, final mean
    score) of the configs probed at two epochs or more, and Spearman's ρ between the two across them."""

    curves: dict[str, list[tuple[int, float]]]
    pairs: list[tuple[float, float]]
    rho: float | None


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's ρ (:func:`workers.rank_correlation.spearman_rho`); None with fewer than 3 points or no spread."""
    if len(x) < 3:
        return None
    rho = spearman_rho(x, y)
    return None if math.isnan(rho) else rho


def kappa_over_training(epochs: list[dict], configs: list[dict]) -> KappaTraining:
    """Per config its κ curve over epochs (mean over seeds of the epoch's ``kappa_mean``), the pairs (κ at
    its first probed epoch, final mean score) and Spearman's ρ between them across configs."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for row in epochs:
        curves.setdefault(row["config_id"], []).append((row["epoch"], row["kappa_mean"]))
    scores = {c["config_id"]: c["score_mean"] for c in configs if c["score_mean"] is not None}
    pairs = [(curve[0][1], scores[cid]) for cid, curve in curves.items() if cid in scores and len(curve) > 1]
    rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
    return KappaTraining(curves, pairs, rho)


def kappa_training_section(training: KappaTraining, headline: Headline) -> str:
    """Does κ fall during training, and does its early value predict the final metric? Nothing when no config
    has κ at two epochs or more."""
    curves, pairs, rho = training
    if not pairs:
        return ""
    falling = sum(curve[-1][1] < curve[0][1] for curve in curves.values() if len(curve) > 1)
    tracked = sum(len(curve) > 1 for curve in curves.values())
    return (
        "\n## κ during training\n\n![κ over training](kappa_over_training.png)\n\n"
        f"κ fell from its first probed epoch to its last in {falling} of {tracked} configs. Across {len(pairs)} "
        f"configs, Spearman's ρ between κ at the first probed epoch and the final {headline.label} is "
        f"{format_value(rho)} (epochs from `epochs.kappa_mean`, averaged over seeds).\n"
    )


THEORY_COLUMNS = ["heads", "head_dim", "width_D", "D_over_N", "regime", "kappa_theorem", "kappa_gaussian",
                  "kappa_measured"]  # fmt: skip


def theory_section(data: ReportData) -> str:
    """Theorem 3.2 beside the measured κ: which parametrisation the space's configs follow (their head_dim
    rules), what the bound predicts for it at the trials' N (``sweep/plan/theory.py``), D ≤ N said as such, and
    the measured final κ of each (heads, head_dim) (``kappa_vs_heads``' whole-block median, averaged over
    the depths that have it). Nothing when the trials do not record one number of tokens per sample."""
    if len(data.tokens_per_sample) != 1 or not data.configs:
        return ""
    measured: dict[tuple, list[float]] = {}
    for row in data.kappa:
        if row["layer"] is None and row["attention"] is None and row["kappa_median"] is not None:
            measured.setdefault((row["num_heads"], row["head_dim"]), []).append(row["kappa_median"])
    parts = ["\n## Theory beside practice (Theorem 3.2)\n"]
    for parametrisation in parametrisations(c["head_dim_rule"] for c in data.configs):
        members = [c for c in data.configs if parametrisation in parametrisations([c["head_dim_rule"]])]
        rows = theory_rows(((c["num_heads"], c["head_dim"]) for c in members), data.tokens_per_sample[0])
        for row in rows:
            found = measured.get((row["heads"], row["head_dim"]))
            row["kappa_measured"] = sum(found) / len(found) if found else None
        parts.append(f"**{parametrisation.capitalize()}.** {prediction(parametrisation, rows)}\n")
        parts.append(markdown_table(rows, THEORY_COLUMNS))
    parts.append(
        "\n`kappa_theorem` is Theorem 3.2's (√D+√N)/(√D−√N), given only where D > N; `kappa_gaussian` the "
        "Marchenko–Pastur edges' ratio for Gaussian heads in either regime; `kappa_measured` the trained "
        "models' final κ (median over probe samples, mean over layers, averaged over depths). `sweep "
        f"kappa-theory --space {data.space}` samples Gaussian heads of these shapes.\n"
    )
    return "\n".join(parts)


# A trial whose steady-state step time is this share or more spent waiting for batches is loader-bound.
LOADER_BOUND_FRACTION = 0.2


def loader_bound_section(data_wait_fractions: list[float]) -> str:
    """A warning when trials waited for data (``data_wait_fraction`` >= :data:`LOADER_BOUND_FRACTION`): their
    throughput measures the loader, not the model. ``data_wait_fractions``: each trial's recorded fraction
    (:func:`sweep.analysis.report.data.data_wait_fractions`). Nothing when none waited, or none recorded it."""
    bound = sum(fraction >= LOADER_BOUND_FRACTION for fraction in data_wait_fractions)
    if not bound:
        return ""
    measured, worst = len(data_wait_fractions), max(data_wait_fractions)
    return (
        f"\n## Loader-bound trials\n\n{bound} of {measured} trials spent {LOADER_BOUND_FRACTION:.0%} or more of their "
        f"steady-state training time waiting for data (worst {worst:.0%}): their training throughput is the "
        "loader's, not the model's. Give them more loader workers (`--data-workers`, or `resources.cpus_per_trial`)."
        f' Which ones: `sweep sql "FROM trials WHERE data_wait_fraction >= {LOADER_BOUND_FRACTION}"`.\n'
    )
