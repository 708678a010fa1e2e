"""The sweep's progress line."""

import io
from types import SimpleNamespace

import sweep.run.progress as progress_module
from sweep.run.progress import ProgressLine, format_seconds


def test_progress_counts_running_done_failed_and_eta():
    stream = io.StringIO()
    progress = ProgressLine(total=4, stream=stream)
    a, b = SimpleNamespace(trial_id="a"), SimpleNamespace(trial_id="b")
    progress.on_trial_start(0, [], a)
    progress.on_trial_start(0, [], b)
    assert "0/4 done · 2 running · 0 failed" in progress.line() and "ETA ?" in progress.line()
    progress.on_trial_result(0, [], a, {"record": {"status": "oom"}})
    progress.on_trial_complete(0, [], a)
    line = progress.line()
    assert "1/4 done · 1 running · 1 failed" in line and "ETA ?" not in line
    progress.on_trial_error(0, [], b)
    assert "2/4 done · 0 running · 2 failed" in progress.line()
    assert stream.getvalue().count("\n") >= 3  # not a terminal: one line per change


def test_format_seconds():
    assert [format_seconds(s) for s in (5, 75, 3725)] == ["5s", "1m15s", "1h02m"]


def test_eta_counts_the_sweeps_slots_not_the_trials_running_this_moment(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    progress = ProgressLine(total=6, stream=stream)
    a, b, c = (SimpleNamespace(trial_id=name) for name in "abc")
    progress.on_trial_start(0, [], a)
    progress.on_trial_start(0, [], b)
    now[0] = 10.0
    progress.on_trial_complete(0, [], a)  # 10 s per trial, 5 left, 2 slots: 25 s, though 1 runs now
    assert "1 running" in progress.line() and progress.line().endswith("ETA 25s")
    progress.on_trial_start(0, [], c)
    assert "2 running" in progress.line() and progress.line().endswith("ETA 25s")
    progress.on_experiment_end([])
    assert stream.getvalue().count("ETA 25s") == 2  # one line per change, the last one not repeated
