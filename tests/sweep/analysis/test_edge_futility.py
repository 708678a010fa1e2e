"""Futility in the edge search (sweep/analysis/edge.py ``futile``, ``needs_seeds``): a config stops, inconclusive,
once even its cap could not give it a verdict at its current gain, checked against an independent float64
computation with scipy's t quantiles; it never gives a verdict: every verdict of a search with it stands on its own
interval, and only configs short of their cap are stopped."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from sweep.analysis.edge import Cell, EdgeSettings, Observation, assess, state_words

SETTINGS = EdgeSettings(tolerance=1.0, mode="max", min_seeds=2, max_seeds=5, baseline_seeds=5, alpha=0.05)
BASE = [0.3, -1.1, 0.8, -0.4, 0.6]
CELLS = [Cell("base", ("c",), 3), Cell("near", ("c",), 1), Cell("far", ("c",), 2)]


def independent(scores: dict[str, list[float | None]], config: str, s: EdgeSettings = SETTINGS) -> dict:
    """The config's interval, the half-width at its cap and N, from the definitions (numpy, scipy.stats.t)."""
    finished = {c: np.asarray([x for x in xs if x is not None]) for c, xs in scores.items()}
    groups = [x for x in finished.values() if len(x) >= 2]
    df = sum(len(x) - 1 for x in groups)
    sp = math.sqrt(sum(((x - x.mean()) ** 2).sum() for x in groups) / df)
    level = 1 - s.alpha / (s.max_seeds - s.min_seeds + 1) / 2
    x, base = finished[config], finished["base"]
    gain = x.mean() - base.mean()
    half = stats.t.ppf(level, df) * sp * math.sqrt(1 / len(x) + 1 / len(base))
    n_c_cap = s.max_seeds - (len(scores[config]) - len(x))  # failed trials count toward the cap
    n_b_cap = len(base) + max(0, s.baseline_seeds - len(scores["base"]))
    df_cap = df + (n_c_cap - len(x)) + (n_b_cap - len(base))
    half_cap = stats.t.ppf(level, df_cap) * sp * math.sqrt(1 / n_c_cap + 1 / n_b_cap)
    needs = math.ceil(2 * (stats.t.ppf(level, df) * sp / abs(gain + s.tolerance)) ** 2)
    return {"gain": gain, "half": half, "half_cap": half_cap, "needs": needs}


def observe(scores: dict[str, list[float | None]]) -> list[Observation]:
    return [Observation(c, seed, x) for c, xs in scores.items() for seed, x in enumerate(xs)]


@pytest.mark.parametrize(
    ("near", "futile"),
    [
        ([-0.9, -1.4], True),  # gain −1.19: 0.19 past the bound; the cap's half-width is 1.43
        ([-1.9, -2.5], True),  # gain −2.24: 1.24 past it, still inside the cap's half-width
        ([-2.6, -3.2], False),  # gain −2.94: 1.94 past it, outside the cap's 1.46 (inside today's 2.19): open
        ([-1.0, None, -1.6], True),  # a failed trial: its cap is 4 finished seeds, not 5 (half-width 1.58)
    ],
)
def test_a_config_is_stopped_exactly_when_the_cap_could_not_settle_it(near, futile):
    scores = {"base": BASE, "near": near, "far": [5.0, 6.1]}
    want = independent(scores, "near")
    assert abs(want["gain"] + 1.0) < want["half"]  # no verdict at this look either way
    assert bool(abs(want["gain"] + 1.0) < want["half_cap"]) is futile  # the planted case is the one named
    state = assess(CELLS, "base", SETTINGS, observe(scores))
    cell = state.cells["near"]
    assert (cell.gain_lo, cell.gain_hi) == pytest.approx((want["gain"] - want["half"], want["gain"] + want["half"]))
    assert (cell.verdict, cell.futile) == (("inconclusive", True) if futile else ("open", False))
    assert cell.needs_seeds == (want["needs"] if futile else None)
    assert any(config == "near" for config, _ in state.proposals) is not futile
    if futile:
        assert want["needs"] > 5  # more than the cap: that is why it stopped
        assert state_words(cell).startswith(f"inconclusive (noise: needs ~{want['needs']} seeds a side; stopped at")
    off = assess(CELLS, "base", replace(SETTINGS, futility=False), observe(scores))
    assert (off.cells["near"].verdict, off.cells["near"].futile) == ("open", False)


