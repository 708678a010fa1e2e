"""From a validated space to the exact list of trials: shapes, the combinations the rules removed and
why, the baseline, params and FLOPs per sample (counted on the meta device, no training), and each
trial's worker config as plain data. The questions (``sweep/questions/``) add their shapes and configs as the
plan goes, and the problems they find are recorded in it (``Plan.issues``: ``sweep/space/validation.py`` reports
them), so a space is planned once."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass, field
from functools import lru_cache

from sweep.errors import ConfigIssue
from sweep.plan.identity import config_id
from sweep.questions import QUESTIONS
from sweep.questions.budget import Unbuildable
from sweep.space.model import Space
from workers.config import ModelSpec
from workers.families.base import DATA_DERIVED_FIELDS, OPTIONAL_FIELDS
from workers.models import build_on_meta, get_family
from workers.probes.flops import forward_flops_per_sample
from workers.probes.params import count_params
from workers.vocabulary import SHAPE_KEYS

# The axes every space must give values; head_dim may instead follow from a head_dim rule.
VALUED_AXES = tuple(name for name in SHAPE_KEYS if name != "head_dim")
# Axes beyond the shape keys, each with the value a model has when the space leaves it out; a shape at that
# value passes nothing to the worker, so every config id from before these axes existed is unchanged.
EXTRA_AXES = ("num_kv_heads", "conditioning")
# Fixed model fields only some families take; passed to the worker only when set, so a ViT's config_id
# does not change because other families exist. (seq_len and vocab_size come from the data instead.)
FAMILY_KEYS = tuple(
    name for name in OPTIONAL_FIELDS if name not in ("head_dim", *EXTRA_AXES) and name not in DATA_DERIVED_FIELDS
)


@dataclass(frozen=True)
class Shape:
    depth: int
    num_heads: int
    head_dim: int
    embed_dim: int
    mlp_dim: int
    rule: str  # the head_dim rule(s) that produced it, e.g. "fixed_d_model"
    family: str = "vit"  # the model family (a space may sweep several: axes.family)
    num_kv_heads: int | None = None  # grouped-query attention's key/value heads; None: num_heads
    conditioning: str = "none"  # workers/conditioning.py
    # A `budget:` block's labels (sweep/questions/budget.py): how the config spends the budget (base, deeper, wider,
    # more_heads) and the target count. Not model fields: they change no config id and no key().
    budget_way: str | None = None
    budget_target_params: int | None = None

    @property
    def attn_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    def key(self) -> tuple:
        return (*(getattr(self, name) for name in SHAPE_KEYS), self.family, self.kv_heads, self.conditioning)

    def as_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in SHAPE_KEYS},
            "attn_dim": self.attn_dim,
            "head_dim_rule": self.rule,
            "family": self.family,
            "num_kv_heads": self.kv_heads,
            "conditioning": self.conditioning,
            **({"budget_way": self.budget_way} if self.budget_way else {}),
            **({"budget_target_params": self.budget_target_params} if self.budget_way else {}),
        }

    def worker_fields(self) -> dict:
        """The extra axes' model fields, only where they differ from the model as built (see EXTRA_AXES)."""
        fields = {}
        if self.kv_heads != self.num_heads:
            fields["num_kv_heads"] = self.kv_heads
        if self.conditioning != "none":
            fields["conditioning"] = self.conditioning
        return fields


@dataclass(frozen=True)
class Removed:
    combination: dict
    reason: str


@dataclass(frozen=True)
class PlannedConfig:
    """One configuration (shape + recipe); trials are this config × seeds."""

    config_id: str
    shape: Shape
    is_baseline: bool
    params: int
    flops_per_sample: int
    model: dict  # ModelSpec fields, data-derived sizes included
    control: str | None = None  # the label of the control arm this config is (space.controls), if any


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
    # Each question's answer by its name (sweep/questions/): budget's BudgetPlans, controls' PlannedControls …
    answers: dict[str, object] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)  # what the questions found wrong while planning

    def trials(self) -> list[dict]:
        """Every (config, seed) trial of a grid, as plain payloads for Ray."""
        if self.pairs is not None:
            return [trial_payload(self, config, seed) for config, seed in self.pairs]
        return [trial_payload(self, config, seed) for config in self.configs for seed in self.seeds]


