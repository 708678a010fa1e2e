"""The question "with the same parameter budget, is it better spent on depth, width or heads?": a space's
``budget:`` block (:class:`Budget`), solved here, planned, validated, printed and reported. From one base
shape, each way grows one free integer dimension until the model's exact parameter count is nearest
the target, every other size as the base's:

    deeper      depth
    wider       d_model (k · unit), MLP = round(ratio · d_model), attention as wide as d_model
    more_heads  heads (k · unit) at the base's head_dim: the attention block widens

Counts come from ``params_of`` (the plan passes ``measure_shape``'s: the model built on the meta device), so
whatever a family adds (biases, norms, embeddings) is in them. Each count is non-decreasing in the free
integer, so the nearest is found by doubling, then bisection: about 2·log2(k) counts a way.

Shapes are the space's :class:`~sweep.space.shapes.Shape` (copied with ``dataclasses.replace``, labelled with
``Shape.labelled``; this module does not import the plan, which loops over the questions). Its labels, the
trials and configs columns ``budget_way`` and ``budget_target_params``, are declared in ``BudgetQuestion.labels``;
the schema, the sink, the views and ``sweep plan`` derive theirs from that. Views: ``budget.sql`` (budget_ways,
budget_pairs).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from sweep.headline import Headline, format_delta, format_score
from sweep.markdown import markdown_table, query
from sweep.questions.base import Label, Planner, Question, Unbuildable
from sweep.text import plural, shape_words
from workers.config import PositiveInt, StrictModel

# --- the space's `budget:` section ----------------------------------------------------------------------

BUDGET_WAYS = ("deeper", "wider", "more_heads")  # the ways a `budget:` block spends its parameters
BUDGET_BASE_KEYS = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim")  # what `budget.from` may name


class BudgetTarget(StrictModel):
    """How many parameters each way spends: ``params`` (a count) or ``factor`` (× the base's params)."""

    params: PositiveInt | None = None
    factor: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="after")
    def _exactly_one(self) -> BudgetTarget:
        if (self.params is None) == (self.factor is None):
            raise ValueError(
                f"exactly one of `params` and `factor` must be given, but got (params={self.params}, "
                f"factor={self.factor}); keep one (a profile's target merges with the space's: set the other to null)"
            )
        return self


class Budget(StrictModel):
    """One parameter budget spent three ways from one base shape (solved below).

    ``from``: the base, ``baseline`` (the space's baseline) or axis values that pick one of the space's
    shapes (``{depth: 4, num_heads: 2}``); the base is a config of its own (``budget_way`` ``base``).
    ``target``: ``{params: N}`` or ``{factor: F}`` (F × the base's params). ``tolerance``: how far, as a
    fraction of the target, a way's exact count (``measure_shape``) may miss it (0.02: ±2%). ``ways``, each
    optional, and what each solves for, every other size as the base's:

    - ``deeper``: depth;
    - ``wider``: d_model, with the MLP at the base's ratio (mlp_dim = round(ratio · d_model)) and attention as
      wide as d_model; ``wider_keeps`` ``num_heads`` (head_dim = d_model / heads, so d_model steps in multiples
      of the heads) or ``head_dim`` (heads = d_model / head_dim); d_model is also a multiple of
      ``width_multiple``;
    - ``more_heads``: the number of heads at the base's head_dim (attention widens: fixed_head_dim), in
      multiples of ``heads_multiple``.

    Each way takes the value whose count is nearest the target; beyond the tolerance it is not planned and the
    space is invalid, with the nearest miss named.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    base: Literal["baseline"] | dict[str, PositiveInt] = Field(default="baseline", alias="from")
    target: BudgetTarget
    tolerance: float = Field(default=0.02, gt=0.0, le=0.5)
    ways: list[Literal["deeper", "wider", "more_heads"]] = Field(default=list(BUDGET_WAYS), min_length=1)
    wider_keeps: Literal["num_heads", "head_dim"] = "num_heads"
    width_multiple: PositiveInt = 1
    heads_multiple: PositiveInt = 1

    @field_validator("ways")
    @classmethod
    def _unique_ways(cls, ways: list[str]) -> list[str]:
        if len(set(ways)) != len(ways):
            raise ValueError(f"ways must be unique, but got {ways}; remove the repeats")
        return ways

    @field_validator("base")
    @classmethod
    def _base_keys(cls, base):
        unknown = sorted(set(base) - set(BUDGET_BASE_KEYS)) if isinstance(base, dict) else []
        if unknown:
            raise ValueError(
                f"keys must be among {', '.join(BUDGET_BASE_KEYS)}, but got {unknown}; remove them, or write "
                "`from: baseline`"
            )
        return base


# --- the solver --------------------------------------------------------------------------------------------

MAX_STEPS = 1 << 20  # no way grows its dimension past a million units (a budget that would is unreachable)
FREE_DIMENSION = {"deeper": "depth", "wider": "embed_dim", "more_heads": "num_heads"}


def percent(fraction: float) -> str:
    """0.02 → ``2%``, 0.005 → ``0.5%``: a tolerance as the space file's fraction reads in percent."""
    return f"{fraction * 100:g}%"


