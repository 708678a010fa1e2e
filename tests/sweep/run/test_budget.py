"""The budget's arithmetic (sweep/run/budget.py) without Ray trials: what is spent, and when it stops handing out
trials. (tests/sweep/run/test_tuner_budget.py runs budgeted sweeps.)"""

from types import SimpleNamespace

import pytest
from ray.tune.search import Searcher

import sweep.run.budget
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from sweep.run.budget import DeviceHoursLimiter, PlannedTrials, recorded_device_s


def limiter(payloads, limit_s, recorded_s=0.0, recorded_rows=0, devices_held=1.0):
    sink = SimpleNamespace(device_s={}, written={})
    return DeviceHoursLimiter(
        PlannedTrials(payloads), sink, limit_s, recorded_s, recorded_rows, devices_held, len(payloads)
    ), sink


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(sweep.run.budget, "time", fake)
    return fake


def test_trials_are_handed_out_until_the_finished_ones_reach_the_budget(clock):
    budget, sink = limiter([{"n": i} for i in range(5)], limit_s=100.0, recorded_s=30.0, recorded_rows=1)
    assert budget.suggest("a") == {"payload": {"n": 0}}
    clock.now += 40.0
    budget.on_trial_complete("a")  # Tune tells the searcher before the sink has written the row
    assert budget.spent_s() == pytest.approx(70.0)  # 30 recorded + the running trial's 40 s on 1 device
    sink.device_s["a"], sink.written["a"] = 40.0, "ok"
    assert budget.spent_s() == pytest.approx(70.0)  # 30 recorded + 40 finished, nothing running
    assert budget.suggest("b") == {"payload": {"n": 1}}  # 70 < 100
    budget.on_trial_complete("b")
    sink.device_s["b"], sink.written["b"] = 35.0, "ok"
    assert budget.suggest("c") == Searcher.FINISHED  # 105 >= 100
    assert budget.suggest("d") == Searcher.FINISHED  # stopped for good
    summary = budget.summary()
    assert (summary.recorded_s, summary.run_s, summary.not_started, summary.stopped) == (30.0, 75.0, 3, True)
    assert "3 trials not started" in summary.words() and "0.02917 of --max-gpu-hours 0.02778" in summary.words()


def test_a_running_trial_counts_at_least_what_finished_trials_cost_on_average(clock):
    budget, _ = limiter([{"n": i} for i in range(4)], limit_s=100.0, recorded_s=90.0, recorded_rows=3, devices_held=2)
    assert budget.suggest("a") == {"payload": {"n": 0}}
    assert budget.spent_s() == pytest.approx(90.0 + 30.0)  # just started: the mean of 90 over 3 rows
    clock.now += 20.0
    assert budget.spent_s() == pytest.approx(90.0 + 40.0)  # 20 s on 2 devices is more than the mean
    assert budget.suggest("b") == Searcher.FINISHED


def test_without_a_budget_passed_every_planned_trial_is_handed_out(clock):
    budget, _ = limiter([{"n": i} for i in range(3)], limit_s=1e9)
    assert [budget.suggest(t) for t in "abcd"] == [{"payload": {"n": i}} for i in range(3)] + [Searcher.FINISHED]
    assert budget.summary().not_started == 0 and not budget.summary().stopped


def test_recorded_device_seconds_sum_the_spaces_rows_of_every_status(tmp_path):
    rows = [
        {"space": "a", "trial_id": "t1", "status": "ok", "device_s": 10.5},
        {"space": "a", "trial_id": "t2", "status": "error", "device_s": 2.0},
        {"space": "a", "trial_id": "t3", "status": "ok", "device_s": None},  # from before device_s
        {"space": "b", "trial_id": "t4", "status": "ok", "device_s": 100.0},
    ]
    for row in rows:
        write_atomic(
            table_from_rows("trials", [row]), tmp_path / "trials" / row["space"] / "s" / f"{row['trial_id']}.parquet"
        )
    assert recorded_device_s(tmp_path, "a") == (12.5, 2)
    assert recorded_device_s(tmp_path, "c") == (0.0, 0)
    assert recorded_device_s(tmp_path / "nothing-yet", "a") == (0.0, 0)
