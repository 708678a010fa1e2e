"""``reports/<space>/index.html``: the report's answer paragraph and three interactive figures, built with
plotly from the rows :func:`sweep.analysis.report.data.gather` already queried (no SQL of its own).

    the answer        the same paragraph as index.md's
    Δ heatmap         depth × (heads, head_dim), Δscore against the baseline; the hover gives the 95% interval,
                      the verdict and the method behind it
    Pareto front      the headline score against parameters, forward FLOPs and batch-1 latency, three panels
    κ over training   per config, the epochs table's ``kappa_mean`` (mean over seeds) by epoch

The file is self-contained: plotly.js is embedded once (about 5 MB), so it opens offline, from disk or
an e-mail attachment, with nothing fetched.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import diverging
from plotly.subplots import make_subplots

from sweep.analysis.report.data import ReportData
from sweep.analysis.report.edge import heatmap_rows
from sweep.headline import Headline, direction_words, format_delta, format_score
from sweep.text import kv_words, plural, short_shape

# (column of `configs`, axis title): the costs the Pareto panels put the score against
PARETO_COSTS = (
    ("params", "parameters"),
    ("flops_per_sample", "forward FLOPs per sample"),
    ("latency_b1_ms", "batch-1 latency (ms)"),
)
FIGURE_IDS = ("delta-heatmap", "pareto-front", "kappa-training")
PANEL_MIDDLE = {"xref": "x domain", "yref": "y domain", "x": 0.5, "y": 0.5}  # of a subplot, whatever its data
# plotly.js 4's "Share chart..." button uploads the figure to Plotly Cloud: off, results stay on this machine
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["sendChartToCloud"]}
STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}
p{line-height:1.45} code{background:#f3f3f3;padding:0 .2em} .caption{color:#555;font-size:.9em}
blockquote{color:#555;border-left:3px solid #ccc;margin-left:0;padding-left:1em}"""


def write_html(path: Path, space: str, question: str | None, headline: Headline, data: ReportData, answer: str) -> Path:
    """Write index.html: ``answer`` (index.md's answer paragraph, Markdown) and the three figures."""
    figures = [
        (f"Δ{headline.name} against the baseline", heatmap_caption(headline, data.edge is not None),
         heatmap_figure(heatmap_rows(data.edge) if data.edge is not None else data.verdicts, headline)),
        (f"{headline.label.capitalize()} against cost: the Pareto front", PARETO_CAPTION,
         pareto_figure(data.configs, data.front, headline)),
        ("κ during training", KAPPA_CAPTION, kappa_figure(data.kappa_epochs)),
    ]  # fmt: skip
    parts = [f"<h1>Where does the head-for-depth trade break? Space <code>{html.escape(space)}</code></h1>"]
    if question:
        parts.append(f"<blockquote>{html.escape(' '.join(question.split()))}</blockquote>")
    parts.append(f'<h2>The answer</h2>\n<p id="answer">{markdown_inline(answer.strip())}</p>')
    for index, (div_id, (title, caption, figure)) in enumerate(zip(FIGURE_IDS, figures, strict=True)):
        plot = figure.to_html(full_html=False, include_plotlyjs=index == 0, div_id=div_id, config=PLOT_CONFIG)
        parts.append(f'<h2>{html.escape(title)}</h2>\n<p class="caption">{caption}</p>\n{plot}')
    parts.append(
        '<p class="caption">Every table behind these figures, and the same answer: <a href="index.md">index.md</a>'
        " (PNG copies of the figures beside it). plotly.js is embedded: this page needs no network.</p>"
    )
    title = f"Head-for-depth report: {html.escape(space)}"
    body = "\n".join(parts)
    path.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        encoding="utf-8",
    )
    return path


