"""The edge search with a learning-rate search (``search: {kind: edge}`` and ``tune:``; sweep/run/edge.py), through
``sweep run`` on Ray Tune with each trial's score planted by its shape and its rate (the trainable replaced by
:func:`planted_trial`): a config the search starts runs its selection runs at every rate first, then its verdict
seeds at the rate they chose, and the search's core sees only the verdict rows; an interrupted search resumes with
no (config, rate, seed) trained twice; the trial cap and ``--max-gpu-hours`` count the selection runs too."""

import functools

import pytest
from ray import tune

import sweep.cli.run
import sweep.run.tuner
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.plan.tuning import choose_rate
from sweep.space.loader import load_space
from tests.helpers import query
from tests.sweep.run.test_edge import MONOTONE, SPACE, StopAfter

RATES = (1e-3, 1e-2)
TUNED = SPACE.replace("SEARCH", "{kind: edge}") + "tune: {lr: [1.0e-3, 1.0e-2], selection_seeds: [100]}\n"
BEST = {2: 1e-2, 4: 1e-3}  # each head count's best rate: a config at its other rate scores 10 points less


def planted_score(depth: int, heads: int, lr: float, seed: int) -> float:
    """The monotone landscape of test_edge at each config's best rate, 10 points less at the other; seed noise
    −0.3, 0 or +0.3."""
    return MONOTONE[(depth, heads)] - (0.0 if lr == BEST[heads] else 10.0) + 0.3 * (seed % 3 - 1)


def planted_trial(config: dict, arrays=None, workers=None) -> None:
    """``tune_trial`` as the sink sees it: the planted score at the rate the worker would train at, 1 s of wall."""
    payload = config["payload"]
    shape, lr = payload["shape"], payload["trial_config"]["train"]["lr"]
    score = planted_score(shape["depth"], shape["num_heads"], lr, payload["seed"])
    record = {"status": "ok", "top1": score, "wall_s": 1.0, "epochs": [], "kappa": []}
    tune.report({"status": "ok", "top1": score, "record": record})


@pytest.fixture
def planted(local_ray, monkeypatch):
    monkeypatch.setattr(sweep.run.tuner, "tune_trial", planted_trial)
    monkeypatch.setattr(sweep.cli.run, "print_answer", lambda args: None)


def rows_of(results) -> list[dict]:
    return query(results, "SELECT config_id, recipe_config_id, seed, tune_phase, tune_lr, depth, num_heads FROM trials")


def test_the_rule_is_the_views_fewest_failures_then_best_mean_then_smaller_rate():
    assert choose_rate({1e-3: [80.0, 90.0], 1e-2: [86.0, 86.0]}, "max") == 1e-2
    assert choose_rate({1e-3: [80.0, 90.0], 1e-2: [86.0, 86.0]}, "min") == 1e-3
    assert choose_rate({1e-3: [50.0, None], 1e-2: [40.0, 41.0]}, "max") == 1e-2  # a failed run ranks its rate last
    assert choose_rate({1e-3: [70.0], 1e-2: [70.0]}, "max") == 1e-3  # a tie: the smaller rate
    assert choose_rate({1e-3: [None], 1e-2: [None]}, "max") == 1e-3


