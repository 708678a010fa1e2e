"""What the edge search (issue 40, ``sweep/analysis/edge.py``) costs and finds, replayed against recorded full grids
and planted lattices, beside the full grid at 3 seeds.

Replay: the searcher loop a ``sweep run`` of ``search: {kind: edge}`` runs, with recorded or planted scores in
place of training. In each wave it asks :func:`sweep.analysis.edge.assess` for the next trial up to ``--width``
times (the trials already started that wave passed as pending, as Ray Tune asks a searcher once per free slot),
then finishes them all and repeats until ``assess`` says finished. A trial of config c takes the next score of
c's recorded seeds in an order shuffled once per replay: drawn without replacement, so a recorded failed seed stays
failed (its score None) and no seed is used twice. It costs c's mean recorded ``device_s`` (planted lattices:
the depth's index, 1 for the shallowest, since a block's cost is the same at every depth).

- **Recorded grids** (``bench/measured/edge_grids/*.csv``; :data:`RECIPE` says how each was recorded, ``--record``
  records them again): the reference verdict of a config is from all its recorded seeds against all the baseline's,
  at 95% with the edge search's statistic (pooled s_p over every config with ≥ 2 seeds, gain ∓ t_0.975(df) · s_p ·
  √(1/n_c + 1/n_b); one look, so no Bonferroni); the reference edge of a column is the edge of those verdicts
  (:func:`column_edge_of`: adjacent measured break and hold, or holds / breaks throughout; a column whose
  reference breaks deeper than it holds has none). ``--replays`` replays per grid, each with its own draw order.
- **Planted lattices**: every lattice shape a shipped space × profile plans (:data:`SHIPPED_SHAPES`: its columns'
  depth counts and where its baseline sits; ``--shapes-from-spaces`` plans them again through the loader), cycled
  to ``--synthetic`` lattices. Each column gets a planted edge (uniform over its depths, "holds throughout" and
  "breaks throughout" included), true gains that step away from −tolerance by U(0.25, 3) tolerances per depth
  (so some edges sit within seed noise of it), and with probability ``--violations`` (columns of ≥ 3 depths whose
  edge leaves ≥ 2 holding depths) its deepest depth breaks again (the "deeper worst" that ``depth_width_heads``
  found at a short budget: depth is then not monotone there, and the planted edge is none). Each seed's score is
  the true mean + N(0, sd), with sd/tolerance drawn from the recorded grids' pooled s_p/tolerance; each trial fails
  with probability ``--fail-share``. The reference edge is the planted one; an implied verdict counts as
  contradicted, as for a recorded grid, where all the lattice's seeds (5 a config) say the opposite at 95%.

The 3-seed full grid: each config and the baseline take 3 of their recorded (planted) seeds, drawn without
replacement; its verdicts are Welch's 95% interval as ``vs_baseline`` uses at 3 seeds on both sides (gain ∓
t_0.975(Welch–Satterthwaite df) · √(s_c²/n_c + s_b²/n_b)); its edge per column the same definition. Its
device-seconds (3 × each config's cost, summed) are the denominator of every fraction.

Printed, per lattice: device-seconds spent ÷ the full grid's at 3 seeds, the share of columns whose reference edge
the search found (edge search's own measured edge equal to the reference's), the same share for the 3-seed full
grid, and every implied verdict the reference contradicts (implied holds where the reference breaks, implied breaks
where it holds); then what the device-seconds bought (:func:`spent_on`), as shares of the grid's: the baseline's
seeds, each other config's first min_seeds trials, its later trials by how it ended (a verdict, futility, the cap),
and the trials of the configs ``check_ends`` started. Then summaries for lattices with ≥ 5 depths and smaller, and
the goal: on ≥ 5 depths, ≤ 40% of the device-seconds, the reference edge found at least as often as the full grid
finds it, and no implied verdict contradicted. Last, the cost with a learning-rate search per config (``tune:``),
whose multiplier ``bench/tuning_cost.py`` measures as (rates × selection seeds + seeds) ÷ seeds of the untuned grid
(2.33× at 4 rates, 1 selection seed, 3 seeds): the edge search tunes only the configs it trains, so its tuned cost
is its trials plus rates × selection seeds trials of each config it trained.

    python bench/edge_replay.py [--seed 0] [--replays 20] [--synthetic 136] [--width 4] [--no-check-ends]
                                [--no-futility] [--min-seeds 2] [--baseline-seeds 5] [--noise S] [--quiet]
    python bench/edge_replay.py --record DIR    # record the grids again (about 55 min on 2 busy cores), then export

The search runs with a space's defaults: ``futility`` and ``check_ends`` on (``--no-futility --no-check-ends`` replays
it as it was before either). Measured 2026-12-06 (docs/benchmarks.md#the-edge-search-replayed): on lattices with
≥ 5 depths 81.4% of the grid's device-seconds (119.2% before), the reference edge found in 14% of columns (the
3-seed grid 4%), no implied verdict contradicted (1 before); the goal's ≤ 40% is not met: 50.6 of those points are
each trained config's first 2 seeds and 12.0 the baseline's.

Deterministic given ``--seed``; about 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import subprocess
import sys
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from sweep.analysis.edge import BREAKS, HOLDS, Cell, EdgeSettings, EdgeState, Observation, assess

ROOT = Path(__file__).resolve().parent.parent
GRIDS = ROOT / "bench" / "measured" / "edge_grids"
# How each recorded grid was recorded: (name, the space as `sweep run` takes it, extra options). Each ran as
#   nice -n 10 python -m sweep.cli run SPACE OPTIONS --results DIR/NAME --quiet
# one after the other, on the 2-core machine (cpus_per_trial 1: at most 2 trials at once), 2026-12-05/06.
RECIPE = [
    ("edge_digits_vit", "bench/edge_spaces/edge_digits_vit.yaml", []),  # local_digits' ViT, depths 1-6, 5 seeds
    ("depth_width_heads", "depth_width_heads", ["--profile", "cpu"]),  # its own 8 seeds
    ("edge_c3_conditioning", "bench/edge_spaces/edge_c3_conditioning.yaml", []),  # c3 cpu, 2 of 4 interventions
]
# The axes that make a column: every shape axis but depth (edge_spec.md).
COLUMN_AXES = ["family", "num_heads", "head_dim", "embed_dim", "mlp_dim", "num_kv_heads", "conditioning"]
FIELDS = ["config_id", "depth", *COLUMN_AXES, "seed", "status", "score", "device_s", "is_baseline", "metric", "mode",
          "tolerance"]  # fmt: skip
# Every lattice shape the shipped spaces plan (`sweep plan`): each column's number of depths, the baseline's
# column and its depth's index there, and the space:profile pairs with that shape. `--shapes-from-spaces` plans
# them again (2026-12-06, main at 49cbd65).
SHIPPED_SHAPES = [
    ((2,) * 12, 0, 1, "c3_conditioning:cpu c3_conditioning:gpu"),
    ((2, 2, 2), 0, 1, "c3_conditioning:smoke mqar_recall:cpu"),
    ((2, 2), 0, 1, "crammed_bert:paper mqar_recall:tuned and 11 smoke profiles"),
    ((5, 5, 5), 0, 4, "crammed_bert:breaks"),
    ((3, 3), 0, 2, "davit_b:paper davit_l:paper volo_d3_fixed_mlp:paper"),
    ((5, 5, 5, 5, 1), 0, 4, "deit_b_fixed_mlp:paper"),
    ((5,) * 8, 1, 4, "deit_b_fixed_mlp:paper_row"),
    ((2, 2, 1), 0, 1, "deit_b_fixed_mlp:smoke vit_b_fixed_mlp:cpu"),
    ((4, 4, 4), 0, 3, "deit_l_fixed_mlp:paper vit_l_fixed_mlp:paper"),
    ((4,) * 6, 1, 3, "deit_l_fixed_mlp:paper_row vit_l_fixed_mlp:paper_row"),
    ((2, 1, 1), 0, 0, "depth_width_heads:paper/cpu/smoke"),
    ((2, 2, 2), 1, 1, "gpt2_tinystories:width"),
    ((6, 6, 6, 6), 0, 5, "gpt2_tinystories:breaks"),
    ((3,) * 7, 0, 1, "gqa_heads:zoology"),
    ((2,) * 5, 2, 1, "gqa_heads:cpu"),
    ((1, 1, 1), 0, 0, "gqa_heads:smoke width_control:smoke"),
    ((2,), 0, 1, "known_induction_two_layers:cpu/smoke"),
    ((1, 1, 1, 1), 0, 0, "known_low_rank_bottleneck:cpu/smoke"),
    ((1, 1), 0, 0, "known_more_heads_hurt:cpu/smoke known_zoology_attention:cpu/smoke/tuned"),
    ((3, 3, 3, 3), 1, 2, "local_digits:base/full/optuna"),
    ((2, 2, 2, 2), 1, 1, "local_digits:quick vit_b_paper:smoke"),
    ((3,) * 7, 2, 2, "local_digits:fine"),
    ((2,) * 10, 0, 1, "lra_listops:paper/paper_generated"),
    ((2,) * 6, 0, 1, "lra_listops:cpu"),
    ((2, 2, 2, 2), 0, 1, "lra_listops:smoke"),
    ((3, 3, 3), 1, 1, "mqar_recall:zoology"),
    ((2, 2), 1, 1, "mqar_recall:smoke"),
    ((3, 3, 3, 3), 0, 2, "tnt_b:paper"),
    ((5, 5, 5, 5, 5, 1), 0, 4, "vit_b_fixed_mlp:paper/short"),
    ((3, 3, 1), 0, 2, "vit_b_fixed_mlp:smoke"),
    ((2,) * 8, 1, 1, "vit_b_paper:paper"),
    ((2,) * 5, 0, 1, "width_control:paper"),
    ((3, 3, 3), 0, 2, "xcit_l:paper xcit_m:paper"),
    ((5, 5, 5, 5), 1, 3, "edge_digits_vit (the recorded digits lattice, 5 depths)"),
]
CONFIDENCE = 0.95


@dataclass
class Lattice:
    """A lattice to replay: its configs, baseline, settings, each config's pool of seeds (score, None where the
    seed failed) and cost per trial, and the reference verdicts (holds / breaks / None) and edges per column."""

    name: str
    cells: list[Cell]
    baseline_id: str
    tolerance: float
    mode: str
    pools: dict[str, list[float | None]]
    cost_s: dict[str, float]
    reference: dict[str, str | None] = field(default_factory=dict)
    source: str = "recorded"
    truth: dict[str, str] | None = None  # planted: the true verdicts, whose edges are the reference edges

    def reference_edges(self) -> dict[Hashable, tuple | None]:
        """The reference edge of each column: the planted truth's, else the reference verdicts'."""
        return lattice_edges(self, self.truth if self.truth is not None else self.reference)

    @property
    def depths(self) -> int:
        """The most depths any column has."""
        counts: dict[Hashable, int] = {}
        for cell in self.cells:
            counts[cell.column] = counts.get(cell.column, 0) + 1
        return max(counts.values())

    def columns(self) -> dict[Hashable, list[Cell]]:
        """Each column's cells, shallowest first."""
        out: dict[Hashable, list[Cell]] = {}
        for cell in sorted(self.cells, key=lambda c: c.depth):
            out.setdefault(cell.column, []).append(cell)
        return out

    def full_grid_s(self, seeds: int = 3) -> float:
        return sum(seeds * self.cost_s[c.config_id] for c in self.cells)


