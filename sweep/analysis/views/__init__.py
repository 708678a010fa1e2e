"""The analysis views' SQL, as files loaded in order (``sweep/analysis/sql.py`` creates them on demand):

    compat.sql   (``sweep/results/compat.sql``, the results' own) the tables, every schema version read as the
                 latest (and, for the plain ``duckdb`` shell only, the tables' globs under ``results/``)
    macros.sql   statistics: t and F quantiles, Welch's degrees of freedom, verdict words, the gain sign
    core.sql     each space's settings, configs (seeds pooled), unlearned seeds, noise checks, infeasible
    verdicts.sql every config against its baseline (vs_baseline) and the edges along depth and head_dim
    costs.sql    at equal cost: the Pareto front and matched budgets
    kappa.sql    κ against heads and against the score
    edge.sql     an edge search's verdicts, measured and implied, and each column's edge (t quantiles at any level)
    then each question's own file beside its module (``sweep/questions/*.sql``), in the registry's order.

``sweep sql --print-views`` prints :func:`views_text`, for ``duckdb -init``.
"""

from __future__ import annotations

import re
from pathlib import Path

from sweep.questions import QUESTIONS, declared_axes, declared_labels
from sweep.text import at_mark

AXIS_COLUMNS_MARK = "-- @question-axis-columns"  # where a view after configs names each question's axis
VIEWS_DIR = Path(__file__).resolve().parent  # package data: shipped in the wheel
# In this order, before the questions' own files
CORE_FILES = ("macros.sql", "core.sql", "verdicts.sql", "costs.sql", "kappa.sql", "edge.sql")
TABLE_NAMES = ("trials", "epochs", "spaces", "kappa", "trials_files", "epochs_files", "spaces_files")


def views_text() -> str:
    """Every analysis definition as one text, in loading order: the core files, then each question's."""
    from sweep.results.reader import compat_sql

    core = [compat_sql(), *(core_sql(name) for name in CORE_FILES)]
    return "\n".join([*core, *filter(None, (q.sql_text() for q in QUESTIONS))])


def core_sql(name: str) -> str:
    """A core file's text, with each question's label (``Question.labels``) at its mark in ``configs``: the
    label's aggregate over the config's rows (``Label.in_configs``); and each question's axis
    (``Question.axes``), one value per config in ``configs`` and named in ``vs_baseline``."""
    from sweep.results.reader import AXES_MARK, LABELS_MARK, label_line  # pyarrow and duckdb: not for --help

    lines = [label_line(label, f"{label.in_configs}({label.name})") for label in declared_labels()]
    axes = [label_line(axis, f"any_value({axis.name})") for axis in declared_axes()]
    named = [f"{axis.name},  -- {' '.join(axis.doc.split())}" for axis in declared_axes()]
    text = at_mark((VIEWS_DIR / name).read_text(), LABELS_MARK, lines)
    return at_mark(at_mark(text, AXES_MARK, axes), AXIS_COLUMNS_MARK, named)


def analysis_views() -> list[str]:
    """The analysis views' names (not the tables', nor the macros), in loading order: read from the files as
    written (the marks add columns, never views), so ``sweep --help`` loads neither pyarrow nor duckdb."""
    files = [(VIEWS_DIR / name).read_text() for name in CORE_FILES]
    text = "\n".join([*files, *filter(None, (q.sql_text() for q in QUESTIONS))])
    names = re.findall(r"CREATE OR REPLACE VIEW (\w+)", re.sub(r"--[^\n]*", "", text))
    return [name for name in names if name not in TABLE_NAMES]
