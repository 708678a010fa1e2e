"""The edge search (``search: {kind: edge}``; docs/analysis.md) as a Ray Tune Searcher: it reads what the results
record of the space's configs, asks :func:`sweep.analysis.edge.assess` what to train next on every suggestion, and
hands Tune one (config, seed) at a time, never one that is recorded or training.

- At start, the record (:func:`edge_record`): every recorded trial of the lattice's configs, whichever run or
  profile recorded it (the config id alone says what was trained), its headline score, or None for a trial that
  failed (``diverged``, ``oom``, ``pruned``: the search counts it toward the config's trials, not its seeds).
  A trial with status ``error`` is not recorded (sweep/run/rerun.py): its pair may run again.
- Each suggestion: ``assess`` over the record, the trials finished in this run and those still training; the first
  proposal is handed out (its payload as a grid's, ``trial_payload``), after the seeds a started config still
  lacks to reach min_seeds (:meth:`EdgeSearch.top_ups`: ``assess`` proposes them only while none is out).
  No proposal while trials are training: wait
  (None). No proposal and nothing training: every config has its verdict, an implied one or its seed cap, and the
  search tells Tune it has finished. Each family's lattice is assessed on its own, against its own baseline.
- A cap on the trials it hands out (``--trials N``, else what ``max_trials`` leaves): reached, it finishes; the
  trials still running end as usual. ``--max-gpu-hours`` wraps it in the device-hours limiter (sweep/run/budget.py)
  as it wraps every search.
- Each contradiction of the monotone assumption is printed once, when it is first found.
"""

from __future__ import annotations

import math
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ray.tune.search import Searcher

from sweep.analysis.edge import BREAKS, HOLDS, INCONCLUSIVE, Observation, assess, column_words
from sweep.analysis.edge_lattice import configs_by_id, edge_settings, lattices
from sweep.analysis.sql import connect_lazily
from sweep.plan.plan import Plan, trial_payload
from sweep.text import plural
from workers.metrics import score_of
from workers.vocabulary import RECORDED_STATUSES, TrialStatus


@dataclass
class EdgeRecord:
    """What the results hold of an edge search's configs: one observation per recorded (config, seed) pair (an
    ``ok`` row first, then the latest), in the order they finished."""

    observations: list[Observation] = field(default_factory=list)

    def remaining(self, max_trials: int | None) -> int | None:
        """Trials the search may still train under ``max_trials`` (None: no cap)."""
        return None if max_trials is None else max(0, max_trials - len(self.observations))


def edge_record(results_dir, plan: Plan) -> EdgeRecord:
    """The :class:`EdgeRecord` of ``plan``'s configs in the results (``sweep run`` resumes from it)."""
    con, views = connect_lazily(results_dir)
    views.create(["trials"])  # the trials files only: no analysis view is read
    statuses = ", ".join(f"'{s}'" for s in RECORDED_STATUSES)
    rows = con.execute(
        f"""SELECT config_id, seed, status, score FROM trials WHERE space = $space AND status IN ({statuses})
            QUALIFY row_number() OVER (PARTITION BY config_id, seed
                                       ORDER BY status = 'ok' DESC, finished_at DESC NULLS LAST) = 1
            ORDER BY finished_at NULLS FIRST, config_id, seed""",
        {"space": plan.space_name},
    ).fetchall()
    planned = configs_by_id(plan)
    return EdgeRecord([
        Observation(config_id, int(seed), finite(score) if status == TrialStatus.OK else None)
        for config_id, seed, status, score in rows
        if config_id in planned
    ])  # fmt: skip


def finite(score) -> float | None:
    return float(score) if score is not None and math.isfinite(score) else None


def result_score(result: dict | None, metric: str) -> float | None:
    """A finished trial's headline score from its last result (None: it failed or has none)."""
    if not result or result.get("status") != TrialStatus.OK:
        return None
    return finite(score_of(result.get("record") or result, metric))


def most_trials(plan: Plan, record: EdgeRecord) -> int:
    """The most trials the search can still hand out: every config to max_seeds, the baseline to baseline_seeds,
    less what is recorded (Tune's ``num_samples`` when no cap is given)."""
    search = plan.space.search
    recorded: dict[str, int] = {}
    for obs in record.observations:
        recorded[obs.config_id] = recorded.get(obs.config_id, 0) + 1
    most = 0
    for config in plan.configs:
        cap = search.baseline_seeds if config.is_baseline else search.max_seeds
        most += max(0, cap - recorded.get(config.config_id, 0))
    return max(1, most)


