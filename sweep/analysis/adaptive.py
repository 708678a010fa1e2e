"""Adaptive seeds: spend extra trials only where a verdict is still open (``sweep rerun --select inconclusive``).

A config's verdict is *settled* when it is significant (its 95% interval clears the tolerance either way,
``vs_baseline.significant``) or it is a baseline; every other config is *open*: inconclusive, judged on a
single seed, or without a finished seed (a config whose baseline did not learn is neither: no seed of
its own settles it, so it is left alone). The budget N is spent in rounds. Each round gives every open
config one more seed, nearest an edge first, and the baseline one more too while it has no more seeds than
the configs being extended (every verdict leans on it), until the round or the budget is spent; then the
verdicts are read again and the next round starts, until every verdict is settled or N trials have run.

*Nearest an edge*: a config's distance is |log2(depth / d)| to the nearest depth that ``depth_edge``
reports for its row (the last depth that holds or the first that breaks, same family, heads, head_dim,
d_model and MLP), or to the baseline's depth when its row has no edge yet; ties go to the config with fewer
seeds, then to plan order. New seeds are the smallest numbers the config has not recorded, so a dry run
prints exactly what a run would start, and two runs from the same results choose the same trials.

The same rule serves the space's claims (``sweep rerun --select expectations``, what ``make known-answers``
runs after each reproduction): a claim is *open* when its verdict in ``expectations`` is ``inconclusive`` and
what it found is one more seeds can change (:data:`SETTLEABLE`: an interval that straddles its bound, a side
with one seed, a side with none); a decided claim (``agrees``, ``disagrees``) takes no seed, nor does one found
``did not learn`` or ``different devices`` (a failed training or two devices: more seeds of the same recipe do
not decide it). A family's open members are those still inconclusive. In a tuned space (``tune:``) a side is its
config at the rate its recorded selection runs chose (the view judges those verdict seeds, found by
``recipe_config_id``), and its new seeds are verdict seeds at that rate; a side whose selection is incomplete
takes none (the caller leaves such configs out of the plan). Each round gives every side of every open
claim (or member) one more seed, in the order the space states its claims, a side that several claims share
once, and a side with ``--max-seeds`` seeds none; then the verdicts are read again, until no claim is open,
every open claim's sides are at the cap, or the budget is spent. Without ``--max-seeds`` only the budget caps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.sql import connect
from sweep.questions.tuning import VERDICT
from sweep.text import plural
from workers.vocabulary import RECORDED_STATUSES

if TYPE_CHECKING:  # the plan's modules load the model families (torch): `sweep report` uses this module without
    from sweep.plan.plan import Missing, Plan, PlannedConfig

# The evidence of a verdict no seed of the config can settle: its baseline did not learn (vs_baseline's
# method 'baseline at chance'). Such configs are not open here; the report names them.
UNSETTLEABLE = "baseline at chance"
# Seeds per config the expectation below looks as far as: past it a verdict whose Δ sits on the tolerance
# bound is called out as not expected to settle, rather than given a budget nobody would run.
MAX_EXPECTED_SEEDS = 10


@dataclass(frozen=True)
class OpenVerdict:
    """A config whose verdict is not settled, with what the analysis says of it now."""

    config: PlannedConfig
    verdict: str
    evidence: str
    n_seeds: int
    edge_distance: float


def recorded_seeds(results_dir: Path, space: str) -> dict[str, set[int]]:
    """Seeds with a recorded outcome, per config_id (``workers.vocabulary.RECORDED_STATUSES``)."""
    statuses = ", ".join(f"'{s}'" for s in RECORDED_STATUSES)
    rows = connect(results_dir).execute(
        f"SELECT config_id, list(DISTINCT seed) FROM trials WHERE space = ? AND status IN ({statuses}) GROUP BY 1",
        [space],
    )
    return {config_id: {int(s) for s in seeds} for config_id, seeds in rows.fetchall()}


def edge_depths(results_dir: Path, space: str) -> dict[tuple, list[int]]:
    """The depths ``depth_edge`` names per row (family, heads, head_dim, d_model, MLP)."""
    rows = connect(results_dir).execute(
        """SELECT family, num_heads, head_dim, embed_dim, mlp_dim, holds_down_to_depth, breaks_at_depth
           FROM depth_edge WHERE space = ?""",
        [space],
    )
    edges: dict[tuple, list[int]] = {}
    for *row, holds, breaks in rows.fetchall():
        edges.setdefault(tuple(row), []).extend(d for d in (holds, breaks) if d is not None)
    return edges


def open_verdicts(plan: Plan, results_dir: Path) -> list[OpenVerdict]:
    """The plan's configs whose verdicts are open, nearest an edge first (the module docstring's order).
    A config with no row yet (never run) is open too."""
    con = connect(results_dir)
    rows = con.execute(
        "SELECT config_id, verdict, evidence, n_seeds, significant, is_baseline FROM vs_baseline WHERE space = ?",
        [plan.space_name],
    ).fetchall()
    judged = {
        config_id: (verdict, evidence, n, significant) for config_id, verdict, evidence, n, significant, _ in rows
    }
    edges = edge_depths(results_dir, plan.space_name)
    found = []
    for order, config in enumerate(plan.configs):
        if config.is_baseline:
            continue
        verdict, evidence, n_seeds, significant = judged.get(config.config_id, ("inconclusive", "no row", 0, False))
        if significant or evidence == UNSETTLEABLE:
            continue
        shape = config.shape
        row = (shape.family, shape.num_heads, shape.head_dim, shape.embed_dim, shape.mlp_dim)
        targets = edges.get(row) or [plan_baseline_depth(plan, shape.family)]
        distance = min(abs(math.log2(shape.depth / target)) for target in targets)
        found.append((distance, n_seeds or 0, order, OpenVerdict(config, verdict, evidence, n_seeds or 0, distance)))
    return [item[-1] for item in sorted(found, key=lambda item: item[:3])]


# What an inconclusive claim found that more seeds of the same configs can change (expectations.sql's `found`).
SETTLEABLE = ("unclear", "no interval", "not run")


@dataclass(frozen=True)
class OpenClaim:
    """A claim of the space whose verdict more seeds may decide: its name, what it found (a family: how many
    members agree), and the configs of its open members' sides, a before b, as the plan resolved them."""

    name: str
    found: str
    configs: tuple[PlannedConfig, ...]


