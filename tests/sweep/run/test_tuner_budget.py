"""``sweep run --max-gpu-hours H`` end to end (sweep/run/tuner.py with sweep/run/budget.py): a budget below the
plan's total stops scheduling, what was recorded stays, a larger budget finishes the rest; and each trial's
``device_s`` against the driver's own clock around it."""

import functools
import textwrap
import time

import pytest
from ray import tune

import sweep.run.tuner
from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from tests.helpers import TINY_SPACE_BODY

# Two configs × two seeds: four trials of about a second each, one at a time, each holding 1 CPU.
SPACE = "question: how far does a budget go?\n" + TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1]")
COLUMNS = "trial_id, config_id, seed, status, top1, wall_s, devices_held, device_s, finished_at"


class TrialClock(tune.Callback):
    """The driver's seconds from each trial's start to its end: a measure independent of the worker's record."""

    def __init__(self):
        self.started, self.seconds = {}, {}

    def on_trial_start(self, iteration, trials, trial, **info):
        self.started[trial.trial_id] = time.monotonic()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.seconds[trial.trial_id] = time.monotonic() - self.started[trial.trial_id]


def rows(results) -> dict[str, dict]:
    columns, found = run_query(results, f"SELECT {COLUMNS} FROM trials")
    return {row[0]: dict(zip(columns, row, strict=True)) for row in found}


@pytest.mark.slow
def test_a_budget_stops_scheduling_and_a_larger_one_finishes_the_rest(tmp_path, local_ray, monkeypatch, capsys):
    path = tmp_path / "budgeted.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    clock = TrialClock()
    monkeypatch.setattr(
        sweep.run.tuner, "run_sweep", functools.partial(sweep.run.tuner.run_sweep, extra_callbacks=[clock])
    )
    run = ["run", str(path), "--results", str(results), "--quiet", "--max-gpu-hours"]

    # a millisecond: the first trial starts (nothing is spent yet) and spends more than that (a warm one: ~60 ms)
    outer_started = time.monotonic()
    assert main([*run, str(0.001 / 3600)]) == 0
    outer_s = time.monotonic() - outer_started
    first = rows(results)
    assert len(first) == 1, first
    (row,) = first.values()
    assert row["status"] == "ok" and row["devices_held"] == 1.0
    assert row["device_s"] == pytest.approx(row["wall_s"] * 1.0)
    # against the driver's clock: the worker's wall time is inside the driver's start-to-end of the trial
    driver_s = clock.seconds[row["trial_id"]]
    assert 0.0 < row["device_s"] <= driver_s <= outer_s
    assert driver_s - row["device_s"] < 5.0, (row["device_s"], driver_s)  # Tune's start and stop around the trial
    err = capsys.readouterr().err
    assert "stopped scheduling at the budget: 3 trials not started" in err, err

    # the budget is spent already: nothing starts, the row stays
    assert main([*run, str(0.001 / 3600)]) == 0
    assert "already recorded" in capsys.readouterr().err
    assert rows(results) == first

    # a larger budget runs exactly the three missing pairs; the first row is untouched
    assert main([*run, "1000"]) == 0
    err = capsys.readouterr().err
    assert "resuming: 1 of 4 trials already recorded" in err and "not started" not in err, err
    after = rows(results)
    assert len(after) == 4 and after[row["trial_id"]] == row
    assert {(r["config_id"], r["seed"]) for r in after.values()} == {
        (c, s) for c in {r["config_id"] for r in after.values()} for s in (0, 1)
    }
    for trial_id, later in after.items():
        assert later["status"] == "ok"
        assert 0.0 < later["device_s"] <= clock.seconds[trial_id], (later, clock.seconds[trial_id])
    spent_h = sum(r["device_s"] for r in after.values()) / 3600
    assert f"budget: {spent_h:.4g} of --max-gpu-hours 1000" in err, err


@pytest.mark.slow
def test_an_optuna_search_stops_at_its_budget_and_resumes_with_a_larger_one(tmp_path, local_ray, capsys):
    path = tmp_path / "searched.yaml"
    # two configs at the search's seed: an Optuna budget of two trials, one before the budget stops it
    path.write_text(textwrap.dedent(SPACE + "search: {kind: optuna, sampler: tpe, num_trials: 2}\n"))
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet", "--max-gpu-hours"]
    assert main([*run, str(0.001 / 3600)]) == 0
    assert "stopped scheduling at the budget: 1 trial not started" in capsys.readouterr().err
    first = rows(results)
    assert len(first) == 1 and all(r["status"] == "ok" and r["device_s"] > 0 for r in first.values())
    assert main([*run, "1000"]) == 0
    after = rows(results)
    assert len(after) == 2 and all(after[trial_id] == row for trial_id, row in first.items())
    assert len({r["config_id"] for r in after.values()}) == 2  # both configs, none trained twice


@pytest.mark.slow
def test_trials_held_back_by_running_estimates_start_when_those_finish_under_them(tmp_path, local_ray, capsys):
    """Issue 38's stop with budget left: two trials running at the recorded mean fill the budget exactly, so the
    third waits; they finish far under that estimate, the rule is checked again, and the other two start."""
    path = tmp_path / "budgeted.yaml"
    path.write_text(textwrap.dedent(SPACE.replace("max_concurrent_trials: 1", "max_concurrent_trials: 2")))
    results = tmp_path / "results"
    # one recorded trial of another config: 900 device-seconds, so a trial is expected to cost 900 s
    old = {"space": "budgeted", "trial_id": "old", "config_id": "old", "seed": 0, "status": "ok", "device_s": 900.0}
    write_atomic(table_from_rows("trials", [old]), results / "trials" / "budgeted" / "s0" / "old.parquet")
    # H = 2700 s: 900 recorded + 900 expected (1st) ≤ H; 900 + 900 running + 900 (2nd) = H exactly: starts;
    # a 3rd (3600 s) waits until the first two are written at ~1 s each, then the mean is ~300 s and all fit
    assert main(["run", str(path), "--results", str(results), "--quiet", "--max-gpu-hours", "0.75"]) == 0
    err = capsys.readouterr().err
    found = rows(results)
    assert len(found) == 5 and all(r["status"] == "ok" for r in found.values()), (found, err)
    assert "not started" not in err, err
    spent_h = sum(r["device_s"] for r in found.values()) / 3600
    assert f"budget: {spent_h:.4g} of --max-gpu-hours 0.75 device-hours spent" in err, err
