"""``sweep report SPACE``: a self-contained folder (Markdown + PNG) that answers where the head-for-depth
trade holds and where it breaks, from the analysis views in ``results/views.sql``, on the space's headline
metric (top-1, accuracy, validation loss …) in its own units and direction.

    reports/<space>/index.md                 the answer in words, then the tables
    reports/<space>/pareto.png               the headline score against parameters, Pareto front and baseline
    reports/<space>/delta_heatmap.png        depth × heads, Δscore against the baseline (blue = better), breaks
                                             outlined
    reports/<space>/kappa_vs_heads.png       κ against heads (and against head_dim), one line per depth/arm
    reports/<space>/throughput_vs_params.png training and inference samples/s against parameters
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from sweep.errors import SweepError
from sweep.metrics import (
    DEFAULT_TOLERANCE,
    METRICS,
    direction_words,
    format_delta,
    format_score,
    tolerance_unit,
)
from sweep.sql import connect, format_value

VERDICT_COLOURS = {"holds": "#2a9d8f", "inconclusive": "#e9c46a", "breaks": "#e63946"}


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


def query(con, sql: str, *params) -> list[dict]:
    relation = con.execute(sql, list(params))
    columns = [d[0] for d in relation.description]
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "_(no rows)_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- the answer in words ----------------------------------------------------------------------------------


def describe_verdict(row: dict) -> str:
    """``holds (Δ -0.3, 95% CI -0.8…+0.2)``: Δ in the metric's units, config minus baseline."""
    metric = row["metric"]
    if row["is_baseline"]:
        return f"{format_score(row['score_mean'], metric)} (the baseline)"
    delta = format_delta(row["delta"], metric)
    if row["delta_lo"] is None:
        return f"{row['verdict']} (Δ {delta}, {row['evidence']})"
    interval = f"{format_delta(row['delta_lo'], metric)}…{format_delta(row['delta_hi'], metric)}"
    return f"{row['verdict']} (Δ {delta}, 95% CI {interval})"


def edge_sentence(label: str, axis: str, held, broke, tried: list, rows: list[dict]) -> str:
    """One line: the conclusion along one axis for one group, then every point tried with its verdict.

    The edge holds contiguously from the largest value tried (the baseline's side) down to ``held``;
    below it the first break is named, or else each remaining value with its own verdict, so a value
    that holds below an inconclusive one is not hidden."""
    top = max(rows, key=lambda r: r[axis]) if rows else None
    if held is None and top is not None and top["verdict"] == "breaks":
        conclusion = f"breaks already at {axis} {top[axis]}"
    elif held is None:
        conclusion = f"no edge: {axis} {top[axis]} is {top['verdict']}" if top else f"no {axis} tried"
    elif held == min(tried):
        conclusion = f"holds down to {axis} {held}, the smallest tried: nothing broke in this range"
    else:
        conclusion = f"holds down to {axis} {held}"
    cutoff = held if held is not None else (top[axis] if top else None)
    below = sorted((r for r in rows if cutoff is not None and r[axis] < cutoff), key=lambda r: -r[axis])
    if broke is not None and not (held is None and top is not None and broke == top[axis]):
        conclusion += f"; breaks at {axis} {broke}"
    elif below:
        conclusion += "; below it " + ", ".join(f"{axis} {r[axis]} {r['verdict']}" for r in below)
        if any(r["verdict"] == "inconclusive" for r in below):
            conclusion += " (more seeds would settle what is inconclusive)"
    points = "; ".join(f"{axis} {r[axis]}: {describe_verdict(r)}" for r in sorted(rows, key=lambda r: -r[axis]))
    return f"- **{label}**: {conclusion}.  \n  {points}"


def family_prefix(edge: dict, edges: list[dict]) -> str:
    """``nystromformer, `` when the space runs several model families side by side, else nothing."""
    return f"{edge['family']}, " if len({e["family"] for e in edges}) > 1 else ""


def depth_sentences(edges: list[dict], verdicts: list[dict]) -> list[str]:
    sentences = []
    for edge in edges:
        rows = [v for v in verdicts if (v["family"], v["num_heads"], v["head_dim"], v["embed_dim"], v["mlp_dim"])
                == (edge["family"], edge["num_heads"], edge["head_dim"], edge["embed_dim"], edge["mlp_dim"])
                and v["depth"] <= v["baseline_depth"]]  # fmt: skip
        label = f"{family_prefix(edge, edges)}{edge['num_heads']} heads of {edge['head_dim']}"
        sentences.append(
            edge_sentence(
                label, "depth", edge["holds_down_to_depth"], edge["breaks_at_depth"], edge["depths_tried"], rows
            )
        )
    return sentences


