"""Words and tables every report section shares, the core's and each question's (``sweep/questions/``):
the headline metric a report judges on, a query's rows as dicts, Markdown tables, and shapes and intervals in
words. Free of heavy imports (the report must not load torch)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.metrics import METRICS, format_delta, tolerance_unit
from sweep.text import format_value, plural, readable


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


def heads_words(count: int) -> str:
    return plural(count, "head")


def shape_words(row: dict) -> str:
    return f"{plural(row['depth'], 'block')} × {heads_words(row['num_heads'])} of {row['head_dim']}{kv_words(row)}"


def is_grouped(row: dict) -> bool:
    """Grouped-query attention: fewer key/value heads than heads (rows without the column: multi-head)."""
    return row.get("num_kv_heads") not in (None, row.get("num_heads"))


def kv_words(row: dict) -> str:
    """``, 4 key/value heads`` for grouped-query attention; nothing for multi-head attention."""
    if not is_grouped(row):
        return ""
    return f", {row['num_kv_heads']} key/value head{'s' if row['num_kv_heads'] > 1 else ''}"


def heads_per_kv_head(row: dict) -> int:
    return row["num_heads"] // row["num_kv_heads"] if row.get("num_kv_heads") else 1


def short_shape(row: dict) -> str:
    """``2×16`` (depth × heads), ``2×16/4kv`` with grouped-query attention: the figures' labels."""
    return f"{row['depth']}×{row['num_heads']}" + (f"/{row['num_kv_heads']}kv" if is_grouped(row) else "")


def with_kv(columns: list[str], rows: list[dict], extra: tuple[str, ...] = ()) -> list[str]:
    """``columns`` with ``num_kv_heads`` after ``num_heads`` (and ``extra`` at the end) when any row is grouped."""
    if not any(is_grouped(r) for r in rows):
        return columns
    at = columns.index("num_heads") + 1
    return [*columns[:at], "num_kv_heads", *columns[at:], *extra]


def interval_words(row: dict, field: str, name: str, single: str = "single seed") -> str:
    """``row[field]`` with its interval (``field_lo``, ``field_hi``): ``+1.2 (95% CI -0.3…+2.7)``, or
    ``+1.2 (single seed)`` (``single`` says it) where there is no interval."""
    value, lo, hi = row[field], row[f"{field}_lo"], row[f"{field}_hi"]
    if lo is None or hi is None:
        return f"{format_delta(value, name)} ({single})"
    return f"{format_delta(value, name)} (95% CI {format_delta(lo, name)}…{format_delta(hi, name)})"