# --- shapes -----------------------------------------------------------------------------------------------


def enumerate_shapes(space: Space) -> tuple[list[Shape], list[Removed]]:
    """Cartesian product of the axes under each head_dim rule; shapes the rules forbid are removed
    with the reason. A shape reached by both rules is kept once."""
    kept: dict[tuple, Shape] = {}
    removed: list[Removed] = []
    axes = {name: space.axis_values(name) for name in VALUED_AXES}
    kv_heads = space.axis_values("num_kv_heads") or [None]
    conditionings = space.axis_values("conditioning")
    for rule in space.head_dim_rule:
        head_dims = space.axis_values("head_dim") if rule == "fixed_head_dim" else [None]
        for family, depth, heads, width, mlp, head_dim, kv, conditioning in itertools.product(
            space.families(),
            axes["depth"],
            axes["num_heads"],
            axes["embed_dim"],
            axes["mlp_dim"],
            head_dims,
            kv_heads,
            conditionings,
        ):
            combo = {
                "depth": depth,
                "num_heads": heads,
                "embed_dim": width,
                "mlp_dim": mlp,
                "head_dim_rule": rule,
                "family": family,
                **({"num_kv_heads": kv} if kv is not None else {}),
                **({"conditioning": conditioning} if conditioning != "none" else {}),
            }
            if reason := next(filter(None, (q.combination_rule(combo) for q in QUESTIONS)), None):
                removed.append(Removed(combo, reason))
                continue
            if rule == "floor_d_model":
                if heads > width:
                    removed.append(Removed(combo, f"num_heads={heads} > embed_dim={width}: head_dim would be 0"))
                    continue
                head_dim = width // heads
            elif head_dim is None:
                if width % heads:
                    removed.append(Removed(combo, f"num_heads={heads} does not divide embed_dim={width}"))
                    continue
                head_dim = width // heads
            shape = Shape(depth, heads, head_dim, width, mlp, rule, family, kv, conditioning)
            reason = constraint_violation(space, shape)
            if reason:
                removed.append(Removed(shape.as_dict(), reason))
            elif shape.key() in kept:
                previous = kept[shape.key()]
                if rule not in previous.rule:
                    kept[shape.key()] = dataclasses.replace(previous, rule=f"{previous.rule}+{rule}")
            else:
                kept[shape.key()] = shape
    return list(kept.values()), removed


def constraint_violation(space: Space, shape: Shape) -> str | None:
    """The first constraint ``shape`` breaks, as a sentence, or None."""
    rules = space.constraints
    if rules.min_head_dim and shape.head_dim < rules.min_head_dim:
        return f"head_dim={shape.head_dim} < constraints.min_head_dim={rules.min_head_dim}"
    if rules.max_head_dim and shape.head_dim > rules.max_head_dim:
        return f"head_dim={shape.head_dim} > constraints.max_head_dim={rules.max_head_dim}"
    if rules.max_attn_dim and shape.attn_dim > rules.max_attn_dim:
        return f"attn_dim={shape.attn_dim} > constraints.max_attn_dim={rules.max_attn_dim}"
    if rules.max_params or rules.max_flops_per_sample:
        params, flops = measure_shape(model_fields(space, shape))
        if rules.max_params and params > rules.max_params:
            return f"params={params:,} > constraints.max_params={rules.max_params:,}"
        if rules.max_flops_per_sample and flops > rules.max_flops_per_sample:
            return f"flops_per_sample={flops:,} > constraints.max_flops_per_sample={rules.max_flops_per_sample:,}"
    return None


def model_fields(space: Space, shape: Shape) -> dict:
    """ModelSpec fields for ``shape`` in ``space``; head_dim always explicit so equal shapes hash equal.

    Image families get the patch and the image's size, channels and classes; sequence families the
    data's length, vocabulary and classes. A family-specific fixed field goes to the families that take
    it; in a space of one family it always goes, so a field that family cannot take is reported.
    """
    fixed = space.model
    family = get_family(shape.family)
    single = len(space.families()) == 1
    specific = {
        k: getattr(fixed, k) for k in FAMILY_KEYS if getattr(fixed, k) is not None and (single or k in family.accepts)
    }
    common = {"family": shape.family, **{k: getattr(shape, k) for k in SHAPE_KEYS}, **shape.worker_fields()}
    from_data = space.data.model_fields_from_data()
    if family.modality != "image":
        return {**common, **from_data, **specific}
    image = {"patch_size": fixed.patch_size, "qkv_bias": fixed.qkv_bias, "drop_path_rate": fixed.drop_path_rate}
    return {**common, **image, **from_data, **specific}