def test_the_cap_counts_the_baselines_seeds_still_to_come():
    """With 3 of the baseline's 5 seeds in, the cap's half-width is the one at 5 baseline seeds."""
    scores = {"base": BASE[:3], "near": [-1.9, -2.5], "far": [5.0, 6.1]}
    want = independent(scores, "near")
    cell = assess(CELLS, "base", SETTINGS, observe(scores)).cells["near"]
    assert cell.futile is bool(abs(want["gain"] + 1.0) < want["half_cap"])
    assert (
        want["half_cap"]
        < independent({**scores, "base": BASE[:3]}, "near", replace(SETTINGS, baseline_seeds=3))["half_cap"]
    )


def test_an_inconclusive_config_at_the_cap_says_the_seeds_it_would_need():
    scores = {"base": BASE, "near": [-0.2, -1.9, -0.4, -1.7, -0.9], "far": [5.0, 6.1]}
    want = independent(scores, "near")
    cell = assess(CELLS, "base", SETTINGS, observe(scores)).cells["near"]
    assert (cell.verdict, cell.futile, cell.needs_seeds) == ("inconclusive", False, want["needs"])
    assert state_words(cell) == (f"inconclusive at the cap (5 of 5 trials finished; noise: needs ~{want['needs']} "
                                 "seeds a side)")  # fmt: skip


def run(settings: EdgeSettings, means: dict[str, float], sd: float, seed: int):
    """The search run to its end, each config's scores drawn once per seed (the same draws for any settings)."""
    rng = random.Random(seed)
    draws = {c: [m + rng.gauss(0, sd) for _ in range(settings.max_seeds)] for c, m in sorted(means.items())}
    observations: list[Observation] = []
    for _ in range(300):
        state = assess(CELLS_DEEP, "b", settings, observations)
        if state.finished:
            return state, observations
        observations += [Observation(c, s, draws[c][s]) for c, s in state.proposals[:3]]
    raise AssertionError("not finished")


CELLS_DEEP = [Cell(f"d{d}", ("c",), d) for d in range(1, 7)] + [Cell("b", ("base",), 1)]


def compare(seed: int) -> tuple[int, int]:
    """Every measured verdict of a search with futility is the one its own interval gives (recomputed here), and a
    stopped config is inconclusive with fewer than max_seeds trials; on these noisy columns it trains less than
    the same search without futility on the same draws."""
    rng = random.Random(seed)
    means = {"b": 0.0, **{f"d{d}": -1.0 + (d - 3.5) * rng.uniform(0.3, 2.5) for d in range(1, 7)}}
    with_, trials_with = run(SETTINGS, means, sd=2.0, seed=seed)
    _, trials_without = run(replace(SETTINGS, futility=False), means, sd=2.0, seed=seed)
    scores: dict[str, list[float | None]] = {}
    for obs in trials_with:
        scores.setdefault("base" if obs.config_id == "b" else obs.config_id, []).append(obs.score)
    for cid, cell in with_.cells.items():
        if cell.verdict in ("holds", "breaks"):
            want = independent(scores, cid)
            lo, hi = want["gain"] - want["half"], want["gain"] + want["half"]
            assert (cell.gain_lo, cell.gain_hi) == pytest.approx((lo, hi))
            assert (cell.verdict == "holds") == (lo >= -1.0) and (cell.verdict == "breaks") == (hi < -1.0)
        if cell.futile:
            assert cell.verdict == "inconclusive" and cell.n_trials < SETTINGS.max_seeds
    return len(trials_with), len(trials_without)


@pytest.mark.parametrize("seed", range(12))
def test_futility_never_gives_a_verdict_it_only_stops_short_of_the_cap(seed):
    compare(seed)


def test_on_noisy_columns_futility_saves_trials():
    """Over the same twelve noisy columns (sd 2 tolerances), the search with futility trains fewer trials."""
    totals = [compare(seed) for seed in range(12)]
    assert sum(w for w, _ in totals) < 0.8 * sum(wo for _, wo in totals)
    assert any(w < wo for w, wo in totals)
