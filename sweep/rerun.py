"""What is missing, and what to run: the basis of resuming a sweep and of scheduled reruns.

A (config, seed) pair is *recorded* when the results hold a row for it whose status is ``ok``,
``diverged``, ``oom`` or ``pruned``: those outcomes are properties of the configuration and would
repeat. A row with status ``error`` (a lost worker, a crash) does not count: the pair is run again.
Running the same selection twice therefore runs nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.errors import SweepError
from sweep.options import SELECTIONS
from sweep.plan import Plan, PlannedConfig
from sweep.sql import connect, connect_lazily
from sweep.storage import sweep_lock  # noqa: F401 (its home was here; `sweep compact` needs it without torch)
from workers.vocabulary import RECORDED_STATUSES


@dataclass(frozen=True)
class Missing:
    config: PlannedConfig
    seed: int


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


def describe(missing: list[Missing], total: int) -> str:
    if not missing:
        return f"nothing missing: all {total} (config, seed) pairs are recorded"
    lines = [f"{len(missing)} of {total} (config, seed) pairs missing; running them:"]
    by_config: dict[str, list[int]] = {}
    for item in missing:
        by_config.setdefault(item.config.config_id, []).append(item.seed)
    configs = {m.config.config_id: m.config for m in missing}
    several = len({c.shape.family for c in configs.values()}) > 1
    for config_id, seeds in by_config.items():
        shape = configs[config_id].shape
        family = f"{shape.family:<16}" if several else ""
        lines.append(
            f"  {config_id}  {family}depth {shape.depth:>2} × {shape.num_heads:>3} heads of {shape.head_dim:<3} "
            f"mlp {shape.mlp_dim:<5} seeds {seeds}"
        )
    return "\n".join(lines)
