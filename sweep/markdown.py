"""The Markdown the report and each question's section write: a query's rows, a cell as people read it, a
table, a difference with its interval. Beneath every stage, so a question (``sweep/questions/``) writes its
section with the same words as the report (``sweep/analysis/report/``) without importing it."""

from __future__ import annotations

from sweep.headline import format_delta
from sweep.text import format_value, readable


def query(con, sql: str, *params) -> list[dict]:
    relation = con.execute(sql, list(params))
    columns = [d[0] for d in relation.description]
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]


# κ at or above this is a numerically rank-deficient block, not a measurement: float64 carries about 16 digits
# (eps = 2.2e-16) and an SVD's error in σ_min is about N·eps·σ_1, so for blocks of N ≥ 5 tokens a σ_min
# below σ_1 · 1e-15 cannot be told from zero. The report says so wherever such a κ appears.
KAPPA_RANK_DEFICIENT = 1e15


def table_cell(column: str, value) -> str:
    """One Markdown cell: numbers as people read them (``readable``), κ beyond float64 precision named."""
    if value is None:
        return ""
    if column.startswith("kappa") and isinstance(value, float) and value >= KAPPA_RANK_DEFICIENT:
        return f"{readable(value)} (rank-deficient)"
    return readable(value) if isinstance(value, int | float) else format_value(value)


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "_(no rows)_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(table_cell(c, row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def interval_words(row: dict, field: str, name: str, single: str = "single seed") -> str:
    """``row[field]`` with its interval (``field_lo``, ``field_hi``): ``+1.2 (95% CI -0.3…+2.7)``, or
    ``+1.2 (single seed)`` (``single`` says it) where there is no interval."""
    value, lo, hi = row[field], row[f"{field}_lo"], row[f"{field}_hi"]
    if lo is None or hi is None:
        return f"{format_delta(value, name)} ({single})"
    return f"{format_delta(value, name)} (95% CI {format_delta(lo, name)}…{format_delta(hi, name)})"
