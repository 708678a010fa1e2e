"""A parameter budget spent three ways (a space's ``budget:`` block, :class:`sweep.space.Budget`): from one
base shape, each way grows one free integer dimension until the model's exact parameter count is nearest
the target, every other size as the base's:

    deeper      depth
    wider       d_model (k · unit), MLP = round(ratio · d_model), attention as wide as d_model
    more_heads  heads (k · unit) at the base's head_dim: the attention block widens

Counts come from ``params_of`` (the plan passes ``measure_shape``'s: the model built on the meta device), so
whatever a family adds (biases, norms, embeddings) is in them. Each count is non-decreasing in the free
integer, so the nearest is found by doubling, then bisection: about 2·log2(k) counts a way.

Shapes are the plan's :class:`~sweep.plan.Shape` (copied with ``dataclasses.replace``; this module does not
import the plan, which imports it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweep.space import Budget

MAX_STEPS = 1 << 20  # no way grows its dimension past a million units (a budget that would is unreachable)
FREE_DIMENSION = {"deeper": "depth", "wider": "embed_dim", "more_heads": "num_heads"}


def percent(fraction: float) -> str:
    """0.02 → ``2%``, 0.005 → ``0.5%``: a tolerance as the space file's fraction reads in percent."""
    return f"{fraction * 100:g}%"


class Unbuildable(ValueError):
    """The family cannot build a shape a way needs (its message says why)."""


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
    shape: Any = None  # sweep.plan.Shape, labelled with the way
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
    base: Any  # sweep.plan.Shape
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
        return dataclasses.replace(base, depth=k, budget_way=way)
    if way == "more_heads":
        return dataclasses.replace(base, num_heads=k * heads_unit(base, budget), rule="fixed_head_dim", budget_way=way)
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
        budget_way=way,
    )


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
    labelled = dataclasses.replace(base, budget_way="base")
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
