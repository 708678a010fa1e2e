"""The learning-rate search (sweep/questions/tuning.py, tuning.sql): the `tune:` section's rules, reported all at
once; the edge-of-range flag; and the protocol's point, on planted null landscapes judged by the real views: fresh
verdict seeds at the chosen rate keep false holds and breaks within 5%, while judging the very selection runs
that chose the rate (the winner's curse) does not."""

import math
import random
import textwrap

import numpy as np
import pytest

from sweep.errors import SpaceError
from sweep.questions.tuning import LrRange, Tune
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY, query

# --- the section -------------------------------------------------------------------------------------------


def test_a_range_is_log_spaced_like_numpy_and_a_list_is_sorted():
    zoology = list(np.logspace(-4, -2, 4))
    assert LrRange(low=1e-4, high=1e-2, num=4).rates() == pytest.approx(zoology, rel=5e-6)  # to 6 digits
    assert Tune(lr=[3e-3, 1e-4, 1e-3]).rates() == [1e-4, 1e-3, 3e-3]
    assert Tune(lr=[1e-3, 3e-3]).selection_seeds == [1000]


def test_every_problem_of_the_section_is_reported_at_once(tmp_path):
    path = tmp_path / "bad.yaml"
    body = TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1, 2]")
    path.write_text(
        "question: q\n" + textwrap.dedent(body) + "tune: {lr: [1.0e-6, 1.0e-3], selection_seeds: [2, 1000]}\n"
    )
    with pytest.raises(SpaceError) as caught:
        load_space(str(path))
    text = str(caught.value)
    assert "tune.selection_seeds" in text and "disjoint" in text and "[2]" in text, text
    assert "tune.lr" in text and "above train.min_lr" in text and "1e-06" in text, text


def test_a_malformed_range_says_the_rule_and_the_values(tmp_path):
    path = tmp_path / "bad.yaml"
    tune = "tune: {lr: {low: 1.0e-2, high: 1.0e-4, num: 4}}\n"
    path.write_text("question: q\n" + textwrap.dedent(TINY_SPACE_BODY) + tune)
    with pytest.raises(SpaceError) as caught:
        load_space(str(path))
    assert "`low < high` must hold, but got (low=0.01, high=0.0001)" in str(caught.value)


# --- rows as a tuned sweep records them -----------------------------------------------------------------------

TOLERANCE = 2.0
RATES = [1e-4, 3e-4, 1e-3, 3e-3]


def row(space, config, lr, seed, score, phase, baseline=False) -> dict:
    """One trials row of a tuned sweep: ``config`` names the shape (its recipe_config_id), ``phase`` the row's."""
    config_id = f"{space}-{config}-{lr:g}" + ("-tuned" if phase == "verdict" else "")
    return {"space": space, "trial_id": f"{config_id}-{seed}", "config_id": config_id, "seed": seed,
            "status": "ok", "metric": "accuracy", "metric_mode": "max", "score": score, "accuracy": score,
            "is_baseline": baseline, "family": "gpt2", "depth": 2 if baseline else 1, "num_heads": 1, "head_dim": 64,
            "embed_dim": 64, "mlp_dim": 256, "num_kv_heads": 1, "tune_phase": phase, "tune_lr": lr,
            "recipe_config_id": f"{space}-{config}", "params": 100_000, "train_samples_per_s": 100.0,
            "infer_samples_per_s": 300.0, "peak_mem_bytes": 10**6, "kappa_mean": 10.0}  # fmt: skip


def write(results, name: str, rows: list[dict]) -> None:
    write_atomic(table_from_rows("trials", rows), results / "trials" / "planted" / "s0" / f"{name}.parquet")


def test_a_rate_chosen_at_either_end_of_the_range_is_flagged(tmp_path):
    curves = {"rising": [50, 60, 70, 80], "peaked": [50, 90, 70, 40], "falling": [95, 80, 60, 50],
              "saturated": [100, 100, 55, 50]}  # fmt: skip
    rows = [row("edges", name, lr, 1000, score, "selection", baseline=name == "peaked")
            for name, scores in curves.items() for lr, score in zip(RATES, scores, strict=True)]  # fmt: skip
    write(tmp_path, "edges", rows)
    found = {r["recipe_config_id"]: r for r in query(tmp_path, "SELECT * FROM tune_choice")}
    assert found["edges-rising"]["chosen_lr"] == 3e-3
    assert found["edges-rising"]["edge_flag"] == "best at the largest rate tried: widen the range"
    assert found["edges-falling"]["chosen_lr"] == 1e-4
    assert found["edges-falling"]["edge_flag"] == "best at the smallest rate tried: widen the range"
    assert found["edges-peaked"]["chosen_lr"] == 3e-4 and found["edges-peaked"]["edge"] is None
    # a tie at the top is broken by the smaller rate, and is no sign that the range is too narrow
    assert found["edges-saturated"]["chosen_lr"] == 1e-4 and found["edges-saturated"]["rates_tied"] == 2
    assert found["edges-saturated"]["edge_flag"] is None
    curve = query(tmp_path, "SELECT lr, score_mean FROM lr_curve WHERE recipe_config_id = 'edges-peaked' ORDER BY lr")
    assert [(r["lr"], r["score_mean"]) for r in curve] == list(zip(RATES, [50.0, 90.0, 70.0, 40.0], strict=True))
    # selection rows are no verdict's: configs (and so vs_baseline) holds none of them
    assert query(tmp_path, "SELECT count(*) AS n FROM configs")[0]["n"] == 0


