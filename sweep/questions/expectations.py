"""The question "do the results agree with what was published?": a space states published results as data
(``expect:``, a list of :class:`Expect`), and the analysis says whether its results agree, disagree, or cannot
tell (docs/known_answers.md; the shipped reproductions are ``search_spaces/known_*.yaml``).

A claim is stated as a paper states it::

    expect:
      - name: one_full_rank_head_beats_eight
        claim: at fixed width one full-rank head beats eight heads of rank d/8 on nearest-neighbour retrieval
        source: Amsel, Yehudai & Bruna 2025 (ICLR, arXiv 2407.16153), Section 7
        a: {num_heads: 1}                 # shape values that pick out one config of the grid, or
        b: {config: {depth: 1, num_heads: 8, embed_dim: 32, mlp_dim: 128}}   # a config of its own
        direction: a_beats_b              # b_beats_a, no_difference, a_at_least_b; a_at_least, a_at_most (a level)
        tolerance: 2.0                    # in the metric's units (or, with relative: true, a fraction of b's mean)
        metric: accuracy                  # any metric or cost the trials record (default: the headline)
        solved_at: 99                     # compare solve rates (seeds at or past 99) instead of means
        level: chance                     # a level claim's level: a number, or the data set's chance
        at_every: {embed_dim: [64, 128]}  # a family: one verdict over the members (or at_some)

The plan resolves each side to its config (a grid side that picks out none of the planned shapes, or several,
is an issue ``sweep validate`` reports; under a profile whose grid leaves a side out, the claim is not judged,
a note) and adds a config of its own after the grid's, as control arms are added (no grid config id moves).
``sweep plan`` prints one line per claim (a family: per member), and ``sweep validate`` notes a solve-rate
claim its planned seeds cannot decide, with the seeds it needs. A sweep records the claims with their config
ids in its ``spaces`` row (:meth:`ExpectationsQuestion.record`), so the ``expectations`` view
(``expectations.sql``) judges the results against what the sweep that made them expected, with no space file
at query time. ``sweep report`` adds a Known answers section.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from sweep.headline import Headline
from sweep.markdown import query
from sweep.questions.base import AXIS_NAMES, Planner, Question
from sweep.text import plural
from workers.config import StrictModel
from workers.metrics import COSTS, METRICS, MODALITY_METRICS

SIDE_KEYS = (*AXIS_NAMES, "family")  # what a grid side may name
FULL_SHAPE = ("depth", "num_heads", "embed_dim", "mlp_dim")  # what a config of its own must give
TWO_SIDED = ("a_beats_b", "b_beats_a", "no_difference", "a_at_least_b")
LEVELS = ("a_at_least", "a_at_most")
EXPECTED = {  # the words the view reports for each direction
    "a_beats_b": "a beats b",
    "b_beats_a": "b beats a",
    "no_difference": "no difference",
    "a_at_least_b": "a at least as good as b",
    "a_at_least": "a at least the level",
    "a_at_most": "a at most the level",
}
DIRECTIONS = {k: EXPECTED[k] for k in ("a_beats_b", "b_beats_a", "no_difference")}  # the original three
NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
NOT_IN_GRID = "must pick out one of the plan's configurations, but picks out none"
ALPHA = 0.05  # every claim is decided at 95% (two-sided intervals; a family at some X: Holm over its members)
MAX_SEEDS_SEARCHED = 30  # how far `sweep validate` looks for the seeds a solve-rate claim needs


# --- the space's `expect:` section --------------------------------------------------------------------------


class OwnConfig(StrictModel):
    """A side that is a config of its own, not a point of the grid: ``{config: {depth: 2, num_heads: 1,
    embed_dim: 64, mlp_dim: 128}}``. The shape is given in full (depth, num_heads, embed_dim and mlp_dim;
    head_dim follows the baseline's head_dim rule unless given; the rest, e.g. ``num_kv_heads``, are the
    baseline's); the plan adds it after the grid's configs unless the grid holds it."""

    config: dict[str, int | str] = Field(min_length=1)

    @field_validator("config")
    @classmethod
    def _full_shape(cls, shape: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(shape) - set(AXIS_NAMES))
        if unknown:
            keys = ", ".join(AXIS_NAMES)
            raise ValueError(f"config keys must be among {keys}, but got {unknown}; rename or remove them")
        missing = [key for key in FULL_SHAPE if key not in shape]
        if missing:
            raise ValueError(f"a config of its own gives its shape in full, but {missing} are missing; add them")
        return shape


Side = dict[str, int | str] | OwnConfig


class Expect(StrictModel):
    """One published result as data (the module's docstring shows every key).

    ``name``: lower case, unique in the space (the view's key). ``claim``: the published statement, in words.
    ``source``: the paper and its table or figure. ``a``, ``b``: shape values that each pick out exactly one
    of the grid's configurations, or ``{config: {...}}``, a config of its own. ``direction``: ``a_beats_b``,
    ``b_beats_a``, ``no_difference``, ``a_at_least_b`` (non-inferiority: a ≥ b − tolerance); or, on ``a``
    alone with a ``level``, ``a_at_least`` / ``a_at_most`` the level. ``tolerance``: in the metric's units
    (a solve rate's: a fraction of seeds); with ``relative: true`` a fraction of b's mean. ``metric``: any
    metric the data set reports or cost the trials record (workers/metrics.py ``METRICS`` and ``COSTS``, each
    with its direction). ``solved_at``: judge the share of seeds whose value reaches it (at or above for a
    metric where higher is better, at or below otherwise) instead of the mean. ``level``: a number, or
    ``chance`` (the data set's chance level for the metric). ``at_every`` / ``at_some``: axis values that
    extend both sides, one member per combination, with one verdict for the family.
    """

    name: str = Field(pattern=NAME_PATTERN, max_length=60)
    claim: str = Field(min_length=1)
    source: str = Field(min_length=1)
    a: Side
    b: Side | None = None
    direction: Literal["a_beats_b", "b_beats_a", "no_difference", "a_at_least_b", "a_at_least", "a_at_most"]
    tolerance: float = Field(default=0.0, ge=0.0)
    relative: bool = False
    metric: str | None = None
    solved_at: float | None = None
    level: float | Literal["chance"] | None = None
    at_every: dict[str, list[int | str]] | None = None
    at_some: dict[str, list[int | str]] | None = None

    @field_validator("a", "b")
    @classmethod
    def _known_keys(cls, side: Any) -> Any:
        if isinstance(side, dict):
            if not side:
                raise ValueError("a side names at least one shape value; add one")
            unknown = sorted(set(side) - set(SIDE_KEYS))
            if unknown:
                keys = ", ".join(SIDE_KEYS)
                raise ValueError(f"shape keys must be among {keys}, but got {unknown}; rename or remove them")
        return side

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, metric: str | None) -> str | None:
        if metric is not None and metric not in METRICS and metric not in COSTS:
            known = ", ".join([*METRICS, *COSTS])
            raise ValueError(f"metric must be a metric or a cost the trials record ({known}), but got {metric!r}")
        return metric

    @model_validator(mode="after")
    def _kind_rules(self) -> Expect:
        problems = []
        if self.direction in LEVELS and (self.b is not None or self.level is None):
            problems.append(f"{self.direction} judges a against a level: give `level` and no `b`")
        if self.direction in TWO_SIDED and (self.b is None or self.level is not None):
            problems.append(f"{self.direction} compares a with b: give `b` and no `level`")
        if self.direction == "no_difference" and self.tolerance == 0:
            problems.append("no_difference needs a tolerance > 0 (within it either way)")
        if self.relative and (self.direction in LEVELS or self.solved_at is not None or self.tolerance >= 1):
            problems.append("relative: true takes a comparison of means, with a tolerance below 1 (a fraction of b)")
        if self.solved_at is not None and self.level == "chance":
            problems.append("with solved_at, a level is a share of seeds from 0 to 1, not chance")
        if self.solved_at is not None and (
            self.tolerance >= 1 or (isinstance(self.level, float | int) and not 0 <= self.level <= 1)
        ):
            problems.append("with solved_at, level and tolerance are shares of seeds, from 0 to 1")
        if self.at_every is not None and self.at_some is not None:
            problems.append("a family is at_every or at_some, not both")
        for values in (self.at_every or {}, self.at_some or {}):
            unknown = sorted(set(values) - set(AXIS_NAMES))
            if unknown or not all(values.values()):
                problems.append(f"at_every/at_some name axes ({', '.join(AXIS_NAMES)}), each with values")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def expected(self) -> str:
        """The words the view reports for this direction: ``a beats b``, ``a at least the level``, …"""
        return EXPECTED[self.direction]

    @property
    def family_values(self) -> dict[str, list]:
        return self.at_every or self.at_some or {}

    @property
    def rule(self) -> str:
        """``every`` (all members must hold), ``some`` (one must, Holm), or ``one`` (not a family)."""
        return "every" if self.at_every else "some" if self.at_some else "one"


def unique_names(expect: list[Expect]) -> list[Expect]:
    """``ValueError`` naming the repeats when two expectations of a space share a name."""
    names = [e.name for e in expect]
    repeats = sorted({n for n in names if names.count(n) > 1})
    if repeats:
        raise ValueError(f"expectation names must be unique in a space, but got {repeats} twice; rename one")
    return expect


Expectations = Annotated[list[Expect], AfterValidator(unique_names)]


def side_words(side: Any) -> str:
    """``depth=1 num_heads=8``: a side's shape values, in SIDE_KEYS order (a config of its own: ``config
    depth=2 num_heads=1 …``)."""
    if isinstance(side, OwnConfig):
        return "config " + side_words(side.config)
    return " ".join(f"{key}={side[key]}" for key in SIDE_KEYS if key in side)


# --- the statistics a solve rate needs (also the analysis's Python functions) ----------------------------


def z_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def t_quantile(p: float | None, dof: float | None) -> float | None:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (None: the normal's); the view's
    intervals at another level than 95% (a family at some X, Holm-adjusted) read it. None for dof < 1."""
    from scipy.stats import norm, t

    if p is None:
        return None
    if dof is None:
        return float(norm.ppf(p))
    return float(t.ppf(p, dof)) if dof >= 1 else None


def wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of a proportion k / n at normal quantile z:
    (p + z²/2n ∓ z √(p(1−p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def newcombe(k_a: int, n_a: int, k_b: int, n_b: int, z: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval (1998, method 10) of p_a − p_b from the two Wilson intervals:
    d − √((p_a − l_a)² + (u_b − p_b)²) … d + √((u_a − p_a)² + (p_b − l_b)²)."""
    (la, ua), (lb, ub) = wilson(k_a, n_a, z), wilson(k_b, n_b, z)
    pa, pb = k_a / n_a, k_b / n_b
    return pa - pb - math.hypot(pa - la, ub - pb), pa - pb + math.hypot(ua - pa, pb - lb)


@functools.lru_cache(maxsize=4096)
def boschloo_p(k_a: int | None, n_a: int | None, k_b: int | None, n_b: int | None) -> float | None:
    """The two-sided p-value of Boschloo's exact unconditional test of p_a = p_b, k_a of n_a seeds solved
    against k_b of n_b (scipy.stats.boschloo_exact on the table [[k_a, k_b], [n_a − k_a, n_b − k_b]], columns
    the two sides). 1 when every seed, or none, solved (the table says nothing against equal rates)."""
    if None in (k_a, n_a, k_b, n_b) or min(n_a, n_b) < 1:
        return None
    if k_a + k_b in (0, n_a + n_b):
        return 1.0
    from scipy.stats import boschloo_exact

    return float(boschloo_exact([[k_a, k_b], [n_a - k_a, n_b - k_b]], alternative="two-sided").pvalue)


def decided_at_best(expect: Expect, seeds: int, alpha: float) -> bool:
    """Whether a solve-rate claim can be decided at ``seeds`` per side in the outcome most favourable to it
    (every seed of the side the claim says wins solved, none of the other; equal rates for the others)."""
    z, tol, n = z_quantile(1 - alpha / 2), expect.tolerance, seeds
    if expect.direction in LEVELS:
        low, high = wilson(n if expect.direction == "a_at_least" else 0, n, z)
        return low >= expect.level - tol if expect.direction == "a_at_least" else high <= expect.level + tol
    if expect.direction in ("a_beats_b", "b_beats_a"):
        return newcombe(n, n, 0, n, z)[0] > tol and boschloo_p(n, n, 0, n) < alpha
    low, high = newcombe(n, n, n, n, z)
    return low >= -tol and (expect.direction == "a_at_least_b" or high <= tol)


def seeds_needed(expect: Expect, members: int = 1) -> int | None:
    """The fewest seeds per side at which a solve-rate claim can be decided at all (its most favourable
    outcome decides it), None past :data:`MAX_SEEDS_SEARCHED`; a family at some X is decided at α / members."""
    alpha = ALPHA / members if expect.rule == "some" else ALPHA
    return next((n for n in range(1, MAX_SEEDS_SEARCHED + 1) if decided_at_best(expect, n, alpha)), None)


# --- the plan -----------------------------------------------------------------------------------------------


def shape_value(shape, key: str):
    return shape.kv_heads if key == "num_kv_heads" else getattr(shape, key)


def matching_shapes(shapes: list, side: dict[str, Any]) -> list:
    """The shapes (``sweep.space.shapes.Shape``) whose values equal every value ``side`` names."""
    return [s for s in shapes if all(shape_value(s, key) == value for key, value in side.items())]


@dataclass(frozen=True)
class Member:
    """One comparison of a claim: the claim itself, or one member of a family (``label``: ``embed_dim=64``),
    with its sides as the member states them."""

    expect: Expect
    label: str
    a: Any  # dict of shape values, or OwnConfig
    b: Any


def members(expect: Expect) -> list[Member]:
    """The claim's comparisons: itself, or one per combination of its family's values, each extending both
    sides (a grid side's values, a config of its own's shape)."""
    values = expect.family_values
    if not values:
        return [Member(expect, "", expect.a, expect.b)]
    keys, found = list(values), []
    for combo in itertools.product(*(values[k] for k in keys)):
        extra = dict(zip(keys, combo, strict=True))
        label = " ".join(f"{k}={v}" for k, v in extra.items())
        found.append(Member(expect, label, extended(expect.a, extra), extended(expect.b, extra)))
    return found


def extended(side: Any, extra: dict) -> Any:
    """A side with a family member's values added (a grid side's values, a config of its own's shape)."""
    if side is None:
        return None
    return OwnConfig(config={**side.config, **extra}) if isinstance(side, OwnConfig) else {**side, **extra}


@dataclass(frozen=True)
class Resolved:
    """A member with the shape each side picks out (``b_shape`` None for a level), and whether each is a
    config of its own."""

    member: Member
    a_shape: Any
    b_shape: Any


@dataclass(frozen=True)
class Surveyed:
    """The expectations question's answer before the configs are measured: the members resolved, and the
    claims a profile's grid leaves a side of out (name: why), judged nowhere under it."""

    resolved: list[Resolved]
    unjudged: dict[str, str]


def own_shape(planner: Planner, config: dict, path: str):
    """A config of its own as a shape (as a control arm's: the baseline's with these values), or None with
    an issue."""
    from sweep.questions.controls import Control, control_shape

    baseline = planner.baseline_shape()
    shape, reason = control_shape(planner, baseline, Control(label="claim", shape=config))
    if shape is None:
        planner.issue(path, "a config of its own must be buildable", dict(config), f"change it: {reason}")
        return None
    problems = planner.family_problems(shape)
    for _, rule, value, fix in problems:
        planner.issue(path, rule, value, fix)
    return None if problems else shape


def grid_shape(planner: Planner, side: dict, path: str, unjudged: list):
    """The one grid shape a side picks out, or None with an issue (``NOT_IN_GRID``: noted in ``unjudged``)."""
    shapes = matching_shapes(planner.shapes, side)
    if len(shapes) == 1:
        return shapes[0]
    if not shapes:
        unjudged.append(f"{path} ({side_words(side)}) picks out none of its grid's configs")
        planner.issue(path, NOT_IN_GRID, dict(side), "use values the axes give (`sweep plan` lists the configurations)")
        return None
    listed = "; ".join(side_words({k: shape_value(s, k) for k in SIDE_KEYS}) for s in shapes[:4])
    rule = f"must pick out exactly one of the plan's configurations, but picks out {len(shapes)}"
    planner.issue(path, rule, dict(side), f"add the key that tells them apart (candidates: {listed})")
    return None


def resolve_sides(planner: Planner) -> Surveyed:
    """Each claim's members with the shape of each side; a side that cannot be resolved is an issue (and the
    claim is left out); the claim-level checks that need the space (metric, seeds) are issues or notes."""
    resolved, unjudged = [], {}
    for index, expect in enumerate(planner.space.expect):
        metric_issues(planner, expect, index)
        found, missing, whole = [], [], True
        for member in members(expect):
            shapes = {}
            for side in ("a", "b"):
                value, path = getattr(member, side), f"expect[{index}].{side}"
                if value is None:
                    shapes[side] = None
                elif isinstance(value, OwnConfig):
                    shapes[side] = own_shape(planner, value.config, path + ".config")
                else:
                    shapes[side] = grid_shape(planner, value, path, missing)
            if shapes["a"] is None or (member.b is not None and shapes["b"] is None):
                whole = False
            elif shapes["b"] is not None and shapes["a"].key() == shapes["b"].key():
                planner.issue(f"expect[{index}]", "a and b must differ", side_words(member.a), "change one")
                whole = False
            else:
                found.append(Resolved(member, shapes["a"], shapes["b"]))
        if missing:
            unjudged[expect.name] = "; ".join(dict.fromkeys(missing))
        if whole:
            resolved.extend(found)
            seeds_note(planner, expect, index)
    return Surveyed(resolved, unjudged)


def metric_issues(planner: Planner, expect: Expect, index: int) -> None:
    """A claim's metric is one the data set reports (or a cost); a level at chance needs the data set's."""
    space, metric = planner.space, claim_metric(planner.space, expect)
    if metric in METRICS and metric not in MODALITY_METRICS[space.data.modality]:
        reported = ", ".join(MODALITY_METRICS[space.data.modality]) + ", " + ", ".join(COSTS)
        planner.issue(f"expect[{index}].metric", f"must be recorded for data set {space.data.name!r}", metric,
                      f"name one it records: {reported}")  # fmt: skip
    if expect.level == "chance" and space.data.chance_score(metric) is None:
        planner.issue(f"expect[{index}].level", f"data set {space.data.name!r} has no chance level for {metric}",
                      "chance", "give the level as a number")  # fmt: skip


def seeds_note(planner: Planner, expect: Expect, index: int) -> None:
    """A note when a solve-rate claim cannot be decided at the planned seeds even in its best outcome."""
    from sweep.errors import ConfigIssue

    if expect.solved_at is None:
        return
    seeds, needed = len(planner.space.seeds), seeds_needed(expect, len(members(expect)))
    if needed is not None and seeds >= needed:
        return
    rule = (f"a solve-rate claim cannot be decided at {plural(seeds, 'seed')} per side, even in its most favourable "
            "outcome")  # fmt: skip
    fix = (
        f"plan at least {needed} seeds (`seeds:`, or `sweep rerun … --seeds {needed}`)"
        if needed
        else f"no number of seeds up to {MAX_SEEDS_SEARCHED} decides it: loosen the tolerance or the level"
    )
    planner.issues.append(ConfigIssue("", f"expect[{index}]", rule, expect.name, fix, note=True))


def claim_metric(space, expect: Expect) -> str:
    return expect.metric or space.metric.name


def metric_mode(space, metric: str) -> str:
    if metric == space.metric.name:
        return space.metric.mode
    return METRICS[metric].mode if metric in METRICS else COSTS[metric].mode


@dataclass(frozen=True)
class PlannedExpectation:
    """A member of the plan with the config each side picks out (``b`` None for a level), and whether each is
    a config added for the claim (not one of the grid's)."""

    member: Member
    a: Any  # sweep.plan.plan.PlannedConfig
    b: Any
    a_added: bool = False
    b_added: bool = False

    @property
    def expect(self) -> Expect:
        return self.member.expect


@dataclass(frozen=True)
class PlannedExpectations:
    """The expectations question's answer in a plan: its members, and the claims not judged under it."""

    planned: list[PlannedExpectation]
    unjudged: dict[str, str]


def with_configs(planner: Planner, surveyed: Surveyed | None) -> PlannedExpectations:
    """The members with their configs: a side's config of the grid (or of a control arm), or a config of its
    own added after them (once, however many claims name it), so no grid config id moves."""
    if surveyed is None:
        return PlannedExpectations([], {})
    grid = {c.shape.key() for c in planner.configs}

    def config_of(shape):
        found = next((c for c in planner.configs if c.shape.key() == shape.key()), None)
        if found is None:
            found = planner.planned_config(shape)
            planner.configs.append(found)
        return found

    planned = []
    for r in surveyed.resolved:
        b = None if r.b_shape is None else config_of(r.b_shape)
        added = (r.a_shape.key() not in grid, r.b_shape is not None and r.b_shape.key() not in grid)
        planned.append(PlannedExpectation(r.member, config_of(r.a_shape), b, *added))
    return PlannedExpectations(planned, surveyed.unjudged)


def level_value(space, expect: Expect, metric: str) -> float | None:
    if expect.level == "chance":
        return space.data.chance_score(metric)
    return None if expect.level is None else float(expect.level)


def claim_rows(plan) -> list[dict]:
    """Each member as plain data, with its config ids: what a sweep records (``spaces.questions``), what
    ``sweep plan --format json`` prints, and what ``expectations.sql`` reads."""
    answer = plan.answers["expectations"]
    rows = []
    for p in answer.planned if answer else []:
        e, space = p.expect, plan.space
        metric = claim_metric(space, e)
        cost = COSTS.get(metric)
        rows.append({
            "name": e.name,
            "claim": " ".join(e.claim.split()),
            "source": " ".join(e.source.split()),
            "expected": e.expected,
            "direction": e.direction,
            "tolerance": e.tolerance,
            "relative": e.relative,
            "metric": metric,
            "metric_mode": metric_mode(space, metric),
            "exact": bool(cost and cost.exact),
            "per_device": bool(cost and cost.per_device),
            "level": level_value(space, e, metric),
            "level_words": None if e.level is None else str(e.level),
            "solved_at": e.solved_at,
            "a_shape": side_words(p.member.a),
            "b_shape": None if p.member.b is None else side_words(p.member.b),
            "a_config": p.a.config_id,
            "b_config": None if p.b is None else p.b.config_id,
            "a_added": p.a_added,
            "b_added": p.b_added,
            "rule": e.rule,
            "member": p.member.label,
            "members": len(members(e)),
        })  # fmt: skip
    return rows


# --- sweep plan ---------------------------------------------------------------------------------------------


def tolerance_words(row: dict) -> str:
    if row.get("solved_at") is not None:
        return f"tolerance {row['tolerance']:g} of the seeds; a seed solves at {row['solved_at']:g} {row['metric']}"
    if row.get("relative"):
        return f"tolerance {row['tolerance']:.0%} of b's mean {row['metric']}"
    return f"tolerance {row['tolerance']:g} {row['metric']}"


def plan_side(row: dict, side: str) -> str:
    """``num_heads=2 (0322bf19a35f5533)``; ``, added`` after the id of a config of its own."""
    added = ", added" if row[f"{side}_added"] else ""
    return f"{row[f'{side}_shape']} ({row[f'{side}_config']}{added})"


def expectation_lines(plan) -> list[str]:
    """One line per member: name, the sides and their configs (``added``: a config of its own), the expected
    result with its tolerance; and a line per claim this profile does not judge."""
    lines = []
    for row in claim_rows(plan):
        name = row["name"] + (f" [{row['member']}, {row['rule']} of {row['members']}]" if row["member"] else "")
        if row["b_config"] is None:
            chance = row["level_words"] == "chance" and row["level"] is not None
            level = row["level_words"] + (f" = {row['level']:g}" if chance else "")
            what = f"{plan_side(row, 'a')}: {row['expected'].replace('the level', '')}{level}"
        else:
            what = f"{plan_side(row, 'a')} vs {plan_side(row, 'b')}: {row['expected']}"
        rate = " (solve rate)" if row["solved_at"] is not None else ""
        lines.append(f"expect {name}: {what}{rate} ({tolerance_words(row)}); {row['source']}")
    answer = plan.answers["expectations"]
    for name, why in (answer.unjudged if answer else {}).items():
        lines.append(f"expect {name}: not judged under this profile: {why}")
    return lines


# --- the report ---------------------------------------------------------------------------------------------


def fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def expectation_section(rows: list[dict]) -> str:
    """``## Known answers``: each claim with its source, the result expected and found, the statistic with
    its interval and the verdict. Nothing when the space's sweeps recorded none."""
    if not rows:
        return ""
    parts = ["\n## Known answers\n"]
    for row in rows:
        if row["found"] == "did not learn":
            parts.append(unlearned_line(row))
            continue
        parts.append(claim_line(row))
    parts.append(
        "\nΔ is a's mean minus b's, signed so that positive means a is better, with its 95% Welch interval (a "
        "solve rate: the share of seeds solved, Newcombe's interval; docs/known_answers.md); `sweep sql \"FROM "
        'expectations"` gives the table, `FROM expectation_members` each member of a family.\n'
    )
    return "\n".join(parts)


def claim_line(row: dict) -> str:
    if row["rule"] in ("every", "some"):
        found = f"{row['members_agreeing']} of {row['members']} members agree ({row['rule']} of them must)"
        return (f"- **{row['name']}: {row['verdict']}.** {row['claim']} ({row['source']}). Expected "
                f"{row['expected']} at {row['rule']} member; found {found}.")  # fmt: skip
    if row["delta_lo"] is not None:
        interval = f"Δ {row['delta']:+.2f} (95% CI {row['delta_lo']:+.2f} … {row['delta_hi']:+.2f})"
    else:
        interval = "Δ " + (f"{row['delta']:+.2f}" if row["delta"] is not None else "unknown") + ", no interval"
    sides = f"{row['a_shape']}" + (f" vs {row['b_shape']}" if row["b_shape"] else f" against {row['level']:g}")
    either = " either way" if row["expected"] == "no difference" else ""
    bound = f"within {row['tolerance']:g}"
    if row["b_shape"]:
        bound = f"by more than {row['tolerance']:g} {row['metric']}{either}"
    return (
        f"- **{row['name']}: {row['verdict']}.** {row['claim']} ({row['source']}). Expected: {sides}, "
        f"{row['expected']} {bound}; found {row['found']}: {interval}, a {fmt(row['a_mean'])} over "
        f"{plural(row['n_a'] or 0, 'seed')}"
        + (f", b {fmt(row['b_mean'])} over {plural(row['n_b'] or 0, 'seed')}." if row["b_shape"] else ".")
    )


def unlearned_line(row: dict) -> str:
    """An expectation the results cannot judge because the side(s) it rests on stayed at chance
    (``found = 'did not learn'``): which side, its mean against the chance level, and that it is no finding."""
    sides = [side for side in ("a", "b") if row[f"{side}_at_chance"]]
    if row["must_learn"] in ("a", "b"):
        sides = [row["must_learn"]]
    who = " and ".join(f"{side} ({row[f'{side}_shape']}, {fmt(row[f'{side}_mean'])} over "
                       f"{plural(row[f'n_{side}'], 'seed')})" for side in sides)  # fmt: skip
    return (
        f"- **{row['name']}: {row['verdict']}.** {row['claim']} ({row['source']}). Expected: {row['a_shape']} vs "
        f"{row['b_shape']}, {row['expected']}; found did not learn: {who} did not get beyond the chance level "
        f"of {fmt(row['chance_score'])} {row['metric']}, so these results say nothing about the claim (train "
        "longer, or with the full profile, before judging it)."
    )


def claimable_sql(text: str) -> str:
    """``expectations.sql`` with the columns a claim may name at its marks: each metric and cost of
    workers/metrics.py, as a regular expression's alternatives (the view takes those the results' files have)."""
    return text.replace("@claim-names", "|".join([*METRICS, *COSTS]))


class ExpectationsQuestion(Question):
    """``expect:``: published results judged against the results (see the module's docstring)."""

    name = "expectations"
    section = "expect"
    section_model = Expectations
    section_default: ClassVar[list] = []
    section_doc = "published results the space reproduces, judged on its results (sweep/questions/expectations.py)"
    sql = "expectations.sql"
    report_place = "costs"

    def add_shapes(self, planner: Planner) -> Surveyed | None:
        if not planner.space.expect:
            return None
        return resolve_sides(planner)

    def add_configs(self, planner: Planner, answer: Surveyed | None) -> PlannedExpectations:
        return with_configs(planner, answer)

    def plan_lines(self, plan) -> list[str]:
        return expectation_lines(plan)

    def grid_words(self, plan) -> str:
        answer = plan.answers["expectations"]
        planned = answer.planned if answer else []
        added = {c.config_id for p in planned for c, new in ((p.a, p.a_added), (p.b, p.b_added)) if new}
        return plural(len(added), "config") + " of claims" if added else ""

    def plan_json(self, plan) -> dict:
        answer = plan.answers["expectations"]
        if not answer or not (answer.planned or answer.unjudged):
            return {}
        return {"expectations": claim_rows(plan), **({"unjudged": answer.unjudged} if answer.unjudged else {})}

    def record(self, plan) -> list[dict] | None:
        return claim_rows(plan)

    def sql_text(self) -> str:
        """Its SQL, with every claimable column (each metric and cost of workers/metrics.py) at its marks."""
        return claimable_sql(super().sql_text())

    def python_functions(self) -> dict:
        return {
            "boschloo_p": (boschloo_p, ["BIGINT"] * 4, "DOUBLE"),
            "t_quantile": (t_quantile, ["DOUBLE", "DOUBLE"], "DOUBLE"),
        }

    def report_section(self, con, space: str, headline: Headline, data) -> str:
        return expectation_section(query(con, "FROM expectations WHERE space = ?", space))


QUESTION = ExpectationsQuestion()