@dataclass(frozen=True)
class WaySolution:
    """One way's answer: the nearest achievable value of its free dimension, its exact count and miss.

    ``shape`` is None when the way has no config: ``reason`` says why (the miss beyond the tolerance, a
    constraint, or what the family cannot build)."""

    way: str
    family: str
    dimension: str  # the free dimension: depth, embed_dim or num_heads
    value: int | None
    params: int | None
    target: int
    tolerance: float
    shape: Any = None  # sweep.space.shapes.Shape, labelled with the way
    reason: str | None = None

    @property
    def miss(self) -> float | None:
        """params / target − 1: the relative difference from the target (+0.007 is 0.7% over)."""
        return None if self.params is None else self.params / self.target - 1

    def words(self) -> str:
        """``depth 8: 36,410 params, matched within ±2%: +0.7%`` (or why it has no config)."""
        if self.value is None:
            return f"{self.dimension}: none ({self.reason})"
        head = f"{self.dimension} {self.value}: {self.params:,} params"
        if self.shape is not None:
            return f"{head}, matched within ±{percent(self.tolerance)}: {self.miss:+.1%}"
        return f"{head}, {self.miss:+.1%}: NOT matched ({self.reason})"


@dataclass(frozen=True)
class BudgetPlan:
    """A family's budget: its base (a config, ``budget_way`` ``base``), the target, and each way's answer."""

    family: str
    base: Any  # sweep.space.shapes.Shape
    base_params: int
    target: int
    tolerance: float
    ways: list[WaySolution]


def target_params(budget: Budget, base_params: int) -> int:
    """The target count: ``target.params``, or ``target.factor`` × the base's params, rounded."""
    return budget.target.params if budget.target.params is not None else round(budget.target.factor * base_params)


def nearest_step(count: Callable[[int], int], target: int) -> tuple[int, int]:
    """The k ≥ 1 whose ``count(k)`` (non-decreasing in k) is nearest ``target`` in relative terms, and that
    count; of two equally near, the smaller k. Doubling finds a k at or over the target, bisection the first."""
    if count(1) >= target:
        return 1, count(1)
    low, high = 1, 2  # count(low) < target throughout
    while count(high) < target:
        if high >= MAX_STEPS:
            return high, count(high)
        low, high = high, min(2 * high, MAX_STEPS)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) < target else (low, middle)
    below, above = count(low), count(high)
    return (low, below) if target - below <= above - target else (high, above)  # whole numbers: exact ties


