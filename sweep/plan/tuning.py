"""A tuned plan's trials (``tune:``, ``sweep/questions/tuning.py`` states the protocol): each config at each rate
for the selection seeds, then each config at its chosen rate for the verdict seeds.

Identities (``sweep/plan/identity.py``'s rule, the rate being the recipe's ``train.lr``):

- a selection run at rate r has the config id of the shape with ``train.lr = r``: the same experiment an untuned
  sweep at that rate would record (only its seeds, ``tune.selection_seeds``, and ``tune_phase`` differ);
- a tuned verdict run at the chosen rate r* has :func:`tuned_config_id`: the id at r* hashed with the
  protocol (the rates tried, the selection seeds, what the choice is made on), because "this shape at the rate
  this protocol chose" is the experiment its verdict is about, and so its rows never pool with an untuned
  sweep's rows that happen to be at the same rate;
- every one carries ``recipe_config_id``, the shape's id at the space's own ``train.lr`` (the untuned config id):
  the key that joins a config's tuned, untuned and selection rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from sweep.plan.identity import config_id
from sweep.plan.plan import Plan, PlannedConfig
from sweep.questions.tuning import SELECTION, VERDICT


def id_at_rate(plan: Plan, config: PlannedConfig, lr: float) -> str:
    """``config``'s id with ``train.lr = lr`` (the ordinary rule)."""
    space = plan.space
    return config_id(config.model, space.data, space.train.model_copy(update={"lr": lr}), space.probes)


def tuned_config_id(id_at_chosen_rate: str, plan: Plan) -> str:
    """A tuned verdict config's id: its id at the chosen rate hashed with the protocol (module docstring)."""
    tune = plan.space.tune
    protocol = {"rates": tune.rates(), "selection_seeds": list(tune.selection_seeds), "choose_on": tune.choose_on}
    text = json.dumps({"config_id": id_at_chosen_rate, "tune": protocol}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def at_rate(plan: Plan, config: PlannedConfig, lr: float, phase: str) -> PlannedConfig:
    """``config`` trained at ``lr`` in ``phase`` (``selection`` or ``verdict``), labelled and identified."""
    identity = id_at_rate(plan, config, lr)
    if phase == VERDICT:
        identity = tuned_config_id(identity, plan)
    shape = config.shape.labelled(tune_phase=phase, tune_lr=lr, recipe_config_id=config.config_id)
    return dataclasses.replace(config, config_id=identity, shape=shape)


def selection_pairs(plan: Plan) -> list[tuple[PlannedConfig, int]]:
    """Every config (the baseline included) × every rate × every selection seed, in plan order."""
    tune = plan.space.tune
    return [
        (at_rate(plan, config, lr, SELECTION), seed)
        for config in plan.configs
        for lr in tune.rates()
        for seed in tune.selection_seeds
    ]


def verdict_pairs(plan: Plan, chosen: dict[str, float]) -> list[tuple[PlannedConfig, int]]:
    """Each config whose rate is chosen (``chosen``: recipe_config_id → rate) × the plan's seeds, at that rate."""
    return [
        (at_rate(plan, config, chosen[config.config_id], VERDICT), seed)
        for config in plan.configs
        if config.config_id in chosen
        for seed in plan.seeds
    ]


def trials_count(plan: Plan) -> tuple[int, int]:
    """(selection, verdict) trials of a tuned plan: configs × rates × selection seeds, configs × seeds."""
    tune = plan.space.tune
    return len(plan.configs) * len(tune.rates()) * len(tune.selection_seeds), len(plan.configs) * len(plan.seeds)


def choose_rate(outcomes: dict[float, list[float | None]], mode: str) -> float:
    """The rate ``tune_choice`` (``sweep/questions/tuning.sql``) chooses from one config's selection runs, for a
    search that chooses before the rows are written: ``outcomes`` maps each rate to its selection runs' scores
    (None: a run that failed, i.e. ``diverged``, ``oom`` or ``pruned``). The rule, the view's: fewest failed runs
    first, then the best mean score of the finished ones in the metric's direction (``mode``: ``max`` or ``min``; a
    rate with none finished last), then the smaller rate."""
    better = 1.0 if mode == "max" else -1.0

    def rank(lr: float) -> tuple:
        scores = outcomes[lr]
        finished = [s for s in scores if s is not None]
        mean = sum(finished) / len(finished) if finished else None
        return (len(scores) - len(finished), mean is None, -better * mean if mean is not None else 0.0, lr)

    return min(outcomes, key=rank)
