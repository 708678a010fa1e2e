"""``--max-gpu-hours H``: a sweep that stops scheduling trials at a budget of device-hours.

What the budget counts, in device-seconds (``trials.device_s``, sweep/results/schema.py: wall seconds × the GPUs a
trial held, or its CPUs when it held no GPU, so one CPU-hour of a CPU trial counts as one GPU-hour):

- ``recorded_s``: the sum of ``device_s`` over every row of the space the results held when the run started
  (every status and profile: a failed trial spent its devices too; rows from before ``device_s`` count 0),
  plus the ``device_s`` of each row this run has written since (the sink's);
- ``expected_s``: what one trial is expected to cost, the mean ``device_s`` of the trials finished so far
  (recorded or this run's; none yet: 0);
- ``running_s``: each trial running now, at the larger of its devices × its seconds so far and ``expected_s``.

The rule: **a trial starts only if recorded_s + running_s + expected_s ≤ H × 3600.** A trial whose expected cost
fits exactly starts. When it does not fit, the next trial waits; the rule is checked again each time Tune asks
for a trial, in particular whenever a running trial finishes (its row replaces its estimate, and a trial that
cost less than estimated leaves room for more). When it does not fit and nothing is running, no trial can
start any more: the run ends, having written every trial it started, and says what was spent and how many
trials were not started. ``H`` is the space's total: a later ``sweep run`` or ``sweep rerun`` with a larger ``H``
starts from what is recorded and runs what is missing (``sweep/cli/run.py`` applies the same rule before Ray
starts, with nothing running: when not even one trial fits, nothing starts).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from ray.tune.search import Searcher

from sweep.analysis.sql import connect_lazily


def recorded_device_s(results_dir, space: str) -> tuple[float, int]:
    """The sum of ``device_s`` over the space's rows in the results, and how many rows have one."""
    con, views = connect_lazily(results_dir)
    views.create(["trials"])  # the trials files only: no analysis view is read
    total, rows = con.execute(
        "SELECT coalesce(sum(device_s), 0), count(device_s) FROM trials WHERE space = ?", [space]
    ).fetchone()
    return float(total), int(rows)


@dataclass
class DeviceHoursSummary:
    """What a budgeted run spent, in device-seconds, and what it left unstarted."""

    limit_s: float
    recorded_s: float  # before the run
    run_s: float  # this run's written rows
    not_started: int  # trials of the run's plan (or Optuna budget) never started
    stopped: bool  # the budget stopped scheduling

    def words(self) -> str:
        spent_h = (self.recorded_s + self.run_s) / 3600
        head = (
            f"budget: {spent_h:.4g} of --max-gpu-hours {self.limit_s / 3600:.4g} device-hours spent "
            f"({self.recorded_s / 3600:.4g} recorded before this run, {self.run_s / 3600:.4g} by it)"
        )
        if not self.stopped:
            return head
        trials = "trial" if self.not_started == 1 else "trials"
        not_started = f"{self.not_started} {trials} not started (a larger budget runs them)"
        return f"{head}; stopped scheduling at the budget: {not_started}"


class DeviceHoursLimiter(Searcher):
    """A Tune Searcher that hands out ``searcher``'s suggestions while the budget lasts (the module docstring
    states the rule): None (ask again later) while the next trial does not fit but trials are running, and
    finished once it does not fit with none running. ``sink``: the run's ParquetSink, whose ``device_s`` holds what
    each row it wrote cost and ``written`` which trials it wrote; ``devices_held``: what a running trial holds;
    ``planned``: trials the run would start."""

    def __init__(
        self,
        searcher: Searcher,
        sink,
        limit_s: float,
        recorded_s: float,
        recorded_rows: int,
        devices_held: float,
        planned: int,
    ):
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher, self.sink = searcher, sink
        self.limit_s, self.recorded_s, self.recorded_rows = limit_s, recorded_s, recorded_rows
        self.devices_held, self.planned = devices_held, planned
        self.running: dict[str, float] = {}  # trial_id -> time.monotonic() when it was handed out (kept once written)
        self.live: set[str] = set()  # handed out, and not yet complete as far as Tune has said
        self.suggested = 0
        self.stopped = False

    def finished_s(self) -> float:
        return sum(self.sink.device_s.values())

    def expected_trial_s(self) -> float:
        """The mean device_s of the trials finished so far (recorded or this run's); 0 before any."""
        rows = self.recorded_rows + len(self.sink.device_s)
        return (self.recorded_s + self.finished_s()) / rows if rows else 0.0

    def running_s(self) -> float:
        """The trials running now, each at the larger of its devices × its seconds so far and the expected cost."""
        # A trial counts as running until the sink has written its row: Tune tells the searcher a trial is
        # complete (freeing its slot) before it tells the callbacks, and its cost must not vanish in between.
        now, expected = time.monotonic(), self.expected_trial_s()
        running = [start for trial_id, start in self.running.items() if trial_id not in self.sink.written]
        return sum(max((now - t) * self.devices_held, expected) for t in running)

    def spent_s(self) -> float:
        """Recorded (before the run and by it) plus running: what the budget has already committed."""
        return self.recorded_s + self.finished_s() + self.running_s()

    def fits(self) -> bool:
        """The rule (module docstring): one more trial starts only if spent + its expected cost <= the limit."""
        return self.spent_s() + self.expected_trial_s() <= self.limit_s

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        if self.stopped:
            return Searcher.FINISHED
        if not self.fits():
            if self.live:  # checked again when Tune next asks: a running trial may finish under its estimate
                return None
            self.stopped = True  # nothing running and not one trial fits: nothing can start any more
            return Searcher.FINISHED
        suggestion = self.searcher.suggest(trial_id)
        if suggestion not in (None, Searcher.FINISHED):
            self.running[trial_id] = time.monotonic()
            self.live.add(trial_id)
            self.suggested += 1
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.live.discard(trial_id)
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    STATE = ("limit_s", "recorded_s", "recorded_rows", "devices_held", "planned", "suggested", "stopped")

    def get_state(self) -> dict:
        """What Tune's experiment state keeps of the wrapper (the searcher inside saves itself)."""
        return {name: getattr(self, name) for name in self.STATE}

    def set_state(self, state: dict) -> None:
        self.__dict__.update({name: state[name] for name in self.STATE})

    def save(self, checkpoint_path: str) -> None:
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)

    def summary(self) -> DeviceHoursSummary:
        return DeviceHoursSummary(
            self.limit_s, self.recorded_s, self.finished_s(), self.planned - self.suggested, self.stopped
        )


class PlannedTrials(Searcher):
    """A grid's trials (the plan's payloads, in plan order) as a Searcher, so that a budget can stop handing
    them out; without a budget a grid runs as ``tune.grid_search`` (sweep/run/tuner.py)."""

    def __init__(self, payloads: list[dict]):
        super().__init__()
        self.payloads, self.next = payloads, 0

    def suggest(self, trial_id: str):
        if self.next >= len(self.payloads):
            return Searcher.FINISHED
        self.next += 1
        return {"payload": self.payloads[self.next - 1]}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pass  # a grid learns nothing from a result

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(json.dumps({"next": self.next}))

    def restore(self, checkpoint_path: str) -> None:
        self.next = json.loads(Path(checkpoint_path).read_text())["next"]