def way_shape(way: str, base, budget: Budget, k: int):
    """The shape ``way`` reaches at step ``k`` of its free dimension, labelled with the way."""
    kv = base.num_kv_heads if base.kv_heads != base.num_heads else None
    if way == "deeper":
        return dataclasses.replace(base, depth=k).labelled(budget_way=way)
    if way == "more_heads":
        more = dataclasses.replace(base, num_heads=k * heads_unit(base, budget), rule="fixed_head_dim")
        return more.labelled(budget_way=way)
    width = k * width_unit(base, budget)
    mlp = max(1, round(base.mlp_dim * width / base.embed_dim))
    if budget.wider_keeps == "num_heads":
        heads, head_dim = base.num_heads, width // base.num_heads
    else:
        heads, head_dim = width // base.head_dim, base.head_dim
    return dataclasses.replace(
        base,
        embed_dim=width,
        mlp_dim=mlp,
        num_heads=heads,
        head_dim=head_dim,
        num_kv_heads=kv,
        rule="fixed_d_model",
    ).labelled(budget_way=way)


def heads_unit(base, budget: Budget) -> int:
    """more_heads counts heads in multiples of ``heads_multiple`` and of the key/value heads (grouped-query)."""
    kv = base.kv_heads if base.kv_heads != base.num_heads else 1
    return math.lcm(budget.heads_multiple, kv)


def width_unit(base, budget: Budget) -> int:
    """wider steps d_model in multiples of ``width_multiple`` and of what keeps heads whole: the heads
    (``wider_keeps: num_heads``), or head_dim × the key/value heads (``head_dim``)."""
    if budget.wider_keeps == "num_heads":
        return math.lcm(budget.width_multiple, base.num_heads)
    kv = base.kv_heads if base.kv_heads != base.num_heads else 1
    return math.lcm(budget.width_multiple, base.head_dim * kv)


def free_value(way: str, shape) -> int:
    return getattr(shape, FREE_DIMENSION[way])


def solve_way(way: str, base, budget: Budget, target: int, params_of: Callable[[Any], int]) -> WaySolution:
    """The shape of ``way`` whose ``params_of`` is nearest ``target``; kept when within the tolerance."""
    dimension = FREE_DIMENSION[way]
    empty = WaySolution(way, base.family, dimension, None, None, target, budget.tolerance)
    if way == "wider" and base.attn_dim != base.embed_dim:
        reason = (
            f"wider keeps attention as wide as d_model, but the base's is {base.attn_dim} wide at d_model "
            f"{base.embed_dim}; use a base with head_dim = embed_dim / num_heads"
        )
        return dataclasses.replace(empty, reason=reason)
    try:
        k, params = nearest_step(lambda step: params_of(way_shape(way, base, budget, step)), target)
    except Unbuildable as exc:
        return dataclasses.replace(empty, reason=f"the family cannot build it: {exc}")
    shape = way_shape(way, base, budget, k)
    solved = dataclasses.replace(empty, value=free_value(way, shape), params=params)
    if abs(params / target - 1) > budget.tolerance:
        return dataclasses.replace(
            solved, reason=f"the nearest achievable misses the target by more than ±{percent(budget.tolerance)}"
        )
    return dataclasses.replace(solved, shape=shape)


def solve_budget(base, budget: Budget, params_of: Callable[[Any], int]) -> BudgetPlan:
    """Every way of ``budget`` from ``base`` (a Shape), each counted by ``params_of``."""
    base_params = params_of(base)
    target = target_params(budget, base_params)
    ways = [solve_way(way, base, budget, target, params_of) for way in budget.ways]
    labelled = base.labelled(budget_way="base")
    return BudgetPlan(base.family, labelled, base_params, target, budget.tolerance, ways)


