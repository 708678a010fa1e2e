"""The report's PNGs (matplotlib, files only): the Pareto front, the Δ heatmap, κ against heads, throughput
against parameters and κ over training; labels placed so that none overlaps another or the canvas's edge."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from sweep.analysis.report.data import ReportData
from sweep.analysis.report.edge import heatmap_rows
from sweep.analysis.report.sections import KappaTraining
from sweep.headline import Headline, direction_words, format_delta
from sweep.markdown import KAPPA_RANK_DEFICIENT
from sweep.text import heads_per_kv_head, is_grouped, readable, short_shape

VERDICT_COLOURS = {"holds": "#2a9d8f", "inconclusive": "#e9c46a", "breaks": "#e63946", "baseline": "#264653",
                   "failed": "#777777", "untried": "#bbbbbb"}  # fmt: skip
IMPLIED_HATCH = "xx"  # an implied verdict's cell (an edge search's: never measured), filled pale and cross-hatched
IMPLIED_ALPHA = 0.3


def save_figure(fig, path: Path) -> None:
    """Lay out and write ``fig`` as PNG: the saved canvas is the box of everything drawn (``bbox_inches``
    "tight") plus a margin, so no title, label or legend is clipped at its edge."""
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)


def wrapped(text: str, width: int = 70) -> str:
    """A title on as many lines as it needs, ``width`` characters each."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def label_points(ax, points: list[tuple[float, float]], labels: list[str], fontsize: int) -> None:
    """Labels beside points without overlapping each other: each takes the first of a few offsets whose box
    (estimated from the text's length in display units) meets no label already placed; labels that fit
    nowhere are left out (the table beside the figure names every config). Call after the axes' scales."""
    ax.figure.canvas.draw()  # the data-to-display transform needs the final limits and scales
    char_w, line_h = 0.62 * fontsize, 1.3 * fontsize  # points; a display unit is a pixel at dpi/72 per point
    scale = ax.figure.dpi / 72
    placed: list[tuple[float, float, float, float]] = []
    for (x, y), label in sorted(zip(points, labels, strict=True)):
        px, py = ax.transData.transform((x, y))
        for dx, dy in ((3, 3), (3, -3 - line_h), (3, 3 + line_h), (-3 - char_w * len(label), 3)):
            box = (px + dx * scale, py + dy * scale, char_w * len(label) * scale, line_h * scale)
            if not any(overlaps(box, other) for other in placed):
                placed.append(box)
                ax.annotate(label, (x, y), fontsize=fontsize, xytext=(dx, dy), textcoords="offset points")
                break


def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Whether two boxes (left, bottom, width, height) share any area."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


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
    base = [c for c in done if c["is_baseline"]]
    if base:
        # hollow and on top, so the baseline's own point (and its error bar) stays visible under the star
        ax.plot(base[0]["params"] / 1e6, base[0]["score_mean"], "*", ms=18, markerfacecolor="none",
                markeredgecolor="#e76f51", markeredgewidth=1.6, zorder=5, label="baseline")  # fmt: skip
    ax.set_xlabel("parameters (M)")
    ax.set_ylabel(f"{headline.name} ({headline.unit}; {direction_words(headline.mode)})")
    ax.set_title(wrapped(f"{headline.label.capitalize()} against parameters (depth × heads labelled on the front)"))
    ax.legend(fontsize=8)
    label_points(ax, [(c["params"] / 1e6, c["score_mean"]) for c in front], [short_shape(c) for c in front], 7)
    save_figure(fig, path)


def plot_delta_heatmap(rows: list[dict], path: Path, headline: Headline) -> None:
    """Depth × (heads, head_dim) grid of Δscore (config − baseline, the metric's units); blue is better in
    either direction (the colour map flips for metrics where lower is better); outlined by verdict colour;
    breaks hatched. An edge search's rows (``report/edge.py`` heatmap_rows) add the verdicts its monotone
    assumption implies: such a cell is filled pale in the implied verdict's colour and cross-hatched, with a
    legend entry "implied", whether or not the config was trained (a config never trained has no Δ)."""
    kv = lambda r: r.get("num_kv_heads") or r["num_heads"]  # noqa: E731
    columns = sorted({(r["family"], r["num_heads"], r["head_dim"], -kv(r)) for r in rows})  # a block per family
    depths = sorted({r["depth"] for r in rows})
    cells = {(r["depth"], r["family"], r["num_heads"], r["head_dim"], -kv(r)): r for r in rows}
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
            if cell is not None and cell.get("implied"):
                mark_implied(ax, j, i, cell)
            if cell is not None and cell["delta"] is not None:
                annotate_cell(ax, j, i, cell, limit, headline)
    several = len({column[0] for column in columns}) > 1
    labels = [
        (f"{family}\n" if several else "") + f"{h}×{k}" + (f"/{-minus_kv}kv" if -minus_kv != h else "")
        for family, h, k, minus_kv in columns
    ]
    ax.set_xticks(range(len(columns)), labels, rotation=30)
    ax.set_yticks(range(len(depths)), depths)
    ax.set_xlabel("heads × head_dim" + (" / key-value heads" if any(map(is_grouped, rows)) else ""))
    ax.set_ylabel("depth")
    implied = sorted({r["implied"] for r in rows if r.get("implied")})
    ax.set_title(
        wrapped(
            f"Δ{headline.name} vs baseline (★), {headline.unit} ({direction_words(headline.mode)}); "
            f"outline = verdict at tolerance {headline.tolerance}"
            + ("; cross-hatched = implied along depth, never measured" if implied else ""),
            max(40, int(9 * (1.1 * len(columns) + 2.5))),  # characters that fit the figure's width
        ),
        fontsize=9,
    )
    if implied:
        ax.legend(handles=[implied_patch(verdict) for verdict in implied], fontsize=7, loc="upper left",
                  bbox_to_anchor=(0, -0.18 if len(depths) > 2 else -0.3), ncol=len(implied), frameon=False)  # fmt: skip
    fig.colorbar(image, ax=ax, label=f"Δ{headline.name} ({headline.unit}; blue = better)")
    save_figure(fig, path)