def open_expectations(plan: Plan, results_dir: Path) -> list[OpenClaim]:
    """The claims of ``plan`` still open (the module docstring's rule), in the order the space states them. A
    space whose results record no claims yet (never run) has every claim open."""
    from sweep.questions.expectations import claim_rows

    by_id = claim_side_configs(plan)
    order = {row["name"]: i for i, row in reversed(list(enumerate(claim_rows(plan))))}
    settleable = ", ".join(f"'{found}'" for found in SETTLEABLE)
    rows = (
        connect(results_dir)
        .execute(
            f"""SELECT m.name, any_value(e.found), list(m.a_config ORDER BY m.member),
                   list(m.b_config ORDER BY m.member)
            FROM expectation_members m JOIN expectations e USING (space, name)
            WHERE m.space = ? AND e.verdict = 'inconclusive' AND m.verdict = 'inconclusive'
              AND m.found IN ({settleable})
            GROUP BY m.name""",
            [plan.space_name],
        )
        .fetchall()
    )
    recorded = (
        connect(results_dir)
        .execute("SELECT count(*) FROM expectation_members WHERE space = ?", [plan.space_name])
        .fetchone()[0]
    )
    if not recorded:  # never run: every claim, with every member's sides
        rows = [(r["name"], "not run", [r["a_config"]], [r["b_config"]]) for r in claim_rows(plan)]
    claims: dict[str, OpenClaim] = {}
    for name, found, a_ids, b_ids in rows:
        if name not in order:
            continue  # a claim the recorded sweep stated that this plan no longer does
        ids = [i for pair in zip(a_ids, b_ids, strict=True) for i in pair if i is not None and i in by_id]
        before = [c.config_id for c in claims[name].configs] if name in claims else []
        claims[name] = OpenClaim(name, found, tuple(by_id[i] for i in dict.fromkeys([*before, *ids])))
    return sorted(claims.values(), key=lambda claim: order[claim.name])