def smallest_free(taken: set[int], count: int) -> list[int]:
    """The ``count`` smallest non-negative seeds not in ``taken`` (none when count < 1)."""
    seeds, candidate = [], 0
    while len(seeds) < count:
        if candidate not in taken:
            seeds.append(candidate)
        candidate += 1
    return seeds


class EdgeSearch(Searcher):
    """Tune's searcher for the edge search (the module docstring says what it does). ``trials``: the most it hands
    out (None: no cap but the verdicts'); ``stream``: where contradiction lines go (stderr)."""

    def __init__(self, plan: Plan, record: EdgeRecord, trials: int | None = None, stream=None):
        super().__init__(metric=plan.space.metric.name, mode=plan.space.metric.mode)
        self.plan = plan
        self.lattices = lattices(plan)
        self.settings = edge_settings(plan)
        self.configs = configs_by_id(plan)
        self.recorded = list(record.observations)
        self.observed: list[Observation] = []  # this run's finished trials
        self.pending: dict[str, tuple[str, int]] = {}  # Tune trial id → (config_id, seed) training
        self.cap = trials
        self.handed_out = 0
        self.said: list[str] = []  # contradiction lines printed so far
        self.said_columns: set[tuple] = set()  # (lattice, column words) of each
        self.finished = self.capped = False
        self.stream = stream

    def assess(self) -> list:
        """Each family's :class:`~sweep.analysis.edge.EdgeState`, from everything known now."""
        observations = [*self.recorded, *self.observed]
        pending = set(self.pending.values())
        return [
            assess(list(lattice.cells), lattice.baseline_id, self.settings, observations, pending)
            for lattice in self.lattices
        ]

    def say_contradictions(self, states: list) -> None:
        """Print each column's contradiction the first time it is found (its numbers move as seeds come in)."""
        for index, state in enumerate(states):
            for line in state.contradictions:
                column = (index, line.split(": depth ", 1)[0])  # "edge search: column …" names the column
                if column not in self.said_columns:
                    self.said_columns.add(column)
                    self.said.append(line)
                    print(f"[sweep] {line}", file=self.stream or sys.stderr, flush=True)

    def top_ups(self, states: list) -> list[tuple[str, int]]:
        """The seeds a started config still lacks to reach min_seeds: ``assess`` proposes a new config's min_seeds
        seeds together, but once one is training (or finished, for a config whose verdict is implied, such as a
        column's end under ``check_ends``) it proposes no more of them; the rest are handed out from here, as a
        wave of the search would hand them out together."""
        trials: dict[str, set[int]] = {}
        for obs in (*self.recorded, *self.observed):
            trials.setdefault(obs.config_id, set()).add(obs.seed)
        training: dict[str, set[int]] = {}
        for config_id, seed in self.pending.values():
            training.setdefault(config_id, set()).add(seed)
        wanted = []
        started = set(trials) | set(training)
        for state in states:
            for config_id in sorted(started):
                cell = state.cells.get(config_id)
                if cell is None or cell.verdict not in ("untried", "open") or cell.gain_lo is not None:
                    continue
                taken = trials.get(config_id, set()) | training.get(config_id, set())
                lacking = self.settings.min_seeds - len(taken)
                wanted += [(config_id, seed) for seed in smallest_free(taken, lacking)]
        return wanted

    def suggest(self, trial_id: str):
        if self.finished:
            return Searcher.FINISHED
        if self.cap is not None and self.handed_out >= self.cap:
            self.capped = self.finished = True
            return Searcher.FINISHED
        states = self.assess()
        self.say_contradictions(states)
        training = set(self.pending.values())
        proposals = [*self.top_ups(states), *(p for state in states for p in state.proposals)]
        proposal = next((p for p in proposals if p not in training), None)
        if proposal is None:
            if self.pending:  # their results decide what comes next
                return None
            self.finished = True
            return Searcher.FINISHED
        self.pending[trial_id] = proposal
        self.handed_out += 1
        config_id, seed = proposal
        return {"payload": trial_payload(self.plan, self.configs[config_id], seed)}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        pair = self.pending.pop(trial_id, None)
        if pair is None:
            return
        score = None if error else result_score(result, self.plan.space.metric.name)
        self.observed.append(Observation(pair[0], pair[1], score))

    def save(self, checkpoint_path: str) -> None:
        state = {k: v for k, v in self.__dict__.items() if k != "stream"}
        Path(checkpoint_path).write_bytes(pickle.dumps(state))

    def restore(self, checkpoint_path: str) -> None:
        self.__dict__.update(pickle.loads(Path(checkpoint_path).read_bytes()))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "stream"}  # sys.stderr does not pickle

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.stream = None

    def summary(self) -> EdgeSummary:
        states = self.assess()
        self.say_contradictions(states)
        settled = all(state.finished for state in states) and not self.pending
        self.capped = self.capped or (self.cap is not None and self.handed_out >= self.cap and not settled)
        return EdgeSummary(
            states,
            [lattice.family for lattice in self.lattices],
            len(self.recorded),
            len(self.observed),
            settled,
            self.capped,
            list(self.said),
        )


