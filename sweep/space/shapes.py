"""The shapes a space spans, before any is a trial: the product of its axes under each head_dim rule, the
combinations its rules remove (and why), each question's added shapes (:func:`survey`), the baseline's shape,
what a family cannot build, and the exact parameter and FLOP counts of a shape (counted on the meta device,
no training). The validation (``validation.py``) judges a space by these shapes; the plan
(``sweep/plan/plan.py``) turns them into configs and trials."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from functools import lru_cache

from sweep.errors import ConfigIssue
from sweep.questions import QUESTIONS, declared_axes
from sweep.questions.base import Unbuildable
from sweep.space import counts
from sweep.space.model import Space
from workers.config import ModelSpec
from workers.families.rules import DATA_DERIVED_FIELDS, FAMILY_RULES, OPTIONAL_FIELDS, family_problems
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
    # The questions' labels of this shape's config, (name, value) pairs sorted by name: the columns a question
    # declares (Question.labels, e.g. budget_way, control). Not model fields: they change no config id and no key().
    labels: tuple[tuple[str, object], ...] = ()
    # The values of the questions' declared axes that are not fields above (Question.axes), (name, value) pairs
    # sorted by name, only where off the axis's default: model fields, part of key() and of the config id.
    axes: tuple[tuple[str, object], ...] = ()

    @property
    def attn_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    def key(self) -> tuple:
        return (
            *(getattr(self, name) for name in SHAPE_KEYS),
            self.family,
            self.kv_heads,
            self.conditioning,
            *self.axes,
        )

    def depth_column(self) -> tuple:
        """The edge search's column of this shape (docs/analysis.md): every key but depth, as (name, value) pairs,
        and the questions' labels (a control of the same shape is another column)."""
        names = (*SHAPE_KEYS[1:], "family", "kv_heads", "conditioning")
        return (*((name, getattr(self, name)) for name in names), *self.axes, *self.labels)

    def axis(self, name: str):
        """The value of a question's declared axis that is not a field of Shape (its default where unset)."""
        return dict(self.axes).get(name, next(a.default for a in declared_axes() if a.name == name))

    def as_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in SHAPE_KEYS},
            "attn_dim": self.attn_dim,
            "head_dim_rule": self.rule,
            "family": self.family,
            "num_kv_heads": self.kv_heads,
            "conditioning": self.conditioning,
            **{axis.name: self.axis(axis.name) for axis in other_axes()},
        }

    def label(self, name: str):
        """The value of the label ``name`` (a declared Label column), or None when the shape has none."""
        return dict(self.labels).get(name)

    def labelled(self, **values) -> Shape:
        """This shape with ``values`` among its labels (replacing any of the same name; None removes one)."""
        merged = {**dict(self.labels), **values}
        return dataclasses.replace(self, labels=tuple(sorted((k, v) for k, v in merged.items() if v is not None)))

    def worker_fields(self) -> dict:
        """The extra axes' model fields, only where they differ from the model as built (see EXTRA_AXES)."""
        fields = {}
        if self.kv_heads != self.num_heads:
            fields["num_kv_heads"] = self.kv_heads
        if self.conditioning != "none":
            fields["conditioning"] = self.conditioning
        fields.update({axis.field: self.axis(axis.name) for axis in other_axes() if axis.name in dict(self.axes)})
        return fields


SHAPE_FIELDS = frozenset(field.name for field in dataclasses.fields(Shape))


def other_axes() -> list:
    """The questions' declared axes (``Question.axes``) that are not fields of :class:`Shape`, held in
    ``Shape.axes`` from their declarations alone."""
    return [axis for axis in declared_axes() if axis.name not in SHAPE_FIELDS]


def other_axis_values(space: Space) -> list[tuple[tuple[str, object], ...]]:
    """Every combination of the values of :func:`other_axes` (one empty one when there are none), each as the
    (name, value) pairs a :class:`Shape` holds: sorted by name, only those off the axis's default."""
    axes = other_axes()
    values = [space.axes.values(axis.name) or [axis.default] for axis in axes]
    return [
        tuple(
            sorted((axis.name, value) for axis, value in zip(axes, combination, strict=True) if value != axis.default)
        )
        for combination in itertools.product(*values)
    ]


