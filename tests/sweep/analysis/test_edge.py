"""The edge search's rules (sweep/analysis/edge.py): its interval against a float64 computation with numpy and
scipy, bisection that finds a planted edge while training only part of a column, implied verdicts and where
they come from, a planted violation of monotonicity, failed configs, and the invariants of any run (hypothesis)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sweep.analysis.edge import Cell, EdgeSettings, Observation, assess

SETTINGS = EdgeSettings(tolerance=2.0, mode="max", min_seeds=2, max_seeds=5, baseline_seeds=5, alpha=0.05)


def lattice(depths: list[int], heads: list[int]) -> list[Cell]:
    return [Cell(f"d{d}h{h}", (("num_heads", h),), d) for h in heads for d in depths]


def run_search(cells, baseline_id, means, sd, settings=SETTINGS, workers=3, seed=0, fails=frozenset()):
    """Replays the search: each round trains up to ``workers`` proposals; a trial's score is its config's planted
    mean plus normal noise (sd), or None for a config in ``fails``. Returns the final state and every trial."""
    rng = random.Random(seed)
    observations: list[Observation] = []
    trained: list[tuple[str, int]] = []
    for _ in range(500):
        state = assess(cells, baseline_id, settings, observations)
        if state.finished:
            return state, trained
        batch = state.proposals[:workers]
        for config_id, seed_ in batch:
            score = None if config_id in fails else means[config_id] + rng.gauss(0, sd)
            observations.append(Observation(config_id, seed_, score))
            trained.append((config_id, seed_))
    raise AssertionError("the search did not finish in 500 rounds")


def test_the_interval_is_the_pooled_bonferroni_t_interval_of_a_float64_computation():
    cells = lattice([1, 2, 4], [4])
    scores = {"d4h4": [90.0, 91.5, 89.0, 90.2, 92.0], "d1h4": [80.0, 83.5, 81.0], "d2h4": [88.0, 90.5]}
    obs = [Observation(c, i, x) for c, xs in scores.items() for i, x in enumerate(xs)]
    state = assess(cells, "d4h4", SETTINGS, obs)

    residuals = np.concatenate([np.asarray(xs) - np.mean(xs) for xs in scores.values()])
    df = sum(len(xs) - 1 for xs in scores.values())
    sp = np.sqrt(np.sum(residuals**2) / df)
    q = stats.t.ppf(1 - 0.05 / 4 / 2, df)  # L = 5 − 2 + 1 = 4 looks
    for config_id in ("d1h4", "d2h4"):
        xs, base = scores[config_id], scores["d4h4"]
        gain = np.mean(xs) - np.mean(base)
        half = q * sp * np.sqrt(1 / len(xs) + 1 / len(base))
        cell = state.cells[config_id]
        assert cell.gain == pytest.approx(gain, rel=1e-12)
        assert (cell.gain_lo, cell.gain_hi) == pytest.approx((gain - half, gain + half), rel=1e-12)
    assert state.cells["d1h4"].verdict == "breaks"  # gain −9.3, far past −2
    assert state.cells["d4h4"].verdict == "baseline"


def test_a_lower_is_better_metric_flips_the_sign_of_the_gain():
    cells = lattice([1, 2], [4])
    obs = [Observation("d2h4", i, x) for i, x in enumerate([1.0, 1.1, 0.9])]
    obs += [Observation("d1h4", i, x) for i, x in enumerate([1.5, 1.6])]
    state = assess(cells, "d2h4", EdgeSettings(tolerance=0.1, mode="min", baseline_seeds=3), obs)
    assert state.cells["d1h4"].gain == pytest.approx(-(1.55 - 1.0))
    assert state.cells["d1h4"].verdict == "breaks"


def test_bisection_finds_a_planted_edge_measuring_part_of_each_column_and_implying_the_rest():
    depths = [1, 2, 3, 4, 5, 6, 7, 8]
    cells = lattice(depths, [1, 4])
    # holds from depth 5 with heads 1, from depth 2 with heads 4; breaks are 10 points below, holds 0.5 below
    means = {c.config_id: (89.5 if c.depth >= (5 if "h1" in c.config_id else 2) else 80.0) for c in cells}
    means["d8h4"] = 90.0
    state, trained = run_search(cells, "d8h4", means, sd=0.5)

    edges = {e.column: e for e in state.edges}
    assert (edges[(("num_heads", 1),)].breaks_at_depth, edges[(("num_heads", 1),)].holds_from_depth) == (4, 5)
    assert (edges[(("num_heads", 4),)].breaks_at_depth, edges[(("num_heads", 4),)].holds_from_depth) == (1, 2)
    assert all(e.found for e in state.edges)
    measured = {c for c, _ in trained}
    assert len(measured) < len(cells) / 2  # bisection: about log2(8) + 1 configs a column
    assert len(trained) == len(set(trained))  # no (config, seed) twice
    for cell in state.cells.values():
        if cell.verdict == "baseline":
            continue
        assert cell.decided == ("holds" if means[cell.config_id] > 85 else "breaks"), cell
        if cell.implied:
            assert cell.config_id not in measured or cell.verdict not in ("holds", "breaks")
            source = state.cells[cell.implied_from]
            assert source.verdict in ("holds", "breaks", "baseline") and source.config_id in measured | {"d8h4"}
            assert (source.depth < cell.depth) == (cell.implied == "holds")
    assert not state.contradictions


def test_a_planted_violation_is_said_in_one_line_and_its_column_measured_whole():
    depths = [1, 2, 3, 4, 5, 6]
    cells = lattice(depths, [4, 16])
    means = {c.config_id: 90.0 for c in cells}
    # "deeper worst": holds from depth 2 but breaks again at 4 and deeper (too deep for the budget)
    means.update({"d1h16": 80.0, "d4h16": 80.0, "d5h16": 80.0, "d6h16": 80.0})
    state, trained = run_search(cells, "d6h4", means, sd=0.3, settings=replace(SETTINGS, check_ends=True))
    assert len(state.contradictions) == 1
    line = state.contradictions[0]
    assert line.startswith("edge search: column num_heads=16: depth ") and " breaks (gain " in line
    assert " holds (gain " in line
    assert "not monotone" in line
    column = [c for c in state.cells.values() if c.column == (("num_heads", 16),)]
    assert all(c.implied is None and c.verdict in ("holds", "breaks") for c in column)
    assert {c.config_id for c in column} <= {c for c, _ in trained}
    assert not next(e for e in state.edges if e.column == (("num_heads", 16),)).found


def test_a_config_whose_trials_all_fail_is_failed_and_implies_nothing():
    cells = lattice([1, 2, 3], [4])
    means = {"d1h4": 80.0, "d2h4": 0.0, "d3h4": 90.0}
    state, _trained = run_search(cells, "d3h4", means, sd=0.3, fails={"d2h4"})
    assert state.cells["d2h4"].verdict == "failed" and state.cells["d2h4"].n_trials == 2
    assert state.cells["d1h4"].verdict == "breaks" and state.cells["d1h4"].implied is None
    edge = state.edges[0]
    assert not edge.found and "depth 2 failed" in edge.description


def test_new_seeds_skip_recorded_and_pending_ones_and_the_baseline_comes_first():
    cells = lattice([1, 2], [4])
    obs = [Observation("d2h4", 0, 90.0), Observation("d2h4", 2, 91.0)]
    state = assess(cells, "d2h4", SETTINGS, obs, pending={("d2h4", 1)})
    assert state.proposals[:2] == [("d2h4", 3), ("d2h4", 4)]
    assert not state.finished


@settings(max_examples=40, deadline=None)
@given(
    n_depths=st.integers(2, 7),
    n_heads=st.integers(1, 3),
    edges=st.lists(st.integers(0, 7), min_size=3, max_size=3),
    sd=st.floats(0.2, 3.0),
    seed=st.integers(0, 10_000),
)
def test_any_search_ends_within_its_caps_never_repeats_a_trial_and_brackets_every_edge_it_finds(
    n_depths, n_heads, edges, sd, seed
):
    depths = list(range(1, n_depths + 1))
    heads = [1, 4, 16][:n_heads]
    cells = lattice(depths, heads)
    means = {c.config_id: 90.0 if c.depth > edges[heads.index(int(c.config_id.split("h")[1]))] else 82.0 for c in cells}
    baseline = f"d{depths[-1]}h{heads[0]}"
    means[baseline] = 90.0
    state, trained = run_search(cells, baseline, means, sd=sd, seed=seed)
    assert len(trained) == len(set(trained))
    per_config = {}
    for config_id, _ in trained:
        per_config[config_id] = per_config.get(config_id, 0) + 1
    assert per_config[baseline] == SETTINGS.baseline_seeds
    assert all(n <= SETTINGS.max_seeds for c, n in per_config.items() if c != baseline)
    for edge in state.edges:
        column = {c.depth: c for c in state.cells.values() if c.column == edge.column}
        if edge.found and edge.breaks_at_depth is not None:
            assert column[edge.breaks_at_depth].verdict == "breaks"
        if edge.found and edge.holds_from_depth is not None:
            assert column[edge.holds_from_depth].verdict in ("holds", "baseline")
    for cell in state.cells.values():
        assert cell.verdict != "open" or cell.implied  # every config ended measured, implied, or at its cap
        assert cell.verdict != "untried" or cell.implied or state.contradictions


def test_without_checking_the_ends_bisection_implies_over_a_violation_it_never_measures():
    """The assumption's cost, stated: bisection measures only inside the bracket, so "deeper worst" goes unseen."""
    depths = [1, 2, 3, 4, 5, 6]
    cells = lattice(depths, [4, 16])
    means = {c.config_id: 90.0 for c in cells}
    means.update({"d1h16": 80.0, "d6h16": 80.0})
    state, trained = run_search(cells, "d6h4", means, sd=0.3)
    assert not state.contradictions
    assert state.cells["d6h16"].implied == "holds" and "d6h16" not in {c for c, _ in trained}


