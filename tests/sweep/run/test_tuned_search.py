"""An Optuna search with a learning-rate search (``search: {kind: optuna}`` and ``tune:``; sweep/run/tuned_search.py),
through ``sweep run`` on Ray Tune with each trial's score planted by its shape, its rate and its seed (the trainable
replaced by :func:`planted_trial`): each config Optuna proposes runs its selection runs, then its verdict seeds at
the rate they chose; Optuna is told the mean of those verdict seeds, never a selection score; an interrupted search
resumes with nothing trained twice and the study starts from the tuned configs."""

import functools

import pytest
from ray import tune

import sweep.cli.run
import sweep.run.tuner
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.run.tuned_search import mean_values
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY, query
from tests.sweep.run.test_edge import StopAfter

SPACE = (
    "question: which shape is best once tuned?\n"
    + TINY_SPACE_BODY.replace(
        "axes: {depth: [1], num_heads: [2, 4]}", "axes: {depth: [1, 2], num_heads: [2, 4]}"
    ).replace("seeds: [0]", "seeds: [0, 1]")
    + "search: {kind: optuna, sampler: random, num_trials: 3, seed: 0}\n"
    + "tune: {lr: [1.0e-3, 1.0e-2], selection_seeds: [100]}\n"
)
BEST = {2: 1e-2, 4: 1e-3}  # each head count's best rate


def planted_score(depth: int, heads: int, lr: float, seed: int) -> float:
    """A selection seed (100) scores 50 points more than any verdict seed, so a study told a selection score would
    hold a value above 100; the other rate costs 10 points; the verdict seeds 0 and 1 differ by 2."""
    base = 60.0 + 5.0 * depth + heads - (0.0 if lr == BEST[heads] else 10.0)
    return base + (50.0 if seed == 100 else 2.0 * seed)


def planted_trial(config: dict, arrays=None, workers=None) -> None:
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


def test_the_objective_is_the_mean_over_the_verdict_seeds_that_finished():
    assert mean_values([(80.0, 1.0), (84.0, 3.0)]) == (82.0, 2.0)
    assert mean_values([(80.0,), None]) == (80.0,) and mean_values([None, None]) is None


def test_sweep_plan_prices_num_trials_configs_each_with_its_selection_and_verdict_runs(tmp_path, capsys):
    import json

    path = tmp_path / "tuned_optuna.yaml"
    path.write_text(SPACE)
    assert main(["plan", str(path), "--gpu", "h100", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 3 of the 4 configs, each 2 rates × 1 selection seed + 2 verdict seeds: 3/4 × 4 runs of every config's time
    wanted_s = sum(3 / 4 * (2 + 2) * r["est_train_s"] for r in out["trials"])
    assert out["estimate"]["tuned_gpu_hours"] == pytest.approx(wanted_s / 3600)
    assert main(["plan", str(path)]) == 0
    assert "(2 selection runs a config), for each config the optuna search trains" in capsys.readouterr().out


@pytest.mark.slow
def test_each_proposed_shape_is_tuned_and_optuna_is_told_its_verdict_mean(tmp_path, planted, monkeypatch, capsys):
    path = tmp_path / "tuned_optuna.yaml"
    path.write_text(SPACE)
    plan = make_plan(*load_space(str(path)))
    shapes = {c.config_id: (c.shape.depth, c.shape.num_heads) for c in plan.configs}
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet"]
    real = sweep.run.tuner.run_sweep
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", functools.partial(real, extra_callbacks=[StopAfter(6)]))
    assert main(run) == 130  # stopped in its second config: one config tuned and judged (4 runs), then 2 more
    first = rows_of(results)
    assert 6 <= len(first) < 12, first
    studies = []
    real_make = sweep.run.tuner.make_search

    def keep(*args):
        searcher, total = real_make(*args)
        studies.append(searcher)
        return searcher, total

    monkeypatch.setattr(sweep.run.tuner, "run_sweep", real)
    monkeypatch.setattr(sweep.run.tuner, "make_search", keep)
    capsys.readouterr()
    assert main(run) == 0
    err = capsys.readouterr().err
    assert "resuming: 1 config tuned and judged, " in err, err
    rows = rows_of(results)
    pairs = [(r["config_id"], r["seed"]) for r in rows]
    assert len(pairs) == len(set(pairs))  # nothing trained twice
    assert set((r["config_id"], r["seed"]) for r in first) <= set(pairs)
    judged = {r["recipe_config_id"] for r in rows if r["tune_phase"] == "verdict"}
    assert len(judged) == 3  # num_trials counts configs: 3 of the 4 shapes tuned
    for config_id in judged:  # every rate on the selection seed, then seeds 0 and 1 at the best rate only
        mine = [r for r in rows if r["recipe_config_id"] == config_id]
        assert sorted((r["tune_phase"], r["tune_lr"], r["seed"]) for r in mine if r["tune_phase"] == "selection") == [
            ("selection", 1e-3, 100), ("selection", 1e-2, 100)
        ]  # fmt: skip
        best = BEST[shapes[config_id][1]]
        assert sorted((r["tune_lr"], r["seed"]) for r in mine if r["tune_phase"] == "verdict") == [(best, 0), (best, 1)]
    assert {r["recipe_config_id"] for r in rows} == judged  # no half-tuned config left behind
    chosen = {r["recipe_config_id"]: r["chosen_lr"] for r in query(results, "FROM tune_choice")}
    assert all(chosen[c] == BEST[shapes[c][1]] for c in judged)  # the views choose as the searcher did
    # The study: one value per config, each the mean of its verdict seeds (never a selection run's 50 more points)
    study = studies[0].summary().study
    told = {t.user_attrs["config_id"]: t.value for t in study.trials if t.value is not None}
    assert set(told) == judged, told
    for config_id, value in told.items():
        depth, heads = shapes[config_id]
        assert value == pytest.approx(60.0 + 5.0 * depth + heads + 1.0)  # seeds 0 and 1 at the best rate: +0, +2
    assert "learning rate tuned per config:" in err and "Optuna was told each config's mean" in err, err
    assert main(run) == 0  # its budget of 3 configs is spent
    assert "its budget is spent (3 of num_trials 3 configs tuned)" in capsys.readouterr().err