# ---------------------------------------------------------------------------------------------- verdicts and edges


def t_quantile(p: float, df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


def verdict_from(gain: float, half: float, tolerance: float) -> str | None:
    """holds when gain − half ≥ −tolerance, breaks when gain + half < −tolerance, else None."""
    if gain - half >= -tolerance:
        return HOLDS
    if gain + half < -tolerance:
        return BREAKS
    return None


def pooled_verdicts(
    scores: dict[str, list[float]], baseline_id: str, tolerance: float, mode: str
) -> dict[str, str | None]:
    """Every config's verdict at 95% with the edge search's pooled statistic, one look (module docstring)."""
    better = 1 if mode == "max" else -1
    groups = [xs for xs in scores.values() if len(xs) >= 2]
    df = sum(len(xs) - 1 for xs in groups)
    squares = sum(sum((x - statistics.fmean(xs)) ** 2 for x in xs) for xs in groups)
    base = scores.get(baseline_id, [])
    out: dict[str, str | None] = {}
    for config_id, xs in scores.items():
        if config_id == baseline_id:
            out[config_id] = HOLDS  # the baseline is its column's measured hold
        elif len(xs) >= 2 and len(base) >= 2 and df >= 1:
            gain = better * (statistics.fmean(xs) - statistics.fmean(base))
            spread = math.sqrt(squares / df) * math.sqrt(1 / len(xs) + 1 / len(base))
            half = t_quantile(1 - (1 - CONFIDENCE) / 2, df) * spread
            out[config_id] = verdict_from(gain, half, tolerance)
        else:
            out[config_id] = None
    return out


def welch_verdict(xs: list[float], base: list[float], tolerance: float, mode: str) -> str | None:
    """Welch's 95% verdict, as ``vs_baseline`` gives it at 3 seeds on both sides (None with < 2 seeds a side)."""
    if len(xs) < 2 or len(base) < 2:
        return None
    better = 1 if mode == "max" else -1
    vc, vb = statistics.variance(xs) / len(xs), statistics.variance(base) / len(base)
    gain = better * (statistics.fmean(xs) - statistics.fmean(base))
    if vc + vb == 0:
        return verdict_from(gain, 0.0, tolerance)
    df = (vc + vb) ** 2 / (vc**2 / (len(xs) - 1) + vb**2 / (len(base) - 1))
    return verdict_from(gain, t_quantile(1 - (1 - CONFIDENCE) / 2, df) * math.sqrt(vc + vb), tolerance)


def column_edge_of(depths: list[int], verdicts: list[str | None]) -> tuple[int | None, int | None] | None:
    """A column's edge from its verdicts (shallowest first): (deepest break, shallowest hold) when adjacent,
    (None, shallowest depth) when that depth holds, (deepest depth, None) when it breaks; None when not found,
    and None when a break sits deeper than a hold (depth is not monotone there)."""
    holds = [d for d, v in zip(depths, verdicts, strict=True) if v == HOLDS]
    breaks = [d for d, v in zip(depths, verdicts, strict=True) if v == BREAKS]
    if holds and breaks and max(breaks) > min(holds):
        return None
    if holds and min(holds) == depths[0]:
        return (None, depths[0])
    if breaks and max(breaks) == depths[-1]:
        return (depths[-1], None)
    if holds and breaks and depths.index(min(holds)) == depths.index(max(breaks)) + 1:
        return (max(breaks), min(holds))
    return None


def lattice_edges(lattice: Lattice, verdicts: dict[str, str | None]) -> dict[Hashable, tuple | None]:
    return {
        key: column_edge_of([c.depth for c in cells], [verdicts.get(c.config_id) for c in cells])
        for key, cells in lattice.columns().items()
    }


def search_edges(state: EdgeState) -> dict[Hashable, tuple | None]:
    """The edge search's own edges (its measured verdicts), in :func:`column_edge_of`'s form."""
    return {e.column: (e.breaks_at_depth, e.holds_from_depth) if e.found else None for e in state.edges}


def matches(found: dict[Hashable, tuple | None], reference: dict[Hashable, tuple | None]) -> tuple[int, int]:
    """(columns whose reference edge was found exactly, columns with a reference edge)."""
    judged = [key for key, edge in reference.items() if edge is not None]
    return sum(found.get(key) == reference[key] for key in judged), len(judged)


def tally_columns(out: Outcome, found: dict, reference: dict, slot: int) -> None:
    """Count, per column, a replay (slot 1) or full-grid draw (slot 2) that found its reference edge."""
    for key, edge in reference.items():
        entry = out.per_column.setdefault(key, [edge, 0, 0])
        entry[slot] += edge is not None and found.get(key) == edge


# ------------------------------------------------------------------------------------------------------ the replay


@dataclass
class Replay:
    device_s: float
    trials: int
    waves: int
    state: EdgeState
    trained: set[str]
    observations: list[Observation]
    end_checked: set[str] = field(default_factory=set)  # configs started by check_ends (implied when started)


# What the search's device-seconds went to (:func:`spent_on`), in the order printed.
PARTS = ["baseline", "first seeds", "to a verdict", "to futility", "to the cap", "check_ends", "other"]


def spent_on(lattice: Lattice, result: Replay, settings: EdgeSettings) -> dict[str, float]:
    """The search's device-seconds by what they bought: the baseline's seeds; each other config's first min_seeds
    trials ("first seeds"); its later trials, by how the config ended: a measured verdict ("to a verdict"),
    stopped for futility ("to futility"), inconclusive at max_seeds ("to the cap"), else "other"; and every trial
    of a config that check_ends started (its verdict was only implied when it was started)."""
    parts = dict.fromkeys(PARTS, 0.0)
    count: dict[str, int] = {}
    for obs in result.observations:
        k = count[obs.config_id] = count.get(obs.config_id, 0) + 1
        cell = result.state.cells[obs.config_id]
        if obs.config_id == lattice.baseline_id:
            part = "baseline"
        elif obs.config_id in result.end_checked:
            part = "check_ends"
        elif k <= settings.min_seeds:
            part = "first seeds"
        elif cell.verdict in (HOLDS, BREAKS):
            part = "to a verdict"
        elif cell.futile:
            part = "to futility"
        elif cell.verdict == "inconclusive":
            part = "to the cap"
        else:
            part = "other"
        parts[part] += lattice.cost_s[obs.config_id]
    return parts


def draw_orders(lattice: Lattice, rng: random.Random) -> dict[str, list[float | None]]:
    """Each config's recorded seeds in a shuffled order: the n-th trial of a config takes the n-th."""
    orders = {}
    for config_id, pool in sorted(lattice.pools.items()):
        order = list(pool)
        rng.shuffle(order)
        orders[config_id] = order
    return orders


def replay(lattice: Lattice, settings: EdgeSettings, rng: random.Random, width: int = 4) -> Replay:
    """The searcher loop (module docstring): waves of up to ``width`` trials until ``assess`` says finished."""
    orders = draw_orders(lattice, rng)
    taken = dict.fromkeys(orders, 0)
    observations: list[Observation] = []
    spent, waves = 0.0, 0
    end_checked: set[str] = set()
    limit = 4 * len(lattice.cells) * max(settings.max_seeds, settings.baseline_seeds)
    while True:
        pending: set[tuple[str, int]] = set()
        for _ in range(width):
            state = assess(lattice.cells, lattice.baseline_id, settings, observations, pending)
            proposal = next((p for p in state.proposals if p not in pending), None)
            if proposal is None:
                break
            cell = state.cells[proposal[0]]
            if cell.verdict == "untried" and cell.implied is not None and taken[proposal[0]] == 0:
                end_checked.add(proposal[0])  # only check_ends starts a config whose verdict is implied
            pending.add(proposal)
        if not pending:
            state = assess(lattice.cells, lattice.baseline_id, settings, observations)
            if not state.finished:
                raise RuntimeError(f"{lattice.name}: nothing proposed, nothing pending, but not finished")
            trained = {o.config_id for o in observations}
            return Replay(spent, len(observations), waves, state, trained, observations, end_checked)
        for config_id, seed in sorted(pending):
            if taken[config_id] >= len(orders[config_id]):
                raise RuntimeError(f"{lattice.name}: {config_id} asked for more seeds than its {taken[config_id]}")
            observations.append(Observation(config_id, seed, orders[config_id][taken[config_id]]))
            taken[config_id] += 1
            spent += lattice.cost_s[config_id]
        waves += 1
        if len(observations) > limit:
            raise RuntimeError(f"{lattice.name}: the replay passed {limit} trials")


def full_grid_verdicts(lattice: Lattice, rng: random.Random, seeds: int = 3) -> dict[str, str | None]:
    """The 3-seed full grid: 3 seeds drawn without replacement from each pool, Welch's verdicts."""
    drawn = {cid: [x for x in rng.sample(pool, min(seeds, len(pool))) if x is not None]
             for cid, pool in sorted(lattice.pools.items())}  # fmt: skip
    base = drawn[lattice.baseline_id]
    out: dict[str, str | None] = {}
    for cid, xs in drawn.items():
        out[cid] = HOLDS if cid == lattice.baseline_id else welch_verdict(xs, base, lattice.tolerance, lattice.mode)
    return out


def contradicted(lattice: Lattice, state: EdgeState) -> list[str]:
    """Every implied verdict the reference contradicts, in words."""
    lines = []
    for cid, cell in sorted(state.cells.items()):
        if cell.verdict in (HOLDS, BREAKS) or cell.implied is None:
            continue
        truth = lattice.reference.get(cid)
        if truth is not None and truth != cell.implied:
            lines.append(f"depth {cell.depth} ({column_words(cell.column)}) implied {cell.implied} from "
                         f"{state.cells[cell.implied_from].depth}, reference {truth}")  # fmt: skip
    return lines


def column_words(column: Hashable) -> str:
    if isinstance(column, tuple):
        return ", ".join(f"{k}={v}" for k, v in column)
    return str(column)


@dataclass
class Outcome:
    """A lattice's figures over its replays."""

    name: str
    source: str
    depths: int
    configs: int
    grid_draws: int = 0
    fraction: list[float] = field(default_factory=list)
    tuned_fraction: list[float] = field(default_factory=list)
    trials: list[int] = field(default_factory=list)
    waves: list[int] = field(default_factory=list)
    found: list[int] = field(default_factory=lambda: [0, 0])
    grid_found: list[int] = field(default_factory=lambda: [0, 0])
    contradictions_said: int = 0
    wrong_implied: list[str] = field(default_factory=list)
    trained_share: list[float] = field(default_factory=list)  # configs trained ÷ configs (baseline included)
    baseline_share: list[float] = field(default_factory=list)  # the baseline's device-seconds ÷ the search's
    per_column: dict = field(default_factory=dict)  # column → [reference edge, search's hits, full grid's hits]
    parts: dict = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))  # Σ over replays, ÷ the grid's device-s

    @staticmethod
    def rate(pair: list[int]) -> float:
        return pair[0] / pair[1] if pair[1] else math.nan