def freeze(fields: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in fields.items()))


@lru_cache(maxsize=4096)
def _measure(frozen: tuple) -> tuple[int, int]:
    spec = ModelSpec(**dict(frozen))
    model = build_on_meta(spec)
    return count_params(model), forward_flops_per_sample(spec, model)


def measure_shape(fields: dict) -> tuple[int, int]:
    """(params, forward FLOPs per sample) of a model, counted on the meta device (cached).

    ``depth`` counts identical blocks (of the swept stage, for staged families), so both counts are
    exactly linear in it: they are counted at depths 1 and 2, which every depth of a shape shares and
    which are quick to build and trace, and extended to the asked depth. A test checks the result
    against a full count for every variant.
    """
    one = _measure(freeze({**fields, "depth": 1}))
    if fields["depth"] == 1:
        return one
    two = _measure(freeze({**fields, "depth": 2}))
    extra_blocks = fields["depth"] - 1
    return one[0] + extra_blocks * (two[0] - one[0]), one[1] + extra_blocks * (two[1] - one[1])


# --- identities ---------------------------------------------------------------------------------------


def identify(model: dict, space: Space) -> str:
    """The config id of ``model`` trained and measured as ``space`` says (``sweep/plan/identity.py`` states
    the rule)."""
    return config_id(model, space.data, space.train, space.probes)


def worker_config(space: Space, model: dict, seed: int) -> dict:
    """The worker's :class:`workers.trial_config.TrialConfig` as plain data."""
    return {
        "model": model,
        "data": space.data.model_dump(),
        "train": space.train.model_dump(),
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
        "control": config.control,  # the control arm's label (trials.control); None for the grid's configs
        "devices_held": devices_held(plan.space.resources),  # what device_s multiplies (sweep/results/schema.py)
        "trial_config": worker_config(plan.space, config.model, seed),
    }


# --- the plan -----------------------------------------------------------------------------------------


class Planner:
    """A plan in the making, lent to the questions (``sweep/questions/base.py``'s ``Planner`` says what they
    may use): the space, the shapes and removed combinations so far, then the measured configs; the issues
    the questions record; and the plan's tools (constraints, what a family can build, exact counts)."""

    def __init__(self, space: Space):
        self.space = space
        self.shapes, self.removed = enumerate_shapes(space)
        self.grid_shapes, self.grid_removed = list(self.shapes), list(self.removed)  # before any question's
        self.configs: list[PlannedConfig] = []
        self.baseline: PlannedConfig | None = None
        self.issues: list[ConfigIssue] = []

    def issue(self, path: str, rule: str, value: object, fix: str) -> None:
        self.issues.append(ConfigIssue("", path, rule, value, fix))  # the file is the validation's to name

    def removal(self, combination: dict, reason: str) -> Removed:
        return Removed(combination, reason)

    def constraint_violation(self, shape: Shape) -> str | None:
        return constraint_violation(self.space, shape)

    def family_problems(self, shape: Shape) -> list[tuple[str, str, object, str]]:
        return shape_problems(self.space, shape)

    def params_of(self, shape: Shape) -> int:
        return exact_params(self.space, shape)

    def baseline_shape(self, family: str | None = None) -> Shape | None:
        key = resolve_baseline(self.space, self.shapes, family)
        return next((s for s in self.shapes if s.key() == key), None)

    def planned_config(self, shape: Shape, **labels) -> PlannedConfig:
        model = model_fields(self.space, shape)
        params, flops = measure_shape(model)
        return PlannedConfig(identify(model, self.space), shape, False, params, flops, model, **labels)


@dataclass
class Survey:
    """A space's shapes with every question's added (``Question.add_shapes``), before anything is measured:
    what the validation needs, and the start of the plan. ``answers``: each question's so far; ``issues``:
    what each found, by its name (none asked when the grid itself has a problem: the validation says that)."""

    planner: Planner
    answers: dict[str, object]
    issues: dict[str, list[ConfigIssue]]


