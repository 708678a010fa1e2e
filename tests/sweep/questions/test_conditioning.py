"""The conditioning question (sweep/questions/conditioning.py): its views against scipy on planted rows, and
what its report section says."""

import numpy as np
import pytest

# --- the views and the report, on planted rows --------------------------------------------------------------

# Planted truth, baseline depth 2 × 1 head (none); three seeds each at mean ∓ 0.2 (every sd 0.2, so each Welch
# df is exactly 4) and κ at base · e^{∓0.1}. At depth 1 × 1 head: the gap is 20 points; 16 heads recover all
# of it; the preconditioner recovers it (κ halved), the log-κ penalty 2 points (κ ÷ 1000), the orthogonality
# penalty loses 2 (κ unchanged).
PLANT = {  # (depth, heads, conditioning): (mean top-1, κ)
    (2, 1, "none"): (80.0, 1e6), (1, 1, "none"): (60.0, 1e7), (1, 4, "none"): (75.0, 1e4),
    (1, 16, "none"): (80.0, 1e3), (1, 1, "preconditioned"): (80.1, 5e6), (1, 1, "kappa_penalty"): (62.0, 1e4),
    (1, 1, "orthogonality"): (58.0, 1e7),
}  # fmt: skip


def planted_rows_of(space, seeds=(0, 1, 2), changes=None):
    from tests.helpers import trial_row

    return [
        trial_row(space, d, h, seed, mean + 0.2 * (seed - 1), baseline=(2, 1), conditioning=c,
                  kappa=kappa * np.exp(0.1 * (seed - 1)))
        for (d, h, c), (mean, kappa) in {**PLANT, **(changes or {})}.items() for seed in seeds
    ]  # fmt: skip


# Three plantings as three spaces of one results folder, imported and opened once (DuckDB's views are built
# once per connection): `cond` as PLANT says; `cond1`, one seed each; `condk`, where κ and score part ways:
# the log-κ penalty lowers κ 1000× and recovers nothing, the preconditioner leaves κ and recovers 10 points.
KAPPA_APART = {(1, 1, "kappa_penalty"): (60.0, 1e4), (1, 1, "preconditioned"): (70.0, 1e7)}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from sweep.analysis.sql import connect
    from sweep.results.importer import import_file
    from tests.helpers import write_csv

    folder = tmp_path_factory.mktemp("planted")
    rows = planted_rows_of("cond") + planted_rows_of("cond1", seeds=(1,))
    rows += planted_rows_of("condk", changes=KAPPA_APART)
    import_file(write_csv(folder / "cond.csv", rows), folder / "results")
    return connect(folder / "results")


def seeds_of(key):
    mean, kappa = PLANT[key]
    return np.array([mean - 0.2, mean, mean + 0.2]), np.log(kappa * np.exp([-0.1, 0.0, 0.1]))


def welch(a, b):
    """(a.mean − b.mean, 95% Welch interval) from scipy."""
    from scipy import stats

    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    return a.mean() - b.mean(), interval.low, interval.high


def view_rows(con, view, space="cond"):
    from sweep.markdown import query

    return {r["conditioning"]: r for r in query(con, f"FROM {view} WHERE space = ? AND depth = 1", space)}


def test_conditioning_effect_matches_scipy_on_planted_rows(planted):
    rows = view_rows(planted, "conditioning_effect")
    assert set(rows) == {"preconditioned", "kappa_penalty", "orthogonality"}
    score0, logk0 = seeds_of((1, 1, "none"))
    for kind, row in rows.items():
        score, logk = seeds_of((1, 1, kind))
        assert (row["delta"], row["delta_lo"], row["delta_hi"]) == pytest.approx(welch(score, score0), rel=1e-4)
        want = welch(logk, logk0)
        assert (row["delta_log_kappa"], row["delta_log_kappa_lo"], row["delta_log_kappa_hi"]) == pytest.approx(
            want, rel=1e-4, abs=1e-9
        )
        assert row["kappa_ratio"] == pytest.approx(np.exp(want[0]))
        assert row["kappa_moved"] == (want[1] > 0 or want[2] < 0)
        assert row["evidence"] == row["kappa_evidence"] == "welch t, 95%"
    assert rows["preconditioned"]["kappa_ratio"] == pytest.approx(0.5) and rows["preconditioned"]["kappa_moved"]
    assert rows["orthogonality"]["kappa_moved"] is False