# How expectations.sql names a tuned sweep's side whose verdict seeds have not run: this prefix and the side's
# untuned config id (stated_claims).
NOT_RUN = "not run: "


def claim_side_configs(plan: Plan) -> dict[str, PlannedConfig]:
    """The configs a claim's side may name in ``expectation_members``, by the id it names them with: each config's
    own id; and in a tuned plan (its configs at their chosen rates, ``tune_phase`` verdict), also the untuned id
    its claims were stated with (``recipe_config_id``) and the view's ``not run: <untuned id>`` for a side whose
    verdict seeds have not run, so an open claim's sides get verdict seeds at their recorded chosen rates."""
    by_id: dict[str, PlannedConfig] = {}
    for config in plan.configs:
        by_id[config.config_id] = config
        recipe = config.label("recipe_config_id")
        if recipe is not None and config.label("tune_phase") == VERDICT:
            by_id.setdefault(recipe, config)
            by_id[NOT_RUN + recipe] = config
    return by_id


def next_claims_round(
    plan: Plan, results_dir: Path, open_: list[OpenClaim], trial_budget: int, max_seeds: int | None
) -> list[Missing]:
    """One round of at most ``trial_budget`` trials: one more seed for each side of each open claim, in order,
    once per config, none for a config that has ``max_seeds`` seeds (None: no cap)."""
    from sweep.plan.plan import Missing

    seeds = recorded_seeds(results_dir, plan.space_name)
    planned: list[Missing] = []
    given: set[str] = set()
    for claim in open_:
        for config in claim.configs:
            taken = seeds.setdefault(config.config_id, set())
            if config.config_id in given or (max_seeds is not None and len(taken) >= max_seeds):
                continue
            if len(planned) == trial_budget:
                return planned
            seed = next_seed(taken)
            taken.add(seed)
            given.add(config.config_id)
            planned.append(Missing(config, seed))
    return planned


def describe_claims_round(open_: list[OpenClaim], planned: list[Missing], trials_left: int) -> str:
    lines = [f"{plural(len(open_), 'open claim')}; this round runs {len(planned)} trials (budget left {trials_left}):"]
    for item in planned:
        shape = item.config.shape
        names = ", ".join(f"{c.name}: {c.found}" for c in open_ if item.config.config_id in ids_of(c))
        heads = "head " if shape.num_heads == 1 else "heads"
        lr = item.config.label("tune_lr")  # a tuned space's side: its verdict seeds' chosen rate
        rate = "" if lr is None else f" at lr {lr:g}"
        lines.append(
            f"  {item.config.config_id}  depth {shape.depth:>2} × {shape.num_heads:>3} {heads} of {shape.head_dim:<3} "
            f"d_model {shape.embed_dim:<4} seed {item.seed}{rate}  ({names})"
        )
    return "\n".join(lines)


def ids_of(claim: OpenClaim) -> set[str]:
    return {c.config_id for c in claim.configs}


def plan_baseline_depth(plan: Plan, family: str) -> int:
    baselines = [c for c in plan.configs if c.is_baseline]
    return next((c.shape.depth for c in baselines if c.shape.family == family), baselines[0].shape.depth)


def next_seed(taken: set[int]) -> int:
    seed = 0
    while seed in taken:
        seed += 1
    return seed