def run_lattice(lattice: Lattice, settings: EdgeSettings, replays: int, width: int, tuning: tuple[int, int],
                seed: int, grid_draws: int = 20) -> Outcome:  # fmt: skip
    """Replay the lattice ``replays`` times and draw the 3-seed full grid ``grid_draws`` times."""
    out = Outcome(lattice.name, lattice.source, lattice.depths, len(lattice.cells), grid_draws)
    reference = lattice.reference_edges()
    full_s = lattice.full_grid_s()
    rates, selection_seeds = tuning
    for r in range(replays):
        rng = random.Random(f"{seed}:{lattice.name}:replay:{r}")
        result = replay(lattice, settings, rng, width)
        out.fraction.append(result.device_s / full_s)
        for part, spent in spent_on(lattice, result, settings).items():
            out.parts[part] += spent / full_s
        selection_s = rates * selection_seeds * sum(lattice.cost_s[c] for c in result.trained)
        out.tuned_fraction.append((result.device_s + selection_s) / full_s)
        out.trials.append(result.trials)
        out.waves.append(result.waves)
        out.trained_share.append(len(result.trained) / len(lattice.cells))
        base_s = sum(lattice.cost_s[o.config_id] for o in result.observations if o.config_id == lattice.baseline_id)
        out.baseline_share.append(base_s / result.device_s if result.device_s else 0.0)
        hit, judged = matches(search_edges(result.state), reference)
        tally_columns(out, search_edges(result.state), reference, 1)
        out.found[0] += hit
        out.found[1] += judged
        out.contradictions_said += len(result.state.contradictions)
        out.wrong_implied += contradicted(lattice, result.state)
    for r in range(grid_draws):
        rng = random.Random(f"{seed}:{lattice.name}:grid:{r}")
        grid_edges = lattice_edges(lattice, full_grid_verdicts(lattice, rng))
        hit, judged = matches(grid_edges, reference)
        tally_columns(out, grid_edges, reference, 2)
        out.grid_found[0] += hit
        out.grid_found[1] += judged
    return out