def miss_issue(solution: WaySolution) -> tuple[str, str, str]:
    """(rule, value, fix) for a way that has no config: what was asked, the nearest miss, what to change."""
    rule = (
        f"{solution.way} must reach {solution.target:,} params within ±{percent(solution.tolerance)} "
        f"(solving {solution.dimension} for family {solution.family})"
    )
    if solution.value is None:
        return rule, "no shape", f"{solution.reason}; or drop {solution.way} from budget.ways"
    value = f"nearest {solution.dimension}={solution.value}: {solution.params:,} params ({solution.miss:+.1%})"
    needed = math.ceil(abs(solution.miss) * 1000) / 1000
    fix = (
        f"{solution.reason}: set budget.tolerance to at least {needed:g}, choose a target this way can reach "
        f"(budget.target.params: {solution.params}), or drop {solution.way} from budget.ways"
    )
    return rule, value, fix


# --- the plan -----------------------------------------------------------------------------------------------


def budget_base(planner: Planner, family: str):
    """The shape ``budget.from`` names in ``family``: the baseline, or the first shape with every value it
    gives (None when no shape has them)."""
    wanted = planner.space.budget.base
    if wanted == "baseline":
        return planner.baseline_shape(family)
    shapes = planner.shapes
    return next((s for s in shapes if s.family == family and all(getattr(s, k) == v for k, v in wanted.items())), None)


def plan_budgets(planner: Planner) -> list[BudgetPlan]:
    """The space's budget solved for each family whose base is among the shapes; a family without one is an
    issue (``budget.from``)."""
    space, plans = planner.space, []
    for family in space.families():
        base = budget_base(planner, family)
        if base is not None:
            plans.append(solve_budget(base, space.budget, planner.params_of))
            continue
        where = f" of family {family}" if len(space.families()) > 1 else ""
        rule = f"must name one of the space's shapes{where} (the budget's base is a config of its own)"
        fix = "write `from: baseline`, or values of a shape the axes give"
        planner.issue("budget.from", rule, space.budget.base, fix)
    return plans


def with_budget_shapes(planner: Planner, budgets: list[BudgetPlan]) -> None:
    """The planner's shapes with each budget's base labelled and each way's shape added (a way's shape that
    is already a shape of the grid is labelled instead); a way without a shape, or whose shape breaks a
    constraint, is a removed combination and an issue, with the reason."""
    by_key = {s.key(): s for s in planner.shapes}
    for budget in budgets:
        target = {"budget_target_params": budget.target}
        by_key[budget.base.key()] = by_key[budget.base.key()].labelled(budget_way="base", **target)
        for way in budget.ways:
            combo = {"budget_way": way.way, "family": budget.family, way.dimension: way.value}
            if way.shape is None:
                planner.issue("budget.ways", *miss_issue(way))
                planner.removed.append(planner.removal(combo, f"{way.words()}; target {budget.target:,} params"))
                continue
            reason = planner.constraint_violation(way.shape)
            if reason:
                rule = f"{way.way}'s shape ({way.dimension}={way.value}) must meet the constraints"
                planner.issue("budget.ways", rule, reason, f"relax the constraint, or drop {way.way} from budget.ways")
            if reason or by_key.get(way.shape.key(), way.shape).label("budget_way") not in (None, way.way):
                taken = by_key.get(way.shape.key())
                why = reason or f"the same shape as the {taken.label('budget_way')} config"
                planner.removed.append(planner.removal(combo, why))
                continue
            by_key[way.shape.key()] = by_key.get(way.shape.key(), way.shape).labelled(budget_way=way.way, **target)
    planner.shapes = list(by_key.values())


# --- sweep plan ---------------------------------------------------------------------------------------------


def budget_lines(plan) -> list[str]:
    """A ``budget:`` block's answer: the base and target, then each way's solved value, params and miss."""
    lines = []
    for budget in plan.answers["budget"]:
        base, family = budget.base, (f" ({budget.family})" if len(plan.space.families()) > 1 else "")
        lines.append(
            f"budget{family}: from depth {base.depth} × {plural(base.num_heads, 'head')} of {base.head_dim}, d_model "
            f"{base.embed_dim}, MLP {base.mlp_dim}: {budget.base_params:,} params; target {budget.target:,} params "
            f"({budget.target / budget.base_params:.2f}× the base), within ±{percent(budget.tolerance)}"
        )
        lines += [f"  {way.way:<10} {way.words()}" for way in budget.ways]
    return lines


