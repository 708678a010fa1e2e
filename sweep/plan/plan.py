"""From a validated space to the exact list of trials: its shapes (``sweep/space/shapes.py``: the grid, the
combinations the rules removed and why, each question's shapes) become configs, with the baseline, params and
FLOPs per sample (counted on the meta device, no training) and a config id, and each (config, seed) a worker
config as plain data. The questions (``sweep/questions/``) add their configs as the plan goes, and the problems
they find are recorded in it (``Plan.issues``: ``sweep/space/validation.py`` reports them), so a space is
planned once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sweep.errors import ConfigIssue
from sweep.plan.identity import config_id
from sweep.questions import QUESTIONS, declared_labels
from sweep.space.model import Space
from sweep.space.shapes import (
    Removed,
    Shape,
    ShapePlanner,
    measure_shape,
    model_fields,
    resolve_baseline,
    survey,
)


@dataclass(frozen=True)
class PlannedConfig:
    """One configuration (shape + recipe); trials are this config × seeds."""

    config_id: str
    shape: Shape
    is_baseline: bool
    params: int
    flops_per_sample: int
    model: dict  # ModelSpec fields, data-derived sizes included

    @property
    def labels(self) -> dict:
        """The questions' labels of this config (its shape's: ``Shape.labels``), by column name."""
        return dict(self.shape.labels)

    def label(self, name: str):
        """The value of the declared label column ``name`` (``Question.labels``), or None when it has none."""
        return self.shape.label(name)


def label_columns(config: PlannedConfig | None) -> dict:
    """Every declared label column (``sweep.questions.declared_labels``) with ``config``'s value, None where it
    has none (or there is no config): what its trials row and ``sweep plan`` carry."""
    return {label.name: config.label(label.name) if config else None for label in declared_labels()}


@dataclass(frozen=True)
class Missing:
    """A (config, seed) pair the results do not hold yet: what resuming, a rerun or an adaptive round runs."""

    config: PlannedConfig
    seed: int


@dataclass
class Plan:
    space_name: str
    profile: str | None
    space: Space
    configs: list[PlannedConfig]
    removed: list[Removed]
    seeds: list[int]
    baseline: PlannedConfig
    # When set, exactly these (config, seed) pairs are run (resume, reruns) instead of configs × seeds.
    pairs: list[tuple[PlannedConfig, int]] | None = field(default=None)
    # Each question's answer by its name (sweep/questions/): what its add_shapes and add_configs returned
    answers: dict[str, object] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)  # what the questions found wrong while planning

    def trials(self) -> list[dict]:
        """Every (config, seed) trial of a grid, as plain payloads for Ray."""
        if self.pairs is not None:
            return [trial_payload(self, config, seed) for config, seed in self.pairs]
        return [trial_payload(self, config, seed) for config in self.configs for seed in self.seeds]


# --- identities ---------------------------------------------------------------------------------------


def identify(model: dict, space: Space) -> str:
    """The config id of ``model`` trained and measured as ``space`` says (``sweep/plan/identity.py`` states
    the rule)."""
    return config_id(model, space.data, space.train, space.probes)


def worker_config(space: Space, model: dict, seed: int, lr: float | None = None) -> dict:
    """The worker's :class:`workers.trial_config.TrialConfig` as plain data; ``lr`` (a tuned sweep's rate,
    ``sweep/plan/tuning.py``) replaces ``train.lr``."""
    train = space.train.model_dump() | ({"lr": lr} if lr is not None else {})
    return {
        "model": model,
        "data": space.data.model_dump(),
        "train": train,
        "probes": space.probes.model_dump(),
        "seed": seed,
        "device": "auto",
        "threads": max(1, int(space.resources.cpus_per_trial)),
    }


def devices_held(resources) -> float:
    """The devices a trial holds, for its ``device_s``: its GPUs, or its CPUs when it reserves no GPU."""
    return resources.gpus_per_trial if resources.gpus_per_trial > 0 else resources.cpus_per_trial


def trial_payload(plan: Plan, config: PlannedConfig, seed: int) -> dict:
    """What one Ray trial receives: the worker config plus the identity the sink records."""
    return {
        "space": plan.space_name,
        "profile": plan.profile,
        "config_id": config.config_id,
        "seed": seed,
        "is_baseline": config.is_baseline,
        "shape": config.shape.as_dict(),
        "family": config.shape.family,
        "metric": plan.space.metric.name,  # the headline metric: the sink's `score` is the record's value of it
        "metric_mode": plan.space.metric.mode,
        # the headline metric's chance level on this data set (workers/data: DataSetSpec.chance_score)
        "chance_score": plan.space.data.chance_score(plan.space.metric.name),
        "planned_params": config.params,
        "planned_flops_per_sample": config.flops_per_sample,
        **label_columns(config),  # the questions' labels (Question.labels): trials columns of the same names
        "devices_held": devices_held(plan.space.resources),  # what device_s multiplies (sweep/results/schema.py)
        "trial_config": worker_config(plan.space, config.model, seed, config.label("tune_lr")),
    }


# --- the plan -----------------------------------------------------------------------------------------


class Planner(ShapePlanner):
    """A plan in the making, lent to the questions' ``add_configs`` (``sweep/questions/base.py``'s ``Planner``
    says what they may use): the survey's shapes, removed combinations and issues, then the measured configs
    and the baseline config, and :meth:`planned_config` to measure one more."""

    configs: list[PlannedConfig]
    baseline: PlannedConfig | None

    @classmethod
    def from_survey(cls, surveyed: ShapePlanner) -> Planner:
        """A planner that goes on from the survey's, whose lists stay as the validation saw them."""
        planner = cls.__new__(cls)
        planner.__dict__.update(vars(surveyed))
        planner.shapes, planner.removed, planner.issues = (
            list(planner.shapes),
            list(planner.removed),
            list(planner.issues),
        )
        planner.configs, planner.baseline = [], None
        return planner

    def planned_config(self, shape: Shape, **labels) -> PlannedConfig:
        model = model_fields(self.space, shape)
        params, flops = measure_shape(model)
        return PlannedConfig(identify(model, self.space), shape.labelled(**labels), False, params, flops, model)