def implied_patch(verdict: str):
    """The legend entry of an implied verdict's cells."""
    from matplotlib.patches import Patch

    colour = VERDICT_COLOURS[verdict]
    return Patch(facecolor=colour, alpha=IMPLIED_ALPHA, hatch=IMPLIED_HATCH, edgecolor=colour,
                 label=f"implied {verdict} (monotone along depth; not measured)")  # fmt: skip


def mark_implied(ax, x: int, y: int, cell: dict) -> None:
    """An implied verdict's cell: filled pale in its colour and cross-hatched; a config never trained (no Δ)
    also says in words which it is and the measured depth it comes from."""
    colour = VERDICT_COLOURS[cell["implied"]]
    patch = plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, alpha=IMPLIED_ALPHA, hatch=IMPLIED_HATCH,
                          edgecolor=colour, lw=0.8, gid="implied")  # fmt: skip
    ax.add_patch(patch)
    if cell["delta"] is None:  # untried, or trained and every trial failed (then said first)
        failed = "failed; " if cell.get("edge_verdict") == "failed" else ""
        text = f"{failed}implied\n{cell['implied']}\n(by depth {cell['implied_from_depth']})"
        ax.text(x, y, text, ha="center", va="center", fontsize=7, color="black", style="italic")


def annotate_cell(ax, x: int, y: int, cell: dict, limit: float, headline: Headline) -> None:
    """One heatmap cell's outline (verdict colour, breaks hatched) and its text: Δ, verdict, seeds."""
    verdict = cell["verdict"]
    outline = plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=2.5, edgecolor=VERDICT_COLOURS[verdict])
    outline.set_hatch("//" if verdict == "breaks" else None)
    ax.add_patch(outline)
    marker = "★ " if cell["is_baseline"] else ""
    colour = "white" if abs(cell["delta"]) > 0.6 * limit else "black"  # legible on dark cells
    words = f"leans {cell['point_verdict']}" if cell["evidence"] == "single seed" else cell.get("edge_verdict", verdict)
    if cell.get("implied"):
        words += f"; implied {cell['implied']}"
    text = f"{marker}{format_delta(cell['delta'], headline.name)}\n{words}\nn={cell['n_seeds']}"
    ax.text(x, y, text, ha="center", va="center", fontsize=7, color=colour)