# ------------------------------------------------------------------------------------------- recorded grids (CSV)


def read_grid(path: Path) -> Lattice:
    """A recorded grid's CSV (:data:`FIELDS`) as a lattice: pools of seeds, mean device_s, reference verdicts."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    varying = [a for a in COLUMN_AXES if len({r[a] for r in rows}) > 1]
    cells: dict[str, Cell] = {}
    pools: dict[str, list[float | None]] = {}
    costs: dict[str, list[float]] = {}
    baseline_id = ""
    for row in rows:
        cid = row["config_id"]
        column = tuple((a, row[a]) for a in varying)
        cells[cid] = Cell(cid, column, int(row["depth"]))
        ok = row["status"] == "ok" and row["score"] not in ("", None)
        pools.setdefault(cid, []).append(float(row["score"]) if ok else None)
        if row["device_s"]:
            costs.setdefault(cid, []).append(float(row["device_s"]))
        if row["is_baseline"] == "1":
            baseline_id = cid
    tolerance, mode = float(rows[0]["tolerance"]), rows[0]["mode"]
    finished = {cid: [x for x in pool if x is not None] for cid, pool in pools.items()}
    lattice = Lattice(path.stem, sorted(cells.values(), key=lambda c: c.config_id), baseline_id, tolerance, mode,
                      pools, {cid: statistics.fmean(costs.get(cid) or [0.0]) for cid in pools})  # fmt: skip
    lattice.reference = pooled_verdicts(finished, baseline_id, tolerance, mode)
    return lattice


def noise_ratio(lattice: Lattice) -> float:
    """The recorded pooled s_p ÷ tolerance (every config with ≥ 2 finished seeds)."""
    groups = [[x for x in pool if x is not None] for pool in lattice.pools.values()]
    groups = [xs for xs in groups if len(xs) >= 2]
    df = sum(len(xs) - 1 for xs in groups)
    squares = sum(sum((x - statistics.fmean(xs)) ** 2 for x in xs) for xs in groups)
    return math.sqrt(squares / df) / lattice.tolerance


def export_grid(results: Path, space: str, path: Path) -> int:
    """Write one recorded space's trial rows (:data:`FIELDS`) to ``path``; returns the row count."""
    from sweep.analysis.sql import run_query

    query = f"""
        SELECT t.config_id, t.depth, {", ".join("t." + a for a in COLUMN_AXES)}, t.seed, t.status, t.score,
               t.device_s, CAST(t.is_baseline AS INT), t.metric, t.metric_mode, s.tolerance
        FROM trials t JOIN space_settings s USING (space)
        WHERE t.space = '{space}' AND t.tune_phase IS NULL
        ORDER BY t.depth, {", ".join("t." + a for a in COLUMN_AXES)}, t.seed"""
    _, rows = run_query(results, query)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for row in rows:
            writer.writerow(["" if v is None else (round(v, 4) if isinstance(v, float) else v) for v in row])
    return len(rows)


