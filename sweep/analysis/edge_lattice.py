"""A plan as the edge search sees it (``search: {kind: edge}``; docs/analysis.md): one lattice per model family, its
configs as :class:`~sweep.analysis.edge.Cell` s in columns (every config sharing all shape axes but depth), the
search's settings, and what ``sweep plan`` expects the search to cost, simulated with the search's own rules
(:func:`sweep.analysis.edge.assess`). Pure: no DuckDB, no Ray, no torch.

The expected cost, per case (``sweep plan`` prints both beside the full grid at 3 seeds):

- **typical**: a noise-free lattice whose edge sits in the middle of each column (the deeper half of its depths
  holds, the shallower half breaks; in the baseline's column every depth from the baseline's down to that middle
  holds), so every config settles at ``min_seeds`` seeds;
- **worst**: every config measured to ``max_seeds`` (each one's interval straddles the tolerance to the end and
  its gain sits far enough from it that futility never stops it, so nothing is implied and every config of every
  column is trained: simulated with futility off).

A *wave* is one round of trials that the search proposes together and that can all run at once given enough
devices (each round's results decide the next); the full grid is one wave. Waves × a trial's time is the
search's wall time with unlimited devices, the least it can take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sweep.analysis.edge import Cell, EdgeSettings, Observation, assess
from sweep.plan.plan import Plan, PlannedConfig

GRID_SEEDS = 3  # the full grid ``sweep plan`` compares the edge search with: every config at 3 seeds
MAX_WAVES = 10_000  # a simulation that has not finished by then is a bug in the rules, not a slow search


@dataclass(frozen=True)
class Lattice:
    """One family's configs as the edge search's cells, and its baseline."""

    family: str
    baseline_id: str
    cells: tuple[Cell, ...]


def edge_settings(plan: Plan) -> EdgeSettings:
    """The search's settings: the space's ``search:`` and its headline metric's tolerance and direction."""
    search, metric = plan.space.search, plan.space.metric
    return EdgeSettings(
        tolerance=metric.tolerance,
        mode=metric.mode,
        min_seeds=search.min_seeds,
        max_seeds=search.max_seeds,
        baseline_seeds=search.baseline_seeds,
        alpha=search.alpha,
        check_ends=search.check_ends,
        futility=search.futility,
    )


def lattices(plan: Plan) -> list[Lattice]:
    """The plan's configs as one lattice per family, each column keyed by the (axis, value) pairs that vary in
    the plan (``Shape.depth_column``; the pairs every config shares are left out of the key and its words)."""
    columns = {c.config_id: dict(c.shape.depth_column()) for c in plan.configs}
    names = list(next(iter(columns.values()), {}))
    varying = [n for n in names if n != "family" and len({str(col.get(n)) for col in columns.values()}) > 1]
    if all(col.get("kv_heads") == col.get("num_heads") for col in columns.values()):  # no grouped-query axis
        varying = [n for n in varying if n != "kv_heads"]
    found = []
    for family in plan.space.families():
        configs = [c for c in plan.configs if c.shape.family == family]
        baseline = next(c for c in configs if c.is_baseline)
        cells = tuple(
            Cell(c.config_id, tuple((n, columns[c.config_id].get(n)) for n in varying), c.shape.depth) for c in configs
        )
        found.append(Lattice(family, baseline.config_id, cells))
    return found


def configs_by_id(plan: Plan) -> dict[str, PlannedConfig]:
    return {c.config_id: c for c in plan.configs}


# --- what the search is expected to cost -----------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """One case's cost: trials (per config id), waves, and device-seconds where each config's trial time is known."""

    trials: dict[str, int]
    waves: int
    device_s: float | None

    @property
    def total(self) -> int:
        return sum(self.trials.values())


def simulate(lattice: Lattice, settings: EdgeSettings, score: Callable[[str, int], float]) -> tuple[dict, int]:
    """The search run to its end on ``lattice`` with ``score(config_id, seed)`` as each trial's score, a wave at a
    time (every proposal of a round trained together): the trials per config and the number of waves."""
    observations: list[Observation] = []
    for waves in range(MAX_WAVES):
        state = assess(list(lattice.cells), lattice.baseline_id, settings, observations)
        if not state.proposals:
            trials: dict[str, int] = {}
            for obs in observations:
                trials[obs.config_id] = trials.get(obs.config_id, 0) + 1
            return trials, waves
        observations += [Observation(c, seed, score(c, seed)) for c, seed in state.proposals]
    raise RuntimeError(f"the edge search's simulation did not finish in {MAX_WAVES} waves")


def typical_scores(lattice: Lattice, settings: EdgeSettings) -> Callable[[str, int], float]:
    """Noise-free scores whose edge sits in the middle of each column (module docstring): a config that holds
    scores the baseline's, one that breaks scores (2 × tolerance + 1) worse."""
    by_column: dict = {}
    for cell in lattice.cells:
        by_column.setdefault(cell.column, []).append(cell)
    baseline = next(c for c in lattice.cells if c.config_id == lattice.baseline_id)
    holds = set()
    for column, cells in by_column.items():
        depths = sorted(c.depth for c in cells)
        middle = depths[len(depths) // 2]
        for cell in cells:
            if cell.depth >= middle or (column == baseline.column and cell.depth >= baseline.depth):
                holds.add(cell.config_id)
    broken = -settings.better * (2 * settings.tolerance + 1)
    return lambda config_id, seed: 0.0 if config_id in holds else broken


def worst_scores(lattice: Lattice, settings: EdgeSettings) -> Callable[[str, int], float]:
    """Scores that leave every config open to its last seed: each config's mean on the tolerance, every seed
    ± a spread far wider than the tolerance (alternating by seed, so seeds 0 and 1 cancel)."""
    spread = 20 * max(settings.tolerance, 1.0)
    on_bound = -settings.better * settings.tolerance

    def score(config_id: str, seed: int) -> float:
        noise = spread if seed % 2 == 0 else -spread
        return noise + (0.0 if config_id == lattice.baseline_id else on_bound)

    return score


def expected(plan: Plan, train_s: dict[str, float] | None = None) -> dict[str, Expected]:
    """The edge search's ``typical`` and ``worst`` cases (module docstring) and the full ``grid`` at 3 seeds;
    ``train_s``: each config's estimated seconds per trial (``sweep plan --gpu``), for device-seconds."""
    settings = edge_settings(plan)
    cases: dict[str, Expected] = {}
    for case, scores in (("typical", typical_scores), ("worst", worst_scores)):
        trials: dict[str, int] = {}
        waves = 0
        # worst: nothing stops a config before its cap (the scores sit on the tolerance, where futility would)
        case_settings = replace(settings, futility=False) if case == "worst" else settings
        for lattice in lattices(plan):  # families run side by side: their waves overlap
            found, family_waves = simulate(lattice, case_settings, scores(lattice, case_settings))
            trials.update(found)
            waves = max(waves, family_waves)
        cases[case] = Expected(trials, waves, device_seconds(trials, train_s))
    grid = {c.config_id: GRID_SEEDS for c in plan.configs}
    cases["grid"] = Expected(grid, 1, device_seconds(grid, train_s))
    return cases


def device_seconds(trials: dict[str, int], train_s: dict[str, float] | None) -> float | None:
    if train_s is None or any(train_s.get(c) is None for c in trials):
        return None
    return sum(count * train_s[c] for c, count in trials.items())