def make_plan(space_name: str, space: Space, profile: str | None, seeds: list[int] | None = None) -> Plan:
    """Every configuration the space allows, with params and FLOPs, and what was removed and why; each
    question's answer, and the issues they found."""
    found = survey(space)
    planner = Planner.from_survey(found.planner)
    baseline_keys = {resolve_baseline(space, planner.shapes, family) for family in space.families()}
    families = space.families()
    conditionings = space.axis_values("conditioning")
    order = lambda s: (families.index(s.family), s.depth, s.num_heads, s.head_dim, s.embed_dim, s.mlp_dim,  # noqa: E731
                       -s.kv_heads, conditionings.index(s.conditioning))  # fmt: skip
    planner.configs = [
        dataclasses.replace(planner.planned_config(shape), is_baseline=shape.key() in baseline_keys)
        for shape in sorted(planner.shapes, key=order)
    ]
    # The space's baseline; a space of several families also marks each other family's config of the same
    # shape as that family's reference (the analysis compares every config with its own family's).
    planner.baseline = next(c for c in planner.configs if c.is_baseline and c.shape.family == space.model.family)
    answers = {q.name: q.add_configs(planner, found.answers[q.name]) for q in QUESTIONS}
    seeds = list(seeds or space.seeds)
    return Plan(space_name, profile, space, planner.configs, planner.removed, seeds, planner.baseline,
                answers=answers, issues=planner.issues)  # fmt: skip


PUBLISHED_TOLERANCE = 0.01  # a planned count within 1% of the published one reproduces it


def compare_published(plan: Plan) -> list[dict]:
    """Each published row of the space beside the planned config with its shape (None when this
    profile's grid does not hold it): planned and published params, and the relative difference."""
    rows = []
    family = plan.space.model.family
    for published in plan.space.published:
        wanted = {**published.shape, "family": family}
        config = next((c for c in plan.configs if all(getattr(c.shape, k) == v for k, v in wanted.items())), None)
        planned_m = config.params / 1e6 if config else None
        diff = (planned_m / published.params_m - 1) if config and published.params_m else None
        rows.append(
            {
                "label": published.label,
                "source": published.source,
                **label_columns(config),
                "shape": dict(published.shape),
                "published_params_m": published.params_m,
                "planned_params_m": planned_m,
                "difference": diff,
                "reproduced": diff is not None and abs(diff) <= PUBLISHED_TOLERANCE,
                "mismatch": published.mismatch,
                "metric": plan.space.metric.name,
                "published_score": published.score if published.score is not None else published.top1,
            }
        )
    return rows
