"""``sweep run`` and ``sweep rerun``: plan, check what is recorded, launch Ray Tune or resume an Optuna study,
and compact the results after a sweep."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import sys
import time
from typing import TYPE_CHECKING

from sweep.errors import SweepError, UsageError
from sweep.text import plural

if TYPE_CHECKING:
    from sweep.plan.plan import Plan
    from sweep.run.edge import EdgeRecord
    from sweep.run.rerun import SearchRecord
    from sweep.run.tuned_search import TunedRecord


def parse_seeds(text: str | None) -> list[int] | None:
    """``3`` means seeds 0, 1, 2; ``0,5,9`` means exactly those."""
    if text is None:
        return None
    try:
        if "," in text:
            return [int(part) for part in text.split(",") if part.strip()]
        count = int(text)
    except ValueError:
        raise UsageError(f"--seeds takes a count (3) or a list (0,5,9), got {text!r}") from None
    if count < 1:
        raise UsageError(f"--seeds must be at least 1, got {count}")
    return list(range(count))


def parse_trials(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number of trials, got {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {count}")
    return count


def load_plan(args, check_data=None, seeds: list[int] | None = None) -> Plan:
    """The plan for ``args.space``; ``seeds`` (else ``--seeds`` as text) overrides the space's seeds."""
    from sweep.plan.plan import make_plan
    from sweep.space.loader import load_space

    name, space, profile = load_space(args.space, args.profile)
    if getattr(args, "data_root", None):
        space = space.model_copy(update={"data": space.data.model_copy(update={"root": str(args.data_root)})})
    if getattr(args, "data_workers", None) is not None:  # like the root, not part of a config's identity
        space = space.model_copy(update={"data": space.data.model_copy(update={"num_workers": args.data_workers})})
    if getattr(args, "log", None):  # --log adds trackers to the space's `log:` (not part of a config's identity)
        space = space.model_copy(update={"log": space.log.adding(args.log)})
    if check_data is not None:
        check_data(space, args.space)  # before planning: a missing data set fails in seconds
    return make_plan(name, space, profile, seeds or parse_seeds(getattr(args, "seeds", None)))


def hints_of(args):
    """The printed commands of this run (``sweep/analysis/hints.py``): the space as given, the profile given, the
    results folder."""
    from sweep.analysis.hints import Hints

    return Hints.given(args.space, args.results, args.profile)


def print_answer(args) -> None:
    """The answer's headline in two or three lines and the command that writes the report: how every ``sweep run``
    and ``sweep rerun`` ends (``sweep/analysis/report/answer.py``)."""
    from sweep.analysis.report.answer import answer_lines

    hints = hints_of(args)
    for line in answer_lines(args.results, hints.name, hints):
        print(f"[sweep] {line}", file=sys.stderr)


def cmd_run(args) -> int:
    status = run_space(args)
    print_answer(args)
    return status


def run_space(args) -> int:
    from sweep.results.storage import sweep_lock
    from sweep.run.rerun import describe, missing_pairs, recorded_pairs
    from sweep.space.validation import check_data

    plan = load_plan(args, check_data)
    if args.trials is not None and plan.space.search.kind == "grid":
        raise UsageError(grid_trials_message(plan))
    with sweep_lock(args.results, plan.space_name, args.wait):
        if plan.space.search.kind == "optuna":
            return run_search(plan, args)
        if plan.space.search.kind == "edge":
            return run_edge(plan, args)
        if plan.space.tune is not None:
            return run_tuned(plan, args)
        if not args.fresh:
            recorded = recorded_pairs(args.results, plan.space_name)
            missing = missing_pairs(plan.configs, plan.seeds, recorded)
            total = len(plan.configs) * len(plan.seeds)
            if len(missing) < total:
                print(
                    f"[sweep] resuming: {total - len(missing)} of {total} trials already recorded in "
                    f"{args.results}/ (--fresh runs them all again)",
                    file=sys.stderr,
                )
            if not missing:
                print(f"[sweep] {describe(missing, total)}", file=sys.stderr)
                return 0
            plan.pairs = [(m.config, m.seed) for m in missing]
        return launch(plan, args)