def test_the_implied_ends_are_measured_once_the_edge_is_bracketed_when_asked():
    cells = lattice([1, 2, 3], [16])
    obs = [Observation("d3h16", s, 90.0 + s % 2) for s in range(5)]
    obs += [Observation("d2h16", s, 90.0 + s % 2) for s in range(2)]  # holds: d3 is the baseline, d1 untried
    plain = assess(cells, "d3h16", SETTINGS, obs)
    assert plain.proposals == [("d1h16", 0), ("d1h16", 1)]  # bisection: the run [d1]
    obs += [Observation("d1h16", s, 80.0 + s % 2) for s in range(2)]
    cells = lattice([1, 2, 3, 4], [16])
    assert assess(cells, "d3h16", SETTINGS, obs).finished  # d4 implied holds, never measured
    checked = assess(cells, "d3h16", replace(SETTINGS, check_ends=True), obs)
    assert checked.proposals == [("d4h16", 0), ("d4h16", 1)]


def test_taken_one_at_a_time_a_started_config_gets_its_other_seeds_while_the_first_trains():
    """A searcher hands Tune one trial a call: the config it started is brought up to min_seeds meanwhile."""
    cells = lattice([1, 2, 3], [4])
    obs = [Observation("d3h4", s, 90.0 + s % 2) for s in range(5)]
    first = assess(cells, "d3h4", SETTINGS, obs).proposals[0]
    assert first == ("d1h4", 0)
    assert assess(cells, "d3h4", SETTINGS, obs, pending={first}).proposals == [("d1h4", 1)]