def budget_rows(plan) -> list[dict]:
    """Each budget's ways as plain data (``sweep plan --format json``)."""
    return [
        {
            "family": budget.family,
            "base_params": budget.base_params,
            "target_params": budget.target,
            "tolerance": budget.tolerance,
            "ways": [way_row(way) for way in budget.ways],
        }
        for budget in plan.answers["budget"]
    ]


def way_row(way: WaySolution) -> dict:
    return {"way": way.way, "dimension": way.dimension, "value": way.value, "params": way.params, "miss": way.miss,
            "matched": way.shape is not None, "reason": way.reason}  # fmt: skip


# --- the report ---------------------------------------------------------------------------------------------

WAY_WORDS = {"base": "the base", "deeper": "deeper", "wider": "wider", "more_heads": "more heads"}
BUDGET_WAY_COLUMNS = ["budget_way", "depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim", "n_seeds",
                      "score_mean", "score_lo", "score_hi", "params", "params_miss", "flops_per_sample",
                      "train_samples_per_s", "infer_samples_per_s", "kappa_mean"]  # fmt: skip
BUDGET_PAIR_COLUMNS = ["way_a", "way_b", "n_a", "n_b", "delta", "delta_lo", "delta_hi", "params_ratio", "verdict",
                       "evidence"]  # fmt: skip


def budget_section(con, space: str, headline: Headline) -> str:
    """Which way spent the budget best: a paragraph per budget (target), then its ways and pairs as tables."""
    key = (space, headline.name)
    ways = query(con, "FROM budget_ways WHERE space = ? AND metric = ?", *key)
    if not ways:
        return ""
    pairs = query(con, "FROM budget_pairs WHERE space = ? AND metric = ?", *key)
    lines = ["\n## Which way spent the parameter budget best?\n"]
    for group in sorted({(w["family"], w["target_params"]) for w in ways}, key=str):
        in_group = [w for w in ways if (w["family"], w["target_params"]) == group]
        compared = [p for p in pairs if (p["family"], p["target_params"]) == group]
        lines.append(budget_paragraph(in_group, compared, headline, space))
        lines.append(markdown_table(in_group, BUDGET_WAY_COLUMNS))
        lines.append(markdown_table(compared, BUDGET_PAIR_COLUMNS))
    lines.append(
        "`params_miss` is params / target − 1; Δ is way a's mean minus way b's, with its Welch 95% interval. "
        'Every number: `sweep sql "FROM budget_ways"`, `sweep sql "FROM budget_pairs"`.\n'
    )
    return "\n".join(lines)


def budget_paragraph(ways: list[dict], pairs: list[dict], headline: Headline, space: str) -> str:
    """The budget, each way's match and mean with its interval, the best way, and how sure that is."""
    name, target = headline.name, ways[0]["target_params"]
    spent = [w for w in ways if w["budget_way"] != "base" and w["score_mean"] is not None]
    if not spent:
        return f"No way of the {target:,}-parameter budget has a finished seed yet.\n"
    ranked = sorted(spent, key=lambda w: w["rank"])
    shown = "; ".join(way_words(w, name) for w in ranked)
    text = f"Target {target:,} parameters, spent {len(spent)} ways (best first): {shown}."
    best = ranked[0]
    against = [p for p in pairs if best["budget_way"] in (p["way_a"], p["way_b"])]
    text += " " + " ".join(pair_words(p, best["budget_way"], name) for p in against)
    single = min(w["n_seeds"] for w in spent) < 2
    wins = [p for p in against if pair_verdict(p, best["budget_way"]) == "wins" and p["significant"]]
    if single:
        text += (
            " A way rests on a single seed: no difference here is significant, and the order may be seed noise. "
            f"More seeds: `sweep rerun {space} --seeds N`."
        )
    elif against and len(wins) == len(against):
        text += f" **{WAY_WORDS[best['budget_way']]}** spent the budget best: it beats every other way by more than "
        text += f"the tolerance ({headline.tolerance} {headline.unit}), each with a 95% interval that clears it."
    else:
        text += (
            f" No way is confidently best: {WAY_WORDS[best['budget_way']]} has the best mean, but not every "
            "comparison clears the tolerance with its 95% interval."
        )
    return text + "\n"