def run_tuned(plan: Plan, args) -> int:
    """A learning-rate search per config (``tune:``, ``sweep/questions/tuning.py``): the selection runs that are
    missing, then each config's verdict seeds at the rate its recorded selection runs chose. Resumes from the
    recorded rows (``sweep/run/tuning.py``); ``--max-gpu-hours`` counts both phases (every row of the space)."""
    from sweep.plan.tuning import trials_count
    from sweep.run.tuning import missing_selection, missing_verdicts

    if args.fresh:
        raise UsageError("--fresh does not go with a `tune:` space: its verdicts rest on the recorded selection runs; "
                         "use another --results folder to start over")  # fmt: skip
    selection, verdicts = trials_count(plan)
    prefix = f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): learning rate tuned per config"
    missing = missing_selection(plan, args.results)
    print(f"{prefix}: {selection - len(missing)} of {selection} selection runs recorded, then {verdicts} verdict "
          "runs at the chosen rates", file=sys.stderr)  # fmt: skip
    if missing:
        if getattr(args, "dry_run", False):
            print(f"[sweep] {len(missing)} selection runs would start (--dry-run: nothing runs)", file=sys.stderr)
            return 0
        plan.pairs = [(m.config, m.seed) for m in missing]
        launch(plan, args)
    missing, waiting = missing_verdicts(plan, args.results)
    if waiting:
        print(f"[sweep] {plural(waiting, 'config')} without every selection run recorded (an error, or the budget): "
              "no verdict seeds for them until a later `sweep run` records them", file=sys.stderr)  # fmt: skip
    if not missing:
        print(f"[sweep] every verdict run at the chosen rates is recorded ({verdicts - len(missing)})", file=sys.stderr)
        return 0
    if getattr(args, "dry_run", False):
        print(f"[sweep] {len(missing)} verdict runs would start (--dry-run: nothing runs)", file=sys.stderr)
        return 0
    plan.pairs = [(m.config, m.seed) for m in missing]
    return launch(plan, args)


def grid_trials_message(plan: Plan) -> str:
    return (
        f"--trials N extends an Optuna search, but {plan.space_name} (profile {plan.profile or 'none'}) is a grid, "
        "which runs every (config, seed) pair once; add seeds with --seeds N, or axis values in the space"
    )


def run_search(plan: Plan, args) -> int:
    """An Optuna search, resumed: the study starts from every recorded trial of the search and trains what
    its budget has left (``--trials N``: N more); ``--fresh``: a new study over the whole budget that trains
    even recorded pairs. No (config, seed) pair is trained twice in one run (``sweep/run/search.py``)."""
    from sweep.run.rerun import SearchRecord, search_record

    search = plan.space.search
    fresh = getattr(args, "fresh", False)
    if plan.space.tune is not None:
        return run_tuned_search(plan, args)
    record = SearchRecord(plan.seeds[0]) if fresh else search_record(args.results, plan)
    trials = args.trials if args.trials is not None else record.remaining(search.num_trials)
    prefix = f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): optuna {search.sampler}"
    if record.outcomes:
        print(
            f"{prefix}, resuming its study: {len(record.outcomes)} recorded trials (seed {record.seed}) start it, "
            f"{record.trained} of them trained by this search (num_trials {search.num_trials})",
            file=sys.stderr,
        )
    hints = hints_of(args)
    if len(record.outcomes) >= len(plan.configs):
        print(
            f"{prefix}: all {len(plan.configs)} configs it can suggest are recorded at seed {record.seed}; "
            f"nothing left to train (more seeds of them: `{hints.rerun('--seeds N')}`)",
            file=sys.stderr,
        )
        return 0
    if trials < 1:
        print(
            f"{prefix}: its budget is spent ({record.trained} of num_trials {search.num_trials} trained); "
            f"`{hints.run('--trials N')}` trains N more",
            file=sys.stderr,
        )
        return 0
    if getattr(args, "dry_run", False):
        print(f"{prefix}: a run would train {trials} more trials (--dry-run: nothing runs)", file=sys.stderr)
        return 0
    return launch(plan, args, record=record, trials=trials)


