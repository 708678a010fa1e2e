"""What is missing, and what to run: the basis of resuming a sweep and of scheduled reruns.

A (config, seed) pair is *recorded* when the results hold a row for it whose status is ``ok``,
``diverged``, ``oom`` or ``pruned``: those outcomes are properties of the configuration and would
repeat. A row with status ``error`` (a lost worker, a crash) does not count: the pair is run again.
Running the same selection twice therefore runs nothing the second time. An Optuna search reads the same
rows as a :class:`SearchRecord`: its study starts from them, and it trains only pairs they do not hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from sweep.analysis.sql import connect, connect_lazily
from sweep.choices import SELECTIONS
from sweep.errors import SweepError
from sweep.plan.plan import Missing, Plan, PlannedConfig
from workers.vocabulary import RECORDED_STATUSES, TrialStatus


def recorded_pairs(results_dir: Path, space: str) -> set[tuple[str, int]]:
    """(config_id, seed) pairs of ``space`` already in the results with a recorded outcome."""
    con, views = connect_lazily(results_dir)
    views.create(["trials"])  # the trials files only: no analysis view is read
    statuses = ", ".join(f"'{s}'" for s in RECORDED_STATUSES)
    rows = con.execute(
        f"SELECT DISTINCT config_id, seed FROM trials WHERE space = ? AND status IN ({statuses})", [space]
    ).fetchall()
    return {(config_id, int(seed)) for config_id, seed in rows}


def missing_pairs(configs: list[PlannedConfig], seeds: list[int], recorded: set) -> list[Missing]:
    """Every (config, seed) of ``configs`` × ``seeds`` not in ``recorded``, in plan order."""
    return [Missing(c, s) for c in configs for s in seeds if (c.config_id, s) not in recorded]


# --- what an Optuna search has recorded ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A recorded trial as an Optuna search is told it: its status, and its objectives' values in the
    search's order (None: Optuna is told the trial failed; so are ``diverged`` and ``oom``)."""

    status: str
    values: tuple[float, ...] | None


@dataclass
class SearchRecord:
    """What the results hold for an Optuna search (``search: {kind: optuna}``).

    Each Optuna trial trains one (config, seed) pair, at the search's seed (the plan's first), so the record
    is one outcome per config the search can suggest: the one recorded row of that pair (``ok`` first, then
    the latest), whichever profile or sweep recorded it, since the config id alone says what was trained.
    ``outcomes`` is in the order the pairs were first finished. ``trained``: how many of those pairs this
    profile trained, which is what its ``num_trials`` budget has spent.
    """

    seed: int
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # config_id → outcome
    trained: int = 0

    def remaining(self, num_trials: int) -> int:
        """Trials left to train of a budget of ``num_trials``."""
        return max(0, num_trials - self.trained)


def search_record(results_dir: Path, plan: Plan) -> SearchRecord:
    """The :class:`SearchRecord` of ``plan``'s Optuna search in the results (``sweep run`` resumes from it)."""
    metrics = [objective.metric for objective in plan.space.search.objectives]
    seed = plan.seeds[0]
    statuses = ", ".join(f"'{s}'" for s in RECORDED_STATUSES)
    values = ", ".join(f'"{metric}"' for metric in metrics)  # reported metrics: column names (space.py)
    rows = (
        connect(results_dir)
        .execute(
            f"""SELECT config_id, status, {values},
                       bool_or(profile IS NOT DISTINCT FROM $profile) OVER (PARTITION BY config_id) AS mine,
                       min(finished_at) OVER (PARTITION BY config_id) AS first_at
                FROM trials WHERE space = $space AND seed = $seed AND status IN ({statuses})
                QUALIFY row_number() OVER (PARTITION BY config_id
                                           ORDER BY status = 'ok' DESC, finished_at DESC NULLS LAST) = 1
                ORDER BY first_at NULLS FIRST, config_id""",
            {"profile": plan.profile, "space": plan.space_name, "seed": seed},
        )
        .fetchall()
    )
    planned = {config.config_id for config in plan.configs}
    record = SearchRecord(seed)
    for config_id, status, *scores, mine, _ in rows:
        if config_id not in planned:  # another recipe or shape: not a trial this search can suggest
            continue
        record.outcomes[config_id] = Outcome(status, objective_values(status, scores))
        record.trained += bool(mine)
    return record


