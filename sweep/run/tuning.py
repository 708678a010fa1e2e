"""Running a tuned plan (``tune:``): what is missing of each phase, and each config's chosen rate from the
recorded selection runs (view ``tune_choice``, ``sweep/questions/tuning.sql``: the one rule, read here and by the
report alike).

A config's rate is chosen once every one of its selection runs (each rate × each selection seed) is recorded
(``sweep/run/rerun.py``'s rule: ``ok``, ``diverged``, ``oom`` or ``pruned``); until then none of its verdict seeds
run. Resuming reads the same rows, so a killed sweep trains no finished run again, and the choice it makes is
the one it would have made without the kill; ``sweep rerun --seeds N`` adds verdict seeds at the recorded choice
without selecting again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.analysis.sql import connect
from sweep.plan.plan import Missing, Plan
from sweep.plan.tuning import at_rate, choose_rate, selection_pairs, verdict_pairs
from sweep.questions.tuning import SELECTION, VERDICT
from sweep.run import rerun  # looked up at each call, as the resume checks are (tests patch them there)


def missing_of(pairs: list, recorded: set[tuple[str, int]]) -> list[Missing]:
    """The (config, seed) pairs of ``pairs`` not in ``recorded``, in order."""
    return [Missing(config, seed) for config, seed in pairs if (config.config_id, seed) not in recorded]


def missing_selection(plan: Plan, results_dir: Path) -> list[Missing]:
    """The selection runs of ``plan`` the results do not hold yet."""
    return missing_of(selection_pairs(plan), rerun.recorded_pairs(results_dir, plan.space_name))


def chosen_rates(plan: Plan, results_dir: Path) -> dict[str, float]:
    """recipe_config_id → chosen rate, for each config of ``plan`` whose selection runs are all recorded."""
    recorded = rerun.recorded_pairs(results_dir, plan.space_name)
    waiting = {m.config.label("recipe_config_id") for m in missing_of(selection_pairs(plan), recorded)}
    ready = [c.config_id for c in plan.configs if c.config_id not in waiting]
    if not ready:
        return {}
    rows = (
        connect(results_dir)
        .execute(
            "SELECT recipe_config_id, chosen_lr FROM tune_choice WHERE space = ? AND metric = ?",
            [plan.space_name, plan.space.metric.name],
        )
        .fetchall()
    )
    return {config_id: float(lr) for config_id, lr in rows if config_id in ready}


def missing_verdicts(plan: Plan, results_dir: Path) -> tuple[list[Missing], int]:
    """The verdict runs at each chosen rate the results do not hold, and how many configs have no rate yet."""
    chosen = chosen_rates(plan, results_dir)
    missing = missing_of(verdict_pairs(plan, chosen), rerun.recorded_pairs(results_dir, plan.space_name))
    return missing, len(plan.configs) - len(chosen)


# --- what a search that tunes as it goes (edge, Optuna) reads of the record ------------------------------


@dataclass(frozen=True)
class SelectionRun:
    """A recorded selection run of a tuned edge or Optuna search: the plan's config id (its rows'
    ``recipe_config_id``), the rate, the selection seed, and its headline score (None: it failed)."""

    config_id: str
    lr: float
    seed: int
    score: float | None


def tuned_ids(plan: Plan) -> tuple[dict[str, tuple[str, float]], dict[str, str]]:
    """A tuned plan's selection ids (→ the plan's config id and the rate) and verdict ids at every rate of its
    protocol (→ the plan's config id): the rows a tuned edge or Optuna search reads (a verdict row of another protocol,
    other rates or selection seeds, has another id and is not its)."""
    selection, verdict = {}, {}
    for config in plan.configs:
        for lr in plan.space.tune.rates():
            selection[at_rate(plan, config, lr, SELECTION).config_id] = (config.config_id, lr)
            verdict[at_rate(plan, config, lr, VERDICT).config_id] = config.config_id
    return selection, verdict


class RateBook:
    """Each config's selection runs as a search sees them (recorded, then finished in the run), and its rate once
    every one is in."""

    def __init__(self, plan: Plan, runs: list[SelectionRun]):
        self.tune, self.mode = plan.space.tune, plan.space.metric.mode
        self.runs: dict[str, dict[tuple[float, int], float | None]] = {}
        for run in runs:
            self.add(run.config_id, run.lr, run.seed, run.score)

    def add(self, config_id: str, lr: float, seed: int, score: float | None) -> None:
        """One finished selection run (``score`` None: it failed)."""
        self.runs.setdefault(config_id, {})[(lr, seed)] = score

    def wanted(self) -> list[tuple[float, int]]:
        """Every (rate, selection seed) a config trains at to choose its rate."""
        return [(lr, seed) for lr in self.tune.rates() for seed in self.tune.selection_seeds]

    def missing(self, config_id: str) -> list[tuple[float, int]]:
        """The config's (rate, selection seed) runs not in yet, in order."""
        done = self.runs.get(config_id, {})
        return [run for run in self.wanted() if run not in done]

    def chosen(self, config_id: str) -> float | None:
        """The config's rate by ``tune_choice``'s rule, once all its selection runs are in (else None)."""
        if self.missing(config_id):
            return None
        done = self.runs[config_id]
        return choose_rate({lr: [done[(lr, s)] for s in self.tune.selection_seeds] for lr in self.tune.rates()},
                           self.mode)  # fmt: skip