def way_words(way: dict, name: str) -> str:
    """``deeper (4 blocks × 4 heads of 12, d_model 48, 114,778 params, -1.5%): 80.1% (95% CI 77.0%…83.2%, 5 seeds)``"""
    interval = (
        f"95% CI {format_score(way['score_lo'], name)}…{format_score(way['score_hi'], name)}, "
        f"{plural(way['n_seeds'], 'seed')}"
        if way["score_lo"] is not None
        else "one seed"
    )
    return (
        f"{WAY_WORDS.get(way['budget_way'], way['budget_way'])} ({shape_words(way)}, d_model {way['embed_dim']}, "
        f"{way['params']:,} params, {way['params_miss']:+.1%}): {format_score(way['score_mean'], name)} ({interval})"
    )


def pair_verdict(pair: dict, way: str) -> str:
    """The pair's verdict read from ``way``'s side (the view states it for way_a)."""
    if pair["way_a"] == way:
        return pair["verdict"]
    return {"wins": "loses", "loses": "wins"}.get(pair["verdict"], pair["verdict"])


def pair_words(pair: dict, way: str, name: str) -> str:
    """``Against wider: Δ +2.1 (95% CI +0.4…+3.8), wins.`` from ``way``'s side."""
    sign = 1 if pair["way_a"] == way else -1
    other = pair["way_b"] if pair["way_a"] == way else pair["way_a"]
    delta = format_delta(sign * pair["delta"], name)
    if pair["delta_lo"] is None:
        interval = pair["evidence"]
    else:
        low, high = sorted((sign * pair["delta_lo"], sign * pair["delta_hi"]))
        interval = f"95% CI {format_delta(low, name)}…{format_delta(high, name)}"
    return f"Against {WAY_WORDS.get(other, other)}: Δ {delta} ({interval}), {pair_verdict(pair, way)}."


class BudgetQuestion(Question):
    """``budget:``: one parameter budget spent deeper, wider or on more heads (see the module's docstring)."""

    name = "budget"
    section = "budget"
    section_model = Budget | None
    section_default = None
    section_doc = "one parameter budget spent deeper, wider or on more heads (sweep/questions/budget.py)"
    sql = "budget.sql"
    report_place = "costs"
    labels = (
        Label("budget_way", "VARCHAR", "how this config spends the space's `budget:` (base | deeper | wider | "
              "more_heads); NULL outside a budget", plan_after="rule"),
        Label("budget_target_params", "BIGINT", "the budget's target, in parameters; NULL outside a budget",
              in_plan=False),
    )  # fmt: skip

    def add_shapes(self, planner: Planner) -> list[BudgetPlan]:
        if planner.space.budget is None:
            return []
        budgets = plan_budgets(planner)
        with_budget_shapes(planner, budgets)
        return budgets

    def add_configs(self, planner: Planner, answer: list[BudgetPlan] | None) -> list[BudgetPlan]:
        return answer or []

    def plan_lines(self, plan) -> list[str]:
        return budget_lines(plan)

    def plan_json(self, plan) -> dict:
        return {"budgets": budget_rows(plan)} if plan.answers["budget"] else {}

    def report_section(self, con, space: str, headline: Headline, data) -> str:
        return budget_section(con, space, headline)


QUESTION = BudgetQuestion()
