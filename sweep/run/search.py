"""The Optuna search: Ray Tune's OptunaSearch over a define-by-run space of the plan's valid shapes, the
samplers a space may name, and a study that resumes from the recorded rows instead of repeating them."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from sweep.plan.plan import Plan, PlannedConfig, trial_payload
from sweep.run.rerun import Outcome, SearchRecord
from workers.vocabulary import SHAPE_KEYS, TrialStatus


class OptunaSearchFailuresAsFailed(OptunaSearch):
    """OptunaSearch that tells Optuna a trial whose record says it failed (oom, diverged, error) FAILED,
    and ignores per-epoch results that lack the objective (e.g. throughput, known only at the end)."""

    def on_trial_result(self, trial_id: str, result: dict):
        if isinstance(self.metric, str) and result.get(self.metric) is None:
            return
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        if result and self.told_values(result) is None:  # failed, or an objective is missing
            return super().on_trial_complete(trial_id, None, error=True)
        return super().on_trial_complete(trial_id, result, error)

    def metrics(self) -> list[str]:
        return [self.metric] if isinstance(self.metric, str) else list(self.metric)

    def told_values(self, result: dict | None) -> list[float] | None:
        """The objective values Optuna is told for a trial's last result; None when it is told FAIL (its
        record failed, or an objective is missing). A result without a status is an epoch's (a trial a
        scheduler stopped): its values are told, as Tune tells them."""
        if not result or result.get("status") not in (None, TrialStatus.OK):
            return None
        values = [result.get(name) for name in self.metrics()]
        return None if any(value is None for value in values) else values


class DefineByRun:
    """Optuna's define-by-run space over the plan's valid shapes, so every suggestion obeys the rules.

    Axes are suggested in order; each offers only the values still possible given the earlier choices.
    When that set differs from the axis's full set, the parameter name carries the earlier choices
    (``num_heads|depth=4``): Optuna requires one distribution per name. A class rather than a closure so
    Tune can pickle it into its experiment checkpoint.
    """

    def __init__(self, plan: Plan):
        self.plan = plan
        self.varying = [
            k
            for k in (*SHAPE_KEYS, "family", "kv_heads", "conditioning")
            if len({getattr(c.shape, k) for c in plan.configs}) > 1
        ]

    def __call__(self, trial) -> dict:
        config = self.walk(lambda name, options, axis: trial.suggest_categorical(name, options))
        return {"payload": trial_payload(self.plan, config, self.plan.seeds[0])}

    def walk(self, choose) -> PlannedConfig:
        """The config reached by ``choose(name, options, axis)`` picking each varying axis's value in turn."""
        candidates: list[PlannedConfig] = self.plan.configs
        chosen: dict[str, int] = {}
        for axis in self.varying:
            options = sorted({getattr(c.shape, axis) for c in candidates})
            full = sorted({getattr(c.shape, axis) for c in self.plan.configs})
            name = axis if options == full else axis + "|" + ",".join(f"{k}={v}" for k, v in chosen.items())
            chosen[axis] = choose(name, options, axis)
            candidates = [c for c in candidates if getattr(c.shape, axis) == chosen[axis]]
        return candidates[0]

    def params_of(self, config: PlannedConfig) -> tuple[dict, dict] | None:
        """The parameters, and their distributions, of a trial that suggests ``config``: what the study is
        given for a recorded trial. None when no suggestion reaches it (an earlier config has the same
        values on every varying axis)."""
        params: dict = {}
        distributions: dict = {}

        def choose(name: str, options: list, axis: str):
            params[name] = getattr(config.shape, axis)
            distributions[name] = CategoricalDistribution(options)
            return params[name]

        return (params, distributions) if self.walk(choose).config_id == config.config_id else None


class NSGAIISampler(optuna.samplers.NSGAIISampler):
    """Optuna's NSGA-II, able to go through pickle. Optuna 5.x's genetic samplers hold a ``threading.Lock``,
    and Tune pickles the searcher, sampler included, into its experiment checkpoint; the lock only guards
    a cache within one process, so a copy gets a fresh one. The class keeps Optuna's name, so the keys it
    stores in a study are Optuna's own."""

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "_thread_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._thread_lock = threading.Lock()


# --- a study that resumes from the record ---------------------------------------------------------------------

# How many suggestions in a row the search answers from the record before it trains an untried config of its
# own choosing: a sampler that has found the best configs (TPE) keeps proposing them.
PATIENCE = 10


@dataclass
class StudySummary:
    """What a search did: its study (every trial carries ``config_id``, ``seed`` and ``source`` as user
    attributes: ``record``, ``answered`` or ``trained``) and the counts of each source. ``exhausted``: it
    stopped early because every config it can suggest was recorded or trained."""

    study: optuna.Study
    from_record: int
    answered: int
    trained: int
    exhausted: bool


