"""The question "is a break the shape's, or the recipe's?": a space's ``tune:`` section (:class:`Tune`), a
learning-rate search per config whose verdicts are judged on runs that did not choose the rate.

The protocol (fresh verdict seeds; ``docs/analysis.md`` says why not cross-fitting nor a held-out slice):

1. **Selection.** Every config, the baseline included, trains at every rate of ``tune.lr`` with each of
   ``tune.selection_seeds`` (disjoint from the space's ``seeds``): the same rates and the same selection
   budget for every config. Each such run is a trials row with ``tune_phase = 'selection'``. (A grid selects
   every config first; an edge search, each config when it starts it, ``sweep/run/edge.py``; an Optuna search,
   each shape it proposes, ``sweep/run/tuned_search.py``.)
2. **Choice.** A config's rate is the one whose selection runs score best on the space's headline metric
   (its eval split; ``choose_on: score``): ranked by failed runs (fewest first), then the mean score over the
   selection seeds (in the metric's direction), then the smaller rate (view ``tune_choice``).
3. **Verdict.** The space's ``seeds`` (an edge search: the seeds it chooses) then train at the chosen rate
   (``tune_phase = 'verdict'``); only these rows (and an untuned sweep's) enter ``configs`` and so every verdict,
   the edge search's and Optuna's objective: no verdict row comes from a run whose score chose the rate.

The key that joins a config's tuned, untuned and selection rows is ``recipe_config_id``: the config id the
shape has at the space's own recipe (its ``train.lr``), which is the untuned sweep's ``config_id``. A selection
run's ``config_id`` is the ordinary id at its rate (the same experiment an untuned sweep at that rate would
record); a tuned verdict's ``config_id`` hashes that id with the protocol (``sweep/plan/tuning.py``), so the
tuned arm's configs never pool with an untuned sweep's rows of the same rate.

Labels (trials and configs columns): ``tune_phase``, ``tune_lr`` (the rate the row trained at; in ``configs``
the chosen rate), ``recipe_config_id``. Views: ``tuning.sql`` (lr_curve, tune_choice, tuned_verdicts).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from sweep.errors import ConfigIssue
from sweep.markdown import markdown_table, query
from sweep.questions.base import Label, Question
from sweep.text import plural
from workers.config import PositiveInt, StrictModel

SELECTION, VERDICT = "selection", "verdict"  # the values of trials.tune_phase (NULL: an untuned sweep's row)
DEFAULT_SELECTION_SEEDS = (1000,)  # far from any space's verdict seeds (0, 1, 2, ...)


class LrRange(StrictModel):
    """``num`` learning rates spaced evenly in log between ``low`` and ``high``, both included
    (``np.logspace(log10(low), log10(high), num)``: Zoology's ``np.logspace(-4, -2, 4)`` is
    ``{low: 1.0e-4, high: 1.0e-2, num: 4}``), each rounded to 6 significant digits (as recorded and printed)."""

    low: float = Field(gt=0.0)
    high: float = Field(gt=0.0)
    num: PositiveInt = Field(ge=2)

    @model_validator(mode="after")
    def _ordered(self) -> LrRange:
        if not self.low < self.high:
            raise ValueError(
                f"`low < high` must hold, but got (low={self.low}, high={self.high}); swap them, or list the rates"
            )
        return self

    def rates(self) -> list[float]:
        step = (math.log10(self.high) - math.log10(self.low)) / (self.num - 1)
        return [float(f"{10 ** (math.log10(self.low) + i * step):.6g}") for i in range(self.num)]


class Tune(StrictModel):
    """A learning-rate search per config (the module docstring gives the protocol).

    ``lr``: the rates tried, a list (two or more, distinct) or ``{low, high, num}`` log-spaced; fixed in the
    space file before running (the edge-of-range flag says when it should have been wider).
    ``selection_seeds``: the seeds each config trains at every rate to choose it; disjoint from ``seeds``.
    ``choose_on``: ``score``, the space's headline metric on its evaluation split, mean over selection seeds."""

    lr: list[float] | LrRange
    selection_seeds: list[int] = Field(default=list(DEFAULT_SELECTION_SEEDS), min_length=1)
    choose_on: Literal["score"] = "score"

    @model_validator(mode="after")
    def _rates(self) -> Tune:
        if isinstance(self.lr, list):
            if len(self.lr) < 2:
                raise ValueError(f"`lr` needs two or more rates to choose from, but got {self.lr}; add rates")
            if any(rate <= 0 for rate in self.lr):
                raise ValueError(f"every rate in `lr` must be > 0, but got {self.lr}; remove the others")
            if len(set(self.lr)) != len(self.lr):
                raise ValueError(f"rates in `lr` must be distinct, but got {self.lr}; remove the repeats")
        if len(set(self.selection_seeds)) != len(self.selection_seeds):
            raise ValueError(f"selection_seeds must be distinct, but got {self.selection_seeds}; remove the repeats")
        return self

    def rates(self) -> list[float]:
        """The rates tried, smallest first."""
        return sorted(self.lr) if isinstance(self.lr, list) else self.lr.rates()