def head_dim_sentences(edges: list[dict], verdicts: list[dict]) -> list[str]:
    sentences = []
    for edge in edges:
        rows = [v for v in verdicts if (v["family"], v["depth"], v["embed_dim"], v["mlp_dim"])
                == (edge["family"], edge["depth"], edge["embed_dim"], edge["mlp_dim"])
                and v["attn_dim"] == v["embed_dim"] and v["head_dim"] <= v["baseline_head_dim"]]  # fmt: skip
        label = f"{family_prefix(edge, edges)}depth {edge['depth']} (d_model {edge['embed_dim']})"
        sentences.append(
            edge_sentence(
                label,
                "head_dim",
                edge["holds_down_to_head_dim"],
                edge["breaks_at_head_dim"],
                edge["head_dims_tried"],
                rows,
            )
        )
    return sentences


# --- pictures ---------------------------------------------------------------------------------------------


def plot_pareto(configs: list[dict], front: list[dict], path: Path, headline: Headline) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    done = [c for c in configs if c["score_mean"] is not None]
    ax.errorbar(
        [c["params"] / 1e6 for c in done],
        [c["score_mean"] for c in done],
        yerr=[c["score_se"] or 0 for c in done],
        fmt="o",
        color="#888",
        alpha=0.7,
        label="config (± s.e.)",
    )
    front = sorted(front, key=lambda c: c["params"])
    ax.plot(
        [c["params"] / 1e6 for c in front],
        [c["score_mean"] for c in front],
        "-o",
        color="#264653",
        label="Pareto front",
    )
    for c in front:
        ax.annotate(
            f"{c['depth']}×{c['num_heads']}",
            (c["params"] / 1e6, c["score_mean"]),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    base = [c for c in done if c["is_baseline"]]
    if base:
        ax.plot(base[0]["params"] / 1e6, base[0]["score_mean"], "*", ms=16, color="#e76f51", label="baseline")
    ax.set_xlabel("parameters (M)")
    ax.set_ylabel(f"{headline.name} ({headline.unit}; {direction_words(headline.mode)})")
    ax.set_title(f"{headline.label.capitalize()} against parameters (depth × heads labelled on the front)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_delta_heatmap(rows: list[dict], path: Path, headline: Headline) -> None:
    """Depth × (heads, head_dim) grid of Δscore (config − baseline, the metric's units); blue is better in
    either direction (the colour map flips for metrics where lower is better); outlined by verdict colour;
    breaks hatched."""
    columns = sorted({(r["family"], r["num_heads"], r["head_dim"]) for r in rows})  # a block per family
    depths = sorted({r["depth"] for r in rows})
    cells = {(r["depth"], r["family"], r["num_heads"], r["head_dim"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(1.1 * len(columns) + 2.5, 0.8 * len(depths) + 2))
    values = [[(cells.get((d, *column)) or {}).get("delta") for column in columns] for d in depths]
    finite = [abs(v) for row in values for v in row if v is not None]
    limit = max([*finite, headline.tolerance]) if finite else 1.0
    grid = [[math.nan if v is None else v for v in row] for row in values]
    cmap = "RdBu" if headline.mode == "max" else "RdBu_r"  # blue = better: up for max, down for min
    image = ax.imshow(grid, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto", origin="lower")
    for i, depth in enumerate(depths):
        for j, column in enumerate(columns):
            cell = cells.get((depth, *column))
            if cell is None or cell["delta"] is None:
                continue
            verdict = cell["verdict"]
            ax.add_patch(
                plt.Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    fill=False,
                    lw=2.5,
                    edgecolor=VERDICT_COLOURS[verdict],
                    hatch="//" if verdict == "breaks" else None,
                )
            )
            marker = "★ " if cell["is_baseline"] else ""
            colour = "white" if abs(cell["delta"]) > 0.6 * limit else "black"  # legible on dark cells
            ax.text(
                j,
                i,
                f"{marker}{format_delta(cell['delta'], headline.name)}\n{verdict}\nn={cell['n_seeds']}",
                ha="center",
                va="center",
                fontsize=7,
                color=colour,
            )
    several = len({family for family, _, _ in columns}) > 1
    labels = [(f"{family}\n" if several else "") + f"{h}×{k}" for family, h, k in columns]
    ax.set_xticks(range(len(columns)), labels, rotation=30)
    ax.set_yticks(range(len(depths)), depths)
    ax.set_xlabel("heads × head_dim")
    ax.set_ylabel("depth")
    ax.set_title(
        f"Δ{headline.name} vs baseline (★), {headline.unit} ({direction_words(headline.mode)}); "
        f"outline = verdict at tolerance {headline.tolerance}",
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, label=f"Δ{headline.name} ({headline.unit}; blue = better)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_kappa(rows: list[dict], path: Path) -> None:
    """κ (mean over layers, last probe) against heads, and against head_dim, one line per family, depth and
    arm."""
    model_level = [r for r in rows if r["layer"] is None and r["attention"] is None]
    several = len({r["family"] for r in model_level}) > 1
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups: dict[tuple, list[dict]] = {}
    for row in model_level:
        arm = "fixed width" if row["attn_dim"] == row["embed_dim"] else "wider block"
        groups.setdefault((row["family"], row["depth"], arm), []).append(row)
    for (family, depth, arm), members in sorted(groups.items()):
        label = (f"{family}, " if several else "") + f"depth {depth}, {arm}"
        style = "-o" if arm == "fixed width" else "--s"
        members.sort(key=lambda r: r["num_heads"])
        left.plot([r["num_heads"] for r in members], [r["kappa_median"] for r in members], style, label=label)
        members.sort(key=lambda r: r["head_dim"])
        right.plot([r["head_dim"] for r in members], [r["kappa_median"] for r in members], style, label=label)
    for ax, xlabel in ((left, "heads"), (right, "head_dim")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("κ of the attention block (median over layers' medians)")
        ax.legend(fontsize=7)
    left.set_title("κ against heads")
    right.set_title("κ against head_dim")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_throughput(configs: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    done = [c for c in configs if c["train_samples_per_s"] is not None]
    for key, label, marker in (("train_samples_per_s", "training", "o"), ("infer_samples_per_s", "inference", "s")):
        ax.scatter([c["params"] / 1e6 for c in done], [c[key] for c in done], marker=marker, label=label, alpha=0.8)
    for c in done:
        ax.annotate(
            f"{c['depth']}×{c['num_heads']}",
            (c["params"] / 1e6, c["train_samples_per_s"]),
            fontsize=6,
            xytext=(2, 2),
            textcoords="offset points",
        )
    ax.set_yscale("log")
    ax.set_xlabel("parameters (M)")
    ax.set_ylabel("samples / s (steady state)")
    ax.set_title("Throughput against parameters (depth × heads labelled)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- the folder -------------------------------------------------------------------------------------------


def write_report(
    space: str, results_dir: Path, out_dir: Path, question: str | None = None, tolerance: float | None = None
) -> Path:
    """Write the report folder for ``space``; returns the path of index.md. ``tolerance``: judge every
    verdict at this tolerance (the metric's units) instead of the space's own."""
    con = connect(results_dir, tolerance=tolerance)
    trials = con.execute("SELECT count(*) FROM trials WHERE space = ?", [space]).fetchone()[0]
    if trials == 0:
        raise SweepError(f"no trials of space {space!r} under {results_dir}; run `sweep run {space}` first")
    headline = find_headline(con, space)
    key = (space, headline.name)
    configs = query(con, "FROM configs WHERE space = ? AND metric = ? ORDER BY depth, num_heads, head_dim", *key)
    verdicts = query(con, "FROM vs_baseline WHERE space = ? AND metric = ? ORDER BY depth, num_heads, head_dim", *key)
    front = query(con, "FROM pareto WHERE space = ? AND metric = ?", *key)
    depth_edges = query(con, "FROM depth_edge WHERE space = ? AND metric = ?", *key)
    head_dim_edges = query(con, "FROM head_dim_edge WHERE space = ? AND metric = ?", *key)
    kappa = query(con, "FROM kappa_vs_heads WHERE space = ? AND metric = ?", *key)
    infeasible = query(con, "FROM infeasible WHERE space = ?", space)

    out_dir.mkdir(parents=True, exist_ok=True)
    plot_pareto(configs, front, out_dir / "pareto.png", headline)
    plot_delta_heatmap(verdicts, out_dir / "delta_heatmap.png", headline)
    if kappa:
        plot_kappa(kappa, out_dir / "kappa_vs_heads.png")
    plot_throughput(configs, out_dir / "throughput_vs_params.png")
    text = render_markdown(
        space, question, headline, trials, configs, verdicts, front, depth_edges, head_dim_edges, kappa, infeasible
    )
    index = out_dir / "index.md"
    index.write_text(text)
    return index


def verdict_rule(headline: Headline, trials: int) -> str:
    """The paragraph that says how a config was judged: metric, direction, tolerance in its units."""
    h = headline
    return (
        f"{trials} trials, judged on `{h.name}` ({h.label}, {direction_words(h.mode)}). A config **holds** when "
        f"its mean {h.label} is confidently (95% Welch interval) no more than {h.tolerance} {h.unit} {h.worse} "
        f"the baseline's, **breaks** when it is confidently more than that {h.worse}, and is **inconclusive** "
        "otherwise. One seed is never called significant. In the tables, `score_mean` is the mean "
        f"{h.name} over seeds and `delta` (Δ) the config's minus the baseline's, in {h.unit}.\n"
    )


def render_markdown(
    space, question, headline, trials, configs, verdicts, front, depth_edges, head_dim_edges, kappa, infeasible
) -> str:
    baseline = next((c for c in configs if c["is_baseline"]), None)
    parts = [f"# Where does the head-for-depth trade break? Space `{space}`\n"]
    if question:
        parts.append(f"> {' '.join(question.split())}\n")
    parts.append(verdict_rule(headline, trials))
    if baseline:
        parts.append(
            f"Baseline: depth {baseline['depth']} × {baseline['num_heads']} heads of {baseline['head_dim']}, "
            f"{baseline['params']:,} parameters, {headline.label} "
            f"{format_score(baseline['score_mean'], headline.name)} over {baseline['n_seeds']} seed(s).\n"
        )
    counts = {v: sum(r["verdict"] == v for r in verdicts) for v in ("holds", "breaks", "inconclusive")}
    single = sum(r["evidence"] == "single seed" for r in verdicts)
    parts.append(
        f"Verdicts: {counts['holds']} hold, {counts['breaks']} break, {counts['inconclusive']} "
        f"inconclusive{f'; {single} rest on a single seed (not significant)' if single else ''}.\n"
    )
    parts.append("## Along depth (fewer blocks, same heads)\n")
    parts += depth_sentences(depth_edges, verdicts) or ["_(no configs at or below the baseline depth)_"]
    parts.append("\n## Along head_dim (more, smaller heads at fixed d_model)\n")
    parts += head_dim_sentences(head_dim_edges, verdicts) or ["_(no fixed-d_model configs)_"]
    parts.append(f"\n![Δ{headline.name} heatmap](delta_heatmap.png)\n")
    parts.append(f"## {headline.label.capitalize()} against parameters\n\n![Pareto](pareto.png)\n")
    parts.append(
        markdown_table(
            front,
            [
                "depth",
                "num_heads",
                "head_dim",
                "score_mean",
                "score_se",
                "params",
                "train_samples_per_s",
                "infer_samples_per_s",
                "peak_mem_bytes",
            ],
        )
    )
    if kappa:
        parts.append("\n## κ of the attention block\n\n![kappa](kappa_vs_heads.png)\n")
        parts.append(
            markdown_table(
                [r for r in kappa if r["layer"] is None and r["attention"] is None],
                ["depth", "num_heads", "head_dim", "attn_dim", "kappa_median", "score_mean"],
            )
        )
    parts.append("\n## Throughput\n\n![throughput](throughput_vs_params.png)\n")
    parts.append("\n## Every config against the baseline\n")
    parts.append(
        markdown_table(
            verdicts,
            [
                "depth",
                "num_heads",
                "head_dim",
                "attn_dim",
                "mlp_dim",
                "n_seeds",
                "score_mean",
                "delta",
                "delta_lo",
                "delta_hi",
                "verdict",
                "evidence",
                "delta_params_pct",
                "delta_train_throughput_pct",
                "delta_infer_throughput_pct",
                "delta_mem_pct",
            ],
        )
    )
    parts.append("\n## Trials that did not finish\n")
    parts.append(
        markdown_table(infeasible, ["trials", "diverged_fraction", "oom_fraction", "error_fraction", "pruned_fraction"])
    )
    parts.append('\nThe same answer in SQL: `sweep sql "FROM depth_edge"`, or `duckdb -init results/views.sql`.\n')
    return "\n".join(parts)
