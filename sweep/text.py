"""Words the tool prints: counts with their nouns, and numbers formatted for people."""

from __future__ import annotations

import math
from datetime import datetime


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 head``, ``4 heads``, ``1 seed``, ``0 seeds``; ``nouns`` for an irregular plural."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def readable(value) -> str:
    """A number as a person reads it: whole numbers with thousands separators (``5,873,890``), others to 4
    significant figures without exponent where it fits (``0.0123``, ``123.5``, ``5,873,890``), and an
    exponent only beyond that (``1.2e+15``); anything else as ``str``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e12 or magnitude < 1e-4:
        return f"{value:.3g}"
    if magnitude >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def human(count: int) -> str:
    """136138 → 136.1K, 86567656 → 86.6M, 35127656448 → 35.1G."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(count) >= scale:
            return f"{count / scale:.1f}{suffix}"
    return str(count)


def size_words(count_bytes: float) -> str:
    """Bytes in the largest binary unit that keeps a figure ≥ 1: ``512 B``, ``3.4 KiB``, ``12.0 MiB``, ``1.50 GiB``
    (three significant figures; never ``0.00 GiB`` for a small model)."""
    value, unit = float(count_bytes), "B"
    for larger in ("KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.0f} {unit}" if unit == "B" or abs(value) >= 100 else f"{value:.3g} {unit}"


def duration_words(seconds: float) -> str:
    """A duration in the unit that reads best: ``850 µs``, ``12.3 ms``, ``4.5 s``, ``12.0 min``, ``3.25 h`` (three
    significant figures; never ``5.07e-09 h``)."""
    for unit, scale, below in (("µs", 1e-6, 1e-3), ("ms", 1e-3, 1.0), ("s", 1.0, 60.0), ("min", 60.0, 3600.0)):
        if abs(seconds) < below:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 3600:.3g} h"


def format_value(value) -> str:
    """A value as a table cell: floats to 6 significant digits, times to the second, None as nothing."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


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


def at_mark(text: str, mark: str, lines: list[str]) -> str:
    """``text`` with each line that holds ``mark`` (an SQL comment, so the file reads alone) replaced by ``lines``,
    each indented as the code after it: how the SQL files take the columns the questions declare. A mark after
    code on its line (``SELECT -- mark``) keeps the code and puts the lines below it."""
    out = []
    for line in text.splitlines(keepends=True):
        if mark not in line:
            out.append(line)
            continue
        code = line[: line.index(mark)].rstrip()
        if code.strip():
            out.append(code + "\n")
        indent = " " * (len(code) + 1) if code.strip() else line[: len(line) - len(line.lstrip())]
        out += [f"{indent}{new}\n" for new in lines]
    return "".join(out)
