"""The edge search's decisions: given what a space has measured, each config's verdict (measured or implied), each
column's edge, and which (config, seed) to train next. Pure: no DuckDB, no Ray, no torch, so the searcher
(sweep/run/) and the replay bench (bench/edge_replay.py) run the very same rules.

Definitions (docs/analysis.md says them for users):

- A *column* is every config that shares all shape axes but depth; along it, depths ascend.
- *Verdict statistic*: gain = better · (mean score of the config − mean score of the baseline), better = +1 when
  higher is better (mode max), −1 for min. s_p is the pooled standard deviation over every config with ≥ 2
  finished seeds, the baseline included: s_p² = Σ_i Σ_j (x_ij − x̄_i)² / df, df = Σ_i (n_i − 1). The interval is
  gain ∓ t_{1−α'/2}(df) · s_p · √(1/n_c + 1/n_b) with α' = α / L and L = max_seeds − min_seeds + 1, the number of
  looks a config can have (one per seed count from min_seeds to max_seeds): Bonferroni over the looks, so a
  verdict keeps its error ≤ α however many seeds the config got before it stopped. *holds*: gain_lo ≥ −tolerance;
  *breaks*: gain_hi < −tolerance; otherwise *open*, or *inconclusive* once the config has max_seeds trials, or
  once *futile* (``futility``, on by default): even at its cap the interval would straddle −tolerance if the gain
  stayed where it is (:func:`futile`); it then says about how many seeds a side would settle it
  (:func:`needs_seeds`). Futility only stops a config without a verdict, never gives one, so each verdict's error
  stays ≤ α: the Bonferroni split covers the looks whichever of them are taken.
  A failed seed (no score) counts toward the config's trials but not toward n_c; a config whose first
  min_seeds or more trials all failed is *failed*. The baseline is its own column's measured hold (gain 0).
- *Monotone along depth* (never along heads: Amsel et al. 2024): in a column, a config that holds implies every
  deeper one holds and one that breaks implies every shallower one breaks. Such a verdict is *implied*, never
  measured, and names the nearest measured config it comes from; a trained config whose own mean gain sits on the
  other side of −tolerance gets none (:func:`leans_against`). A *contradiction* (a measured break deeper than a
  measured hold) stops the column implying anything; every config of it is then measured.
- Contradictions are found among measured rows: bisection itself only measures between the deepest break and the
  shallowest hold, where none can arise, so they come from rows recorded by earlier sweeps, from verdicts that
  change as the pooled spread moves, or from ``check_ends``, which measures each column's implied ends once its
  edge is bracketed.
- A column's *edge*: its deepest measured break and its shallowest measured hold when they are adjacent depths;
  or "holds throughout" (its shallowest depth measured holds), or "breaks throughout" (its deepest measured
  breaks); otherwise not found.

What to train next (the order of :attr:`EdgeState.proposals`): the baseline's seeds up to baseline_seeds; then
the seeds each started config still lacks to reach min_seeds finished seeds (a new config is started with them
all, and keeps them even when implied meanwhile), then one more seed for each config whose verdict is still open,
that nothing implies (or that is a column end ``check_ends`` measures) and that has nothing training, those without an
interval first, then nearest the tolerance (|gain − (−tolerance)| / half-width of the interval); then, in each
column with no open config in flight, the middle config of its longest run of untried configs between the deepest
measured break and the shallowest measured hold (the shallower middle of an even run: it is cheaper), started
with min_seeds seeds, or, once no untried run is left and ``check_ends`` is set, its ends whose verdicts are only
implied. That is noisy bisection along depth, the monotone thresholding bandit of Cheshire, Ménard &
Carpentier (COLT 2020). New seeds are the smallest non-negative integers the config has not recorded and that are
not pending.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

HOLDS, BREAKS, OPEN, INCONCLUSIVE, FAILED, BASELINE, UNTRIED = (
    "holds",
    "breaks",
    "open",
    "inconclusive",
    "failed",
    "baseline",
    "untried",
)
# Verdicts that end a config's measuring: no seed is added to it.
TERMINAL = {HOLDS, BREAKS, INCONCLUSIVE, FAILED, BASELINE}


@dataclass(frozen=True)
class EdgeSettings:
    """The search's settings: the tolerance in the headline metric's units, its direction ('max' or 'min'), the
    seeds a config starts with and may reach, the baseline's seeds, and the error rate α of each verdict.
    ``check_ends``: once bisection has bracketed a column's edge, also measure its shallowest and deepest configs
    where their verdicts are only implied, so a column that breaks again at its deepest (too deep to train in the
    budget: "deeper worst") contradicts the shallower hold instead of being implied to hold (off here, on by default
    in a space's ``search:``, sweep/space/model.py). ``futility``: stop a config once even max_seeds could not settle
    it (:func:`futile`)."""

    tolerance: float
    mode: str
    min_seeds: int = 2
    max_seeds: int = 5
    baseline_seeds: int = 5
    alpha: float = 0.05
    check_ends: bool = False
    futility: bool = True

    @property
    def looks(self) -> int:
        """L: the seed counts at which a config's verdict is read, min_seeds … max_seeds."""
        return self.max_seeds - self.min_seeds + 1

    @property
    def better(self) -> int:
        return 1 if self.mode == "max" else -1


@dataclass(frozen=True)
class Cell:
    """One config of the lattice: its id, its column (any hashable key; a tuple of (axis, value) pairs is said
    as ``axis=value`` in words) and its depth."""

    config_id: str
    column: Hashable
    depth: int


@dataclass(frozen=True)
class Observation:
    """One recorded trial: its config, seed and headline score (None: the trial failed)."""

    config_id: str
    seed: int
    score: float | None


@dataclass(frozen=True)
class CellState:
    """A config's state: its measured ``verdict`` (holds, breaks, open, inconclusive, failed, baseline, untried),
    ``implied`` ('holds' or 'breaks' where the monotone assumption decides it, None otherwise) and the measured
    config it comes from; finished seeds, trials (failed included) and the gain's interval (None without one)."""

    config_id: str
    column: Hashable
    depth: int
    verdict: str
    implied: str | None
    implied_from: str | None
    n_seeds: int
    n_trials: int
    gain: float | None
    gain_lo: float | None
    gain_hi: float | None
    futile: bool = False
    needs_seeds: int | None = None

    @property
    def decided(self) -> str | None:
        """The verdict a reader takes: measured holds or breaks, else the implied one, else None."""
        return self.verdict if self.verdict in (HOLDS, BREAKS) else self.implied


@dataclass(frozen=True)
class ColumnEdge:
    """A column's edge from measured verdicts only (the module docstring's definition)."""

    column: Hashable
    breaks_at_depth: int | None
    holds_from_depth: int | None
    found: bool
    description: str


@dataclass(frozen=True)
class EdgeState:
    """Everything :func:`assess` decides."""

    cells: dict[str, CellState]
    edges: list[ColumnEdge]
    contradictions: list[str]
    proposals: list[tuple[str, int]]
    finished: bool


@dataclass
class _Tally:
    """One config's observations: the latest score of each seed (None: failed), and its pending seeds."""

    scores: dict[int, float | None] = field(default_factory=dict)
    pending: set[int] = field(default_factory=set)

    @property
    def finished(self) -> list[float]:
        return [s for s in self.scores.values() if s is not None]

    @property
    def n_trials(self) -> int:
        return len(self.scores)

    def next_seeds(self, count: int) -> list[int]:
        """The ``count`` smallest non-negative seeds neither recorded nor pending."""
        seeds, candidate = [], 0
        while len(seeds) < count:
            if candidate not in self.scores and candidate not in self.pending:
                seeds.append(candidate)
            candidate += 1
        return seeds


def column_words(column: Hashable) -> str:
    """A column key in words: ``num_heads=16, head_dim=4`` for a tuple of pairs, else its text."""
    if isinstance(column, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in column):
        return ", ".join(f"{k}={v}" for k, v in column)
    return str(column)


def t_quantile(p: float, df: float) -> float:
    from scipy.stats import t  # scipy loads in ~0.3 s: only when an interval is computed

    return float(t.ppf(p, df))


def pooled_sd(tallies: Iterable[_Tally]) -> tuple[float | None, int]:
    """s_p and its degrees of freedom over the configs with ≥ 2 finished seeds (module docstring)."""
    squares, df = 0.0, 0
    for tally in tallies:
        scores = tally.finished
        if len(scores) >= 2:
            mean = sum(scores) / len(scores)
            squares += sum((x - mean) ** 2 for x in scores)
            df += len(scores) - 1
    return (math.sqrt(squares / df) if df else None), df


def measured_state(
    cell: Cell, tally: _Tally, baseline: _Tally, is_baseline: bool, sd: float | None, df: int, s: EdgeSettings
) -> CellState:
    """A config's measured verdict and interval (no implication yet)."""
    scores, base = tally.finished, baseline.finished
    gain = lo = hi = None
    stopped = False
    if scores and base:
        gain = s.better * (sum(scores) / len(scores) - sum(base) / len(base))
    if is_baseline:
        verdict = BASELINE
    elif tally.n_trials == 0:
        verdict = UNTRIED
    elif not scores and tally.n_trials >= s.min_seeds:
        verdict = FAILED
    else:
        if len(scores) >= s.min_seeds and len(base) >= 2 and df >= 1 and sd is not None:
            half = t_quantile(1 - s.alpha / s.looks / 2, df) * sd * math.sqrt(1 / len(scores) + 1 / len(base))
            lo, hi = gain - half, gain + half
        if lo is not None and lo >= -s.tolerance:
            verdict = HOLDS
        elif hi is not None and hi < -s.tolerance:
            verdict = BREAKS
        elif tally.n_trials >= s.max_seeds:
            verdict = INCONCLUSIVE
        elif lo is not None and s.futility and futile(gain, tally, baseline, sd, df, s):
            verdict, stopped = INCONCLUSIVE, True
        else:
            verdict = OPEN
    needs = needs_seeds(gain, sd, df, s) if verdict == INCONCLUSIVE and lo is not None else None
    return CellState(cell.config_id, cell.column, cell.depth, verdict, None, None, len(scores), tally.n_trials, gain,
                     lo, hi, stopped, needs)  # fmt: skip


def half_width_at_cap(tally: _Tally, baseline: _Tally, sd: float, df: int, s: EdgeSettings) -> float:
    """The interval's half-width a config would have at its cap, were every trial left to it and to the baseline
    to finish: n_c' = max_seeds − the config's failed trials, n_b' = n_b + the baseline's trials still to come
    (baseline_seeds − its trials, if positive), df' = df + (n_c' − n_c) + (n_b' − n_b), the same s_p and level
    α' = α/L: t_{1−α'/2}(df') · s_p · √(1/n_c' + 1/n_b')."""
    n_c, n_b = len(tally.finished), len(baseline.finished)
    n_c_cap = s.max_seeds - (tally.n_trials - n_c)
    n_b_cap = n_b + max(0, s.baseline_seeds - baseline.n_trials)
    df_cap = df + (n_c_cap - n_c) + (n_b_cap - n_b)
    return t_quantile(1 - s.alpha / s.looks / 2, df_cap) * sd * math.sqrt(1 / n_c_cap + 1 / n_b_cap)


def futile(gain: float, tally: _Tally, baseline: _Tally, sd: float, df: int, s: EdgeSettings) -> bool:
    """Futility (``EdgeSettings.futility``): an open config is stopped once even its cap could not give it a verdict
    if its gain stayed where it is: |gain + tolerance| < :func:`half_width_at_cap`. It only ever stops a config
    without a verdict, never gives one, so each verdict's error stays ≤ α (the Bonferroni split over the looks
    holds whichever looks are taken)."""
    return abs(gain + s.tolerance) < half_width_at_cap(tally, baseline, sd, df, s)


def needs_seeds(gain: float, sd: float, df: int, s: EdgeSettings) -> int | None:
    """About how many seeds a side (config and baseline each) an inconclusive config needs for a verdict, were its
    gain to stay where it is: N = ⌈2 · (t_{1−α'/2}(df) · s_p / |gain + tolerance|)²⌉, the seeds at which the
    interval at today's t would clear −tolerance (more looks would raise t a little: an order of magnitude, not a
    promise). None when the gain sits on the tolerance."""
    gap = abs(gain + s.tolerance)
    if gap == 0:
        return None
    t = t_quantile(1 - s.alpha / s.looks / 2, df)
    return math.ceil(2 * (t * sd / gap) ** 2)


def _hold_depths(column: list[CellState]) -> list[CellState]:
    return [c for c in column if c.verdict in (HOLDS, BASELINE)]


def contradiction(column: list[CellState]) -> str | None:
    """The line that says a column breaks deeper than it holds, or None (measured verdicts only)."""
    holds = _hold_depths(column)
    breaks = [c for c in column if c.verdict == BREAKS]
    for b in sorted(breaks, key=lambda c: -c.depth):
        shallower_holds = [h for h in holds if h.depth < b.depth]
        if shallower_holds:
            h = max(shallower_holds, key=lambda c: c.depth)
            return (
                f"edge search: column {column_words(b.column)}: depth {b.depth} breaks ({interval_words(b)}) but "
                f"depth {h.depth} holds ({interval_words(h)}): depth is not monotone here; measuring the whole column"
            )
    return None


def state_words(cell: CellState) -> str:
    """A measured state without a verdict in words, as the ``edge_verdicts`` view's ``edge_state_words`` says it:
    ``inconclusive (noise: needs ~12 seeds a side; stopped at 2 of 2 trials finished: the cap could not settle
    it)``, ``inconclusive at the cap (5 of 5 trials finished; noise: needs ~9 seeds a side)``, ``open (1 of 2
    trials finished)``, ``failed (all 2 trials)``, ``untried``."""
    noise = ("noise: its gain sits on the tolerance" if cell.needs_seeds is None
             else f"noise: needs ~{cell.needs_seeds} seeds a side")  # fmt: skip
    if cell.verdict == UNTRIED:
        return UNTRIED
    if cell.verdict == FAILED:
        return f"failed (all {cell.n_trials} trials)"
    if cell.verdict == INCONCLUSIVE and cell.futile:
        return (f"inconclusive ({noise}; stopped at {cell.n_seeds} of {cell.n_trials} trials finished: the cap "
                "could not settle it)")  # fmt: skip
    if cell.verdict == INCONCLUSIVE:
        return f"inconclusive at the cap ({cell.n_seeds} of {cell.n_trials} trials finished; {noise})"
    return f"open ({cell.n_seeds} of {cell.n_trials} trials finished)"


def interval_words(cell: CellState) -> str:
    if cell.verdict == BASELINE:
        return "the baseline"
    if cell.gain_lo is None:
        return f"{cell.n_seeds} seeds"
    return f"gain {cell.gain:+.3g} ± {(cell.gain_hi - cell.gain_lo) / 2:.3g}, {cell.n_seeds} seeds"


def implied(column: list[CellState], tolerance: float) -> list[CellState]:
    """The column's cells with implied verdicts filled in (monotone along depth; the column has no contradiction),
    but none for a config whose own seeds lean against it (:func:`leans_against`)."""
    holds = _hold_depths(column)
    breaks = [c for c in column if c.verdict == BREAKS]
    out = []
    for cell in column:
        if cell.verdict in (HOLDS, BREAKS, BASELINE):
            out.append(cell)
            continue
        below = [h for h in holds if h.depth < cell.depth]
        above = [b for b in breaks if b.depth > cell.depth]
        if below and not leans_against(cell, HOLDS, tolerance):
            source = max(below, key=lambda c: c.depth)
            out.append(_with_implied(cell, HOLDS, source.config_id))
        elif above and not below and not leans_against(cell, BREAKS, tolerance):
            source = min(above, key=lambda c: c.depth)
            out.append(_with_implied(cell, BREAKS, source.config_id))
        else:
            out.append(cell)
    return out


def leans_against(cell: CellState, verdict: str, tolerance: float) -> bool:
    """Whether a trained config's own seeds lean against the verdict the monotone assumption would imply: its
    mean gain sits on the other side of −tolerance (below it for an implied hold, at or above it for an implied
    break). Such a config gets no implied verdict: the assumption is not borrowed against the config's own
    measurement (it keeps its measured state, and is measured on while open)."""
    if cell.gain is None:
        return False
    return cell.gain < -tolerance if verdict == HOLDS else cell.gain >= -tolerance


def _with_implied(cell: CellState, verdict: str, source: str) -> CellState:
    fields = {**cell.__dict__, "implied": verdict, "implied_from": source}
    return CellState(**fields)


def column_edge(column: list[CellState], contradicted: bool) -> ColumnEdge:
    """The column's edge, from measured verdicts only (module docstring)."""
    key = column[0].column
    if contradicted:
        return ColumnEdge(key, None, None, False, "not found: depth is not monotone in this column")
    depths = [c.depth for c in column]
    holds = [c.depth for c in _hold_depths(column)]
    breaks = [c.depth for c in column if c.verdict == BREAKS]
    hold_from = min(holds) if holds else None
    break_at = max(breaks) if breaks else None
    if hold_from == depths[0]:
        return ColumnEdge(key, None, hold_from, True, f"holds throughout (measured at depth {hold_from})")
    if break_at == depths[-1]:
        return ColumnEdge(key, break_at, None, True, f"breaks throughout (measured at depth {break_at})")
    if hold_from is not None and break_at is not None and depths.index(hold_from) == depths.index(break_at) + 1:
        return ColumnEdge(key, break_at, hold_from, True, f"breaks at depth {break_at}, holds from depth {hold_from}")
    between = [c for c in column if (break_at or -math.inf) < c.depth < (hold_from or math.inf)]
    stuck = [f"depth {c.depth} {c.verdict}" for c in between if c.verdict in (INCONCLUSIVE, FAILED)]
    reason = "; ".join(stuck) if stuck else "still measuring"
    return ColumnEdge(key, break_at, hold_from, False, f"not found: {reason}")


def untried_runs(column: list[CellState]) -> list[list[CellState]]:
    """Maximal runs of consecutive untried, not implied configs of a column."""
    runs, current = [], []
    for cell in column:
        if cell.verdict == UNTRIED and cell.implied is None:
            current.append(cell)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def unmeasured_ends(column: list[CellState], tallies: dict[str, _Tally]) -> list[CellState]:
    """The column's shallowest and deepest configs whose verdicts are only implied (``check_ends``)."""
    ends = [column[0]] if len(column) == 1 else [column[0], column[-1]]
    return [c for c in ends if c.verdict == UNTRIED and c.implied and not tallies[c.config_id].pending]


def being_measured(cell: CellState, tally: _Tally, s: EdgeSettings, ends: set[str]) -> bool:
    """Whether a started config is still being measured: its verdict is open (or its first seeds are training)
    and either nothing implies it, or it is a column end ``check_ends`` measures, or it has not yet had its
    min_seeds trials (a config is started with them all: it keeps them even when implied meanwhile)."""
    started = tally.n_trials + len(tally.pending)
    if cell.verdict not in (OPEN, UNTRIED) or not started:
        return False
    return cell.implied is None or cell.config_id in ends or started < s.min_seeds


def seeds_wanted(cell: CellState, tally: _Tally, s: EdgeSettings) -> int:
    """How many more seeds a config being measured is given now: without an interval, enough to reach min_seeds
    finished seeds (a failed trial is made up for); with one, one more seed, the next look, once nothing of it is
    training; never past max_seeds trials."""
    room = s.max_seeds - tally.n_trials - len(tally.pending)
    if cell.gain_lo is None:
        # 0 while the interval waits for the baseline's seeds; a config with no finished seed yet counts its failed
        # trials too, so one that fails every time is 'failed' after min_seeds trials
        finished = cell.n_seeds if cell.n_seeds else tally.n_trials
        wanted = s.min_seeds - finished - len(tally.pending)
    else:
        wanted = 0 if tally.pending else 1
    return max(0, min(wanted, room))


def nearness(cell: CellState, tolerance: float) -> float:
    """How near the tolerance an open config's interval sits, in half-widths (0: on it; −1 without an interval,
    so those come first: they have not reached min_seeds)."""
    if cell.gain_lo is None:
        return -1.0
    half = (cell.gain_hi - cell.gain_lo) / 2
    return abs(cell.gain + tolerance) / half if half > 0 else math.inf


def assess(
    cells: list[Cell],
    baseline_id: str,
    settings: EdgeSettings,
    observations: list[Observation],
    pending: Iterable[tuple[str, int]] = frozenset(),
) -> EdgeState:
    """Every config's verdict, every column's edge and the next trials, from the observations (the latest of a
    repeated (config, seed) counts) and the (config, seed) pairs still training. Deterministic."""
    tallies = {cell.config_id: _Tally() for cell in cells}
    for obs in observations:
        if obs.config_id in tallies:
            tallies[obs.config_id].scores[obs.seed] = obs.score
    for config_id, seed in pending:
        if config_id in tallies:
            tallies[config_id].pending.add(seed)
    baseline = tallies[baseline_id]
    sd, df = pooled_sd(tallies.values())
    measured = {
        c.config_id: measured_state(c, tallies[c.config_id], baseline, c.config_id == baseline_id, sd, df, settings)
        for c in cells
    }
    columns: dict[Hashable, list[CellState]] = {}
    for cell in sorted(cells, key=lambda c: c.depth):
        columns.setdefault(cell.column, []).append(measured[cell.config_id])
    states, edges, lines, starts, extend = {}, [], [], [], []
    for column in columns.values():
        line = contradiction(column)
        column = column if line else implied(column, settings.tolerance)
        lines += [line] if line else []
        edges.append(column_edge(column, line is not None))
        states.update({c.config_id: c for c in column})
        ends = {c.config_id for c in (column[0], column[-1])} if settings.check_ends else set()
        measuring = [c for c in column if being_measured(c, tallies[c.config_id], settings, ends)]
        extend += measuring
        # the baseline's own seeds do not hold its column back: it counts as a hold whatever they score
        in_flight = bool(measuring) or any(tallies[c.config_id].pending for c in column if c.verdict != BASELINE)
        if line:
            starts += [c for c in column if c.verdict == UNTRIED and not tallies[c.config_id].pending]
        elif not in_flight:
            runs = untried_runs(column)
            if runs:
                longest = max(runs, key=len)  # max keeps the first (shallowest) of equal lengths
                starts.append(longest[(len(longest) - 1) // 2])
            elif settings.check_ends:
                starts += unmeasured_ends(column, tallies)
    proposals = proposal_order(tallies, baseline_id, settings, extend, starts)
    finished = not proposals and not any(t.pending for t in tallies.values())
    return EdgeState(states, edges, lines, proposals, finished)


def proposal_order(
    tallies: dict[str, _Tally], baseline_id: str, s: EdgeSettings, extend: list[CellState], starts: list[CellState]
) -> list[tuple[str, int]]:
    """The next trials, best first (module docstring)."""
    baseline = tallies[baseline_id]
    missing = s.baseline_seeds - baseline.n_trials - len(baseline.pending)
    proposals = [(baseline_id, seed) for seed in baseline.next_seeds(max(missing, 0))]
    for cell in sorted(extend, key=lambda c: nearness(c, s.tolerance)):
        tally = tallies[cell.config_id]
        proposals += [(cell.config_id, seed) for seed in tally.next_seeds(seeds_wanted(cell, tally, s))]
    for cell in starts:
        proposals += [(cell.config_id, seed) for seed in tallies[cell.config_id].next_seeds(s.min_seeds)]
    return proposals
