"""From a validated space to the exact list of trials: shapes, the combinations the rules removed and
why, the baseline, params and FLOPs per sample (counted on the meta device, no training), and each
trial's worker config as plain data."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from functools import lru_cache

from sweep.budget import BudgetPlan, Unbuildable, solve_budget
from sweep.identity import config_id as experiment_id
from sweep.space import Control, Space
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
    # A `budget:` block's labels (sweep/budget.py): how the config spends the budget (base, deeper, wider,
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


@dataclass(frozen=True)
class PlannedControl:
    """A control arm of the plan: its label and reason, the config that runs it, and whether the grid held
    that config already (then it is labelled, not added)."""

    label: str
    why: str
    shape: dict  # the axis values the space gives it (the rest are the baseline's)
    config: PlannedConfig
    in_grid: bool


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
    budgets: list[BudgetPlan] = field(default_factory=list)  # the space's `budget:`, one per family
    controls: list[PlannedControl] = field(default_factory=list)  # space.controls, each with its config

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
            if kv is not None and (kv > heads or heads % kv):
                removed.append(Removed(combo, f"num_kv_heads={kv} does not divide num_heads={heads}"))
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


def config_id(model: dict, space: Space) -> str:
    """The id of ``model`` trained and measured as ``space`` says (``sweep/identity.py`` states the rule)."""
    return experiment_id(model, space.data, space.train, space.probes)


def trial_config(space: Space, model: dict, seed: int) -> dict:
    """The worker's TrialConfig as plain data."""
    return {
        "model": model,
        "data": space.data.model_dump(),
        "train": space.train.model_dump(),
        "probes": space.probes.model_dump(),
        "seed": seed,
        "device": "auto",
        "threads": max(1, int(space.resources.cpus_per_trial)),
    }


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
        "trial_config": trial_config(plan.space, config.model, seed),
    }


# --- the plan -----------------------------------------------------------------------------------------


def make_plan(space_name: str, space: Space, profile: str | None, seeds: list[int] | None = None) -> Plan:
    """Every configuration the space allows, with params and FLOPs, and what was removed and why."""
    shapes, removed = enumerate_shapes(space)
    budgets = plan_budgets(space, shapes)
    shapes, removed = with_budget_shapes(shapes, removed, budgets, space)
    baseline_keys = {resolve_baseline(space, shapes, family) for family in space.families()}
    families = space.families()
    configs = []
    conditionings = space.axis_values("conditioning")
    for shape in sorted(
        shapes,
        key=lambda s: (
            families.index(s.family),
            s.depth,
            s.num_heads,
            s.head_dim,
            s.embed_dim,
            s.mlp_dim,
            -s.kv_heads,
            conditionings.index(s.conditioning),
        ),
    ):
        model = model_fields(space, shape)
        params, flops = measure_shape(model)
        is_baseline = shape.key() in baseline_keys
        configs.append(PlannedConfig(config_id(model, space), shape, is_baseline, params, flops, model))
    # The space's baseline; a space of several families also marks each other family's config of the same
    # shape as that family's reference (the analysis compares every config with its own family's).
    baseline = next(c for c in configs if c.is_baseline and c.shape.family == space.model.family)
    configs, controls = with_controls(space, configs, baseline)
    return Plan(
        space_name,
        profile,
        space,
        configs,
        removed,
        list(seeds or space.seeds),
        baseline,
        controls=controls,
        budgets=budgets,
    )


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


# --- a parameter budget spent three ways (sweep/budget.py) ---------------------------------------------------


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


def budget_params(space: Space, shape: Shape) -> int:
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


def budget_base(space: Space, shapes: list[Shape], family: str) -> Shape | None:
    """The shape ``budget.from`` names in ``family``: the baseline, or the first shape with every value it
    gives (None when no shape has them)."""
    wanted = space.budget.base
    if wanted == "baseline":
        key = resolve_baseline(space, shapes, family)
        return next((s for s in shapes if s.key() == key), None)
    return next((s for s in shapes if s.family == family and all(getattr(s, k) == v for k, v in wanted.items())), None)


def plan_budgets(space: Space, shapes: list[Shape]) -> list[BudgetPlan]:
    """The space's budget solved for each family whose base is among ``shapes`` (none without ``budget:``)."""
    if space.budget is None:
        return []
    plans = []
    for family in space.families():
        base = budget_base(space, shapes, family)
        if base is not None:
            plans.append(solve_budget(base, space.budget, lambda shape: budget_params(space, shape)))
    return plans


