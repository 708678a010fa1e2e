"""``sweep report SPACE``: a self-contained folder (Markdown + PNG, and an interactive HTML page) that
answers where the head-for-depth trade holds and where it breaks, from the analysis views in
``sweep/views/`` and ``sweep/questions/*.sql``, on the space's headline metric (top-1, accuracy, validation
loss …) in its own units and direction.

    reports/<space>/index.md                 the answer in words, then the tables
    reports/<space>/index.html               the same answer and interactive figures (Δ heatmap, Pareto front
                                             against params / FLOPs / latency, κ over training), offline
                                             (sweep/report_html.py)
    reports/<space>/pareto.png               the headline score against parameters, Pareto front and baseline
    reports/<space>/delta_heatmap.png        depth × heads, Δscore against the baseline (blue = better), breaks
                                             outlined
    reports/<space>/kappa_vs_heads.png       κ against heads (and against head_dim), one line per depth/arm
    reports/<space>/throughput_vs_params.png training and inference samples/s against parameters
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from sweep.errors import UsageError
from sweep.metrics import (
    DEFAULT_TOLERANCE,
    direction_words,
    format_delta,
    format_score,
)
from sweep.questions import QUESTIONS
from sweep.questions.gqa import DECODING_COLUMNS
from sweep.report_html import write_html
from sweep.report_words import (
    KAPPA_RANK_DEFICIENT,
    Headline,
    heads_per_kv_head,
    heads_words,
    is_grouped,
    kv_words,
    markdown_table,
    query,
    shape_words,
    short_shape,
    with_kv,
)
from sweep.sql import connect, format_value
from sweep.text import plural, readable
from sweep.theory import parametrisations, prediction, theory_rows

VERDICT_COLOURS = {"holds": "#2a9d8f", "inconclusive": "#e9c46a", "breaks": "#e63946", "baseline": "#264653"}


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


# --- the answer in words ----------------------------------------------------------------------------------


def describe_verdict(row: dict) -> str:
    """``holds (Δ -0.3, 95% CI -0.8…+0.2)``: Δ in the metric's units, config minus baseline. A single seed is
    ``inconclusive (single seed; Δ -0.3 leans holds)``: never a verdict."""
    metric = row["metric"]
    if row["is_baseline"]:
        return f"{format_score(row['score_mean'], metric)} (the baseline)"
    delta = format_delta(row["delta"], metric)
    if row["evidence"] == "single seed":
        return f"{row['verdict']} (single seed; Δ {delta} leans {row['point_verdict']})"
    if row["delta_lo"] is None or row["evidence"] == "baseline at chance":
        return f"{row['verdict']} (Δ {delta}, {row['evidence']})"
    interval = f"{format_delta(row['delta_lo'], metric)}…{format_delta(row['delta_hi'], metric)}"
    return f"{row['verdict']} (Δ {delta}, 95% CI {interval})"


def edge_sentence(label: str, axis: str, held, broke, tried: list, rows: list[dict]) -> str:
    """One line: the conclusion along one axis for one group, then every point tried with its verdict.

    The edge holds contiguously from the largest value tried (the baseline's side) down to ``held``;
    below it the first break is named, or else each remaining value with its own verdict, so a value
    that holds below an inconclusive one is not hidden. The baseline's own point is the reference: it is
    listed, never counted as a hold."""
    judged = [r for r in rows if not r["is_baseline"]]
    top = max(judged, key=lambda r: r[axis]) if judged else None
    tried = [r[axis] for r in judged] or tried
    if held is None and top is not None and top["verdict"] == "breaks":
        conclusion = f"breaks already at {axis} {top[axis]}"
    elif held is None:
        conclusion = f"no edge: {axis} {top[axis]} is {top['verdict']}" if top else "only the baseline was tried"
    elif held == min(tried):
        conclusion = f"holds down to {axis} {held}, the smallest tried: nothing broke in this range"
    else:
        conclusion = f"holds down to {axis} {held}"
    cutoff = held if held is not None else (top[axis] if top else None)
    below = sorted((r for r in judged if cutoff is not None and r[axis] < cutoff), key=lambda r: -r[axis])
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
                and v.get("num_kv_heads") == edge.get("num_kv_heads")
                and v["depth"] <= v["baseline_depth"]]  # fmt: skip
        label = f"{family_prefix(edge, edges)}{heads_words(edge['num_heads'])} of {edge['head_dim']}{kv_words(edge)}"
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
                and heads_per_kv_head(v) == edge.get("heads_per_kv_head", 1)
                and v["attn_dim"] == v["embed_dim"] and v["head_dim"] <= v["baseline_head_dim"]]  # fmt: skip
        sharing = edge.get("heads_per_kv_head", 1)
        grouped = f", {sharing} query heads per key/value head" if sharing != 1 else ""
        label = f"{family_prefix(edge, edges)}depth {edge['depth']} (d_model {edge['embed_dim']}{grouped})"
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


def answer_paragraph(
    headline: Headline,
    verdicts: list[dict],
    space: str,
    profile: str | None = None,
    unlearned: list[dict] | None = None,
) -> str:
    """The report's first paragraph, one a reader can quote: how many configs hold and break with
    confidence (exactly ``vs_baseline``'s holds and breaks: significant, never the baseline, never a single
    seed), the leanest config that holds and the depths at which every config breaks, each with its Δ and
    95% interval; a baseline or config at chance and a seed that failed to learn while its siblings did
    (``unlearned``: rows of ``unlearned_seeds``); what is still open and the rerun the adaptive rule
    expects to settle it."""
    if not verdicts:
        return (
            "No verdicts: the results hold no baseline row for this space, so nothing can be judged against it. "
            "Run the baseline config, or mark its rows with `is_baseline` when importing.\n"
        )
    judged = [v for v in verdicts if not v["is_baseline"]]
    holds = [v for v in judged if v["verdict"] == "holds"]
    breaks = [v for v in judged if v["verdict"] == "breaks"]
    open_ = [v for v in judged if v["verdict"] == "inconclusive"]
    single = sum(v["evidence"] == "single seed" for v in open_)
    on_one = f" ({single} of them on a single seed, which is never a verdict)" if single else ""
    sentences = [
        f"Of {plural(len(judged), 'config')} judged against the baseline on {headline.label} (tolerance "
        f"{headline.tolerance} {headline.unit}), {len(holds)} hold and {len(breaks)} break with 95% confidence; "
        f"{len(open_)} {'is' if len(open_) == 1 else 'are'} open{on_one}."
    ]
    sentences += chance_sentences(verdicts, unlearned or [], headline)
    if holds:
        lean = min(holds, key=lambda v: (v["params"] or 0, v["depth"]))
        change = lean["delta_params_pct"] or 0.0
        size = f"{abs(change):.0f}% {'fewer' if change < 0 else 'more'} parameters than the baseline"
        if abs(change) < 0.5:
            size = "as many parameters as the baseline"
        sentences.append(f"The leanest that holds is {shape_words(lean)}: {describe_verdict(lean)}, with {size}.")
    for depth in sorted({v["depth"] for v in breaks}):
        at_depth = [v for v in judged if v["depth"] == depth]
        if all(v in breaks for v in at_depth):
            deltas = sorted(v["delta"] for v in at_depth)
            span = format_delta(deltas[0], headline.name) + (
                f" to {format_delta(deltas[-1], headline.name)}" if len(deltas) > 1 else ""
            )
            sentences.append(
                f"Every config with {plural(depth, 'block')} breaks, whatever its heads "
                f"({len(at_depth)} tried; Δ {span})."
            )
    sentences += rerun_sentences(verdicts, space, profile)
    return " ".join(sentences) + "\n"


def chance_sentences(verdicts: list[dict], unlearned: list[dict], headline: Headline) -> list[str]:
    """What did not learn: a baseline at chance (no verdict rests on it), configs at chance, and seeds at
    chance whose siblings learned (``vs_baseline.at_chance`` and friends, ``unlearned_seeds``)."""
    name, sentences = headline.name, []
    for base in (v for v in verdicts if v["is_baseline"] and v.get("at_chance")):
        sentences.append(
            f"The baseline ({shape_words(base)}) did not learn: {format_score(base['score_mean'], name)} against a "
            f"chance level of {format_score(base['chance_score'], name)}, so no verdict rests on it and every config "
            "of its family stays open, whatever its score; more seeds will not change that (a longer training "
            "budget, or a profile whose baseline learns, will)."
        )
    stuck = [v for v in verdicts if not v["is_baseline"] and v.get("at_chance") and not v.get("baseline_at_chance")]
    if stuck:
        shown = ", ".join(f"{shape_words(v)} ({format_score(v['score_mean'], name)})" for v in stuck)
        sentences.append(
            f"At chance (chance {format_score(stuck[0]['chance_score'], name)}: {plural(len(stuck), 'config')} "
            f"learned nothing at this budget): {shown}."
        )
    if unlearned:
        shown = "; ".join(
            f"{shape_words(u)}{' (the baseline)' if u['is_baseline'] else ''}, seed {u['seed']} at "
            f"{format_score(u['score'], name)} while {plural(u['siblings_learned'], 'sibling')} reached "
            f"{format_score(u['siblings_mean'], name)}"
            for u in unlearned
        )
        sentences.append(
            f"{'A seed' if len(unlearned) == 1 else f'{len(unlearned)} seeds'} failed to learn while "
            f"{'its siblings' if len(unlearned) == 1 else 'their siblings'} did: {shown}. Each stays in its "
            "config's mean and widens its interval: a shape that learns only on some seeds is part of the answer "
            '(`sweep sql "FROM unlearned_seeds"`).'
        )
    return sentences


def rerun_sentences(verdicts: list[dict], space: str, profile: str | None) -> list[str]:
    """The rerun that settles what is open: the budget the adaptive rule (``sweep/adaptive.py``) is expected
    to need, and which open verdicts it does not expect to settle."""
    from sweep.adaptive import MAX_EXPECTED_SEEDS, expected_budget

    expected = expected_budget(verdicts)
    if not expected.open:
        return []
    command = f"`make rerun SPACE={space}{f' PROFILE={profile}' if profile else ''} SELECT=inconclusive"
    if not expected.settles:
        return [
            f"No open verdict is expected to settle within {MAX_EXPECTED_SEEDS} seeds a config: each Δ sits on the "
            "tolerance bound, at its present spread."
        ]
    text = (
        f"More seeds where verdicts are open: {command} BUDGET={expected.trials}` is expected to settle "
        f"{expected.settles} of {expected.open} (the adaptive rule run on today's means and spreads)"
    )
    if expected.unsettled:
        text += (
            f"; {len(expected.unsettled)} would need more than {MAX_EXPECTED_SEEDS} seeds each, their Δ "
            "that close to the tolerance bound"
        )
    return [text + "."]


# --- pictures ---------------------------------------------------------------------------------------------


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
        ax.plot(base[0]["params"] / 1e6, base[0]["score_mean"], "*", ms=16, color="#e76f51", label="baseline")
    ax.set_xlabel("parameters (M)")
    ax.set_ylabel(f"{headline.name} ({headline.unit}; {direction_words(headline.mode)})")
    ax.set_title(wrapped(f"{headline.label.capitalize()} against parameters (depth × heads labelled on the front)"))
    ax.legend(fontsize=8)
    label_points(ax, [(c["params"] / 1e6, c["score_mean"]) for c in front], [short_shape(c) for c in front], 7)
    save_figure(fig, path)


def plot_delta_heatmap(rows: list[dict], path: Path, headline: Headline) -> None:
    """Depth × (heads, head_dim) grid of Δscore (config − baseline, the metric's units); blue is better in
    either direction (the colour map flips for metrics where lower is better); outlined by verdict colour;
    breaks hatched."""
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
    ax.set_title(
        wrapped(
            f"Δ{headline.name} vs baseline (★), {headline.unit} ({direction_words(headline.mode)}); "
            f"outline = verdict at tolerance {headline.tolerance}",
            max(40, int(9 * (1.1 * len(columns) + 2.5))),  # characters that fit the figure's width
        ),
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, label=f"Δ{headline.name} ({headline.unit}; blue = better)")
    save_figure(fig, path)


def annotate_cell(ax, x: int, y: int, cell: dict, limit: float, headline: Headline) -> None:
    """One heatmap cell's outline (verdict colour, breaks hatched) and its text: Δ, verdict, seeds."""
    verdict = cell["verdict"]
    outline = plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=2.5, edgecolor=VERDICT_COLOURS[verdict])
    outline.set_hatch("//" if verdict == "breaks" else None)
    ax.add_patch(outline)
    marker = "★ " if cell["is_baseline"] else ""
    colour = "white" if abs(cell["delta"]) > 0.6 * limit else "black"  # legible on dark cells
    words = f"leans {cell['point_verdict']}" if cell["evidence"] == "single seed" else verdict
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


KAPPA_EPOCHS_SQL = """
SELECT t.config_id, t.family, t.depth, t.num_heads, t.head_dim, e.epoch, avg(e.kappa_mean) AS kappa_mean
FROM epochs e JOIN trials t USING (space, trial_id)
WHERE t.space = $1 AND t.metric = $2 AND t.status = 'ok' AND e.kappa_mean IS NOT NULL
GROUP BY ALL ORDER BY t.config_id, e.epoch
"""


def rank(values: list[float]) -> list[float]:
    """Ranks 1 … n, ties given their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's ρ: Pearson's correlation of the average ranks; None with fewer than 3 points or no spread."""
    if len(x) < 3:
        return None
    rx, ry = rank(x), rank(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx > 0 and sy > 0 else None


def kappa_over_training(epochs: list[dict], configs: list[dict]) -> tuple[dict, list[tuple], float | None]:
    """Per config its κ curve over epochs (mean over seeds of the epoch's ``kappa_mean``), the pairs (κ at
    its first probed epoch, final mean score) and Spearman's ρ between them across configs."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for row in epochs:
        curves.setdefault(row["config_id"], []).append((row["epoch"], row["kappa_mean"]))
    scores = {c["config_id"]: c["score_mean"] for c in configs if c["score_mean"] is not None}
    pairs = [(curve[0][1], scores[cid]) for cid, curve in curves.items() if cid in scores and len(curve) > 1]
    rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
    return curves, pairs, rho


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


# --- the folder -------------------------------------------------------------------------------------------


@dataclass
class ReportData:
    """Everything the report shows for one space, on its headline metric: rows of the analysis views."""

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
    unlearned: list[dict] = field(default_factory=list)  # FROM unlearned_seeds: seeds at chance whose siblings learned


def gather(con, space: str, headline: Headline, trials: int) -> ReportData:
    """Query every view the report reads, once."""
    key = (space, headline.name)
    on_metric = "WHERE space = ? AND metric = ?"
    by_shape = f"{on_metric} ORDER BY depth, num_heads, head_dim"
    latest = con.execute(
        "SELECT profile FROM spaces WHERE space = ? ORDER BY written_at DESC LIMIT 1", [space]
    ).fetchone()
    return ReportData(
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
    )


def write_report(
    space: str, results_dir: Path, out_dir: Path, question: str | None = None, tolerance: float | None = None
) -> Path:
    """Write the report folder for ``space`` (index.md, index.html and the PNGs); returns the path of index.md.
    ``question``: None takes the one its latest sweep recorded (``space_settings``). ``tolerance``: judge
    every verdict at this tolerance (the metric's units) instead of the space's own."""
    con = connect(results_dir, tolerance=tolerance)
    trials = con.execute("SELECT count(*) FROM trials WHERE space = ?", [space]).fetchone()[0]
    if trials == 0:
        raise UsageError(f"no trials of space {space!r} under {results_dir}; run `sweep run {space}` first")
    if question is None:
        recorded = con.execute("SELECT question FROM space_settings WHERE space = ?", [space]).fetchone()
        question = recorded[0] if recorded else None
    headline = find_headline(con, space)
    data = gather(con, space, headline, trials)
    out_dir.mkdir(parents=True, exist_ok=True)
    training = draw_figures(data, out_dir, headline)
    extra = equal_cost_section(data.matched, headline) + question_sections(con, space, headline, data, "costs")
    extra += kappa_metric_section(data.kappa_metric, headline)
    if training is not None:
        extra += kappa_training_section(*training, headline)
    extra += theory_section(con, space, data)
    extra += question_sections(con, space, headline, data, "mechanism")
    extra += loader_bound_section(con, space)
    index = out_dir / "index.md"
    index.write_text(render_markdown(space, question, headline, data, extra=extra))
    answer = answer_paragraph(headline, data.verdicts, space, data.profile, data.unlearned)  # as index.md's
    write_html(out_dir / "index.html", space, question, headline, data, answer)
    return index


def question_sections(con, space: str, headline: Headline, data: ReportData, place: str) -> str:
    """The sections of the questions (``sweep/questions/``) that go at ``place`` (``costs``, ``mechanism``)."""
    return "".join(q.report_section(con, space, headline, data) for q in QUESTIONS if q.report_place == place)


THEORY_COLUMNS = ["heads", "head_dim", "width_D", "D_over_N", "regime", "kappa_theorem", "kappa_gaussian",
                  "kappa_measured"]  # fmt: skip


def theory_section(con, space: str, data: ReportData) -> str:
    """Theorem 3.2 beside the measured κ: which parametrisation the space's configs follow (their head_dim
    rules), what the bound predicts for it at the trials' N (``sweep/theory.py``), D ≤ N said as such, and
    the measured final κ of each (heads, head_dim) (``kappa_vs_heads``' whole-block median, averaged over
    the depths that have it). Nothing when the trials do not record their tokens per sample."""
    tokens = [row[0] for row in con.execute(
        "SELECT DISTINCT num_tokens FROM trials WHERE space = ? AND num_tokens IS NOT NULL", [space]
    ).fetchall()]  # fmt: skip
    if len(tokens) != 1 or not data.configs:
        return ""
    measured: dict[tuple, list[float]] = {}
    for row in data.kappa:
        if row["layer"] is None and row["attention"] is None and row["kappa_median"] is not None:
            measured.setdefault((row["num_heads"], row["head_dim"]), []).append(row["kappa_median"])
    parts = ["\n## Theory beside practice (Theorem 3.2)\n"]
    for parametrisation in parametrisations(c["head_dim_rule"] for c in data.configs):
        members = [c for c in data.configs if parametrisation in parametrisations([c["head_dim_rule"]])]
        rows = theory_rows(((c["num_heads"], c["head_dim"]) for c in members), tokens[0])
        for row in rows:
            found = measured.get((row["heads"], row["head_dim"]))
            row["kappa_measured"] = sum(found) / len(found) if found else None
        parts.append(f"**{parametrisation.capitalize()}.** {prediction(parametrisation, rows)}\n")
        parts.append(markdown_table(rows, THEORY_COLUMNS))
    parts.append(
        "\n`kappa_theorem` is Theorem 3.2's (√D+√N)/(√D−√N), given only where D > N; `kappa_gaussian` the "
        "Marchenko–Pastur edges' ratio for Gaussian heads in either regime; `kappa_measured` the trained "
        "models' final κ (median over probe samples, mean over layers, averaged over depths). `sweep "
        f"kappa-theory --space {space}` samples Gaussian heads of these shapes.\n"
    )
    return "\n".join(parts)


# A trial whose steady-state step time is this share or more spent waiting for batches is loader-bound.
LOADER_BOUND_FRACTION = 0.2


def loader_bound_section(con, space: str) -> str:
    """A warning when trials waited for data (``data_wait_fraction`` >= :data:`LOADER_BOUND_FRACTION`): their
    throughput measures the loader, not the model. Nothing when none did, or for results written before
    the column existed."""
    if "data_wait_fraction" not in [column[0] for column in con.execute("FROM trials LIMIT 0").description]:
        return ""
    bound, measured, worst = con.execute(
        "SELECT count(*) FILTER (WHERE data_wait_fraction >= ?), count(data_wait_fraction), max(data_wait_fraction) "
        "FROM trials WHERE space = ?",
        [LOADER_BOUND_FRACTION, space],
    ).fetchone()
    if not bound:
        return ""
    return (
        f"\n## Loader-bound trials\n\n{bound} of {measured} trials spent {LOADER_BOUND_FRACTION:.0%} or more of their "
        f"steady-state training time waiting for data (worst {worst:.0%}): their training throughput is the "
        "loader's, not the model's. Give them more loader workers (`--data-workers`, or `resources.cpus_per_trial`)."
        f' Which ones: `sweep sql "FROM trials WHERE data_wait_fraction >= {LOADER_BOUND_FRACTION}"`.\n'
    )


def draw_figures(data: ReportData, out_dir: Path, headline: Headline) -> tuple | None:
    """Every PNG the report links; returns κ over training's (curves, early pairs, ρ) when it was drawn."""
    plot_pareto(data.configs, data.front, out_dir / "pareto.png", headline)
    if data.verdicts:
        plot_delta_heatmap(data.verdicts, out_dir / "delta_heatmap.png", headline)
    if data.kappa:
        plot_kappa(data.kappa, out_dir / "kappa_vs_heads.png")
    plot_throughput(data.configs, out_dir / "throughput_vs_params.png")
    curves, early_pairs, early_rho = kappa_over_training(data.kappa_epochs, data.configs)
    if not early_pairs:
        return None
    plot_kappa_epochs(data.kappa_epochs, curves, early_pairs, early_rho, out_dir / "kappa_over_training.png", headline)
    return curves, early_pairs, early_rho


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


def kappa_training_section(curves: dict, pairs: list[tuple], rho, headline: Headline) -> str:
    """Does κ fall during training, and does its early value predict the final metric?"""
    falling = sum(curve[-1][1] < curve[0][1] for curve in curves.values() if len(curve) > 1)
    tracked = sum(len(curve) > 1 for curve in curves.values())
    return (
        "\n## κ during training\n\n![κ over training](kappa_over_training.png)\n\n"
        f"κ fell from its first probed epoch to its last in {falling} of {tracked} configs. Across {len(pairs)} "
        f"configs, Spearman's ρ between κ at the first probed epoch and the final {headline.label} is "
        f"{format_value(rho)} (epochs from `epochs.kappa_mean`, averaged over seeds).\n"
    )


def verdict_rule(headline: Headline, trials: int) -> str:
    """The paragraph that says how a config was judged: metric, direction, tolerance in its units."""
    h = headline
    return (
        f"{trials} trials, judged on `{h.name}` ({h.label}, {direction_words(h.mode)}). A config **holds** when "
        f"its mean {h.label} is confidently (95% interval) no more than {h.tolerance} {h.unit} {h.worse} "
        f"the baseline's, **breaks** when it is confidently more than that {h.worse}, and is **inconclusive** "
        "otherwise. The interval is Welch's, or, with 2 seeds on a side, one on the variance pooled over the "
        "space's configs where their spreads pass the equal-variance checks (`evidence` names the method). "
        "One seed is never called significant. In the tables, `score_mean` is the mean "
        f"{h.name} over seeds and `delta` (Δ) the config's minus the baseline's, in {h.unit}.\n"
    )


FRONT_COLUMNS = ["depth", "num_heads", "head_dim", "score_mean", "score_se", "params", "train_samples_per_s",
                 "infer_samples_per_s", "peak_mem_bytes"]  # fmt: skip
KAPPA_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "kappa_median", "score_mean"]
VERDICT_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "mlp_dim", "n_seeds", "score_mean", "delta",
                   "delta_lo", "delta_hi", "verdict", "evidence", "delta_params_pct", "delta_train_throughput_pct",
                   "delta_infer_throughput_pct", "delta_mem_pct"]  # fmt: skip