@dataclass(frozen=True)
class Removed:
    combination: dict
    reason: str


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
        for family, depth, heads, width, mlp, head_dim, kv, conditioning, others in itertools.product(
            space.families(),
            axes["depth"],
            axes["num_heads"],
            axes["embed_dim"],
            axes["mlp_dim"],
            head_dims,
            kv_heads,
            conditionings,
            other_axis_values(space),
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
                **dict(others),
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
            shape = Shape(depth, heads, head_dim, width, mlp, rule, family, kv, conditioning, axes=others)
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
    family = FAMILY_RULES[shape.family]  # what it takes, without importing its module (timm, transformers)
    single = len(space.families()) == 1
    specific = {
        k: getattr(fixed, k) for k in FAMILY_KEYS if getattr(fixed, k) is not None and (single or k in family.accepts)
    }
    common = {"family": shape.family, **{k: getattr(shape, k) for k in SHAPE_KEYS}}
    from_data = space.data.model_fields_from_data()
    if family.modality != "image":
        return {**common, **from_data, **specific, **shape.worker_fields()}
    image = {"patch_size": fixed.patch_size, "qkv_bias": fixed.qkv_bias, "drop_path_rate": fixed.drop_path_rate}
    return {**common, **image, **from_data, **specific, **shape.worker_fields()}  # an axis overrides a fixed field


def freeze(fields: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in fields.items()))


@lru_cache(maxsize=4096)
def _measure(frozen: tuple) -> tuple[int, int]:
    measured = counts.measure(frozen)
    return measured.params, measured.flops


def measure_shape(fields: dict) -> tuple[int, int]:
    """(params, forward FLOPs per sample) of a model, counted on the meta device (kept on disk by
    ``sweep/space/counts.py``, so a model is measured once per installation).

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


class ShapePlanner:
    """The shapes in the making, lent to the questions' ``add_shapes`` (``sweep/questions/base.py``'s
    ``Planner`` says what they may use): the space, the shapes and removed combinations so far, the issues the
    questions record; and the tools (constraints, what a family can build, exact counts, the baseline)."""

    def __init__(self, space: Space):
        self.space = space
        self.shapes, self.removed = enumerate_shapes(space)
        self.grid_shapes, self.grid_removed = list(self.shapes), list(self.removed)  # before any question's
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


@dataclass
class Survey:
    """A space's shapes with every question's added (``Question.add_shapes``), before anything is measured:
    what the validation needs, and the start of the plan. ``answers``: each question's so far; ``issues``:
    what each found, by its name (none asked when the grid itself has a problem: the validation says that)."""

    planner: ShapePlanner
    answers: dict[str, object]
    issues: dict[str, list[ConfigIssue]]


_surveys: dict[tuple, Survey] = {}  # by the space's JSON and the registry: validation and planning survey a space once


def survey(space: Space) -> Survey:
    """The grid's shapes, then each question's (``add_shapes``), in registry order; once per space. No
    question is asked of a grid whose baseline is missing or whose shapes a family cannot build (the
    validation reports that first)."""
    key = (space.model_dump_json(), tuple(q.name for q in QUESTIONS))  # a question registered since: asked anew
    if key not in _surveys:
        planner = ShapePlanner(space)
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


def resolve_baseline(space: Space, shapes: list[Shape], family: str | None = None) -> tuple | None:
    """The key of the shape of ``family`` (default: ``model.family``) matching every value the baseline
    names, or None. Where the baseline leaves the extra axes out it takes multi-head attention (as many
    key/value heads as heads), the space's first conditioning (``none`` unless the space says otherwise) and the
    first value of every other declared axis."""
    defaults = {"conditioning": space.axis_values("conditioning")[0]}
    defaults.update({axis.name: (space.axes.values(axis.name) or [axis.default])[0] for axis in other_axes()})
    wanted = {**defaults, **space.baseline, "family": family or space.model.family}
    if "num_kv_heads" in wanted:
        wanted["kv_heads"] = wanted.pop("num_kv_heads")
    matches = [s for s in shapes if all(shape_value(s, k) == v for k, v in wanted.items())]
    if "kv_heads" not in wanted:
        matches.sort(key=lambda s: s.kv_heads != s.num_heads)  # multi-head attention first
    return matches[0].key() if len(matches) >= 1 else None


def shape_value(shape: Shape, name: str):
    """A shape's value of ``name``: a field of :class:`Shape`, else a declared axis (:func:`other_axes`)."""
    return getattr(shape, name) if name in SHAPE_FIELDS or name == "kv_heads" else shape.axis(name)


@lru_cache(maxsize=4096)
def _count_params(frozen: tuple) -> int:
    return counts.measure(frozen, flops=False).params


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
    problems = family_problems(shape.family, spec)
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
    return [(f"model.{p.field}", p.rule, p.value, p.fix) for p in family_problems(shape.family, spec)]
