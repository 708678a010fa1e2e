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


def format_value(value) -> str:
    """A value as a table cell: floats to 6 significant digits, times to the second, None as nothing."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)