def run_tuned_search(plan: Plan, args) -> int:
    """An Optuna search with ``tune:`` (``sweep/run/tuned_search.py``), resumed: its study starts from every config
    whose verdict seeds are recorded at its chosen rate, and it tunes what ``num_trials`` (configs) has left
    (``--trials N``: N more configs); ``--fresh`` is refused (the choices rest on the recorded selection runs)."""
    from sweep.run.tuned_search import runs_per_config, tuned_search_record

    if getattr(args, "fresh", False):
        raise UsageError("--fresh does not go with a `tune:` space: its verdicts rest on the recorded selection runs; "
                         "use another --results folder to start over")  # fmt: skip
    search = plan.space.search
    record = tuned_search_record(args.results, plan)
    trials = args.trials if args.trials is not None else record.remaining(search.num_trials)
    prefix = (f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): optuna {search.sampler}, learning rate "
              f"tuned per config ({runs_per_config(plan)} runs a config: its selection runs, then seeds {plan.seeds} "
              "at its chosen rate; Optuna is told their mean)")  # fmt: skip
    done = len(record.search.outcomes)
    if record.selection or record.verdicts:
        selection = plural(len(record.selection), "selection run")
        print(f"{prefix}, resuming: {plural(done, 'config')} tuned and judged, {selection} recorded", file=sys.stderr)
    if done >= len(plan.configs):
        print(f"{prefix}: all {len(plan.configs)} configs it can suggest are tuned and judged; nothing left to train",
              file=sys.stderr)  # fmt: skip
        return 0
    if trials < 1:
        print(f"{prefix}: its budget is spent ({done} of num_trials {search.num_trials} configs tuned); "
              f"`{hints_of(args).run('--trials N')}` tunes N more", file=sys.stderr)  # fmt: skip
        return 0
    if getattr(args, "dry_run", False):
        print(f"{prefix}: a run would tune {plural(trials, 'more config')} (--dry-run: nothing runs)", file=sys.stderr)
        return 0
    return launch(plan, args, record=record, trials=trials)


def run_edge(plan: Plan, args) -> int:
    """An edge search, resumed from every recorded trial of its configs (``sweep/run/edge.py``): it trains what its
    verdicts still need, up to ``--trials N`` trials now (default: what ``max_trials`` leaves; none: no cap). No
    (config, seed) pair is trained twice; ``--fresh`` is refused (the verdicts rest on every recorded seed)."""
    from sweep.run.edge import EdgeSearch, edge_record

    if getattr(args, "fresh", False):
        raise UsageError("--fresh does not go with an edge search: its verdicts rest on every recorded seed; use "
                         "another --results folder to start over")  # fmt: skip
    search = plan.space.search
    record = edge_record(args.results, plan)
    trials = args.trials if args.trials is not None else record.remaining(search.max_trials)
    prefix = f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): edge search"
    if plan.space.tune is not None:
        prefix += ", learning rate tuned per config"
    if record.observations or record.selection:
        selection = f" and {plural(len(record.selection), 'selection run')}" if plan.space.tune is not None else ""
        print(f"{prefix}, resuming: {plural(len(record.observations), 'recorded trial')}{selection} of its "
              f"{plural(len(plan.configs), 'config')} start it", file=sys.stderr)  # fmt: skip
    said = io.StringIO()  # the run's searcher says the record's contradictions; only a settled search says them here
    summary = EdgeSearch(plan, record, trials, stream=said).summary()  # what the record alone settles
    if summary.finished:
        for line in [*said.getvalue().splitlines(), *(f"[sweep] {line}" for line in summary.lines())]:
            print(line, file=sys.stderr)
        print(f"{prefix}: every config is settled (a verdict, an implied one, or its seed cap); nothing to train",
              file=sys.stderr)  # fmt: skip
        return 0
    if trials is not None and trials < 1:
        print(f"{prefix}: its trial cap is spent ({record.recorded()} of max_trials {search.max_trials} "
              f"recorded); `{hints_of(args).run('--trials N')}` trains N more", file=sys.stderr)  # fmt: skip
        return 0
    if getattr(args, "dry_run", False):
        print(f"{prefix}: a run would train what the verdicts need, {cap_words(trials)} (--dry-run: nothing runs)",
              file=sys.stderr)  # fmt: skip
        return 0
    return launch(plan, args, record=record, trials=trials)