_surveys: dict[str, Survey] = {}  # by the space's JSON: validation and planning survey a space once


def survey(space: Space) -> Survey:
    """The grid's shapes, then each question's (``add_shapes``), in registry order; once per space. No
    question is asked of a grid whose baseline is missing or whose shapes a family cannot build (the
    validation reports that first)."""
    key = space.model_dump_json()
    if key not in _surveys:
        planner = Planner(space)
        ready = planner.shapes and all(resolve_baseline(space, planner.shapes, f) for f in space.families())
        ready = ready and not any(shape_problems(space, s) for s in planner.shapes)
        answers, issues = {}, {}
        for question in QUESTIONS:
            before = len(planner.issues)
            answers[question.name] = question.add_shapes(planner) if ready else None
            issues[question.name] = planner.issues[before:]
        _surveys.clear()  # one space at a time is enough: its validation, then its plan
        _surveys[key] = Survey(planner, answers, issues)
    return _surveys[key]


def make_plan(space_name: str, space: Space, profile: str | None, seeds: list[int] | None = None) -> Plan:
    """Every configuration the space allows, with params and FLOPs, and what was removed and why; each
    question's answer, and the issues they found."""
    found = survey(space)
    planner = copy.copy(found.planner)  # the survey's lists stay as validation saw them
    planner.shapes, planner.removed, planner.issues = list(planner.shapes), list(planner.removed), list(planner.issues)
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
                "control": config.control if config else None,
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


def resolve_baseline(space: Space, shapes: list[Shape], family: str | None = None) -> tuple | None:
    """The key of the shape of ``family`` (default: ``model.family``) matching every value the baseline
    names, or None. Where the baseline leaves the extra axes out it takes multi-head attention (as many
    key/value heads as heads) and the space's first conditioning (``none`` unless the space says otherwise)."""
    defaults = {"conditioning": space.axis_values("conditioning")[0]}
    wanted = {**defaults, **space.baseline, "family": family or space.model.family}
    if "num_kv_heads" in wanted:
        wanted["kv_heads"] = wanted.pop("num_kv_heads")
    matches = [s for s in shapes if all(getattr(s, k) == v for k, v in wanted.items())]
    if "kv_heads" not in wanted:
        matches.sort(key=lambda s: s.kv_heads != s.num_heads)  # multi-head attention first
    return matches[0].key() if len(matches) >= 1 else None


# --- exact counts and what a family cannot build (the questions' tools) --------------------------------------


@lru_cache(maxsize=4096)
def _count_params(frozen: tuple) -> int:
    return count_params(build_on_meta(ModelSpec(**dict(frozen))))


def measure_params(fields: dict) -> int:
    """The exact parameter count of ``measure_shape`` without its FLOPs (cheaper: no trace), by the same
    linear extension from depths 1 and 2."""
    one = _count_params(freeze({**fields, "depth": 1}))
    if fields["depth"] == 1:
        return one
    return one + (fields["depth"] - 1) * (_count_params(freeze({**fields, "depth": 2})) - one)


def exact_params(space: Space, shape: Shape) -> int:
    """``shape``'s exact parameter count in ``space``; :class:`Unbuildable` when its family cannot build it."""
    fields = model_fields(space, shape)
    try:
        spec = ModelSpec(**fields)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise Unbuildable(str(exc).splitlines()[-1]) from exc
    problems = get_family(shape.family).problems(spec)
    if problems:
        raise Unbuildable("; ".join(f"{p.field}={p.value}: {p.rule}" for p in problems))
    return measure_params(fields)


def shape_problems(space: Space, shape: Shape) -> list[tuple[str, str, object, str]]:
    """What ``shape``'s family cannot build, as (key path, rule, value, fix): the model fields that disagree
    (path ``model``), or each problem the family names (path ``model.<field>``)."""
    try:
        spec = ModelSpec(**model_fields(space, shape))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        return [("model", "the model fields must agree", shape.as_dict(), str(exc).splitlines()[-1])]
    return [(f"model.{p.field}", p.rule, p.value, p.fix) for p in get_family(shape.family).problems(spec)]
