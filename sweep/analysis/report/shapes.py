"""A config's shape in words and labels (``2 blocks × 16 heads of 4``, ``2×16/4kv``), grouped-query
attention named where a row has fewer key/value heads than heads."""

from __future__ import annotations

from sweep.text import plural


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