def next_round(
    plan: Plan, results_dir: Path, open_: list[OpenVerdict], trial_budget: int, max_seeds: int | None = None
) -> list[Missing]:
    """One round of at most ``trial_budget`` trials: one more seed per open config in order, each preceded, while
    the baseline of its family has no more seeds than it, by one more seed for that baseline; none for a config
    (or baseline) that has ``max_seeds`` seeds (None: no cap)."""
    seeds = recorded_seeds(results_dir, plan.space_name)
    baselines = {c.shape.family: c for c in plan.configs if c.is_baseline}
    from sweep.plan.plan import Missing

    planned: list[Missing] = []
    for item in open_:
        base = baselines[item.config.shape.family]
        if max_seeds is not None and len(seeds.get(item.config.config_id, ())) >= max_seeds:
            continue
        for config in (base, item.config):
            taken = seeds.setdefault(config.config_id, set())
            if config is base and len(taken) > len(seeds.get(item.config.config_id, ())):
                continue
            if max_seeds is not None and len(taken) >= max_seeds:
                continue
            if len(planned) == trial_budget:
                return planned
            seed = next_seed(taken)
            taken.add(seed)
            planned.append(Missing(config, seed))
    return planned


def describe_round(open_: list[OpenVerdict], planned: list[Missing], trials_left: int) -> str:
    lines = [f"{len(open_)} open verdicts; this round runs {len(planned)} trials (budget left {trials_left}):"]
    reasons = {item.config.config_id: item for item in open_}
    for item in planned:
        shape, why = item.config.shape, reasons.get(item.config.config_id)
        seeds = plural(why.n_seeds, "seed") if why else ""
        note = "baseline" if item.config.is_baseline else f"{why.verdict}, {why.evidence}, {seeds}"
        heads = "head " if shape.num_heads == 1 else "heads"
        lines.append(
            f"  {item.config.config_id}  depth {shape.depth:>2} × {shape.num_heads:>3} {heads} "
            f"of {shape.head_dim:<3} "
            f"seed {item.seed}  ({note})"
        )
    return "\n".join(lines)


# --- how many trials the rule above is expected to need --------------------------------------------------


# Why an open verdict is not expected to settle within MAX_EXPECTED_SEEDS seeds (Expectation.why), in the order
# they are told apart: a seed of the config or of its baseline at chance while its siblings learned (the failure,
# not the Δ, makes the interval wide: vs_baseline's n_unlearned / baseline_unlearned); seeds spread far wider than
# the space's others (with the space's typical spread, the pooled sd, it would settle); else the Δ sits so close
# to the tolerance bound that even the typical spread needs more seeds.
SEED_AT_CHANCE = "a seed at chance"
WIDE_SPREAD = "a wide spread"
ON_THE_BOUND = "Δ on the tolerance bound"


@dataclass(frozen=True)
class Expectation:
    """What :func:`expected_trials` found: the trials the adaptive rule is expected to run until every open
    verdict it can settle within :data:`MAX_EXPECTED_SEEDS` seeds is settled; how many it expects to settle
    (``settles`` of ``open``), and the open configs it does not expect to settle, by config_id, with why each
    (``why``: :data:`SEED_AT_CHANCE`, :data:`WIDE_SPREAD` or :data:`ON_THE_BOUND`)."""

    trials: int
    open: int
    settles: int
    unsettled: tuple[str, ...]
    why: tuple[str, ...] = ()  # one per unsettled config, in its order


@dataclass
class _Projected:
    config_id: str
    family: str
    gain: float | None  # signed so that positive is better; None: no finished seed yet
    sd: float | None
    n: int


def _t95(dof: float) -> float:
    from scipy.stats import t  # scikit-learn's dependency; imported only when a budget is estimated

    return float(t.ppf(0.975, dof))


def _settled(config: _Projected, base: _Projected, tolerance: float) -> bool:
    """Would the verdict be significant at these seed counts, if the means and sds stayed as they are now?
    (vs_baseline's Welch rule: holds when gain − half-width ≥ −tol, breaks when gain + half-width < −tol.)"""
    if config.n < 2 or base.n < 2:
        return False
    if config.gain is None:
        return True  # no finished seed yet: assume its first two seeds give it an interval that settles
    va, vb = config.sd**2 / config.n, base.sd**2 / base.n
    if va + vb == 0:
        return True
    dof = (va + vb) ** 2 / (va**2 / (config.n - 1) + vb**2 / (base.n - 1)) if va and vb else config.n + base.n - 2
    half = _t95(max(dof, 1.0)) * math.sqrt(va + vb)
    return config.gain - half >= -tolerance or config.gain + half < -tolerance


