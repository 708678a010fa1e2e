"""``sweep report SPACE``: a self-contained folder (Markdown + PNG, and an interactive HTML page) that
answers where the head-for-depth trade holds and where it breaks, from the analysis views in ``sweep/analysis/views/``
and ``sweep/questions/*.sql``, on the space's headline metric (top-1, accuracy, validation loss …) in its own
units and direction.

    reports/<space>/index.md                 the answer in words, then the tables
    reports/<space>/index.html               the same answer and interactive figures (Δ heatmap, Pareto front
                                             against params / FLOPs / latency, κ over training), offline
                                             (html.py)
    reports/<space>/pareto.png               the headline score against parameters, Pareto front and baseline
    reports/<space>/delta_heatmap.png        depth × heads, Δscore against the baseline (blue = better), breaks
                                             outlined; an edge search's implied verdicts cross-hatched (edge.py)
    reports/<space>/kappa_vs_heads.png       κ against heads (and against head_dim), one line per depth/arm
    reports/<space>/throughput_vs_params.png training and inference samples/s against parameters

The skeleton is ``write.py``; this face hands on the names scripts and tests use, loaded on first use, so that
importing the package loads no plotting library. The words the report shares with the questions' sections
live beneath both: ``sweep/markdown.py`` (tables, intervals), ``sweep/text.py`` (shapes in words) and
``sweep/headline.py`` (``Headline``).
"""

from __future__ import annotations

import importlib

_FACE = {
    "write_report": "write",
    "render_markdown": "write",
    "ReportData": "data",
    "VERDICT_COLUMNS": "tables",
    "label_points": "figures",
    "overlaps": "figures",
    "plot_kappa": "figures",
    "save_figure": "figures",
    "loader_bound_section": "sections",
}

__all__ = sorted(_FACE)


def __getattr__(name: str):
    if name not in _FACE:
        raise AttributeError(f"module 'sweep.analysis.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sweep.analysis.report.{_FACE[name]}"), name)