class ResumedSearch(OptunaSearchFailuresAsFailed):
    """An Optuna search that starts where the results leave off and never trains a (config, seed) pair twice.

    - The study starts with one finished trial per recorded pair (:class:`~sweep.run.rerun.SearchRecord`), with
      the recorded values, in the order they were first finished: the sampler sees them as its own. A
      genetic sampler (NSGA-II) is also given each one's generation, as if it had sampled them.
    - A suggestion of a recorded pair, or of one trained earlier in this run, is answered from the record:
      the study is told its values and the next suggestion is asked for. A suggestion of a pair still
      training is told that pair's values when it ends. Tune is given only pairs to train, so its
      ``num_samples`` counts trained trials.
    - After :data:`PATIENCE` answered suggestions in a row, the search trains an untried config drawn at
      random (seeded): it is enqueued, so the study records it as a suggestion of its own.
    - When every config it can suggest is recorded or training, it tells Tune it has finished.
    """

    def __init__(self, plan: Plan, record: SearchRecord, **options):
        super().__init__(**options)
        self.seed = record.seed
        self.known: dict[str, list[float] | None] = {}  # config_id → told values (None: FAIL)
        self.training: dict[str, str] = {}  # Tune trial id → config_id
        self.waiting: dict[str, list] = {}  # config_id → the study's trials waiting for it to finish
        self.reachable = [c for c in plan.configs if self._space.params_of(c) is not None]
        self.rng = random.Random(plan.space.search.seed)
        self.counts = {"record": 0, "answered": 0, "trained": 0}
        self.exhausted = False
        self.warm_start(plan, record)

    def warm_start(self, plan: Plan, record: SearchRecord) -> None:
        configs = {config.config_id: config for config in plan.configs}
        trials = []
        for config_id, outcome in record.outcomes.items():
            self.known[config_id] = None if outcome.values is None else list(outcome.values)
            complete = sum(trial.state == TrialState.COMPLETE for trial in trials)
            recorded = self.recorded_trial(configs[config_id], outcome, complete)
            if recorded is not None:
                trials.append(recorded)
        self._ot_study.add_trials(trials)
        self.counts["record"] = len(trials)

    def recorded_trial(self, config: PlannedConfig, outcome: Outcome, complete: int) -> FrozenTrial | None:
        """A recorded outcome as a finished trial of the study; ``complete``: how many complete trials the
        study was given before it (a genetic sampler's generations are ``population_size`` of them each)."""
        reached = self._space.params_of(config)
        if reached is None:
            return None
        params, distributions = reached
        system_attrs = {}
        # Optuna's genetic samplers (NSGA-II) take parents only from trials that carry a generation, which
        # they set when they sample a trial themselves; the key is theirs (BaseGASampler's classmethod).
        generation_key = getattr(self._sampler, "_get_generation_key", None)
        if generation_key is not None:
            system_attrs[generation_key()] = complete // self._sampler.population_size
        return optuna.trial.create_trial(
            state=TrialState.FAIL if outcome.values is None else TrialState.COMPLETE,
            values=None if outcome.values is None else list(outcome.values),
            params=params,
            distributions=distributions,
            user_attrs={"config_id": config.config_id, "seed": self.seed, "source": "record", "status": outcome.status},
            system_attrs=system_attrs,
        )

    def suggest(self, trial_id: str) -> dict | str:
        for _ in range(PATIENCE):
            if not self.untried():
                self.exhausted = True
                return Searcher.FINISHED
            config = super().suggest(trial_id)
            config_id = config["payload"]["config_id"]
            if config_id not in self.known and config_id not in self.training.values():
                return self.train(trial_id, config)
            self.answer(self._ot_trials.pop(trial_id), config_id)
        untried = self.untried()
        if not untried:
            self.exhausted = True
            return Searcher.FINISHED
        self._ot_study.enqueue_trial(self._space.params_of(self.rng.choice(untried))[0])
        return self.train(trial_id, super().suggest(trial_id))

    def untried(self) -> list[PlannedConfig]:
        """The configs the search can suggest that are neither recorded nor training."""
        taken = set(self.known) | set(self.training.values())
        return [config for config in self.reachable if config.config_id not in taken]

    def train(self, trial_id: str, config: dict) -> dict:
        config_id = config["payload"]["config_id"]
        self.training[trial_id] = config_id
        self.label(self._ot_trials[trial_id], config_id, "trained")
        return config

    def answer(self, ot_trial, config_id: str) -> None:
        """Answer ``ot_trial``, a suggestion of ``config_id``, from the record: now if its outcome is known,
        else when the trial training it finishes."""
        self.label(ot_trial, config_id, "answered")
        if config_id in self.known:
            self.tell(ot_trial, config_id)
        else:
            self.waiting.setdefault(config_id, []).append(ot_trial)

    def tell(self, ot_trial, config_id: str) -> None:
        values = self.known[config_id]
        if values is None:
            self._ot_study.tell(ot_trial, state=TrialState.FAIL)
        else:
            self._ot_study.tell(ot_trial, values)

    def label(self, ot_trial, config_id: str, source: str) -> None:
        ot_trial.set_user_attr("config_id", config_id)
        ot_trial.set_user_attr("seed", self.seed)
        ot_trial.set_user_attr("source", source)
        self.counts[source] += 1

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        super().on_trial_complete(trial_id, result, error)
        config_id = self.training.pop(trial_id, None)
        if config_id is None:
            return
        self.known[config_id] = None if error else self.told_values(result)
        for ot_trial in self.waiting.pop(config_id, []):
            self.tell(ot_trial, config_id)

    def summary(self) -> StudySummary:
        counts = self.counts
        return StudySummary(self._ot_study, counts["record"], counts["answered"], counts["trained"], self.exhausted)


def make_searcher(plan: Plan, record: SearchRecord | None = None) -> ResumedSearch:
    """The plan's Optuna search, resumed from ``record`` (None: a new study, nothing recorded)."""
    search = plan.space.search
    samplers = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=search.seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=search.seed),
        "nsga2": lambda: NSGAIISampler(seed=search.seed),
    }
    metrics = [o.metric for o in search.objectives]
    modes = [o.mode for o in search.objectives]
    return ResumedSearch(
        plan,
        record if record is not None else SearchRecord(plan.seeds[0]),
        space=DefineByRun(plan),
        metric=metrics if len(metrics) > 1 else metrics[0],
        mode=modes if len(modes) > 1 else modes[0],
        sampler=samplers[search.sampler](),  # seeded here: OptunaSearch ignores its own seed then
    )