def record(folder: Path) -> None:
    """Run :data:`RECIPE` into ``folder`` (each grid in its own results folder), then export each grid's CSV."""
    for name, space, options in RECIPE:
        command = ["nice", "-n", "10", sys.executable, "-m", "sweep.cli", "run", space, *options,
                   "--results", str(folder / name), "--quiet"]  # fmt: skip
        print("$", " ".join(command), flush=True)
        subprocess.run(command, cwd=ROOT, check=True)
        stem = Path(space).stem
        print(f"{name}: {export_grid(folder / name, stem, GRIDS / f'{name}.csv')} rows -> {GRIDS / name}.csv")


# -------------------------------------------------------------------------------------------- planted lattices


def planted(shape: tuple, base_col: int, base_pos: int, label: str, index: int, ratios: list[float],
            rng: random.Random, fail_share: float, violations: float, pool_seeds: int = 5) -> Lattice:  # fmt: skip
    """A planted lattice of ``shape`` (module docstring). Tolerance 1, mode max, baseline mean 0."""
    sd = rng.choice(ratios) * rng.uniform(0.75, 1.25)
    cells, means, truth = [], {}, {}
    baseline_id = f"c{base_col}d{base_pos + 1}"
    for col, count in enumerate(shape):
        # The planted edge: the first holding depth's index (count: breaks throughout); the baseline holds.
        edge = rng.randint(0, count if col != base_col else base_pos)
        gains = planted_gains(count, edge, rng)
        if col == base_col:
            gains[base_pos] = 0.0
        if count >= 3 and count - edge >= 2 and col != base_col and rng.random() < violations:
            gains[-1] = -1.0 - rng.uniform(0.25, 3.0)  # the deepest breaks again: not monotone here
        for pos, gain in enumerate(gains):
            cid = f"c{col}d{pos + 1}"
            cells.append(Cell(cid, (("column", col),), pos + 1))
            means[cid] = gain
            truth[cid] = HOLDS if gain >= -1.0 else BREAKS
    pools = {
        cid: [None if rng.random() < fail_share else mean + rng.gauss(0.0, sd) for _ in range(pool_seeds)]
        for cid, mean in means.items()
    }
    costs = {c.config_id: float(c.depth) for c in cells}
    finished = {cid: [x for x in pool if x is not None] for cid, pool in pools.items()}
    reference = pooled_verdicts(finished, baseline_id, 1.0, "max")
    return Lattice(f"planted-{index:03d} {label}", cells, baseline_id, 1.0, "max", pools, costs, reference, "planted",
                   truth)  # fmt: skip


