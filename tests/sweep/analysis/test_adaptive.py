"""Adaptive seeds (`sweep rerun --select inconclusive --budget N`): which verdicts are open, the order they
get seeds in (nearest an edge first), the baseline kept level, the budget, the seeds chosen, and the dry run
through the CLI, on planted rows whose verdicts are known (the fixture planted_adaptive, tests/conftest.py)."""

import pytest

from sweep.analysis.adaptive import next_round, open_verdicts
from sweep.cli import main


def shapes(items):
    return [(item.config.shape.depth, item.config.shape.num_heads) for item in items]


def test_open_verdicts_are_the_unsettled_ones_nearest_an_edge_first(planted_adaptive):
    plan, results, _ = planted_adaptive
    open_ = open_verdicts(plan, results)
    # heads-1 row: 4 on a single seed, 2 inconclusive: no edge, so nearest the baseline's depth 4: 4, 2, 1
    assert shapes(open_) == [(4, 1), (2, 1), (1, 1)]
    assert [item.evidence for item in open_][:1] == ["single seed"]
    assert open_[1].verdict == "inconclusive" and open_[2].n_seeds == 0


@pytest.mark.slow
def test_a_round_gives_each_open_config_a_seed_and_keeps_the_baseline_level(planted_adaptive):
    plan, results, ids = planted_adaptive
    round_ = next_round(plan, results, open_verdicts(plan, results), trial_budget=10)
    by_id = {v: k for k, v in ids.items()}
    assert [(by_id[m.config.config_id], m.seed) for m in round_] == [
        ((4, 1), 1),  # the baseline has 2 seeds, more than this config's 1: not yet
        ((4, 4), 2),  # level with 2 × 1's 2 seeds: the baseline gets one more first
        ((2, 1), 2),
        ((1, 1), 0),
    ]
    short = next_round(plan, results, open_verdicts(plan, results), trial_budget=2)
    assert [(by_id[m.config.config_id], m.seed) for m in short] == [((4, 1), 1), ((4, 4), 2)]


@pytest.mark.slow
def test_dry_run_through_the_cli_prints_the_round_and_runs_nothing(planted_adaptive, capsys):
    _, results, _ = planted_adaptive
    before = sorted(p.name for p in results.rglob("*.parquet"))
    args = ["rerun", "adaptive", "--select", "inconclusive", "--budget", "6", "--dry-run", "--results", str(results)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "3 open verdicts; this round runs 4 trials (budget left 6)" in err
    assert "seed 2  (baseline)" in err and "(inconclusive, welch t, 95%, 2 seeds)" in err
    assert sorted(p.name for p in results.rglob("*.parquet")) == before
    assert main(args) == 0 and "this round runs 4 trials" in capsys.readouterr().err  # the same plan again


def test_budget_and_seeds_options_are_checked(planted_adaptive, capsys):
    _, results, _ = planted_adaptive
    assert main(["rerun", "adaptive", "--select", "inconclusive", "--results", str(results)]) != 0
    assert "needs --budget N" in capsys.readouterr().err
    assert main(["rerun", "adaptive", "--select", "inconclusive", "--budget", "2", "--seeds", "3"]) != 0
    assert "chooses the seeds itself" in capsys.readouterr().err
    assert main(["rerun", "adaptive", "--budget", "2", "--seeds", "3"]) != 0
    assert "--budget goes with --select inconclusive" in capsys.readouterr().err