def plot_kappa(rows: list[dict], path: Path) -> None:
    """κ (mean over layers, last probe) against heads, and against head_dim, one line per family, depth and
    arm."""
    model_level = [r for r in rows if r["layer"] is None and r["attention"] is None]
    several = len({r["family"] for r in model_level}) > 1
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups: dict[tuple, list[dict]] = {}
    for row in model_level:
        arm = "fixed width" if row["attn_dim"] == row["embed_dim"] else "wider block"
        groups.setdefault((row["family"], row["depth"], arm, heads_per_kv_head(row)), []).append(row)
    for (family, depth, arm, sharing), members in sorted(groups.items()):
        label = (f"{family}, " if several else "") + f"depth {depth}, {arm}"
        label += f", {sharing} heads per kv head" if sharing != 1 else ""
        style = "-o" if arm == "fixed width" else "--s"
        members.sort(key=lambda r: r["num_heads"])
        left.plot([r["num_heads"] for r in members], [r["kappa_median"] for r in members], style, label=label)
        members.sort(key=lambda r: r["head_dim"])
        right.plot([r["head_dim"] for r in members], [r["kappa_median"] for r in members], style, label=label)
    beyond = any((r["kappa_median"] or 0) >= KAPPA_RANK_DEFICIENT for r in model_level)
    for ax, xlabel in ((left, "heads"), (right, "head_dim")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("κ of the attention block\n(median over layers' medians)")
        if beyond:  # such κ are not measurements: say so on the figure, where the eye lands on them
            ax.axhline(KAPPA_RANK_DEFICIENT, ls=":", color="#b00", lw=1)
            ax.annotate("κ ≥ 1e15: rank-deficient block\n(beyond float64 precision)", (0.01, KAPPA_RANK_DEFICIENT),
                        xycoords=("axes fraction", "data"), xytext=(0, -4), textcoords="offset points",
                        va="top", fontsize=7, color="#b00")  # fmt: skip
        ax.legend(fontsize=7)
    left.set_title("κ against heads")
    right.set_title("κ against head_dim")
    save_figure(fig, path)


def plot_throughput(configs: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    done = [c for c in configs if c["train_samples_per_s"] is not None]
    for key, label, marker in (("train_samples_per_s", "training", "o"), ("infer_samples_per_s", "inference", "s")):
        ax.scatter([c["params"] / 1e6 for c in done], [c[key] for c in done], marker=marker, label=label, alpha=0.8)
    if any(c[key] for c in done for key in ("train_samples_per_s", "infer_samples_per_s")):
        ax.set_yscale("log")  # only with positive values to scale (imported rows may have no throughput)
    ax.set_xlabel("parameters (M)")
    ax.set_ylabel("samples / s (steady state)")
    ax.set_title("Throughput against parameters (depth × heads labelled)")
    ax.legend(fontsize=8)
    label_points(ax, [(c["params"] / 1e6, c["train_samples_per_s"]) for c in done], [short_shape(c) for c in done], 6)
    save_figure(fig, path)


def plot_kappa_epochs(epochs: list[dict], curves: dict, pairs: list[tuple], rho, path: Path, headline) -> None:
    """κ over training per config (left) and early κ against the final metric (right)."""
    labels = {row["config_id"]: f"{row['depth']}×{row['num_heads']}×{row['head_dim']}" for row in epochs}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for cid, curve in curves.items():
        left.plot([e for e, _ in curve], [k for _, k in curve], marker="o", ms=3, label=labels[cid])
    left.set_yscale("log")
    left.set_xlabel("epoch")
    left.set_ylabel("κ (mean over layers of the median)")
    left.set_title(wrapped("κ during training (depth × heads × head_dim)", 50))
    if len(curves) <= 12:
        left.legend(fontsize=7)
    right.scatter([p[0] for p in pairs], [p[1] for p in pairs])
    right.set_xscale("log")
    right.set_xlabel("κ at the first probed epoch")
    right.set_ylabel(f"final {headline.label}")
    rho_text = "n/a" if rho is None else readable(rho)
    right.set_title(wrapped(f"does early κ predict the final {headline.label}? Spearman ρ = {rho_text}", 50))
    save_figure(fig, path)


def draw_figures(data: ReportData, training: KappaTraining, out_dir: Path, headline: Headline) -> None:
    """Every PNG the report links; κ over training only when some config has κ at two or more epochs."""
    plot_pareto(data.configs, data.front, out_dir / "pareto.png", headline)
    rows = heatmap_rows(data.edge) if data.edge is not None else data.verdicts  # an edge search's: implied too
    if rows:
        plot_delta_heatmap(rows, out_dir / "delta_heatmap.png", headline)
    if data.kappa:
        plot_kappa(data.kappa, out_dir / "kappa_vs_heads.png")
    plot_throughput(data.configs, out_dir / "throughput_vs_params.png")
    if training.pairs:
        path = out_dir / "kappa_over_training.png"
        plot_kappa_epochs(data.kappa_epochs, training.curves, training.pairs, training.rho, path, headline)


def plot_lr_curves(rows: list[dict], path: Path, headline: Headline) -> None:
    """Score against learning rate per config (view ``lr_curve``: a tuned sweep's selection runs, mean over its
    selection seeds; log rate axis), each config's chosen rate ringed (``chosen``: recipe_config_id → rate)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    by_config: dict[str, list[dict]] = {}
    for row in rows:
        by_config.setdefault(row["recipe_config_id"], []).append(row)
    for curve in by_config.values():
        points = [(r["lr"], r["score_mean"]) for r in curve if r["score_mean"] is not None]
        label = short_shape(curve[0]) + (f" d{curve[0]['embed_dim']}" if curve[0].get("embed_dim") else "")
        label += " (baseline)" if curve[0]["is_baseline"] else ""
        (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        chosen = [(r["lr"], r["score_mean"]) for r in curve if r.get("chosen") and r["score_mean"] is not None]
        ax.scatter([p[0] for p in chosen], [p[1] for p in chosen], s=160, facecolors="none",
                   edgecolors=line.get_color())  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (selection runs; ringed: the rate chosen)")
    ax.set_ylabel(f"{headline.label}, mean over selection seeds")
    ax.set_title(wrapped("Score against learning rate per config: the verdict seeds ran at the ringed rate"))
    ax.legend(fontsize=7)
    save_figure(fig, path)