def cap_words(trials: int | None) -> str:
    return "with no trial cap" if trials is None else f"at most {plural(trials, 'trial')}"


def search_words(plan: Plan, count: int | None) -> str:
    """How ``launch`` names what it runs: ``12 trials, grid``; ``at most 40 trials, edge search …``."""
    search = plan.space.search
    if search.kind == "grid":
        return f"{count} trials, grid"
    if search.kind == "optuna" and plan.space.tune is not None:
        return f"{plural(count, 'config')} to tune, optuna {search.sampler}"
    if search.kind == "optuna":
        return f"{count} trials, optuna {search.sampler}"
    return (f"{cap_words(count)}, edge search ({search.min_seeds} to {search.max_seeds} seeds a config, "
            f"{search.baseline_seeds} for the baseline, alpha {search.alpha:g})")  # fmt: skip


def cmd_rerun(args) -> int:
    status = rerun_space(args)
    if not args.dry_run:
        print_answer(args)
    return status


def rerun_space(args) -> int:
    from sweep.run.rerun import describe, missing_pairs, recorded_pairs, select_configs
    from sweep.space.model import GridSearch, Scheduler
    from sweep.space.validation import check_data

    if args.select in ("inconclusive", "expectations"):
        return rerun_inconclusive(args, check_data)
    if args.trial_budget is not None or args.max_seeds is not None:
        raise UsageError("--budget goes with --select inconclusive or expectations, and so does --max-seeds; the "
                         "other selections take --seeds N")  # fmt: skip
    if args.seeds is None:
        return rerun_search(args, check_data)
    if args.trials is not None:
        raise UsageError("--trials N extends an Optuna search, --seeds N adds seeds to its configs: give one of them")
    if args.seeds < 1:
        raise UsageError(f"--seeds must be at least 1, got {args.seeds}")
    plan = load_plan(args, check_data, seeds=list(range(args.seeds)))
    with lock_unless_dry_run(args, plan.space_name):
        configs = select_configs(plan, args.results, args.select, args.top_k)
        if plan.space.tune is not None:  # verdict seeds at each config's recorded choice, never selecting again
            configs = tuned_verdict_configs(plan, configs, args.results)
        missing = missing_pairs(configs, plan.seeds, recorded_pairs(args.results, plan.space_name))
        print(
            f"[rerun] {plan.space_name}: selection {args.select!r}, {len(configs)} configs × seeds {plan.seeds}",
            file=sys.stderr,
        )
        print(describe(missing, len(configs) * len(plan.seeds), dry_run=args.dry_run), file=sys.stderr)
        if not missing or args.dry_run:
            return 0
        plan.pairs = [(m.config, m.seed) for m in missing]
        plan.space = plan.space.model_copy(update={"search": GridSearch(), "scheduler": Scheduler()})
        return launch(plan, args)


def tuned_verdict_configs(plan: Plan, configs: list, results) -> list:
    """``configs`` of a tuned plan at the rate each one's recorded selection runs chose (``sweep/run/tuning.py``),
    as its verdict seeds train; a config whose selection is not all recorded is left out, said in one line."""
    from sweep.plan.tuning import verdict_pairs
    from sweep.run.tuning import chosen_rates

    chosen = chosen_rates(plan, results)
    waiting = [c for c in configs if c.config_id not in chosen]
    if waiting:
        print(f"[rerun] {plural(len(waiting), 'config')} without every selection run recorded: `sweep run` selects "
              "their rate first; no verdict seeds for them here", file=sys.stderr)  # fmt: skip
    wanted = {c.config_id for c in configs}
    one_seed = plan.seeds[:1]
    plan_of_one = dataclasses.replace(plan, seeds=one_seed)
    return [c for c, _ in verdict_pairs(plan_of_one, chosen) if c.label("recipe_config_id") in wanted]


