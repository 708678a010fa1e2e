"""Spearman's rank correlation, written once for both sides: GLUE's STS-B metric (``workers/data/glue.py``)
and the report's "does early κ predict the final score?" (``sweep/analysis/report``). numpy only, so the analysis
commands that import it load no torch."""

from __future__ import annotations

import numpy as np


def average_ranks(values) -> np.ndarray:
    """Ranks 1…n of ``values`` (float64), tied values sharing the mean of their ranks (scipy's
    ``rankdata(method="average")``)."""
    values = np.asarray(values)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts).astype(np.float64)  # the last rank of each distinct value
    return (ends - (counts - 1) / 2.0)[inverse.reshape(-1)]


def spearman_rho(x, y) -> float:
    """Spearman's ρ in [-1, 1]: Pearson's correlation of the two sides' average ranks (ties share the mean of
    their ranks). NaN, as scipy's ``spearmanr``, when one side is constant (the correlation is undefined: a
    single point is constant too) or any value is NaN (scipy's default ``nan_policy="propagate"``).
    ``ValueError`` unless ``x`` and ``y`` are 1-D and of one length."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"spearman_rho needs two 1-D sequences of one length, but got shapes {x.shape} and {y.shape}")
    if len(x) < 2 or np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    x, y = average_ranks(x), average_ranks(y)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(float(x @ x) * float(y @ y))
    if denominator == 0:
        return float("nan")
    return float(np.clip(float(x @ y) / denominator, -1.0, 1.0))
