"""The rerun selections near-break, pareto and top-k on planted rows whose verdicts, front and ranking are
worked out by hand here (the planted space of tests/sweep/analysis/test_adaptive.py: tests/conftest.py)."""

import pytest

from sweep.errors import SweepError
from sweep.run.rerun import select_configs


def chosen(plan, results, how, top_k=None):
    return {(c.shape.depth, c.shape.num_heads) for c in select_configs(plan, results, how, top_k)}


def test_near_break_takes_both_sides_of_each_depth_edge_and_the_baseline(planted_adaptive):
    plan, results, _ = planted_adaptive
    # 4 heads: 2 holds, 1 breaks (the edge's two sides); 1 head: 4 on one seed (never a verdict), 2
    # inconclusive, so that row has no edge; 1 × 1 never ran. The baseline 4 × 4 is always taken.
    assert chosen(plan, results, "near-break") == {(2, 4), (1, 4), (4, 4)}


def test_pareto_takes_the_score_params_front_and_the_baseline(planted_adaptive):
    plan, results, _ = planted_adaptive
    # params = 1000·depth + heads; mean scores 4×4 90.05, 2×4 90.05, 1×4 60.05, 4×1 89.8, 2×1 87.5:
    # 2 × 4 dominates both depth-4 configs (same or higher score, fewer params); 1 × 4 and 2 × 1 are cheaper.
    assert chosen(plan, results, "pareto") == {(1, 4), (2, 1), (2, 4), (4, 4)}


@pytest.mark.slow
def test_top_k_takes_the_best_mean_scores(planted_adaptive):
    plan, results, _ = planted_adaptive
    assert chosen(plan, results, "top-k", top_k=2) == {(4, 4), (2, 4)}
    assert chosen(plan, results, "top-k", top_k=3) == {(4, 4), (2, 4), (4, 1)}
    with pytest.raises(SweepError, match="needs --top-k K"):
        select_configs(plan, results, "top-k")