def with_budget_shapes(
    shapes: list[Shape], removed: list[Removed], budgets: list[BudgetPlan], space: Space
) -> tuple[list[Shape], list[Removed]]:
    """``shapes`` with each budget's base labelled and each way's shape added (a way's shape that is already
    a shape of the grid is labelled instead); a way without a shape, or whose shape breaks a constraint, is
    a removed combination with the reason."""
    by_key = {s.key(): s for s in shapes}
    removed = list(removed)
    for budget in budgets:
        target = {"budget_target_params": budget.target}
        by_key[budget.base.key()] = dataclasses.replace(by_key[budget.base.key()], budget_way="base", **target)
        for way in budget.ways:
            combo = {"budget_way": way.way, "family": budget.family, way.dimension: way.value}
            if way.shape is None:
                removed.append(Removed(combo, f"{way.words()}; target {budget.target:,} params"))
                continue
            reason = constraint_violation(space, way.shape)
            if reason or by_key.get(way.shape.key(), way.shape).budget_way not in (None, way.way):
                taken = by_key.get(way.shape.key())
                removed.append(Removed(combo, reason or f"the same shape as the {taken.budget_way} config"))
                continue
            by_key[way.shape.key()] = dataclasses.replace(by_key.get(way.shape.key(), way.shape), budget_way=way.way,
                                                          **target)  # fmt: skip
    return list(by_key.values()), removed


# --- control arms -------------------------------------------------------------------------------------


def control_shape(space: Space, baseline: Shape, control: Control) -> tuple[Shape | None, str | None]:
    """The shape of ``control``: the baseline's, with the axis values the control gives. head_dim follows
    the baseline's head_dim rule (embed_dim / num_heads under fixed_d_model) unless the control gives it.
    Returns (shape, None), or (None, why it cannot be built)."""
    given = dict(control.shape)
    pick = lambda name, default: given.get(name, default)  # noqa: E731
    heads, width = pick("num_heads", baseline.num_heads), pick("embed_dim", baseline.embed_dim)
    kv = pick("num_kv_heads", baseline.num_kv_heads)
    rule = baseline.rule.split("+")[0]
    if "head_dim" in given or rule == "fixed_head_dim":
        head_dim = pick("head_dim", baseline.head_dim)
    elif rule == "floor_d_model":
        if heads > width:
            return None, f"num_heads={heads} > embed_dim={width}: head_dim would be 0"
        head_dim = width // heads
    elif width % heads:
        return None, f"num_heads={heads} does not divide embed_dim={width} (head_dim rule {rule})"
    else:
        head_dim = width // heads
    if kv is not None and (kv > heads or heads % kv):
        return None, f"num_kv_heads={kv} does not divide num_heads={heads}"
    depth, mlp = pick("depth", baseline.depth), pick("mlp_dim", baseline.mlp_dim)
    conditioning = pick("conditioning", baseline.conditioning)
    shape = Shape(depth, heads, head_dim, width, mlp, rule, baseline.family, kv, conditioning)
    reason = constraint_violation(space, shape)
    return (None, reason) if reason else (shape, None)


def with_controls(
    space: Space, configs: list[PlannedConfig], baseline: PlannedConfig
) -> tuple[list[PlannedConfig], list[PlannedControl]]:
    """The grid's configs with each control arm of the space: a control whose shape the grid holds labels
    that config; any other is added after the grid's (so no config of the grid moves, nor its id)."""
    configs, controls = list(configs), []
    for control in space.controls:
        shape, reason = control_shape(space, baseline.shape, control)
        if shape is None:  # validation reports it first (sweep/validation.py control_issues)
            raise ValueError(f"control {control.label!r} cannot be built: {reason}")
        index = next((i for i, c in enumerate(configs) if c.shape.key() == shape.key()), None)
        if index is not None:
            configs[index] = dataclasses.replace(configs[index], control=control.label)
        else:
            model = model_fields(space, shape)
            params, flops = measure_shape(model)
            configs.append(
                PlannedConfig(config_id(model, space), shape, False, params, flops, model, control=control.label)
            )
        config = configs[index if index is not None else -1]
        controls.append(PlannedControl(control.label, control.why, dict(control.shape), config, index is not None))
    return configs, controls


def control_rows(plan: Plan) -> list[dict]:
    """Each control arm beside the baseline: its shape, params and FLOPs, and the change in params."""
    base = plan.baseline
    return [
        {
            "label": c.label,
            "config_id": c.config.config_id,
            "shape": c.shape,
            **{k: getattr(c.config.shape, k) for k in SHAPE_KEYS},
            "params": c.config.params,
            "flops_per_sample": c.config.flops_per_sample,
            "params_change": c.config.params / base.params - 1,
            "flops_change": c.config.flops_per_sample / base.flops_per_sample - 1,
            "in_grid": c.in_grid,
            "why": " ".join(c.why.split()),
        }
        for c in plan.controls
    ]
