"""The Optuna search: Ray Tune's OptunaSearch over a define-by-run space of the plan's valid shapes, and the
samplers a space may name."""

from __future__ import annotations

import threading

import optuna
from ray.tune.search.optuna import OptunaSearch

from sweep.plan import Plan, PlannedConfig, trial_payload
from workers.vocabulary import SHAPE_KEYS, TrialStatus


class OptunaSearchFailuresAsFailed(OptunaSearch):
    """OptunaSearch that tells Optuna a trial whose record says it failed (oom, diverged, error) FAILED,
    and ignores per-epoch results that lack the objective (e.g. throughput, known only at the end)."""

    def on_trial_result(self, trial_id: str, result: dict):
        if isinstance(self.metric, str) and result.get(self.metric) is None:
            return
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        metrics = [self.metric] if isinstance(self.metric, str) else self.metric
        failed = result and result.get("status") not in (None, TrialStatus.OK)
        incomplete = result and any(result.get(name) is None for name in metrics)
        if failed or incomplete:
            return super().on_trial_complete(trial_id, None, error=True)
        return super().on_trial_complete(trial_id, result, error)


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
        candidates: list[PlannedConfig] = self.plan.configs
        chosen: dict[str, int] = {}
        for axis in self.varying:
            options = sorted({getattr(c.shape, axis) for c in candidates})
            full = sorted({getattr(c.shape, axis) for c in self.plan.configs})
            name = axis if options == full else axis + "|" + ",".join(f"{k}={v}" for k, v in chosen.items())
            chosen[axis] = trial.suggest_categorical(name, options)
            candidates = [c for c in candidates if getattr(c.shape, axis) == chosen[axis]]
        return {"payload": trial_payload(self.plan, candidates[0], self.plan.seeds[0])}


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


def make_searcher(plan: Plan):
    search = plan.space.search
    samplers = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=search.seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=search.seed),
        "nsga2": lambda: NSGAIISampler(seed=search.seed),
    }
    metrics = [o.metric for o in search.objectives]
    modes = [o.mode for o in search.objectives]
    return OptunaSearchFailuresAsFailed(
        space=DefineByRun(plan),
        metric=metrics if len(metrics) > 1 else metrics[0],
        mode=modes if len(modes) > 1 else modes[0],
        sampler=samplers[search.sampler](),  # seeded here: OptunaSearch ignores its own seed then
    )