def planted_gains(count: int, edge: int, rng: random.Random, step: tuple[float, float] = (0.25, 3.0)) -> list[float]:
    """True gains along a column of ``count`` depths whose first holding index is ``edge``: each depth away from
    the edge moves U(``step``) tolerances further from −tolerance (−1), up for holds, down for breaks."""
    gains = [0.0] * count
    level = -1.0
    for pos in range(edge, count):
        level += rng.uniform(*step)
        gains[pos] = level
    level = -1.0
    for pos in range(edge - 1, -1, -1):
        level -= rng.uniform(*step)
        gains[pos] = level
    return gains


def shapes_from_spaces() -> list[tuple]:
    """Every shipped space × profile's lattice shape, planned through the loader (what :data:`SHIPPED_SHAPES`
    lists): slow (it plans every space), so it is an option."""
    from sweep.plan.plan import make_plan
    from sweep.space.loader import find_space, load_space, read_yaml, shipped_spaces

    seen: dict[tuple, list[str]] = {}
    for name in sorted(shipped_spaces()):
        raw = read_yaml(find_space(name))
        profiles = list(raw.get("profiles") or {})
        for profile in ([] if raw.get("default_profile") else [None]) + profiles:
            space_name, space, chosen = load_space(name, profile)
            plan = make_plan(space_name, space, chosen)
            columns: dict[tuple, list[int]] = {}
            for config in plan.configs:
                s = config.shape
                key = (s.family, s.num_heads, s.head_dim, s.embed_dim, s.mlp_dim, s.kv_heads, s.conditioning)
                columns.setdefault(key, []).append(s.depth)
            b = plan.baseline.shape
            key = (b.family, b.num_heads, b.head_dim, b.embed_dim, b.mlp_dim, b.kv_heads, b.conditioning)
            keys = list(columns)
            entry = (tuple(len(columns[k]) for k in keys), keys.index(key), sorted(columns[key]).index(b.depth))
            seen.setdefault(entry, []).append(f"{name}:{chosen or 'base'}")
    return [(*entry, " ".join(names)) for entry, names in seen.items()]


