"""A live progress line for a sweep: trials done / total, running, failed, and an ETA."""

from __future__ import annotations

import sys
import time

from ray import tune


class ProgressLine(tune.Callback):
    """Prints ``[sweep] 7/18 done · 2 running · 1 failed · ETA 1m40s`` as trials start and end.

    On a terminal the line is rewritten in place; otherwise (CI, log files) one line per change.
    The ETA is the mean wall time of finished trials × trials left ÷ the most trials seen running at once
    (the sweep's slots: between one trial's end and the next one's start fewer run, and the ETA should not
    jump for that moment).
    """

    def __init__(self, total: int, stream=None):
        self.total = total
        self.stream = stream or sys.stderr
        self.started_at: dict[str, float] = {}
        self.durations: list[float] = []
        self.done = self.failed = 0
        self.slots = 0  # the most trials running at once so far
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self._last = ""

    def on_trial_start(self, iteration, trials, trial, **info):
        self.started_at[trial.trial_id] = time.monotonic()
        self.slots = max(self.slots, len(self.started_at))
        self._print()

    def on_trial_result(self, iteration, trials, trial, result, **info):
        record = result.get("record")
        if record is not None and record.get("status") != "ok":
            self.failed += 1

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._finished(trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.failed += 1
        self._finished(trial)

    def on_experiment_end(self, trials, **info):
        self._print(final=True)

    def _finished(self, trial) -> None:
        begun = self.started_at.pop(trial.trial_id, None)
        if begun is not None:
            self.durations.append(time.monotonic() - begun)
        self.done += 1
        self._print()

    def line(self) -> str:
        running = len(self.started_at)
        left = max(self.total - self.done, 0)
        eta = "?"
        if self.durations and left:
            per_trial = sum(self.durations) / len(self.durations)
            eta = format_seconds(per_trial * left / max(self.slots, 1))
        elif not left:
            eta = "0s"
        elapsed = format_seconds(time.monotonic() - self.start)
        return (
            f"[sweep] {self.done}/{self.total} done · {running} running · {self.failed} failed · "
            f"elapsed {elapsed} · ETA {eta}"
        )

    def _print(self, final: bool = False) -> None:
        text = self.line()
        if text == self._last and not (final and self.tty):  # a log file gets the last line once
            return
        self._last = text
        if self.tty:
            self.stream.write("\r" + text.ljust(90) + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
