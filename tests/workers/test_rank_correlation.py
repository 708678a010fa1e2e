"""workers/rank_correlation.py, the one Spearman's ρ that GLUE's STS-B metric and the report both use,
checked against scipy: ties on either side, a constant side, NaN, and the report's reading of it (None where
scipy says NaN, or with fewer than 3 points)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from sweep.analysis.report.sections import spearman
from workers.data.glue import spearman_pct
from workers.rank_correlation import average_ranks, spearman_rho


def sample(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two sides of 3…60 values: half-point scores (many ties), and a side that is continuous, small whole
    numbers (ties on both sides) or the scores plus noise (a strong correlation)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    y = np.round(rng.uniform(0, 5, size=n) * 2) / 2
    x = [rng.normal(size=n), rng.integers(0, 4, size=n).astype(float), y + rng.normal(scale=0.5, size=n)][seed % 3]
    return x, y


@pytest.mark.parametrize("seed", range(12))
def test_ranks_and_rho_match_scipy_with_ties(seed):
    x, y = sample(seed)
    assert average_ranks(x) == pytest.approx(rankdata(x))
    expected = spearmanr(x, y).statistic
    assert not math.isnan(expected)
    assert spearman_rho(x, y) == pytest.approx(expected, abs=1e-12)
    assert spearman(list(x), list(y)) == pytest.approx(expected, abs=1e-12)  # the report's
    assert spearman_pct(x, y) == pytest.approx(100 * expected, abs=1e-9)  # GLUE's, in percent


def test_a_constant_side_or_nan_is_undefined():
    y = [0.0, 1.0, 2.5, 5.0]
    with pytest.warns(Warning):  # scipy warns that the input is constant and returns NaN
        assert math.isnan(spearmanr([3, 3, 3, 3], y).statistic)
    assert math.isnan(spearman_rho([3, 3, 3, 3], y)) and math.isnan(spearman_rho(y, [3, 3, 3, 3]))
    assert math.isnan(spearman_rho([1, 2, float("nan"), 4], y))
    assert math.isnan(spearman_rho([1.0], [2.0]))  # one point: constant on both sides
    assert spearman([3, 3, 3, 3], y) is None  # the report says "n/a", never NaN


def test_the_report_needs_three_points_and_either_order_gives_plus_or_minus_one():
    assert spearman([1.0, 2.0], [2.0, 1.0]) is None
    assert spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert spearman_rho([4, 3, 2, 1], [0.0, 1.0, 2.5, 5.0]) == pytest.approx(-1.0)


def test_sides_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match=r"one length, but got shapes \(3,\) and \(2,\)"):
        spearman_rho([1, 2, 3], [1, 2])