def tuned_verdict_plan(plan: Plan, results) -> Plan:
    """``plan`` with each config at the rate its recorded selection runs chose, as its verdict seeds train
    (``tuned_verdict_configs``): what ``--select inconclusive`` judges and adds seeds to in a ``tune:`` space, and
    ``--select expectations`` adds seeds to on the sides of open claims, never selecting again; a config without
    every selection run recorded is left out (said)."""
    configs = tuned_verdict_configs(plan, plan.configs, results)
    return dataclasses.replace(plan, configs=configs, pairs=None)


def lock_unless_dry_run(args, space: str):
    """The space's sweep lock for a rerun that runs; none for ``--dry-run``, which only reads: it writes nothing (no
    lock file, no folder), so it works on a read-only results folder and beside a sweep that holds the lock."""
    from sweep.results.storage import sweep_lock

    return contextlib.nullcontext() if getattr(args, "dry_run", False) else sweep_lock(args.results, space, args.wait)


def rerun_search(args, check_data) -> int:
    """``sweep rerun`` without ``--seeds``: an Optuna search resumes, as ``sweep run`` resumes it."""
    plan = load_plan(args, check_data)
    if plan.space.search.kind == "grid":
        raise UsageError("--seeds N is required (seeds wanted per config: 0 … N-1), or use --select inconclusive")
    if args.select != "all":
        raise UsageError(f"--select {args.select} needs --seeds N (seeds wanted per selected config: 0 … N-1)")
    with lock_unless_dry_run(args, plan.space_name):
        return run_search(plan, args) if plan.space.search.kind == "optuna" else run_edge(plan, args)


def rerun_inconclusive(args, check_data) -> int:
    """Rounds of one more seed for every open verdict (``--select inconclusive``) or every side of every open
    claim (``--select expectations``), until all are settled, ``--budget`` trials have run or every open one
    has ``--max-seeds`` seeds (``sweep/analysis/adaptive.py``); ``--dry-run`` prints the first round."""
    from sweep.space.model import GridSearch, Scheduler

    if args.trial_budget is None or args.trial_budget < 1:
        raise UsageError(f"--select {args.select} needs --budget N (N >= 1): how many more trials it may run")
    if args.max_seeds is not None and args.max_seeds < 1:
        raise UsageError(f"--max-seeds must be at least 1, got {args.max_seeds}")
    if args.seeds is not None or args.trials is not None:
        raise UsageError(f"--select {args.select} chooses the seeds itself; drop --seeds or --trials and give "
                         "--budget N")  # fmt: skip
    plan = load_plan(args, check_data)
    if plan.space.tune is not None:  # its configs at their recorded chosen rates, as verdict seeds train; a claim's
        plan = tuned_verdict_plan(plan, args.results)  # sides are found there by recipe_config_id (adaptive.py)
        if args.select == "inconclusive" and not any(config.is_baseline for config in plan.configs):
            print(f"[rerun] {plan.space_name}: no baseline with every selection run recorded, so no verdict to "
                  "settle; `sweep run` selects its rate first", file=sys.stderr)  # fmt: skip
            return 0
    rule = adaptive_rule(args.select, args.max_seeds)
    prefix = f"[rerun] {plan.space_name}: selection {args.select!r}"
    cap = "" if args.max_seeds is None else f", at most {plural(args.max_seeds, 'seed')} a config"
    with lock_unless_dry_run(args, plan.space_name):
        open_ = rule.open(plan, args.results)
        opened, spent = len(open_), 0
        while open_ and spent < args.trial_budget and not device_hours_spent(args, plan.space_name):
            planned = rule.round(plan, args.results, open_, args.trial_budget - spent)
            if not planned:
                break  # every open one is at --max-seeds
            print(f"{prefix}{cap}, {rule.describe(open_, planned, args.trial_budget - spent)}", file=sys.stderr)
            if args.dry_run:
                return 0
            plan.pairs = [(m.config, m.seed) for m in planned]
            plan.space = plan.space.model_copy(update={"search": GridSearch(), "scheduler": Scheduler()})
            launch(plan, args)
            spent += len(planned)
            open_ = rule.open(plan, args.results)
        settled = opened - len(open_)
        state = f"every {rule.noun} is settled" if not open_ else f"{len(open_)} still open"
        if open_ and args.max_seeds is not None and spent < args.trial_budget:
            state += f" at --max-seeds {args.max_seeds}"
        if not opened:
            print(f"{prefix}: no open {rule.noun}, nothing to run", file=sys.stderr)
            return 0
        print(f"{prefix}: {plural(spent, 'trial')} run, {settled} of {plural(opened, 'open ' + rule.noun)} "
              f"settled; {state}", file=sys.stderr)  # fmt: skip
    return 0