INFEASIBLE_COLUMNS = ["trials", "diverged_fraction", "oom_fraction", "error_fraction", "pruned_fraction"]


def render_markdown(space: str, question: str | None, headline: Headline, data: ReportData, extra: str = "") -> str:
    """index.md: the answer first, then the edges, the figures, and every table behind them."""
    parts = [f"# Where does the head-for-depth trade break? Space `{space}`\n"]
    if question:
        parts.append(f"> {' '.join(question.split())}\n")
    parts += answer_section(space, headline, data)
    parts += edges_section(headline, data)
    parts.append(f"## {headline.label.capitalize()} against parameters\n\n![Pareto](pareto.png)\n")
    parts.append(markdown_table(data.front, with_kv(FRONT_COLUMNS, data.front)))
    if data.kappa:
        parts.append("\n## κ of the attention block\n\n![kappa](kappa_vs_heads.png)\n")
        whole_block = [r for r in data.kappa if r["layer"] is None and r["attention"] is None]
        parts.append(markdown_table(whole_block, with_kv(KAPPA_COLUMNS, whole_block)))
    if extra:
        parts.append(extra)
    parts.append("\n## Throughput\n\n![throughput](throughput_vs_params.png)\n")
    parts.append("\n## Every config against the baseline\n")
    parts.append(markdown_table(data.verdicts, with_kv(VERDICT_COLUMNS, data.verdicts, DECODING_COLUMNS)))
    parts.append("\n## Trials that did not finish\n")
    parts.append(markdown_table(data.infeasible, INFEASIBLE_COLUMNS))
    parts.append(
        '\nThe same answer in SQL: `sweep sql "FROM depth_edge"`, or in the plain DuckDB shell: '
        "`sweep sql --print-views > views.sql`, then `duckdb -init views.sql`.\n"
    )
    return "\n".join(parts)