def objective_values(status: str, scores: list) -> tuple[float, ...] | None:
    """A recorded row's objective values as the search is told them: the values of an ``ok`` or ``pruned``
    row that has them all (a pruned trial's last scores, as Tune tells a stopped trial); else None."""
    if status not in (TrialStatus.OK, TrialStatus.PRUNED):
        return None
    if any(score is None or not math.isfinite(score) for score in scores):
        return None
    return tuple(float(score) for score in scores)


def select_configs(plan: Plan, results_dir: Path, how: str, top_k: int | None = None) -> list[PlannedConfig]:
    """The plan's configs chosen by ``how``; the baselines (one per family) are always included (every
    verdict needs its family's).

    - ``all``: every config of the space;
    - ``near-break``: the configs on either side of each edge the analysis views found (the last one that
      holds and the first one that breaks, along depth and along head_dim);
    - ``pareto``: the configs on the score/params Pareto front;
    - ``top-k``: the K configs with the best mean headline score so far, by the metric's direction
      (highest top-1 or accuracy, lowest validation loss).
    """
    if how == "all":
        return list(plan.configs)
    con = connect(results_dir)
    by_shape = {c.shape.key(): c for c in plan.configs}  # (depth, heads, head_dim, width, mlp, family, kv, cond.)
    shape = "depth, num_heads, head_dim, embed_dim, mlp_dim, family, num_kv_heads, conditioning"
    if how == "near-break":
        sql = f"""
            SELECT {shape} FROM depth_edge e
            JOIN configs c USING (space, metric, family, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads,
                                  conditioning)
            WHERE space = $1 AND depth IN (e.holds_down_to_depth, e.breaks_at_depth)
            UNION
            SELECT {shape} FROM head_dim_edge e
            JOIN configs c USING (space, metric, family, depth, embed_dim, mlp_dim, conditioning)
            WHERE space = $1 AND c.attn_dim = c.embed_dim AND c.num_heads // c.num_kv_heads = e.heads_per_kv_head
              AND head_dim IN (e.holds_down_to_head_dim, e.breaks_at_head_dim)"""
    elif how == "pareto":
        sql = f"SELECT {shape} FROM pareto WHERE space = $1"
    elif how == "top-k":
        if not top_k or top_k < 1:
            raise SweepError("--select top-k needs --top-k K with K >= 1")
        best_first = "CASE WHEN metric_mode = 'min' THEN score_mean ELSE -score_mean END"
        sql = f"""SELECT {shape} FROM configs WHERE space = $1 AND n_seeds > 0 AND score_mean IS NOT NULL
                  ORDER BY {best_first} LIMIT {top_k}"""
    else:
        raise SweepError(f"--select must be one of {', '.join(SELECTIONS)}, got {how!r}")
    shapes = {tuple(row) for row in con.execute(sql, [plan.space_name]).fetchall()}
    chosen = [by_shape[s] for s in shapes if s in by_shape]
    chosen += [c for c in plan.configs if c.is_baseline and c not in chosen]  # every family's baseline
    return sorted(
        chosen, key=lambda c: (c.shape.family, c.shape.depth, c.shape.num_heads, c.shape.head_dim, c.shape.mlp_dim)
    )


def describe(missing: list[Missing], total: int, dry_run: bool = False) -> str:
    """What is missing, one line per config; ``dry_run``: said as what a run would start, not as running."""
    if not missing:
        return f"nothing missing: all {total} (config, seed) pairs are recorded"
    doing = "a run would start them (--dry-run: nothing runs):" if dry_run else "running them:"
    lines = [f"{len(missing)} of {total} (config, seed) pairs missing; {doing}"]
    by_config: dict[str, list[int]] = {}
    for item in missing:
        by_config.setdefault(item.config.config_id, []).append(item.seed)
    configs = {m.config.config_id: m.config for m in missing}
    several = len({c.shape.family for c in configs.values()}) > 1
    for config_id, seeds in by_config.items():
        shape = configs[config_id].shape
        family = f"{shape.family:<16}" if several else ""
        heads = "head " if shape.num_heads == 1 else "heads"
        lines.append(
            f"  {config_id}  {family}depth {shape.depth:>2} × {shape.num_heads:>3} {heads} "
            f"of {shape.head_dim:<3} "
            f"mlp {shape.mlp_dim:<5} seeds {seeds}"
        )
    return "\n".join(lines)