# ------------------------------------------------------------------------------------------------------ printing


def print_outcome(o: Outcome) -> None:
    fr = statistics.fmean(o.fraction)
    line = (f"{o.name[:58]:58s} {o.depths:>2d} {o.configs:>3d}  {fr:6.1%} ({min(o.fraction):.0%}-{max(o.fraction):.0%})"
            f"  {statistics.fmean(o.trials):5.1f}  {fmt_rate(o.found):>15s}  {fmt_rate(o.grid_found):>15s}"
            f"  {len(o.wrong_implied):>3d}")  # fmt: skip
    print(line)
    print(f"      spent, % of the 3-seed grid's device-seconds: {parts_words(o.parts, len(o.fraction))}")
    for text in sorted(set(o.wrong_implied)):
        print(f"      contradicted ({o.wrong_implied.count(text)}x): {text}")


def parts_words(parts: dict, replays: int) -> str:
    """:func:`spent_on`'s parts, each a mean over ``replays`` as a share of the grid (those above 0 only)."""
    shown = [f"{part} {total / replays:.1%}" for part, total in parts.items() if total > 0]
    return ", ".join(shown) or "nothing"


def edge_words(edge: tuple | None) -> str:
    if edge is None:
        return "none (a verdict in its bracket is not significant, or depth is not monotone)"
    breaks, holds = edge
    if breaks is None:
        return f"holds throughout (from depth {holds})"
    if holds is None:
        return f"breaks throughout (to depth {breaks})"
    return f"breaks at {breaks}, holds from {holds}"


def fmt_rate(pair: list[int]) -> str:
    return f"{pair[0]}/{pair[1]} {Outcome.rate(pair):4.0%}" if pair[1] else "-/0 (none)"


def summary(label: str, outcomes: list[Outcome]) -> dict:
    """Pooled figures over ``outcomes``: mean device fraction (per lattice), pooled match rates, contradictions."""
    if not outcomes:
        print(f"{label}: no lattices")
        return {}
    fraction = statistics.fmean(statistics.fmean(o.fraction) for o in outcomes)
    tuned = statistics.fmean(statistics.fmean(o.tuned_fraction) for o in outcomes)
    found = [sum(o.found[0] for o in outcomes), sum(o.found[1] for o in outcomes)]
    grid = [sum(o.grid_found[0] for o in outcomes), sum(o.grid_found[1] for o in outcomes)]
    wrong = sum(len(o.wrong_implied) for o in outcomes)
    implied_total = sum(len(o.fraction) for o in outcomes)
    said = sum(o.contradictions_said for o in outcomes)
    trained = statistics.fmean(statistics.fmean(o.trained_share) for o in outcomes)
    base = statistics.fmean(statistics.fmean(o.baseline_share) for o in outcomes)
    per_config = sum(sum(o.trials) for o in outcomes) / sum(
        sum(share * o.configs for share in o.trained_share) for o in outcomes
    )
    print(f"{label}: {len(outcomes)} lattices ({implied_total} replays): device-seconds {fraction:.1%} of the 3-seed "
          f"full grid's; reference edge found {fmt_rate(found)} (full grid at 3 seeds {fmt_rate(grid)}); "
          f"implied verdicts contradicted {wrong}; contradictions said {said}; configs trained {trained:.0%}, "
          f"{per_config:.1f} trials each; the baseline's share of the search's device-seconds {base:.0%}")  # fmt: skip
    parts = {part: statistics.fmean(o.parts[part] / len(o.fraction) for o in outcomes) for part in PARTS}
    print(f"  spent (mean per lattice, % of the 3-seed grid's device-seconds): {parts_words(parts, 1)}")
    return {"fraction": fraction, "tuned": tuned, "found": Outcome.rate(found), "grid": Outcome.rate(grid),
            "wrong": wrong}  # fmt: skip


def goal_line(label: str, s: dict) -> None:
    if not s:
        return
    checks = [s["fraction"] <= 0.40, s["found"] >= s["grid"], s["wrong"] == 0]
    yes = ["yes" if c else "no" for c in checks]
    print(f"goal ({label}): device-seconds {s['fraction']:.1%} <= 40% {yes[0]}; found {s['found']:.0%} >= full "
          f"grid's {s['grid']:.0%} {yes[1]}; contradicted implied verdicts {s['wrong']} == 0 {yes[2]}: "
          f"{'MET' if all(checks) else 'NOT MET'}")  # fmt: skip