def test_sweep_plan_counts_each_trained_configs_selection_runs(tmp_path, capsys):
    """The typical and worst cases and the full grid at 3 seeds, each with 2 selection runs (2 rates × 1 seed) for
    every config it trains; the tuned GPU-hours are the typical case's trials plus those runs, at each config's
    estimated time."""
    import json

    from sweep.analysis.edge_lattice import expected

    path = tmp_path / "tuned_edge.yaml"
    path.write_text(TUNED)
    assert main(["plan", str(path), "--gpu", "h100", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cases = expected(make_plan(*load_space(str(path))))
    for case in ("typical", "worst", "grid"):
        assert out["edge_search"][case]["tuned_trials"] == cases[case].total + 2 * len(cases[case].trials)
    train_s = {r["config_id"]: r["est_train_s"] for r in out["trials"]}
    typical = cases["typical"].trials
    wanted_s = sum((count + 2) * train_s[config_id] for config_id, count in typical.items())
    assert out["estimate"]["tuned_gpu_hours"] == pytest.approx(wanted_s / 3600)
    assert main(["plan", str(path)]) == 0
    typical = out["edge_search"]["typical"]["tuned_trials"]
    line = f"learning rate tuned: each config it trains first runs its 2 rates × 1 selection seed: typical {typical} "
    assert line in capsys.readouterr().out


@pytest.mark.slow
def test_an_interrupted_tuned_edge_search_selects_then_judges_each_config_it_starts_and_repeats_nothing(
    tmp_path, planted, monkeypatch, capsys
):
    path = tmp_path / "tuned_edge.yaml"
    path.write_text(TUNED)
    plan = make_plan(*load_space(str(path)))
    shapes = {c.config_id: (c.shape.depth, c.shape.num_heads) for c in plan.configs}
    ids = {shape: config_id for config_id, shape in shapes.items()}
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet"]
    real = sweep.run.tuner.run_sweep
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", functools.partial(real, extra_callbacks=[StopAfter(5)]))
    assert main(run) == 130
    first = rows_of(results)
    # One trial at a time: the baseline's two selection runs, then at once its verdict seeds (no other config's
    # selection runs before them: a config's verdicts start as soon as its own selection ends)
    assert (
        sorted((r["recipe_config_id"], r["tune_phase"]) for r in first)
        == [(ids[(4, 4)], "selection")] * 2 + [(ids[(4, 4)], "verdict")] * 3
    ), first
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", real)
    capsys.readouterr()
    assert main(run) == 0
    err = capsys.readouterr().err
    assert "resuming: 3 recorded trials and 2 selection runs of its 8 configs start it" in err, err
    rows = rows_of(results)
    trained = [(r["config_id"], r["seed"]) for r in rows]
    assert len(trained) == len(set(trained))  # nothing twice: a (config, rate, seed) has one id and seed
    assert {(r["recipe_config_id"], r["tune_lr"], r["seed"]) for r in rows} == {
        (r["recipe_config_id"], r["tune_lr"], r["seed"]) for r in rows
    } and len({(r["recipe_config_id"], r["tune_lr"], r["seed"], r["tune_phase"]) for r in rows}) == len(rows)
    selection = [r for r in rows if r["tune_phase"] == "selection"]
    verdicts = [r for r in rows if r["tune_phase"] == "verdict"]
    # Every config the search judged ran every rate on its selection seed, and its verdicts only at the best rate
    judged = {r["recipe_config_id"] for r in verdicts}
    for config_id in judged:
        assert sorted(r["tune_lr"] for r in selection if r["recipe_config_id"] == config_id) == list(RATES)
        assert {r["seed"] for r in selection if r["recipe_config_id"] == config_id} == {100}
        assert {r["tune_lr"] for r in verdicts if r["recipe_config_id"] == config_id} == {BEST[shapes[config_id][1]]}
    chosen = {r["recipe_config_id"]: r["chosen_lr"] for r in query(results, "FROM tune_choice")}
    assert all(chosen[config_id] == BEST[shapes[config_id][1]] for config_id in judged)  # the views agree
    # The edge core saw the verdict rows only: the bisection test_edge traces by hand, on verdict seeds
    # (then check_ends, on by default, measures heads 2's implied ends, depths 1 and 4)
    configs_wanted = [(2, 4), (1, 4), (2, 2), (3, 2), (1, 2), (4, 2)]
    wanted = [(4, 4, s) for s in range(5)] + [(d, h, s) for d, h in configs_wanted for s in (0, 1)]
    assert sorted((r["recipe_config_id"], r["seed"]) for r in verdicts) == sorted(
        (ids[(d, h)], s) for d, h, s in wanted
    )
    assert {r["recipe_config_id"] for r in selection} == judged  # implied configs are never tuned nor trained
    assert "edge search: 8 configs: 7 measured (4 hold, the baseline included; 3 break), 1 implied" in err, err
    assert (
        "learning rate tuned per config: 14 selection runs (2 recorded before this run, 12 by it)" in err
        and "a rate chosen for 7 of 8 configs" in err
    )
    verdict_words = query(results, "SELECT config_id, verdict FROM edge_verdicts WHERE verdict = 'breaks'")
    assert {r["config_id"] for r in verdict_words} == {ids[(1, 4)], ids[(2, 2)], ids[(1, 2)]}
    assert main(run) == 0  # a third run: every config settled, nothing trains
    assert "every config is settled" in capsys.readouterr().err and len(rows_of(results)) == len(rows)


@pytest.mark.slow
def test_the_trial_cap_and_the_device_hours_budget_count_the_selection_runs(tmp_path, planted, capsys):
    path = tmp_path / "tuned_edge.yaml"
    path.write_text(TUNED)
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet"]
    assert main([*run, "--trials", "3"]) == 0
    rows = rows_of(results)
    assert sorted(r["tune_phase"] for r in rows) == ["selection", "selection", "verdict"], rows  # both count
    assert "stopped at the trial cap" in capsys.readouterr().err
    # 3 device-seconds recorded, 1 expected a trial: 2 more fit 5.5 device-seconds, a 6th would not
    assert main([*run, "--max-gpu-hours", str(5.5 / 3600)]) == 0
    err = capsys.readouterr().err
    rows = rows_of(results)
    assert len(rows) == 5 and "stopped scheduling at the budget" in err, err
    assert len({(r["config_id"], r["seed"]) for r in rows}) == 5