def test_an_end_checked_after_bisection_is_measured_to_a_verdict_not_left_at_one_trial():
    cells = lattice([1, 2, 3, 4], [16])
    obs = [Observation("d3h16", s, 90.0 + s % 2) for s in range(5)]
    obs += [Observation("d2h16", s, 90.0 + s % 2) for s in range(2)]
    obs += [Observation("d1h16", s, 80.0 + s % 2) for s in range(2)]
    obs += [Observation("d4h16", 0, 88.5)]  # one seed of the end in: still implied holds, still measured
    state = assess(cells, "d3h16", replace(SETTINGS, check_ends=True), obs)
    assert state.cells["d4h16"].implied == "holds"
    assert state.proposals == [("d4h16", 1)]


def test_a_trained_config_whose_own_gain_leans_against_the_implied_verdict_gets_none():
    """The baseline (depth 1) holds, so depths 2 and 3 would be implied to hold; depth 2's own seeds sit below
    −tolerance without a verdict (gain −2.5, the bound −2): it keeps its measured state, implied nothing, and is
    measured on; untried depth 3 is still implied by the baseline."""
    cells = [Cell("b", ("c",), 1), Cell("d2", ("c",), 2), Cell("d3", ("c",), 3)]
    scores = {"b": [0.0, 1.0, -1.0, 0.5, -0.5], "d2": [-4.0, -1.0]}
    obs = [Observation(c, i, x) for c, xs in scores.items() for i, x in enumerate(xs)]
    state = assess(cells, "b", replace(SETTINGS, futility=False), obs)
    d2 = state.cells["d2"]
    assert d2.gain == pytest.approx(-2.5) and d2.gain_lo < -2.0 <= d2.gain_hi
    assert (d2.verdict, d2.implied) == ("open", None)
    assert (state.cells["d3"].implied, state.cells["d3"].implied_from) == ("holds", "b")
    assert ("d2", 2) in state.proposals  # not implied, so measured on
    above = assess(cells, "b", replace(SETTINGS, futility=False), [*obs[:5], Observation("d2", 0, -1.0),
                                                                    Observation("d2", 1, -2.0)])  # fmt: skip
    assert above.cells["d2"].implied == "holds"  # gain −1.5, above the bound: the hold is implied
