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
    return expand_axis_tokens("\n".join([*core, *filter(None, (q.sql_text() for q in QUESTIONS))]))


# A view's place for every declared axis (Question.axes), written as an SQL comment so the file stays valid SQL.
# With two axes, kv (ordered DESC, across heads: heads // kv AS per_kv) and cond:
#   /*@axes*/                 , kv, cond                 (each axis's name)
#   /*@axes c.*/              , c.kv, c.cond             (a table's prefix)
#   /*@axes m. AS matched_*/  , m.kv AS matched_kv, m.cond AS matched_cond
#   /*@axes-order*/           , kv DESC, cond            (Axis.order_sql)
#   /*@axes-across-heads*/    , heads // kv, cond        (Axis.across_heads; "AS": aliased, "names": the aliases)
#   /*@axes-same z c but cond*/   AND z.kv = c.kv        (a join on every other axis)
AXIS_TOKEN = re.compile(r"/\*@axes(?P<kind>-order|-across-heads|-same)?(?: (?P<spec>[^*]*?))?\*/")


def expand_axis_tokens(text: str) -> str:
    """``text`` with each ``/*@axes…*/`` token (:data:`AXIS_TOKEN`) replaced by the declared axes, each after a
    comma: a new question's axis is grouped, partitioned, matched and sorted by wherever the shipped ones are."""

    def expanded(token: re.Match) -> str:
        joint = " AND " if token["kind"] == "-same" else ", "
        return "".join(f"{joint}{item}" for item in axis_items(token["kind"], token["spec"] or ""))

    return AXIS_TOKEN.sub(expanded, text)


def axis_items(kind: str | None, spec: str) -> list[str]:
    """The items one ``/*@axes…*/`` token stands for, one per declared axis (:func:`expand_axis_tokens`)."""
    items = []
    for axis in declared_axes():
        if kind == "-order":
            items.append(axis.order_sql or axis.name)
        elif kind == "-same":
            left, right, *but = spec.replace(" but ", " ").split()
            if axis.name not in but:
                items.append(f"{left}.{axis.name} = {right}.{axis.name}")
        elif kind == "-across-heads":
            expression, alias = axis.across_heads or (axis.name, axis.name)
            aliased = f"{expression} AS {alias}" if expression != alias else alias
            items.append({"": expression, "AS": aliased, "names": alias}[spec])
        else:
            source, _, alias = spec.partition(" AS ")
            items.append(f"{source}{axis.name}" + (f" AS {alias}{axis.name}" if alias else ""))
    return items


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