def markdown_inline(text: str) -> str:
    """The little Markdown the answer paragraph uses (``code`` and **bold**), as HTML, the rest escaped."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)


def no_data(figure: go.Figure, message: str) -> go.Figure:
    """An empty figure that says why it is empty (the page keeps its three figures either way)."""
    figure.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    return figure.update_layout(height=220, plot_bgcolor="white")


# --- Δ heatmap --------------------------------------------------------------------------------------------


INCONCLUSIVE_WASH = "rgba(255, 255, 255, 0.6)"  # over an inconclusive cell: its colour at 40% strength
IMPLIED_COLOURS = {"holds": "#2a9d8f", "breaks": "#e63946"}  # an implied verdict's dashed edge (figures.py's colours)


def heatmap_caption(headline, edge: bool = False) -> str:
    caption = (
        f"Each cell: the config's mean {html.escape(headline.label)} minus the baseline's (★), in "
        f"{html.escape(headline.unit)} ({direction_words(headline.mode)}); blue is better, red worse; pale cells "
        "with a dotted edge are inconclusive (their colour is a point estimate, not a verdict). Hover for the "
        f"95% interval, the verdict at tolerance {headline.tolerance} and the method behind it."
    )
    if edge:
        caption += (
            " An edge search: a cell with a dashed edge in a verdict's colour and the word <i>implied</i> holds "
            "a verdict the monotone assumption along depth implies from the measured depth it names, never a "
            "measurement (a config never trained has no colour of its own)."
        )
    return caption


def kv_heads(row: dict) -> int:
    """Key/value heads (rows without the column: multi-head attention, as many as heads)."""
    return row.get("num_kv_heads") or row["num_heads"]


def implied_words(row: dict) -> str:
    """An edge search's implied verdict of ``row`` in words ('' without one)."""
    if not row.get("implied"):
        return ""
    return f"implied {row['implied']} (by depth {row['implied_from_depth']}, measured)"


def heatmap_cell(row: dict, headline) -> tuple[str, str]:
    """A cell's text (Δ and verdict) and its hover (shape, Δ, 95% interval, verdict, evidence, seeds); an edge
    search's implied verdict in both, and alone for a config never trained."""
    name = headline.name
    heads = plural(row["num_heads"], "head")
    shape = f"depth {row['depth']} × {heads} of {row['head_dim']}{kv_words(row)} ({row['family']})"
    if row["delta"] is None:  # an edge search's config never trained, with the verdict implied for it
        words = implied_words(row)
        return f"<i>{words}</i>".replace(" (by", "<br>(by"), f"{shape}<br>never trained: {words}"
    delta = format_delta(row["delta"], name)
    if row["is_baseline"]:
        score = format_score(row["score_mean"], name)
        return f"★ {delta}<br>baseline", f"{shape}<br>the baseline: {score} over {plural(row['n_seeds'], 'seed')}"
    interval = "no interval (one seed on a side)"
    if row["delta_lo"] is not None:
        interval = f"95% CI {format_delta(row['delta_lo'], name)}…{format_delta(row['delta_hi'], name)}"
    hover = (
        f"{shape}<br>Δ{name} {delta} {headline.unit}, {interval}<br>verdict: <b>{row['verdict']}</b> "
        f"({row['evidence']})<br>{plural(row['n_seeds'], 'seed')}; score {format_score(row['score_mean'], name)}"
    )
    words = f"1 seed: leans {row['point_verdict']}" if row["evidence"] == "single seed" else row["verdict"]
    words = row.get("edge_verdict", words)
    if row.get("implied"):
        words, hover = f"{words}<br><i>implied {row['implied']}</i>", f"{hover}<br>{implied_words(row)}"
    return f"{delta}<br>{words}", hover