@dataclass
class EdgeSummary:
    """What an edge search knows at the end of a run: each family's state, the trials it started from and those
    it ran, whether every config is settled (``finished``) or the trial cap stopped it (``capped``)."""

    states: list
    families: list[str]
    from_record: int
    trained: int
    finished: bool
    capped: bool
    contradictions: list[str]

    def counts(self) -> dict[str, int]:
        """Configs by what is known of them: measured holds/breaks (the baseline counted as a hold), implied
        holds/breaks, inconclusive at their seed cap or failed, and open (still measuring, or untried)."""
        counts = dict.fromkeys(("measured holds", "measured breaks", "implied holds", "implied breaks",
                                "inconclusive", "failed", "open"), 0)  # fmt: skip
        for state in self.states:
            for cell in state.cells.values():
                if cell.verdict in (HOLDS, "baseline"):
                    counts["measured holds"] += 1
                elif cell.verdict == BREAKS:
                    counts["measured breaks"] += 1
                elif cell.implied is not None:
                    counts[f"implied {cell.implied}"] += 1
                elif cell.verdict in (INCONCLUSIVE, "failed"):
                    counts["inconclusive" if cell.verdict == INCONCLUSIVE else "failed"] += 1
                else:
                    counts["open"] += 1
        return counts

    def lines(self) -> list[str]:
        """The run's end in a few lines: configs measured / implied / open, each column's edge, contradictions."""
        c = self.counts()
        total = sum(c.values())
        measured = c["measured holds"] + c["measured breaks"]
        implied = c["implied holds"] + c["implied breaks"]
        futile = sum(cell.futile and cell.implied is None for state in self.states for cell in state.cells.values())
        unsettled = [f"{c[k]} {k}" for k in ("inconclusive", "failed") if c[k]]
        if futile:  # futility: stopped short of the cap, since even the cap could not settle them
            unsettled[0] += f" ({futile} stopped for futility: noise wider than their gap to the tolerance)"
        lines = [
            f"edge search: {plural(total, 'config')}: {measured} measured ({c['measured holds']} hold, the baseline "
            f"included; {c['measured breaks']} break), {implied} implied by the monotone assumption "
            f"({c['implied holds']} hold, {c['implied breaks']} break), "
            + (", ".join(unsettled) + ", " if unsettled else "")
            + f"{c['open']} open; {plural(self.from_record + self.trained, 'trial')} "
            f"({self.from_record} recorded before this run, {self.trained} by it)"
        ]
        several = len(self.families) > 1
        found = sum(edge.found for state in self.states for edge in state.edges)
        columns = sum(len(state.edges) for state in self.states)
        lines.append(f"edges found in {found} of {plural(columns, 'column')} (along depth, measured on both sides):")
        for family, state in zip(self.families, self.states, strict=True):
            for edge in state.edges:
                where = f"{family}: " if several else ""
                lines.append(f"  {where}{column_words(edge.column) or 'every config'}: {edge.description}")
        if self.contradictions:
            lines.append(f"{plural(len(self.contradictions), 'contradiction')} of the monotone assumption, each "
                         "column measured whole (said above when found)")  # fmt: skip
        else:
            lines.append("no contradiction of the monotone assumption (a deeper config that breaks where a "
                         "shallower one holds)")  # fmt: skip
        if self.capped:
            lines.append("stopped at the trial cap (--trials N, or the search's max_trials): a later `sweep run` "
                         "with a larger one continues")  # fmt: skip
        return lines