@dataclasses.dataclass(frozen=True)
class AdaptiveRule:
    """What ``rerun_inconclusive`` asks of a selection: the open items, one round of trials for them, the
    round in words, and what an item is called."""

    open: object
    round: object
    describe: object
    noun: str


def adaptive_rule(select: str, max_seeds: int | None) -> AdaptiveRule:
    """``inconclusive``: the configs' open verdicts against the baseline; ``expectations``: the space's open claims."""
    from functools import partial

    from sweep.analysis import adaptive

    if select == "expectations":
        round_ = partial(adaptive.next_claims_round, max_seeds=max_seeds)
        return AdaptiveRule(adaptive.open_expectations, round_, adaptive.describe_claims_round, "claim")
    round_ = partial(adaptive.next_round, max_seeds=max_seeds)
    return AdaptiveRule(adaptive.open_verdicts, round_, adaptive.describe_round, "verdict")


def launch(
    plan: Plan, args, record: SearchRecord | EdgeRecord | TunedRecord | None = None, trials: int | None = None
) -> int:
    """Run ``plan``: a grid's trials, or an Optuna or edge search resumed from ``record`` for ``trials`` trials
    (an edge search: at most; None, no cap)."""
    from sweep.run.tuner import run_sweep

    grid = plan.space.search.kind == "grid"
    count = len(plan.trials()) if grid else trials
    if device_hours_spent(args, plan.space_name):
        return 0
    print(
        f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): {search_words(plan, count)}, "
        f"results in {args.results}/",
        file=sys.stderr,
    )
    outcome = run_sweep(
        plan,
        args.results,
        args.space,
        progress=not args.quiet,
        record=record,
        trials=trials,
        verbose=args.verbose,
        max_gpu_hours=getattr(args, "max_gpu_hours", None),
    )
    summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.statuses.items())) or "nothing"
    print(
        f"[sweep] sweep {outcome.sweep_id}: {outcome.trials} trials written ({summary}) in {outcome.wall_s:.0f}s",
        file=sys.stderr,
    )
    if outcome.study is not None:
        print(f"[sweep] {describe_study(outcome.study, count)}", file=sys.stderr)
    if outcome.device_hours is not None:
        print(f"[sweep] {outcome.device_hours.words()}", file=sys.stderr)
    for line in outcome.edge.lines() if outcome.edge is not None else []:
        print(f"[sweep] {line}", file=sys.stderr)
    if outcome.tuning is not None:
        print(f"[sweep] {outcome.tuning}", file=sys.stderr)
    query = f"SELECT * FROM trials WHERE sweep_id = '{outcome.sweep_id}'"
    print(f"[sweep] query them: {hints_of(args).sql(query)}", file=sys.stderr)
    compact_after_sweep(args.results, plan.space_name)
    return 0


def device_hours_spent(args, space: str) -> bool:
    """Whether ``--max-gpu-hours`` leaves no room for one more trial by what the results record (said in one line):
    then nothing starts, not even Ray. The rule is the run's (sweep/run/budget.py) with nothing running: a trial
    starts only if recorded + its expected cost (the mean of the recorded trials) <= H."""
    if getattr(args, "max_gpu_hours", None) is None:
        return False
    from sweep.run.budget import recorded_device_s

    recorded_s, rows = recorded_device_s(args.results, space)
    expected_s = recorded_s / rows if rows else 0.0
    if recorded_s + expected_s <= args.max_gpu_hours * 3600:
        return False
    print(
        f"[sweep] budget: {recorded_s / 3600:.4g} of --max-gpu-hours {args.max_gpu_hours:.4g} device-hours already "
        f"recorded for {space}, and a trial is expected to cost {expected_s / 3600:.4g} (the mean of {rows} recorded); "
        "nothing started (a larger budget runs what is missing)",
        file=sys.stderr,
    )
    return True


