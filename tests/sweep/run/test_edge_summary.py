"""The edge search's closing lines in ``sweep run`` (sweep/run/edge.py ``EdgeSummary``): configs stopped for
futility are counted apart among the inconclusive ones."""

from sweep.analysis.edge import Cell, EdgeSettings, Observation, assess
from sweep.run.edge import EdgeSummary

SETTINGS = EdgeSettings(tolerance=1.0, mode="max", min_seeds=2, max_seeds=5, baseline_seeds=5, alpha=0.05)
CELLS = [Cell("base", ("c",), 3), Cell("near", ("c",), 1), Cell("far", ("c",), 2)]


def test_the_runs_summary_counts_the_configs_stopped_for_futility():
    scores = {"base": [0.3, -1.1, 0.8, -0.4, 0.6], "near": [-0.9, -1.4], "far": [5.0, 6.1]}
    observations = [Observation(c, seed, x) for c, xs in scores.items() for seed, x in enumerate(xs)]
    state = assess(CELLS, "base", SETTINGS, observations)
    assert state.cells["near"].futile and state.finished  # gain −1.19 against a bound of −1: nothing settles it
    lines = EdgeSummary([state], ["vit"], 9, 0, True, False, []).lines()
    assert "1 inconclusive (1 stopped for futility: noise wider than their gap to the tolerance)" in lines[0]
    off = assess(CELLS, "base", SETTINGS.__class__(**{**SETTINGS.__dict__, "futility": False}), observations)
    assert "stopped for futility" not in EdgeSummary([off], ["vit"], 9, 0, False, False, []).lines()[0]