def answer_section(space: str, headline: Headline, data: ReportData) -> list[str]:
    """The answer in words, how it was judged, the baseline, and the count of each verdict."""
    parts = ["## The answer\n", answer_paragraph(headline, data.verdicts, space, data.profile, data.unlearned)]
    parts.append(verdict_rule(headline, data.trials))
    baseline = next((c for c in data.configs if c["is_baseline"]), None)
    if baseline:
        parts.append(
            f"Baseline: {shape_words(baseline)}, {baseline['params']:,} parameters, {headline.label} "
            f"{format_score(baseline['score_mean'], headline.name)} over {plural(baseline['n_seeds'], 'seed')}.\n"
        )
    judged = [r for r in data.verdicts if not r["is_baseline"]]  # the baseline is the reference, not a verdict
    counts = {v: sum(r["verdict"] == v for r in judged) for v in ("holds", "breaks", "inconclusive")}
    single = sum(r["evidence"] == "single seed" for r in judged)
    parts.append(
        f"Verdicts of the {plural(len(judged), 'config')} besides the baseline: {counts['holds']} hold, "
        f"{counts['breaks']} break, {counts['inconclusive']} inconclusive"
        f"{f' ({single} of them on a single seed)' if single else ''}.\n"
    )
    return parts


def edges_section(headline: Headline, data: ReportData) -> list[str]:
    """Where the trade breaks along depth and along head_dim, in sentences, and the Δ heatmap."""
    parts = ["## Along depth (fewer blocks, same heads)\n"]
    parts += depth_sentences(data.depth_edges, data.verdicts) or ["_(no configs at or below the baseline depth)_"]
    parts.append("\n## Along head_dim (more, smaller heads at fixed d_model)\n")
    parts += head_dim_sentences(data.head_dim_edges, data.verdicts) or ["_(no fixed-d_model configs)_"]
    if data.verdicts:
        parts.append(f"\n![Δ{headline.name} heatmap](delta_heatmap.png)\n")
    return parts
