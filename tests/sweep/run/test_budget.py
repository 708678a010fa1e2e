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


def finish(budget, sink, trial_id, device_s):
    """What Tune and the sink do when a trial ends: the searcher hears first, then the row is written."""
    budget.on_trial_complete(trial_id)
    sink.device_s[trial_id], sink.written[trial_id] = device_s, "ok"


def test_a_trial_whose_expected_cost_fits_exactly_starts_and_one_over_does_not(clock):
    # 30 s recorded over 1 row: a trial is expected to cost 30 s; 30 + 30 = 60 = the limit
    budget, _ = limiter([{"n": i} for i in range(3)], limit_s=60.0, recorded_s=30.0, recorded_rows=1)
    assert budget.suggest("a") == {"payload": {"n": 0}}
    over, _ = limiter([{"n": i} for i in range(3)], limit_s=59.999, recorded_s=30.0, recorded_rows=1)
    assert over.suggest("a") == Searcher.FINISHED  # nothing running: nothing can start any more
    assert over.summary().not_started == 3 and over.summary().stopped


def test_a_running_trial_holds_back_the_next_until_it_finishes_under_its_estimate(clock):
    # the ~0.0003 h trials of issue 38: 1 s each recorded, 10 s limit
    budget, sink = limiter([{"n": i} for i in range(12)], limit_s=10.0, recorded_s=4.0, recorded_rows=4)
    assert budget.suggest("a") == {"payload": {"n": 0}}  # 4 + 0 running + 1 expected <= 10
    for trial_id in "bcde":  # 4 + 1·k running + 1 <= 10 while k <= 5
        assert budget.suggest(trial_id) is not None
    assert budget.suggest("f") == {"payload": {"n": 5}}  # 4 + 5 running + 1 = 10: fits exactly
    assert budget.suggest("g") is None  # 4 + 6 + 1 > 10, trials are running: wait, not finished
    assert not budget.stopped
    clock.now += 0.5
    for trial_id in "abcdef":  # each finished in half its estimate
        finish(budget, sink, trial_id, 0.5)
    # recorded 4 + 3 = 7 over 10 rows: expected 0.7; 7 + 0.7 <= 10, and again as long as the sum stays under
    started = [trial_id for trial_id in "ghijk" if budget.suggest(trial_id) not in (None, Searcher.FINISHED)]
    assert started == ["g", "h", "i", "j"]  # 7 + 0.7·3 running + 0.7 = 9.8 <= 10; a fifth: 10.5 > 10
    assert budget.suggest("l") is None
    for trial_id in "ghij":
        finish(budget, sink, trial_id, 0.75)  # 10 s spent, nothing running, 1 s expected: 11 > 10
    assert budget.suggest("m") == Searcher.FINISHED
    assert budget.suggest("n") == Searcher.FINISHED
    summary = budget.summary()
    assert (summary.recorded_s, summary.run_s, summary.not_started, summary.stopped) == (4.0, 6.0, 2, True)
    assert "2 trials not started" in summary.words() and "0.002778 of --max-gpu-hours 0.002778" in summary.words()


def test_a_trial_is_checked_again_when_tune_asks_after_the_row_is_written(clock):
    budget, sink = limiter([{"n": i} for i in range(5)], limit_s=100.0, recorded_s=30.0, recorded_rows=1)
    assert budget.suggest("a") == {"payload": {"n": 0}}  # 30 + 30 expected <= 100
    clock.now += 45.0
    assert budget.spent_s() == pytest.approx(75.0)  # 30 recorded + the running trial's 45 s on 1 device
    assert budget.suggest("b") is None  # 75 + 30 expected > 100, and a trial runs: ask again later
    finish(budget, sink, "a", 40.0)
    assert budget.spent_s() == pytest.approx(70.0)  # 30 recorded + 40 finished, nothing running
    assert budget.suggest("b") == Searcher.FINISHED  # expected now (30 + 40) / 2 = 35: 105 > 100
    summary = budget.summary()
    assert (summary.recorded_s, summary.run_s, summary.not_started, summary.stopped) == (30.0, 40.0, 4, True)
    assert "4 trials not started" in summary.words() and "0.01944 of --max-gpu-hours 0.02778" in summary.words()


def test_a_running_trial_counts_at_least_what_finished_trials_cost_on_average(clock):
    budget, _ = limiter([{"n": i} for i in range(4)], limit_s=180.0, recorded_s=90.0, recorded_rows=3, devices_held=2)
    assert budget.suggest("a") == {"payload": {"n": 0}}
    assert budget.spent_s() == pytest.approx(90.0 + 30.0)  # just started: the mean of 90 over 3 rows
    clock.now += 20.0
    assert budget.spent_s() == pytest.approx(90.0 + 40.0)  # 20 s on 2 devices is more than the mean
    assert budget.suggest("b") == {"payload": {"n": 1}}  # 130 + 30 <= 180
    assert budget.suggest("c") is None  # 130 + 30 running + 30 > 180


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