def test_a_failed_selection_run_ranks_its_rate_last(tmp_path):
    rows = [row("fail", "c", lr, 1000, score, "selection") for lr, score in zip(RATES, [50, 60, 70, 80], strict=True)]
    rows[-1] |= {"status": "diverged", "score": None}
    write(tmp_path, "fail", rows)
    assert query(tmp_path, "SELECT chosen_lr FROM tune_choice")[0]["chosen_lr"] == 1e-3


# --- the protocol on null landscapes ----------------------------------------------------------------------------

LANDSCAPES = 200
# As many selection seeds as verdict seeds, so the two arms differ only in whether the runs judged chose the rate.
# Four, not three: at three seeds Welch's interval on bimodal seeds alone (no selection) calls 5-7% of these nulls
# (4/4 good against 0/4 is rarer than 3/3 against 0/3); measured on this landscape with the real views.
SELECTION_SEEDS = 4
VERDICT_SEEDS = 4


GOOD, BAD = 100.0 - 0.5 * math.sqrt(2 / math.pi), 55.0  # the two modes' means (100 − |N(0, 0.5)|; 55 + N(0, 2))
P_BASE = 0.6  # the baseline forms the circuit in 60% of its seeds, at every rate
P_CONFIG = P_BASE - TOLERANCE / (GOOD - BAD)  # the config a little less often: its true mean is exactly base − tol


def bimodal(rng: random.Random, p_good: float) -> float:
    """One seed of an MQAR-like run: the circuit forms (about 100) with probability ``p_good``, else not (about
    55); shapes differ in how often it forms, as MQAR's do (the seeds 100, 75.5, 55.5 of one config). Selecting
    the rate whose runs all formed it shrinks their spread: judged on those runs, two such sides look alike
    within a narrow interval ("holds") though the config's true mean is the bound."""
    return 100.0 - abs(rng.gauss(0, 0.5)) if rng.random() < p_good else BAD + rng.gauss(0, 2.0)


SIDES = {"base": P_BASE, "cfg": P_CONFIG}


def null_rows(rng, space: str) -> list[dict]:
    """Selection rows of a landscape with no learning-rate effect and the config's true mean exactly on the
    verdict's bound (baseline − tolerance) at every rate: neither "holds" nor "breaks" is true of it."""
    return [row(space, name, lr, 1000 + s, bimodal(rng, p), "selection", baseline=name == "base")
            for name, p in SIDES.items() for lr in RATES for s in range(SELECTION_SEEDS)]  # fmt: skip


def false_calls(results) -> float:
    """The share of landscapes whose config was judged holds or breaks (vs_baseline, the real verdict views)."""
    verdicts = query(results, "SELECT verdict FROM vs_baseline WHERE NOT is_baseline", tolerance=TOLERANCE)
    assert len(verdicts) == LANDSCAPES
    return sum(v["verdict"] in ("holds", "breaks") for v in verdicts) / LANDSCAPES


@pytest.mark.slow
def test_fresh_verdict_seeds_keep_false_calls_within_5_percent_where_the_selection_runs_do_not(tmp_path):
    rng = random.Random(20261205)
    tuned, reused = tmp_path / "tuned", tmp_path / "reused"
    selection = [r for i in range(LANDSCAPES) for r in null_rows(rng, f"null{i}")]
    write(tuned, "selection", selection)
    chosen = {r["recipe_config_id"]: r["chosen_lr"] for r in query(tuned, "SELECT * FROM tune_choice")}
    assert len(chosen) == 2 * LANDSCAPES
    # the protocol: fresh seeds at each config's chosen rate (the landscape is the same at every rate)
    verdicts = [row(key.split("-")[0], key.split("-")[1], lr, s, bimodal(rng, SIDES[key.split("-")[1]]),
                    "verdict", baseline=key.endswith("base"))
                for key, lr in chosen.items() for s in range(VERDICT_SEEDS)]  # fmt: skip
    write(tuned, "verdicts", verdicts)
    # the winner's curse: the selection runs at the chosen rate, judged as if they were verdict seeds
    picked = [r | {"tune_phase": "verdict", "config_id": r["config_id"] + "-reused"} for r in selection
              if r["tune_lr"] == chosen[r["recipe_config_id"]]]  # fmt: skip
    write(reused, "picked", picked)
    fresh_rate, reused_rate = false_calls(tuned), false_calls(reused)
    assert fresh_rate <= 0.05, fresh_rate
    assert reused_rate > 0.05, reused_rate
    print(f"false holds+breaks: fresh verdict seeds {fresh_rate:.1%}, the selection runs reused {reused_rate:.1%}")