def test_conditioning_vs_heads_matches_scipy_and_gives_each_verdict(planted):
    rows = view_rows(planted, "conditioning_vs_heads")
    base, shallow, heads = (seeds_of(k)[0] for k in [(2, 1, "none"), (1, 1, "none"), (1, 16, "none")])
    for kind, row in rows.items():
        treated = seeds_of((1, 1, kind))[0]
        assert (row["depth"], row["baseline_depth"], row["heads_num_heads"]) == (1, 2, 16)
        assert (row["gap"], row["gap_lo"], row["gap_hi"]) == pytest.approx(welch(base, shallow), rel=1e-4)
        assert (row["heads_recovery"], row["heads_recovery_lo"], row["heads_recovery_hi"]) == pytest.approx(
            welch(heads, shallow), rel=1e-4
        )
        got = (row["conditioning_recovery"], row["conditioning_recovery_lo"], row["conditioning_recovery_hi"])
        assert got == pytest.approx(welch(treated, shallow), rel=1e-4)
        assert (row["vs_baseline"], row["vs_baseline_lo"]) == pytest.approx(welch(treated, base)[:2], rel=1e-4)
        assert row["heads_verdict"] == "closes the gap"
    assert rows["preconditioned"]["verdict"] == "closes the gap" and rows["preconditioned"]["as_much_as_heads"]
    assert rows["kappa_penalty"]["verdict"] == "narrows the gap, does not close it"
    assert rows["orthogonality"]["verdict"] == "widens the gap"
    assert rows["kappa_penalty"]["kappa_ratio"] == pytest.approx(1e-3)


def conditioning_report(con, space="cond"):
    from sweep.headline import Headline
    from sweep.questions.conditioning import conditioning_section

    return conditioning_section(con, space, Headline(name="top1", mode="max", tolerance=0.5))


def test_the_report_says_whether_conditioning_reproduces_the_heads_effect(planted):
    text = conditioning_report(planted)
    assert text.startswith("\n## Is conditioning what depth was buying?")
    assert "the missing depth costs +20.0 (95% CI +19.5…+20.5)" in text
    assert "16 heads of 4) recovers +20.0 (95% CI +19.5…+20.5); verdict: closes the gap" in text
    assert "`preconditioned`, with κ ×0.5 (95% CI ×0.399…×0.627, moved), recovers +20.1 (95% CI +19.6…+20.6)" in text
    assert "`orthogonality`, with κ ×1 (95% CI ×0.797…×1.25, not shown to move), recovers -2.0" in text
    assert "`kappa_penalty`, with κ ×0.001" in text and "verdict: narrows the gap, does not close it" in text
    assert "conditioning alone reproduces the heads' effect: `preconditioned` closes the gap" in text
    assert "Confidently as much as more heads do (within the tolerance), intervention − best more heads: " in text
    assert "`preconditioned` at depth 1 +0.1 (95% CI -0.4…+0.6)" in text
    assert "Confidently less than more heads do, intervention − best more heads: `kappa_penalty` at depth 1 -18.0" in (
        text
    )


def test_the_report_on_single_seeds_says_nothing_is_significant(planted):
    text = conditioning_report(planted, "cond1")
    assert "recovers +20.1 (single seed)" in text and "κ ×0.5 (single seed)" in text
    assert "On single seeds nothing here is significant: `preconditioned` came within the tolerance" in text
    assert "(95% CI" not in text


def test_the_report_says_when_score_does_not_follow_kappa(planted):
    """κ lowered 1000× with no recovery, and a recovery with κ unmoved: both said, with the shape."""
    text = conditioning_report(planted, "condk")
    assert "Lowering κ alone bought no score here: `kappa_penalty` (depth 1: κ ×0.001) lowered κ" in text
    assert "`preconditioned` (depth 1) recovered score with κ not shown to move" in text
    assert "narrows the gap, does not close it" in text  # the preconditioner's +10 of 20


def test_the_report_on_planted_truth_draws_no_mechanism_it_cannot_see(planted):
    text = conditioning_report(planted)
    assert "Lowering κ alone" not in text and "not come through κ" not in text
