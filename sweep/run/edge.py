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
- With a learning-rate search (``tune:``, ``sweep/questions/tuning.py``): a config the search proposes first runs its
  selection runs (every rate × every selection seed, each a suggestion of its own, handed out together), and once
  they are all recorded its proposed seeds run as verdict seeds at the rate they chose (``RateBook``, the rule of
  view ``tune_choice``), so a config's verdicts start as soon as its own selection ends, not after every config's.
  The baseline is tuned the same way. The search's core sees only verdict rows, keyed by the plan's config id
  (each tuned row's ``recipe_config_id``), as the edge views do; selection runs are never its observations. The
  trial cap and ``--max-gpu-hours`` count both phases.
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
from sweep.plan.tuning import at_rate
from sweep.questions.tuning import SELECTION, VERDICT
from sweep.run.tuning import RateBook, SelectionRun, tuned_ids
from sweep.text import plural
from workers.metrics import score_of
from workers.vocabulary import RECORDED_STATUSES, TrialStatus


@dataclass
class EdgeRecord:
    """What the results hold of an edge search's configs: one observation per recorded (config, seed) pair (an
    ``ok`` row first, then the latest), in the order they finished; with ``tune:``, the observations are the
    verdict seeds (keyed by the plan's config id) and ``selection`` holds the selection runs."""

    observations: list[Observation] = field(default_factory=list)
    selection: list[SelectionRun] = field(default_factory=list)

    def recorded(self) -> int:
        """The trials recorded, selection runs included."""
        return len(self.observations) + len(self.selection)

    def remaining(self, max_trials: int | None) -> int | None:
        """Trials the search may still train under ``max_trials`` (None: no cap); selection runs count."""
        return None if max_trials is None else max(0, max_trials - self.recorded())


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
    planned = {config_id: config_id for config_id in configs_by_id(plan)}
    selection: dict[str, tuple[str, float]] = {}
    if plan.space.tune is not None:
        selection, planned = tuned_ids(plan)
    selection_seeds = set(plan.space.tune.selection_seeds) if plan.space.tune is not None else set()
    record = EdgeRecord()
    for config_id, seed, status, score in rows:
        score = finite(score) if status == TrialStatus.OK else None
        if config_id in planned:
            record.observations.append(Observation(planned[config_id], int(seed), score))
        elif config_id in selection and seed in selection_seeds:
            record.selection.append(SelectionRun(*selection[config_id], int(seed), score))
    return record


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
    if plan.space.tune is not None:
        tune = plan.space.tune
        most += len(plan.configs) * len(tune.rates()) * len(tune.selection_seeds) - len(record.selection)
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
        self.tune = plan.space.tune  # None: no learning-rate search
        self.book = RateBook(plan, record.selection) if self.tune is not None else None  # selection runs, rates
        self.selection_recorded, self.selection_trained = len(record.selection), 0
        self.pending_selection: dict[str, tuple[str, float, int]] = {}  # Tune trial id → (config_id, lr, seed)

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
        for config_id, seed in (p for p in proposals if p not in training):
            payload = self.hand_out(trial_id, config_id, seed)
            if payload is not None:
                self.handed_out += 1
                return {"payload": payload}
        if self.pending or self.pending_selection:  # their results decide what comes next
            return None
        self.finished = True
        return Searcher.FINISHED

    def hand_out(self, trial_id: str, config_id: str, seed: int) -> dict | None:
        """The payload of the trial that proposal (config_id, seed) needs now: the pair itself (untuned); with a
        learning-rate search, the pair as a verdict seed at the config's chosen rate once its selection runs are
        all recorded, else one of its selection runs not recorded nor training (None: all are training)."""
        config = self.configs[config_id]
        lr = self.book.chosen(config_id) if self.tune is not None else None
        if self.tune is None or lr is not None:
            self.pending[trial_id] = (config_id, seed)
            planned = config if lr is None else at_rate(self.plan, config, lr, VERDICT)
            return trial_payload(self.plan, planned, seed)
        training = {(lr, s) for c, lr, s in self.pending_selection.values() if c == config_id}
        missing = [run for run in self.book.missing(config_id) if run not in training]
        if not missing:
            return None
        lr, selection_seed = missing[0]
        self.pending_selection[trial_id] = (config_id, lr, selection_seed)
        return trial_payload(self.plan, at_rate(self.plan, config, lr, SELECTION), selection_seed)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        score = None if error else result_score(result, self.plan.space.metric.name)
        selection = self.pending_selection.pop(trial_id, None)
        if selection is not None:
            config_id, lr, seed = selection
            self.book.add(config_id, lr, seed, score)
            self.selection_trained += 1
            return
        pair = self.pending.pop(trial_id, None)
        if pair is None:
            return
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
        settled = all(state.finished for state in states) and not self.pending and not self.pending_selection
        self.capped = self.capped or (self.cap is not None and self.handed_out >= self.cap and not settled)
        return EdgeSummary(
            states,
            [lattice.family for lattice in self.lattices],
            len(self.recorded),
            len(self.observed),
            settled,
            self.capped,
            list(self.said),
            self.tuning_line(),
        )

    def tuning_line(self) -> str | None:
        """A tuned search's selection runs and chosen rates in one line (None: no learning-rate search)."""
        if self.tune is None:
            return None
        chosen = [self.book.chosen(c) for c in self.configs]
        rates = sorted({lr for lr in chosen if lr is not None})
        runs = plural(self.selection_recorded + self.selection_trained, "selection run")
        return (
            f"learning rate tuned per config: {runs} ({self.selection_recorded} recorded before this run, "
            f"{self.selection_trained} by it); a rate chosen for "
            f"{sum(lr is not None for lr in chosen)} of {plural(len(chosen), 'config')}"
            + (f" ({', '.join(f'{lr:g}' for lr in rates)} among them)" if rates else "")
            + "; the verdicts above are on verdict seeds at each config's chosen rate"
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
    tuning: str | None = None  # a tuned search's selection runs and chosen rates (EdgeSearch.tuning_line)

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
        if self.tuning:
            lines.append(self.tuning)
        if self.capped:
            lines.append("stopped at the trial cap (--trials N, or the search's max_trials): a later `sweep run` "
                         "with a larger one continues")  # fmt: skip
        return lines
