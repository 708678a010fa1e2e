"""The report's Markdown tables: a cell as people read it, a table, and the columns each shared table shows."""

from __future__ import annotations

from sweep.metrics import format_delta
from sweep.text import format_value, readable

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


FRONT_COLUMNS = ["depth", "num_heads", "head_dim", "score_mean", "score_se", "params", "train_samples_per_s",
                 "infer_samples_per_s", "peak_mem_bytes"]  # fmt: skip


KAPPA_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "kappa_median", "score_mean"]


VERDICT_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "mlp_dim", "n_seeds", "score_mean", "delta",
                   "delta_lo", "delta_hi", "verdict", "evidence", "delta_params_pct", "delta_train_throughput_pct",
                   "delta_infer_throughput_pct", "delta_mem_pct", "device_hours"]  # fmt: skip


def cost_sentence(device_s: list[float | None]) -> str:
    """What the space's trials cost in all (``device_s``: each trial's, None where it was not recorded), in words."""
    known = [value for value in device_s if value is not None]
    if not known:
        return "What it cost is not known: no trial recorded its device-seconds (results from before they were).\n"
    unknown = len(device_s) - len(known)
    missing = f"; {unknown} trials from before device-seconds were recorded are not counted" if unknown else ""
    return (
        f"What it cost: {sum(known) / 3600:.4g} device-hours over {len(known)} trials (GPU-hours, or CPU-hours for "
        f"trials without a GPU); `device_hours` below is each config's, every trial of it counted{missing}.\n"
    )


INFEASIBLE_COLUMNS = ["trials", "diverged_fraction", "oom_fraction", "error_fraction", "pruned_fraction"]


def interval_words(row: dict, field: str, name: str, single: str = "single seed") -> str:
    """``row[field]`` with its interval (``field_lo``, ``field_hi``): ``+1.2 (95% CI -0.3…+2.7)``, or
    ``+1.2 (single seed)`` (``single`` says it) where there is no interval."""
    value, lo, hi = row[field], row[f"{field}_lo"], row[f"{field}_hi"]
    if lo is None or hi is None:
        return f"{format_delta(value, name)} ({single})"
    return f"{format_delta(value, name)} (95% CI {format_delta(lo, name)}…{format_delta(hi, name)})"