def describe_study(study, num_trials: int) -> str:
    """What an Optuna search's study holds after a run, by where each trial came from."""
    text = (
        f"its study holds {len(study.study.trials)} trials: {study.from_record} from the record, {study.trained} "
        f"trained now, {plural(study.answered, 'suggestion')} of pairs already recorded or trained, answered from the "
        "record"
    )
    if study.exhausted and study.trained < num_trials:
        text += f"; stopped after {study.trained} of {num_trials}: every config it can suggest is recorded"
    return text


def compact_after_sweep(results, space: str) -> None:
    """Merge the space's per-trial files into one per sweep and table (``sweep/results/compact.py``); the caller holds
    the space's sweep lock. A failure here loses nothing: the sweep's rows are written, and `sweep compact`
    tries again."""
    from sweep.results.compact import compact_space

    try:
        outcome = compact_space(results, space)
    except SweepError as exc:
        print(f"[sweep] warning: {exc}", file=sys.stderr)
        return
    if outcome.written or outcome.leftovers or outcome.skipped:
        print(f"[sweep] compacted {outcome.words()}", file=sys.stderr)


def go_offline_if_the_hub_is_unreachable() -> None:
    """HF_HUB_OFFLINE=1 for this process when the Hub cannot be reached (set before ``datasets`` is imported,
    which reads it once): Hub data and tokenizers then come from the local cache or fail in one line at once,
    instead of after ``datasets``' retries."""
    from workers.data.hub import hub_reachable, is_offline

    if not is_offline() and not hub_reachable():
        os.environ["HF_HUB_OFFLINE"] = "1"
        print("[preflight] the Hugging Face Hub cannot be reached: Hub data is looked for in the local cache only",
              file=sys.stderr)  # fmt: skip


def cmd_preflight(args) -> int:
    """``sweep preflight``: every check of ``sweep/run/preflight.py`` on the plan; non-zero on any problem."""
    from sweep.cli.estimates import estimate_rows, estimate_settings
    from sweep.run.preflight import format_rows, preflight, stated_node

    if (args.node_gpus is None) != (args.node_cpus is None):
        raise UsageError("--node-gpus and --node-cpus go together: state both of a node of the cluster")
    go_offline_if_the_hub_is_unreachable()  # before planning, which imports the Hub's libraries
    plan = load_plan(args)
    started = time.perf_counter()
    print(
        f"[preflight] {plan.space_name} (profile {plan.profile or 'none'}): {len(plan.configs)} configs, "
        f"results {args.results}",
        file=sys.stderr,
    )
    settings = estimate_settings(args)
    estimates = {row["config_id"]: row for row in estimate_rows(plan, settings)} if settings else {}
    nodes = stated_node(args.node_gpus, args.node_cpus) if args.node_gpus is not None else None
    rows = preflight(plan, args.space, args.results, compile_=args.compile, nodes=nodes, estimates=estimates,
                     gpu_name=settings["gpu"].name if settings else None, stand_in=args.stand_in_data)  # fmt: skip
    if settings:
        print(f"[preflight] estimates on {settings['gpu'].name}, MFU {settings['mfu']:.2f} ({settings['mfu_source']})",
              file=sys.stderr)  # fmt: skip
    print(format_rows(rows))
    problems = [row for row in rows if not row.ok]
    wall_s = time.perf_counter() - started
    if problems:
        print(f"[preflight] {len(problems)} of {len(rows)} checks failed in {wall_s:.0f}s; fix them before `sweep run`",
              file=sys.stderr)  # fmt: skip
        return 1
    print(f"[preflight] all {len(rows)} checks passed in {wall_s:.0f}s", file=sys.stderr)
    return 0