def expected_trials(rows: list[dict]) -> Expectation:
    """The trials ``sweep rerun --select inconclusive`` is expected to need to settle the open verdicts of
    ``rows`` (one space's ``vs_baseline`` rows, baselines included), by running the rule of this module's
    docstring on paper: each round one more seed for every open config and, while it has no more seeds
    than that config, one for its baseline; each verdict re-judged with its mean and sd as they are now
    (a config or baseline of one seed borrows the space's pooled sd, else the other side's). Rounds go on
    until every config that can settle within :data:`MAX_EXPECTED_SEEDS` seeds has; configs that cannot
    still take their seed each round, as the rule gives them. An expectation, not a promise: the new seeds
    move the means."""
    bases = {r["family"]: r for r in rows if r["is_baseline"]}
    pooled = next((r["pooled_sd"] for r in rows if r.get("pooled_sd")), None)
    base_state: dict[str, _Projected] = {}
    for family, b in bases.items():
        sd = b["score_sd"] if b["n_seeds"] >= 2 and b["score_sd"] is not None else pooled
        base_state[family] = _Projected(b["config_id"], family, 0.0, sd, b["n_seeds"] or 0)
    open_: list[_Projected] = []
    tolerance = {r["family"]: r["tolerance"] for r in rows}
    failed = {r["config_id"] for r in rows if (r.get("n_unlearned") or 0) or (r.get("baseline_unlearned") or 0)}
    for r in rows:
        if r["is_baseline"] or r["significant"] or r["evidence"] == UNSETTLEABLE or r["family"] not in bases:
            continue
        sd = r["score_sd"] if (r["n_seeds"] or 0) >= 2 and r["score_sd"] is not None else None
        open_.append(_Projected(r["config_id"], r["family"], r["gain"], sd, r["n_seeds"] or 0))
    for family, base in base_state.items():  # a one-seed side borrows the pooled sd, else the other side's
        if base.sd is None:
            others = [i.sd for i in open_ if i.family == family and i.sd is not None]
            base.sd = pooled if pooled is not None else (others[0] if others else 0.0)
    for item in open_:
        if item.sd is None:
            item.sd = pooled if pooled is not None else base_state[item.family].sd

    def can_settle(item: _Projected) -> bool:
        lone, base = _Projected(**vars(item)), _Projected(**vars(base_state[item.family]))
        while lone.n <= MAX_EXPECTED_SEEDS:
            if _settled(lone, base, tolerance[item.family]):
                return True
            base.n += base.n <= lone.n
            lone.n += 1
        return False

    def why(item: _Projected) -> str:
        """Why ``item`` is not expected to settle (the constants above), judged on today's seed counts."""
        if item.config_id in failed:
            return SEED_AT_CHANCE
        typical = pooled if pooled is not None else base_state[item.family].sd
        if typical is not None and item.sd > typical and can_settle(_Projected(**{**vars(item), "sd": typical})):
            return WIDE_SPREAD
        return ON_THE_BOUND

    hopeful = {item.config_id for item in open_ if can_settle(item)}
    reasons = {item.config_id: why(item) for item in open_ if item.config_id not in hopeful}
    trials, active = 0, list(open_)
    while any(item.config_id in hopeful for item in active):
        for item in active:
            base = base_state[item.family]
            if base.n <= item.n:
                base.n += 1
                trials += 1
            item.n += 1
            trials += 1
        active = [item for item in active if not _settled(item, base_state[item.family], tolerance[item.family])]
    return Expectation(trials, len(open_), len(hopeful), tuple(reasons), tuple(reasons.values()))
