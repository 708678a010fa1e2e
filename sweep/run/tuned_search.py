"""An Optuna search with a learning-rate search per config (``search: {kind: optuna}`` beside ``tune:``;
``sweep/questions/tuning.py`` states the protocol): each shape Optuna proposes is tuned as a grid's config is, and
Optuna is told the tuned verdict score, never a selection run's.

- :class:`TunedSearch` wraps the resumed Optuna search (``sweep/run/search.py``'s ``ResumedSearch``): each Optuna
  trial is one *config*. When Optuna proposes a config, its selection runs (every rate × every selection seed) are
  handed to Tune, each a trial of its own; once they are all recorded the config's rate is chosen (``choose_rate``,
  the rule of view ``tune_choice``) and its verdict seeds (the space's ``seeds``) run at that rate; once those are
  all recorded, Optuna is told the config's objectives as the mean over its verdict seeds that finished (FAIL when
  none did). Several configs are tuned at once when slots allow.
- ``num_trials`` and ``--trials N`` count configs tuned, not Tune trials.
- Resuming (:func:`tuned_search_record`): the study starts from every config whose verdict seeds are all recorded
  at its chosen rate, told their mean; a config with some runs recorded but not all is proposed again first
  (enqueued), and only its missing runs train. No (config, rate, seed) trains twice.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path

from ray.tune.search import Searcher

from sweep.analysis.sql import connect_lazily
from sweep.plan.plan import Plan, trial_payload
from sweep.plan.tuning import at_rate
from sweep.questions.tuning import SELECTION, VERDICT
from sweep.run.rerun import Outcome, SearchRecord, objective_values
from sweep.run.tuning import RateBook, SelectionRun, tuned_ids
from workers.metrics import score_of
from workers.vocabulary import RECORDED_STATUSES, TrialStatus


@dataclass
class TunedRecord:
    """What the results hold of a tuned Optuna search: ``search``, the study's record (one outcome per config whose
    verdict seeds are all recorded at its chosen rate: their mean; ``trained``: how many such configs), each
    config's selection runs, and its verdict seeds' objective values (None: failed) at its chosen rate."""

    search: SearchRecord
    selection: list[SelectionRun] = field(default_factory=list)
    verdicts: dict[str, dict[int, tuple[float, ...] | None]] = field(default_factory=dict)

    def remaining(self, num_trials: int) -> int:
        """Configs left to tune of a budget of ``num_trials`` configs."""
        return self.search.remaining(num_trials)


def recorded_runs(results_dir, plan: Plan) -> list[tuple]:
    """(config_id, seed, status, objective values...) of the space's recorded rows, one per (config_id, seed) (an
    ``ok`` row first, then the latest), in the order they finished."""
    con, views = connect_lazily(results_dir)
    views.create(["trials"])
    statuses = ", ".join(f"'{s}'" for s in RECORDED_STATUSES)
    values = ", ".join(f'"{o.metric}"' for o in plan.space.search.objectives)
    return con.execute(
        f"""SELECT config_id, seed, status, score, {values} FROM trials WHERE space = $space AND status IN ({statuses})
            QUALIFY row_number() OVER (PARTITION BY config_id, seed
                                       ORDER BY status = 'ok' DESC, finished_at DESC NULLS LAST) = 1
            ORDER BY finished_at NULLS FIRST, config_id, seed""",
        {"space": plan.space_name},
    ).fetchall()


def tuned_search_record(results_dir, plan: Plan) -> TunedRecord:
    """The :class:`TunedRecord` of ``plan`` in the results (``sweep run`` resumes from it)."""
    selection_ids, verdict_ids = tuned_ids(plan)
    selection_seeds, seeds = set(plan.space.tune.selection_seeds), set(plan.seeds)
    record = TunedRecord(SearchRecord(plan.seeds[0]))
    at: dict[str, dict[int, tuple]] = {}  # verdict id → seed → values, until the chosen rates are known
    last: dict[str, int] = {}  # config_id → the place of its last verdict row (the rows come in finishing order)
    for place, (config_id, seed, status, score, *values) in enumerate(recorded_runs(results_dir, plan)):
        if config_id in selection_ids and seed in selection_seeds:
            score = float(score) if status == TrialStatus.OK and score is not None and math.isfinite(score) else None
            record.selection.append(SelectionRun(*selection_ids[config_id], int(seed), score))
        elif config_id in verdict_ids and seed in seeds:
            at.setdefault(config_id, {})[int(seed)] = objective_values(status, values)
            last[verdict_ids[config_id]] = place
    book = RateBook(plan, record.selection)
    for config in plan.configs:
        lr = book.chosen(config.config_id)
        if lr is not None:
            record.verdicts[config.config_id] = dict(at.get(at_rate(plan, config, lr, VERDICT).config_id, {}))
    for config_id in sorted(record.verdicts, key=lambda c: last.get(c, -1)):  # as each config's last seed finished
        runs = record.verdicts[config_id]
        if set(runs) >= seeds:
            mean = mean_values([runs[seed] for seed in plan.seeds])
            record.search.outcomes[config_id] = Outcome(TrialStatus.OK if mean else "failed", mean)
    record.search.trained = len(record.search.outcomes)
    return record


def runs_per_config(plan: Plan) -> int:
    """The runs one config costs: every rate × every selection seed, then every verdict seed."""
    tune = plan.space.tune
    return len(tune.rates()) * len(tune.selection_seeds) + len(plan.seeds)


def mean_values(runs: list[tuple[float, ...] | None]) -> tuple[float, ...] | None:
    """The mean of each objective over the runs that finished with values (None: none did)."""
    finished = [run for run in runs if run is not None]
    if not finished:
        return None
    return tuple(sum(values) / len(finished) for values in zip(*finished, strict=True))


class TunedSearch(Searcher):
    """Tune's searcher for an Optuna search with ``tune:`` (the module docstring says what it does). ``inner``: the
    resumed Optuna search; ``configs``: the most configs it proposes in this run."""

    def __init__(self, inner, plan: Plan, record: TunedRecord, configs: int):
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner, self.plan, self.cap = inner, plan, configs
        self.book = RateBook(plan, record.selection)
        self.verdicts = {config_id: dict(runs) for config_id, runs in record.verdicts.items()}
        self.configs = {c.config_id: c for c in plan.configs}
        self.groups: dict[str, str] = {}  # config_id → the Optuna trial it answers, while being tuned
        self.pending: dict[str, tuple] = {}  # Tune trial id → (SELECTION, config_id, lr, seed) or (VERDICT, ...)
        self.proposed, self.asked, self.inner_done = 0, 0, False
        self.runs = {SELECTION: 0, VERDICT: 0}  # trained in this run
        self.enqueue_partial(record)

    def enqueue_partial(self, record: TunedRecord) -> None:
        """Configs with some runs recorded but no outcome: proposed first, so their runs are not left half done."""
        started = {run.config_id for run in record.selection} | set(record.verdicts)
        for config_id in sorted(started - set(record.search.outcomes)):
            params = self.inner._space.params_of(self.configs[config_id])
            if params is not None:
                self.inner._ot_study.enqueue_trial(params[0])

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        for config_id in list(self.groups):
            payload = self.next_run(trial_id, config_id)
            if payload is not None:
                return {"payload": payload}
        while not self.inner_done and self.proposed < self.cap:
            self.asked += 1
            suggestion = self.inner.suggest(f"tuned-{self.asked}")
            if suggestion is None:
                break
            if suggestion == Searcher.FINISHED:
                self.inner_done = True
                break
            config_id = suggestion["payload"]["config_id"]
            self.groups[config_id] = f"tuned-{self.asked}"
            self.proposed += 1
            payload = self.next_run(trial_id, config_id)
            if payload is not None:
                return {"payload": payload}
            self.settle(config_id)  # every run of it is recorded already
        return None if self.pending or self.groups else Searcher.FINISHED

    def next_run(self, trial_id: str, config_id: str) -> dict | None:
        """The payload of the config's next run to train (None: every one is recorded or training): a selection
        run, or once its rate is chosen, a verdict seed at that rate."""
        config = self.configs[config_id]
        training = {entry[2:] for entry in self.pending.values() if entry[1] == config_id}
        lr = self.book.chosen(config_id)
        if lr is None:
            runs = [run for run in self.book.missing(config_id) if run not in training]
            if not runs:
                return None
            self.pending[trial_id] = (SELECTION, config_id, *runs[0])
            return trial_payload(self.plan, at_rate(self.plan, config, runs[0][0], SELECTION), runs[0][1])
        done = self.verdicts.setdefault(config_id, {})
        seeds = [s for s in self.plan.seeds if s not in done and (lr, s) not in training]
        if not seeds:
            return None
        self.pending[trial_id] = (VERDICT, config_id, lr, seeds[0])
        return trial_payload(self.plan, at_rate(self.plan, config, lr, VERDICT), seeds[0])

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        entry = self.pending.pop(trial_id, None)
        if entry is None:
            return
        phase, config_id, lr, seed = entry
        self.runs[phase] += 1
        if phase == SELECTION:
            self.book.add(config_id, lr, seed, None if error else headline(result, self.plan.space.metric.name))
            return
        self.verdicts.setdefault(config_id, {})[seed] = None if error else told(self.inner, result)
        self.settle(config_id)

    def settle(self, config_id: str) -> None:
        """Tell Optuna the config's mean over its verdict seeds, once they are all in."""
        runs = self.verdicts.get(config_id, {})
        if config_id not in self.groups or not set(runs) >= set(self.plan.seeds):
            return
        mean = mean_values([runs[seed] for seed in self.plan.seeds])
        inner_id = self.groups.pop(config_id)
        if mean is None:
            self.inner.on_trial_complete(inner_id, None, error=True)
            return
        result = {"status": TrialStatus.OK, **dict(zip(self.inner.metrics(), mean, strict=True))}
        self.inner.on_trial_complete(inner_id, result)

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_bytes(pickle.dumps(self.__dict__))

    def restore(self, checkpoint_path: str) -> None:
        self.__dict__.update(pickle.loads(Path(checkpoint_path).read_bytes()))

    def summary(self):
        """The inner search's study summary (``StudySummary``)."""
        return self.inner.summary()

    def tuning_line(self) -> str:
        chosen = sum(self.book.chosen(c) is not None for c in self.configs)
        return (f"learning rate tuned per config: {self.runs[SELECTION]} selection runs and {self.runs[VERDICT]} "
                f"verdict runs trained now; a rate chosen for {chosen} of {len(self.configs)} configs; Optuna was "
                "told each config's mean over its verdict seeds at its chosen rate")  # fmt: skip


def headline(result: dict | None, metric: str) -> float | None:
    """A finished run's headline score (None: it failed or has none)."""
    if not result or result.get("status") != TrialStatus.OK:
        return None
    value = score_of(result.get("record") or result, metric)
    return float(value) if value is not None and math.isfinite(value) else None


def told(inner, result: dict | None) -> tuple[float, ...] | None:
    """A verdict run's objective values as Optuna would be told them (None: failed)."""
    values = inner.told_values(result)
    return None if values is None else tuple(float(v) for v in values)
