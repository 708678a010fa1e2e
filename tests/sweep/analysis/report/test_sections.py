"""sweep/analysis/report/sections.py: the shared sections are functions of the gathered rows (a ReportData built by
hand here, no DuckDB), checked against numbers worked out independently."""

from __future__ import annotations

import math

import pytest
from scipy.stats import spearmanr

from sweep.analysis.report.data import ReportData
from sweep.analysis.report.sections import (
    kappa_over_training,
    kappa_training_section,
    loader_bound_section,
    theory_section,
)
from sweep.headline import Headline

TOP1 = Headline(name="top1", mode="max", tolerance=0.5)


def report_data(**rows) -> ReportData:
    """A ReportData of space ``s`` with no rows but those given."""
    empty = {name: [] for name in ReportData.__dataclass_fields__ if name not in ("space", "trials", "profile")}
    return ReportData(space="s", trials=0, profile=None, **{**empty, **rows})


def whole_block(heads: int, head_dim: int, depth: int, kappa: float) -> dict:
    return {"num_heads": heads, "head_dim": head_dim, "depth": depth, "layer": None, "attention": None,
            "kappa_median": kappa}  # fmt: skip


def test_theory_puts_the_gaussian_bound_beside_kappa_averaged_over_depths():
    configs = [{"num_heads": h, "head_dim": 64 // h, "head_dim_rule": "fixed_d_model"} for h in (4, 16)]
    kappa = [whole_block(4, 16, 2, 10.0), whole_block(4, 16, 4, 30.0), whole_block(16, 4, 2, 5.0),
             {**whole_block(4, 16, 2, 999.0), "layer": 0}]  # a single layer's κ is not the block's  # fmt: skip
    section = theory_section(report_data(configs=configs, kappa=kappa, tokens_per_sample=[128]))
    gaussian = (math.sqrt(128) + 8) / (math.sqrt(128) - 8)  # D = 64 < N = 128: the Marchenko–Pastur edges
    assert f"{gaussian:.4g}" == "5.828"
    assert "| 4 | 16 | 64 | 0.5 | D < N (theorem does not apply) |  | 5.828 | 20 |" in section  # (10 + 30) / 2
    assert "| 16 | 4 | 64 | 0.5 | D < N (theorem does not apply) |  | 5.828 | 5 |" in section
    assert "`sweep kappa-theory --space s`" in section


@pytest.mark.parametrize("tokens", [[], [128, 256]])
def test_no_theory_without_one_number_of_tokens_per_sample(tokens):
    configs = [{"num_heads": 4, "head_dim": 16, "head_dim_rule": "fixed_d_model"}]
    assert theory_section(report_data(configs=configs, tokens_per_sample=tokens)) == ""


def test_kappa_over_training_counts_falls_and_ranks_early_kappa_against_the_score():
    # four configs probed at epochs 1 and 2 (κ falls in three), one probed once (left out of the pairs)
    early = {"a": 40.0, "b": 10.0, "c": 20.0, "d": 30.0}
    late = {"a": 20.0, "b": 5.0, "c": 25.0, "d": 3.0}
    epochs = [{"config_id": c, "epoch": e, "kappa_mean": k} for c in early for e, k in ((1, early[c]), (2, late[c]))]
    epochs.append({"config_id": "e", "epoch": 1, "kappa_mean": 7.0})
    scores = {"a": 70.0, "b": 90.0, "c": 80.0, "d": 80.0, "e": 60.0}  # a tie in the scores
    configs = [{"config_id": c, "score_mean": s} for c, s in scores.items()]
    training = kappa_over_training(epochs, configs)
    assert sorted(training.pairs) == sorted((early[c], scores[c]) for c in early)
    expected = spearmanr(list(early.values()), [scores[c] for c in early]).statistic
    assert training.rho == pytest.approx(expected)
    section = kappa_training_section(training, TOP1)
    assert "κ fell from its first probed epoch to its last in 3 of 4 configs" in section
    assert f"is {expected:.6g} (epochs" in section
    assert kappa_training_section(kappa_over_training(epochs[-1:], configs), TOP1) == ""  # one epoch: nothing


def test_loader_bound_counts_trials_at_or_over_a_fifth_of_their_time_waiting():
    section = loader_bound_section([0.2, 0.19, 0.75, 0.0])
    assert "2 of 4 trials spent 20% or more" in section and "(worst 75%)" in section
    assert loader_bound_section([0.19, 0.0]) == "" and loader_bound_section([]) == ""