def heatmap_figure(verdicts: list[dict], headline) -> go.Figure:
    """Depth (rows) × (family, heads, head_dim) (columns), coloured by Δ; blue = better in either direction."""
    figure = go.Figure()
    if not verdicts:
        return no_data(figure, "no verdicts: the results hold no baseline row for this space")
    columns = sorted({(r["family"], r["num_heads"], r["head_dim"], -kv_heads(r)) for r in verdicts})
    depths = sorted({r["depth"] for r in verdicts})
    cells = {(r["depth"], r["family"], r["num_heads"], r["head_dim"], -kv_heads(r)): r for r in verdicts}
    grid = [[cells.get((depth, *column)) for column in columns] for depth in depths]
    texts = [[heatmap_cell(c, headline) if c and (c["delta"] is not None or c.get("implied")) else ("", "")
              for c in row] for row in grid]  # fmt: skip
    deltas = [abs(c["delta"]) for row in grid for c in row if c and c["delta"] is not None]
    limit = max([*deltas, headline.tolerance]) or 1.0
    several = len({column[0] for column in columns}) > 1
    labels = [
        (f"{family} " if several else "") + f"{heads}×{head_dim}" + (f"/{-minus_kv}kv" if -minus_kv != heads else "")
        for family, heads, head_dim, minus_kv in columns
    ]
    figure.add_trace(
        go.Heatmap(
            z=[[c["delta"] if c else None for c in row] for row in grid],
            x=labels,
            y=[str(depth) for depth in depths],
            text=[[text for text, _ in row] for row in texts],
            hovertext=[[hover for _, hover in row] for row in texts],
            texttemplate="%{text}",
            hovertemplate="%{hovertext}<extra></extra>",
            colorscale=diverging.RdBu if headline.mode == "max" else diverging.RdBu[::-1],
            zmin=-limit,
            zmax=limit,
            colorbar={"title": {"text": f"Δ{headline.name} ({headline.unit})"}},
        )
    )
    for y, row in enumerate(grid):  # as the PNG hatches them: inconclusive cells washed out and dashed
        for x, cell in enumerate(row):
            if cell and not cell["is_baseline"] and cell["delta"] is not None and cell["verdict"] == "inconclusive":
                edge = {"color": "#777", "width": 1.5, "dash": "dot"}
                figure.add_shape(type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5, layer="above",
                                 fillcolor=INCONCLUSIVE_WASH, line=edge)  # fmt: skip
    for y, row in enumerate(grid):  # an edge search's implied verdicts: a dashed edge in the implied verdict's colour
        for x, cell in enumerate(row):
            if cell and cell.get("implied"):
                edge = {"color": IMPLIED_COLOURS[cell["implied"]], "width": 2, "dash": "dash"}
                figure.add_shape(type="rect", x0=x - 0.45, x1=x + 0.45, y0=y - 0.45, y1=y + 0.45, layer="above",
                                 line=edge, name="implied")  # fmt: skip
    figure.update_xaxes(title_text="heads × head_dim", type="category")
    figure.update_yaxes(title_text="depth", type="category")
    return figure.update_layout(height=160 + 70 * len(depths), margin={"t": 30})


# --- Pareto front -----------------------------------------------------------------------------------------

PARETO_CAPTION = (
    "Grey: every finished config (± standard error over seeds); dark line: the configs no other beats on both the "
    "score and that cost (depth×heads labelled); ★ the baseline. Hover for the shape and the numbers."
)


def front_on(configs: list[dict], cost: str, mode: str) -> list[dict]:
    """The configs no other beats on both the score (by the metric's direction) and ``cost`` (lower): the
    rule of costs.sql's ``pareto``, on any cost column. Configs without that cost are left out."""
    sign = -1 if mode == "min" else 1
    done = sorted(
        (c for c in configs if c["score_mean"] is not None and c.get(cost) is not None), key=lambda c: c[cost]
    )
    front, best = [], -math.inf
    for _, same_cost in itertools.groupby(done, key=lambda c: c[cost]):
        same_cost = list(same_cost)
        top = max(sign * c["score_mean"] for c in same_cost)
        if top > best:
            front += [c for c in same_cost if sign * c["score_mean"] == top]
            best = top
    return front


def point_hover(config: dict, headline) -> str:
    se = f" ± {config['score_se']:.3g}" if config.get("score_se") is not None else ""
    costs = ", ".join(
        f"{title} {config[key]:.4g}" for key, title in PARETO_COSTS if config.get(key) is not None
    )  # fmt: skip
    return (
        f"depth {config['depth']} × {plural(config['num_heads'], 'head')} of {config['head_dim']}{kv_words(config)}<br>"
        f"{headline.name} {format_score(config['score_mean'], headline.name)}{se} ({plural(config['n_seeds'], 'seed')})"
        f"<br>{costs}"
    )