# ---------------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the replay's random seed (default 0)")
    parser.add_argument("--replays", type=int, default=20, help="replays per recorded grid (default 20)")
    parser.add_argument("--synthetic", type=int, default=136, help="planted lattices (default 136: 4 per shape)")
    parser.add_argument("--width", type=int, default=4, help="trials a wave starts at once (default 4)")
    parser.add_argument("--min-seeds", type=int, default=2)
    parser.add_argument("--max-seeds", type=int, default=5)
    parser.add_argument("--baseline-seeds", type=int, default=5)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument(
        "--check-ends",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the search measures each column's implied ends (default: yes, as a space's search)",
    )
    parser.add_argument("--futility", action=argparse.BooleanOptionalAction, default=True,
                        help="a config stops once even max_seeds could not settle it (default: yes)")  # fmt: skip
    parser.add_argument("--fail-share", type=float, default=0.05, help="planted: share of failed trials")
    parser.add_argument("--noise", type=float, help="planted: this s_p / tolerance instead of the recorded ones'")
    parser.add_argument("--violations", type=float, default=0.15, help="planted: share of non-monotone columns")
    parser.add_argument("--rates", type=int, default=4, help="tune: rates a config's learning rate is chosen from")
    parser.add_argument("--selection-seeds", type=int, default=1, help="tune: selection seeds per rate")
    parser.add_argument("--grids", type=Path, default=GRIDS, help="the recorded grids' CSV folder")
    parser.add_argument("--quiet", action="store_true", help="summaries only, no line per planted lattice")
    parser.add_argument("--record", type=Path, metavar="DIR", help="record the grids again into DIR, then export")
    parser.add_argument("--export", type=Path, metavar="DIR", help="only export the grids recorded in DIR/NAME")
    parser.add_argument("--shapes-from-spaces", action="store_true", help="plan the shipped spaces for the shapes")
    return parser.parse_args(argv)


def settings_for(lattice: Lattice, args: argparse.Namespace) -> EdgeSettings:
    return EdgeSettings(lattice.tolerance, lattice.mode, args.min_seeds, args.max_seeds, args.baseline_seeds,
                        args.alpha, check_ends=args.check_ends, futility=args.futility)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.record:
        record(args.record)
    if args.export:
        for name, space, _ in RECIPE:
            print(f"{name}: {export_grid(args.export / name, Path(space).stem, args.grids / f'{name}.csv')} rows")
        return
    recorded = [read_grid(path) for path in sorted(args.grids.glob("*.csv"))]
    ratios = [noise_ratio(g) for g in recorded] or [1.0]
    planted_ratios = [args.noise] if args.noise else ratios
    shapes = shapes_from_spaces() if args.shapes_from_spaces else SHIPPED_SHAPES
    tuning = (args.rates, args.selection_seeds)
    print(f"edge search replay: seed {args.seed}, waves of {args.width}, seeds {args.min_seeds}-{args.max_seeds} "
          f"a config, baseline {args.baseline_seeds}, alpha {args.alpha}, check_ends {args.check_ends}, futility "
          f"{args.futility}")  # fmt: skip
    noise = ", ".join(f"{g.name} {r:.2f}" for g, r in zip(recorded, ratios, strict=False))
    print(f"recorded noise, pooled s_p / tolerance: {noise}")
    header = (f"{'lattice':58s} {'D':>2s} {'cfg':>3s}  {'device-s ÷ grid@3':>18s}  {'trials':>5s}  "
              f"{'edge found':>15s}  {'grid@3 found':>15s}  {'contra':>3s}")  # fmt: skip
    print(header)
    outcomes = [run_lattice(g, settings_for(g, args), args.replays, args.width, tuning, args.seed) for g in recorded]
    for o in outcomes:
        print_outcome(o)
        for key, (edge, hits, grid_hits) in o.per_column.items():
            print(f"      column {column_words(key)}: reference edge {edge_words(edge)}; found in {hits}/"
                  f"{len(o.fraction)} replays, by the 3-seed grid in {grid_hits}/{o.grid_draws}")  # fmt: skip
    rng = random.Random(f"{args.seed}:planted")
    for index in range(args.synthetic):
        shape, base_col, base_pos, label = shapes[index % len(shapes)]
        lattice = planted(shape, base_col, base_pos, label.split()[0], index, planted_ratios, rng, args.fail_share,
                          args.violations)  # fmt: skip
        outcome = run_lattice(lattice, settings_for(lattice, args), 1, args.width, tuning, args.seed)
        outcomes.append(outcome)
        if not args.quiet:
            print_outcome(outcome)
    print()
    groups = {}
    for source in ("recorded", "planted"):
        for deep in (True, False):
            chosen = [o for o in outcomes if o.source == source and (o.depths >= 5) == deep]
            groups[(source, deep)] = summary(f"{source}, {'>= 5' if deep else '< 5'} depths", chosen)
    deep_all = summary(">= 5 depths, recorded and planted", [o for o in outcomes if o.depths >= 5])
    goal_line("lattices with >= 5 depths", deep_all)
    goal_line("recorded lattices with >= 5 depths", groups[("recorded", True)])
    small = summary("< 5 depths, recorded and planted", [o for o in outcomes if o.depths < 5])
    print(f"on lattices with < 5 depths: device-seconds {small.get('fraction', math.nan):.1%} of the full grid's")
    multiplier = (args.rates * args.selection_seeds + 3) / 3
    for label, s in (("lattices with >= 5 depths", deep_all), ("lattices with < 5 depths", small)):
        if s:
            print(f"with a learning-rate search ({args.rates} rates x {args.selection_seeds} selection seed, "
                  f"bench/tuning_cost.py's multiplier {multiplier:.2f}x for the 3-seed grid), {label}: edge "
                  f"{s['fraction']:.1%} x {multiplier:.2f} = {s['fraction'] * multiplier:.1%} of the untuned grid "
                  f"if every trained config were tuned per trial; counted exactly (selection runs only for the "
                  f"configs the search trained) {s['tuned']:.1%} of the untuned grid, "
                  f"{s['tuned'] / multiplier:.1%} of the tuned grid")  # fmt: skip


if __name__ == "__main__":
    main()