class TuningQuestion(Question):
    """The ``tune:`` section: each config's learning rate chosen on selection seeds, judged on fresh ones."""

    name = "tuning"
    section = "tune"
    section_model = Tune | None
    section_doc = "a learning-rate search per config: selection runs choose each config's rate (docs/analysis.md)"
    sql = "tuning.sql"
    report_place = "costs"
    labels = (
        Label("tune_phase", "VARCHAR", "'selection': a run that chose its config's learning rate (no verdict counts "
              "it); 'verdict': a verdict seed at the chosen rate; NULL: an untuned sweep's row", in_plan=False),
        Label("tune_lr", "DOUBLE", "the learning rate the row trained at in a tuned sweep (in configs: the config's "
              "chosen rate); NULL for an untuned sweep's row (its rate is the space's train.lr)", in_plan=False),
        Label("recipe_config_id", "VARCHAR", "the key that joins a config's tuned, untuned and selection rows: the "
              "config id its shape has at the space's own recipe (train.lr), i.e. the untuned sweep's config_id",
              in_plan=False),
    )  # fmt: skip

    def space_issues(self, space, file: str) -> list:
        tune = getattr(space, "tune", None)
        if tune is None:
            return []
        issues = []
        shared = sorted(set(tune.selection_seeds) & set(space.seeds))
        if shared:
            issues.append(ConfigIssue(file, "tune.selection_seeds", "selection seeds must be disjoint from `seeds` "
                          "(a verdict row may not come from a run whose score chose the rate)", shared,
                          "pick selection seeds outside `seeds`, e.g. 1000, 1001"))  # fmt: skip
        low = [rate for rate in tune.rates() if rate <= space.train.min_lr]
        if low:
            issues.append(ConfigIssue(file, "tune.lr", f"every rate must be above train.min_lr ({space.train.min_lr})",
                          low, "raise the smallest rate, or lower train.min_lr"))  # fmt: skip
        return issues

    def plan_lines(self, plan) -> list[str]:
        tune = plan.space.tune
        if tune is None:
            return []
        rates = ", ".join(f"{r:g}" for r in tune.rates())
        per_config = len(tune.rates()) * len(tune.selection_seeds)
        kind = plan.space.search.kind
        head = f"learning rate tuned per config: rates {rates}, {plural(len(tune.selection_seeds), 'selection seed')} "
        choice = "(the choice: best mean score on the selection runs; no verdict counts them)"
        if kind == "grid":
            return [f"{head}{tune.selection_seeds} each ({len(plan.configs) * per_config} selection runs), then seeds "
                    f"{plan.seeds} at each config's chosen rate {choice}"]  # fmt: skip
        return [f"{head}{tune.selection_seeds} each ({per_config} selection runs a config), for each config the "
                f"{kind} search trains, before its verdict seeds run at its chosen rate {choice}"]  # fmt: skip

    def plan_json(self, plan) -> dict:
        tune = plan.space.tune
        if tune is None:
            return {"tune": None}
        return {"tune": {"lr": tune.rates(), "selection_seeds": tune.selection_seeds, "choose_on": tune.choose_on}}

    def record(self, plan):
        tune = plan.space.tune
        if tune is None:
            return None
        return {"lr": tune.rates(), "selection_seeds": list(tune.selection_seeds), "recipe_lr": plan.space.train.lr}

    def report_section(self, con, space: str, headline, data) -> str:
        rows = query(con, "SELECT * FROM tune_choice WHERE space = ? ORDER BY is_baseline DESC, depth, num_heads",
                     space)  # fmt: skip
        if not rows:
            return untuned_line(con, space)
        return tuning_section(con, space, rows)


def untuned_line(con, space: str) -> str:
    """One line for a sweep that ran untuned: its verdicts are at one learning rate."""
    rates = con.execute("SELECT count(*) FROM trials WHERE space = ? AND tune_phase IS NOT NULL", [space]).fetchone()[0]
    if rates:
        return ""
    return (
        "## Learning rate\n\nEvery verdict here is at one learning rate (the space's `train.lr`): a break may be the "
        "recipe's, not the shape's. A space's `tune:` section (profile `tuned` where shipped) chooses each "
        "config's rate on selection seeds first (docs/analysis.md).\n"
    )


def tuning_section(con, space: str, rows: list[dict]) -> str:
    """The tuned sweep's section: each config's chosen rate, its edge flag and its verdict in words."""
    table = [
        {
            "config": f"{r['depth']} × {r['num_heads']} of {r['head_dim']}" + (" (baseline)" * r["is_baseline"]),
            "rates tried": r["rates_tried"],
            "chosen lr": f"{r['chosen_lr']:g}",
            "selection score": f"{r['chosen_score']:.1f}" if r["chosen_score"] is not None else "n/a",
            "edge": r["edge_flag"] or "",
            "verdict": r["tuned_words"] or "",
        }
        for r in rows
    ]
    return (
        "## Learning rate, tuned per config\n\nEach config's rate was chosen on its selection runs (seeds no verdict "
        'counts), then its verdict seeds ran at that rate (`sweep sql "SELECT * FROM lr_curve"`: score against '
        "rate).\n\n" + markdown_table(table, list(table[0])) + "\n![score against learning rate per config, the chosen "
        "rate ringed](lr_curve.png)\n"
    )


QUESTION = TuningQuestion()