def pareto_figure(configs: list[dict], front: list[dict], headline) -> go.Figure:
    """Three panels, the score against params, FLOPs and latency; the params front is the ``pareto`` view's."""
    figure = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04)
    for col, (cost, title) in enumerate(PARETO_COSTS, start=1):
        done = [c for c in configs if c["score_mean"] is not None and c.get(cost) is not None]
        on_front = front if cost == "params" else front_on(configs, cost, headline.mode)
        on_front = sorted((c for c in on_front if c.get(cost) is not None), key=lambda c: c[cost])
        pareto_panel(figure, col, done, on_front, cost, headline)
        figure.update_xaxes(title_text=title, exponentformat="SI", row=1, col=col)
        if not done:
            figure.add_annotation(text=f"no {title} recorded", showarrow=False, **PANEL_MIDDLE, row=1, col=col)
    figure.update_yaxes(title_text=f"{headline.name} ({headline.unit}; {direction_words(headline.mode)})", col=1)
    return figure.update_layout(height=430, margin={"t": 30}, legend={"orientation": "h", "y": -0.25})


def pareto_panel(figure: go.Figure, col: int, done: list[dict], front: list[dict], cost: str, headline) -> None:
    """One panel: every config with its standard error, the front as a line, the baseline as a star."""

    def add(rows: list[dict], **style) -> None:
        hover = [point_hover(r, headline) for r in rows]
        x, y = [r[cost] for r in rows], [r["score_mean"] for r in rows]
        style |= {"hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>", "showlegend": col == 1}
        figure.add_trace(go.Scatter(x=x, y=y, **style), row=1, col=col)  # one legend entry per kind, not three

    errors = {"type": "data", "array": [c["score_se"] or 0 for c in done], "visible": True}
    add(done, mode="markers", name="config (± s.e.)", marker={"color": "#999"}, error_y=errors)
    labels = [short_shape(c) for c in front]
    add(front, mode="lines+markers+text", name="Pareto front", line={"color": "#264653"}, text=labels,
        textposition="top right", cliponaxis=False)  # fmt: skip
    star = {"symbol": "star", "size": 16, "color": "#e76f51"}
    add([c for c in done if c["is_baseline"]], mode="markers", name="baseline", marker=star)


# --- κ over training --------------------------------------------------------------------------------------

KAPPA_CAPTION = (
    "κ of the attention block (mean over layers of the per-layer median over probe samples) after each epoch, "
    "averaged over seeds; one line per config, depth × heads × head_dim. Click a legend entry to hide a line."
)


def kappa_figure(epochs: list[dict]) -> go.Figure:
    """One line per config: κ by epoch (rows of ``KAPPA_EPOCHS_SQL``: one per config and epoch)."""
    figure = go.Figure()
    if not epochs:
        return no_data(figure, "no κ recorded per epoch (the epochs table has no kappa_mean for this space)")
    curves: dict[str, list[dict]] = {}
    for row in epochs:
        curves.setdefault(row["config_id"], []).append(row)
    if all(len({r["epoch"] for r in rows}) < 2 for rows in curves.values()):  # dots on an empty axis otherwise
        return no_data(figure, "κ was probed at one epoch only: a curve over training needs two or more "
                               "(probes.kappa_every_epochs); each config's final κ is in the κ section")  # fmt: skip
    for rows in curves.values():
        label = f"{rows[0]['depth']}×{rows[0]['num_heads']}×{rows[0]['head_dim']}"
        figure.add_trace(
            go.Scatter(
                x=[r["epoch"] for r in rows],
                y=[r["kappa_mean"] for r in rows],
                mode="lines+markers",
                name=label,
                hovertemplate=f"{label}<br>epoch %{{x}}: κ %{{y:.4g}}<extra></extra>",
            )
        )
    figure.update_xaxes(title_text="epoch", dtick=1)
    figure.update_yaxes(title_text="κ (log scale)", type="log")
    return figure.update_layout(height=430, margin={"t": 30}, legend={"title": {"text": "depth×heads×head_dim"}})