# --- said: the verdict words and the report -----------------------------------------------------------------------


def said_rows(space: str) -> list[dict]:
    """A tuned sweep beside an untuned one: the baseline best at 1e-3; config "tuned" breaks at the recipe's 1e-4
    and holds at its own best, 1e-3; config "broken" is 10 points down at every rate."""
    curves = {"base": [80, 90, 95, 60], "tuned": [70, 85, 95, 60], "broken": [70, 80, 85, 50]}
    rows = [row(space, name, lr, 1000, score, "selection", baseline=name == "base")
            for name, scores in curves.items() for lr, score in zip(RATES, scores, strict=True)]  # fmt: skip
    best = {"base": (1e-3, 95.0), "tuned": (1e-3, 95.0), "broken": (1e-3, 85.0)}
    for name, (lr, mean) in best.items():
        rows += [row(space, name, lr, s, mean + 0.1 * (s - 1), "verdict", baseline=name == "base") for s in range(3)]
        untuned = {"base": 80.0, "tuned": 70.0, "broken": 70.0}[name]  # an untuned sweep at the recipe's 1e-4
        rows += [
            row(space, name, 1e-4, s, untuned + 0.1 * (s - 1), None, baseline=name == "base")
            | {"config_id": f"{space}-{name}", "tune_lr": None, "recipe_config_id": None}
            for s in range(3)
        ]
    for depth, name in enumerate(curves, start=1):  # distinct shapes, so the figure's labels tell them apart
        for r in rows:
            if r["config_id"].startswith(f"{space}-{name}"):
                r["num_heads"] = depth
    return rows


@pytest.mark.slow
def test_the_verdict_words_say_whether_a_break_survives_tuning_and_the_report_draws_the_curves(tmp_path):
    from sweep.analysis.report.write import write_report
    from sweep.results.sink import record_space

    write(tmp_path, "said", said_rows("said"))
    tune = '{"tuning": {"lr": [0.0001, 0.0003, 0.001, 0.003], "selection_seeds": [1000], "recipe_lr": 0.0001}}'
    record_space(tmp_path, "said", "s0", "tuned", "q", "accuracy", "max", TOLERANCE, tune)
    words = {r["recipe_config_id"]: r for r in query(tmp_path, "SELECT * FROM tune_choice")}
    assert words["said-broken"]["tuned_words"] == "breaks at every rate tried; best 0.001, Δ -10.0"
    assert words["said-tuned"]["tuned_words"] == "holds once tuned: 0.0001 → 0.001"
    assert words["said-tuned"]["untuned_verdict"] == "breaks" and words["said-tuned"]["edge_flag"] is None
    assert words["said-base"]["tuned_words"] == "baseline (best 0.001)"
    alone = tmp_path / "alone"  # the tuned sweep without the untuned one: its words do not claim what untuned did
    write(alone, "said", [r for r in said_rows("said") if r["tune_phase"] is not None])
    record_space(alone, "said", "s0", "tuned", "q", "accuracy", "max", TOLERANCE, tune)
    found = {r["recipe_config_id"]: r["tuned_words"] for r in query(alone, "SELECT * FROM tune_choice")}
    assert found["said-tuned"] == "holds tuned, at 0.001 (untuned, at the recipe's 0.0001, not in these results)"
    # each arm against its own baseline: the untuned configs against the untuned baseline
    arms = query(tmp_path, "SELECT config_id, lr_arm, verdict FROM vs_baseline ORDER BY config_id")
    assert {(r["config_id"], r["lr_arm"], r["verdict"]) for r in arms} == {
        ("said-base", "untuned", "baseline"), ("said-broken", "untuned", "breaks"),
        ("said-tuned", "untuned", "breaks"), ("said-base-0.001-tuned", "tuned", "baseline"),
        ("said-broken-0.001-tuned", "tuned", "breaks"), ("said-tuned-0.001-tuned", "tuned", "holds"),
    }  # fmt: skip
    index = write_report("said", tmp_path, tmp_path / "report")
    text = index.read_text()
    assert "## Learning rate, tuned per config" in text and "holds once tuned: 0.0001 → 0.001" in text
    assert (tmp_path / "report" / "lr_curve.png").stat().st_size > 0
