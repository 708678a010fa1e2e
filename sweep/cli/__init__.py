"""The ``sweep`` command.

    sweep run SPACE [--profile P] [--seeds N|a,b,c] [--results DIR|s3://bucket/prefix|gs://bucket/prefix]
                   [--log mlflow|tensorboard|wandb …] [--trials N] [--fresh]
    sweep plan SPACE [--profile P] [--format table|csv|json]
    sweep spaces
    sweep validate SPACE|FILE [--profile P]
    sweep sql "QUERY" [--results DIR] [--format table|csv|json] [--tolerance X]
    sweep import FILE [--results DIR]
    sweep doctor [--results DIR] [--fix]
    sweep compact [--results DIR] [--space SPACE …] [--wait]
    sweep report SPACE [--results DIR] [--out DIR] [--tolerance X]
    sweep rerun SPACE --seeds N [--select all|near-break|pareto|top-k] [--dry-run]
    sweep rerun SPACE --select inconclusive --budget N [--dry-run]
    sweep rerun SPACE --profile P [--trials N]      (an Optuna search: resume it, like run)
    sweep kappa-theory (--space SPACE [--profile P] | --tokens N (--width D | --head-dim d) [--heads 1,2,4])
    sweep data export listops --rows N --out DIR [--seed S] [--max-depth D] [--max-args A] …

Errors print on one line each (every problem in a space at once) and exit non-zero (2 for a bad space
or missing data); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.views import analysis_views, views_text
from sweep.cli.options import SELECTIONS, TRACKERS
from sweep.errors import DataUnavailableError, SweepError, UsageError
from sweep.text import human, plural

if TYPE_CHECKING:
    from sweep.plan.plan import Plan
    from sweep.run.rerun import SearchRecord

# Each command imports what it needs when it runs: the analysis commands (sql, report, doctor, compact) and
# `--help` load neither torch nor Ray; planning and running do (the spaces' models and data sets).

DEFAULT_SPACE = "mqar_recall"  # its default profile, cpu, answers on 2 cores in under 10 minutes
DEFAULT_RESULTS = Path("results")
SPACE_HELP = f"a shipped space name, one in ./search_spaces/, or a path to a YAML file (default: {DEFAULT_SPACE})"
PROFILE_HELP = "a profile of the space (`sweep spaces NAME` lists them); default: the space's default_profile"
RESULTS_HELP = "the results folder, or an s3:// / gs:// prefix (default: results)"
FORMAT_HELP = "how to print rows (default: table)"
TOLERANCE_HELP = (
    "judge every verdict at this tolerance, in each space's metric units (points of top-1, nats of loss); "
    "default: each space's own metric.tolerance"
)


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


def parse_int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option} takes comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError(f"{option} needs positive whole numbers, got {text!r}")
    return values


def parse_results(text: str):
    """``--results``: a folder or an object-store prefix (``sweep/results/storage.py``, imported when given)."""
    from sweep.results.storage import parse_results as parse

    return parse(text)


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    from sweep.analysis.sql import render as render_rows

    return render_rows(columns, rows, fmt)


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


# --- commands ---------------------------------------------------------------------------------------------


def cmd_run(args) -> int:
    from sweep.run.rerun import describe, missing_pairs, recorded_pairs, sweep_lock
    from sweep.space.validation import check_data

    plan = load_plan(args, check_data)
    if args.trials is not None and plan.space.search.kind == "grid":
        raise UsageError(grid_trials_message(plan))
    with sweep_lock(args.results, plan.space_name, args.wait):
        if plan.space.search.kind == "optuna":
            return run_search(plan, args)
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
    record = SearchRecord(plan.seeds[0]) if fresh else search_record(args.results, plan)
    trials = args.trials if args.trials is not None else record.remaining(search.num_trials)
    prefix = f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): optuna {search.sampler}"
    if record.outcomes:
        print(
            f"{prefix}, resuming its study: {len(record.outcomes)} recorded trials (seed {record.seed}) start it, "
            f"{record.trained} of them trained by this search (num_trials {search.num_trials})",
            file=sys.stderr,
        )
    where = args.space + (f" --profile {plan.profile}" if plan.profile else "")
    if len(record.outcomes) >= len(plan.configs):
        print(
            f"{prefix}: all {len(plan.configs)} configs it can suggest are recorded at seed {record.seed}; "
            f"nothing left to train (more seeds of them: `sweep rerun {where} --seeds N`)",
            file=sys.stderr,
        )
        return 0
    if trials < 1:
        print(
            f"{prefix}: its budget is spent ({record.trained} of num_trials {search.num_trials} trained); "
            f"`sweep run {where} --trials N` trains N more",
            file=sys.stderr,
        )
        return 0
    return launch(plan, args, record=record, trials=trials)


def cmd_rerun(args) -> int:
    from sweep.run.rerun import describe, missing_pairs, recorded_pairs, select_configs, sweep_lock
    from sweep.space.model import GridSearch, Scheduler
    from sweep.space.validation import check_data

    if args.select == "inconclusive":
        return rerun_inconclusive(args, check_data)
    if args.budget is not None:
        raise UsageError("--budget goes with --select inconclusive; the other selections take --seeds N")
    if args.seeds is None:
        return rerun_search(args, check_data)
    if args.trials is not None:
        raise UsageError("--trials N extends an Optuna search, --seeds N adds seeds to its configs: give one of them")
    if args.seeds < 1:
        raise UsageError(f"--seeds must be at least 1, got {args.seeds}")
    plan = load_plan(args, check_data, seeds=list(range(args.seeds)))
    with sweep_lock(args.results, plan.space_name, args.wait):
        configs = select_configs(plan, args.results, args.select, args.top_k)
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


def rerun_search(args, check_data) -> int:
    """``sweep rerun`` without ``--seeds``: an Optuna search resumes, as ``sweep run`` resumes it."""
    from sweep.run.rerun import sweep_lock

    plan = load_plan(args, check_data)
    if plan.space.search.kind == "grid":
        raise UsageError("--seeds N is required (seeds wanted per config: 0 … N-1), or use --select inconclusive")
    if args.select != "all":
        raise UsageError(f"--select {args.select} needs --seeds N (seeds wanted per selected config: 0 … N-1)")
    with sweep_lock(args.results, plan.space_name, args.wait):
        return run_search(plan, args)


def rerun_inconclusive(args, check_data) -> int:
    """Rounds of one more seed for every open verdict, until all are settled or ``--budget`` trials have
    run (``sweep/run/adaptive.py``); ``--dry-run`` prints the first round."""
    from sweep.run.adaptive import describe_round, next_round, open_verdicts
    from sweep.run.rerun import sweep_lock
    from sweep.space.model import GridSearch, Scheduler

    if args.budget is None or args.budget < 1:
        raise UsageError("--select inconclusive needs --budget N (N >= 1): how many more trials it may run")
    if args.seeds is not None or args.trials is not None:
        raise UsageError("--select inconclusive chooses the seeds itself; drop --seeds or --trials and give --budget N")
    plan = load_plan(args, check_data)
    prefix = f"[rerun] {plan.space_name}: selection 'inconclusive'"
    with sweep_lock(args.results, plan.space_name, args.wait):
        open_ = open_verdicts(plan, args.results)
        opened, spent = len(open_), 0
        while open_ and spent < args.budget:
            planned = next_round(plan, args.results, open_, args.budget - spent)
            print(f"{prefix}, {describe_round(open_, planned, args.budget - spent)}", file=sys.stderr)
            if args.dry_run:
                return 0
            plan.pairs = [(m.config, m.seed) for m in planned]
            plan.space = plan.space.model_copy(update={"search": GridSearch(), "scheduler": Scheduler()})
            launch(plan, args)
            spent += len(planned)
            open_ = open_verdicts(plan, args.results)
        settled = opened - len(open_)
        state = "every verdict is settled" if not open_ else f"{len(open_)} still open"
        print(f"{prefix}: {spent} trials run, {settled} of {opened} open verdicts settled; {state}", file=sys.stderr)
    return 0


def launch(plan: Plan, args, record: SearchRecord | None = None, trials: int | None = None) -> int:
    """Run ``plan``: a grid's trials, or an Optuna search resumed from ``record`` for ``trials`` trials."""
    from sweep.run.tuner import run_sweep

    grid = plan.space.search.kind == "grid"
    count = len(plan.trials()) if grid else trials
    print(
        f"[sweep] {plan.space_name} (profile {plan.profile or 'none'}): {count} trials, "
        f"{'grid' if grid else 'optuna ' + plan.space.search.sampler}, results in {args.results}/",
        file=sys.stderr,
    )
    outcome = run_sweep(
        plan, args.results, args.space, progress=not args.quiet, record=record, trials=trials, verbose=args.verbose
    )
    summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.statuses.items())) or "nothing"
    print(
        f"[sweep] sweep {outcome.sweep_id}: {outcome.trials} trials written ({summary}) in {outcome.wall_s:.0f}s",
        file=sys.stderr,
    )
    if outcome.study is not None:
        print(f"[sweep] {describe_study(outcome.study, count)}", file=sys.stderr)
    print(
        f"[sweep] query them: sweep sql \"SELECT * FROM trials WHERE sweep_id = '{outcome.sweep_id}'\"",
        file=sys.stderr,
    )
    compact_after_sweep(args.results, plan.space_name)
    return 0


def describe_study(study, budget: int) -> str:
    """What an Optuna search's study holds after a run, by where each trial came from."""
    text = (
        f"its study holds {len(study.study.trials)} trials: {study.from_record} from the record, {study.trained} "
        f"trained now, {study.answered} suggestions of pairs already recorded or trained, answered from the record"
    )
    if study.exhausted and study.trained < budget:
        text += f"; stopped after {study.trained} of {budget}: every config it can suggest is recorded"
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


def plan_rows(plan: Plan) -> list[dict]:
    """``sweep plan``'s table: each config's shape, params and FLOPs, with each question's columns."""
    from sweep.questions import QUESTIONS

    rows = []
    several = len(plan.space.families()) > 1
    for config in plan.configs:
        shape = config.shape
        asked = {name: value for q in QUESTIONS for name, value in q.plan_columns(plan, config).items()}
        rows.append({
            "config_id": config.config_id, "baseline": config.is_baseline,
            **({"family": shape.family} if several else {}), "depth": shape.depth,
            "num_heads": shape.num_heads,
            **({"num_kv_heads": asked.pop("num_kv_heads")} if "num_kv_heads" in asked else {}),
            "head_dim": shape.head_dim, "embed_dim": shape.embed_dim,
            "mlp_dim": shape.mlp_dim, "attn_dim": shape.attn_dim, "rule": shape.rule,
            **({"budget_way": asked.pop("budget_way")} if "budget_way" in asked else {}),
            "params": config.params, "flops_per_sample": config.flops_per_sample,
            "seeds": len(plan.seeds), **asked,
        })  # fmt: skip
    return rows


def print_stages(plan: Plan) -> None:
    """For staged families (DaViT, VOLO): which stage the shape columns describe, and the other stages."""
    fixed = plan.space.model
    if fixed.swept_stage is None:
        return

    def others(values: list[int]) -> str:
        return "[" + ", ".join("*" if i == fixed.swept_stage else str(v) for i, v in enumerate(values, 1)) + "]"

    print(
        f"stages: depth, num_heads, head_dim, embed_dim and mlp_dim are stage {fixed.swept_stage}'s (*); the "
        f"others keep depths {others(fixed.stage_depths)}, heads {others(fixed.stage_heads)}, "
        f"widths {others(fixed.stage_dims)}"
    )


def print_published(plan: Plan) -> None:
    """The paper's rows beside the planned counts, and why they differ where the space file says so."""
    from sweep.plan.plan import compare_published

    for row in compare_published(plan):
        shape = ", ".join(f"{k} {v}" for k, v in row["shape"].items())
        score = f", {row['metric']} {row['published_score']:g}" if row["published_score"] is not None else ""
        count = f"{row['published_params_m']:.1f}M" if row["published_params_m"] else "no parameter count"
        head = f"published {row['label']} ({shape}): {count}{score}"
        head += f" [the {row['control']} control]" if row.get("control") else ""
        if row["planned_params_m"] is None:
            print(f"{head}; not in this profile's grid")
            continue
        if row["difference"] is None:
            print(f"{head}; planned {row['planned_params_m']:.3f}M")
        else:
            verdict = "reproduced" if row["reproduced"] else "NOT reproduced"
            print(f"{head}, planned {row['planned_params_m']:.2f}M ({row['difference']:+.1%}): {verdict}")
        if row["mismatch"]:
            print(f"  why: {' '.join(row['mismatch'].split())}")
        if row.get("source"):
            print(f"  source: {' '.join(row['source'].split())}")


def print_question_lines(plan: Plan, place: str) -> None:
    """The lines ``sweep plan`` prints for each question (``sweep/questions/``) whose lines go at ``place``."""
    from sweep.questions import QUESTIONS

    for question in QUESTIONS:
        if question.plan_place == place:
            for line in question.plan_lines(plan):
                print(line)


def print_plan_json(plan: Plan, rows: list[dict], removed: list[dict]) -> None:
    from sweep.plan.plan import compare_published
    from sweep.questions import QUESTIONS

    answers = {key: value for q in QUESTIONS for key, value in q.plan_json(plan).items()}
    asked = {key: answers.pop(key) for key in ("budgets", "controls") if key in answers}  # the order it always had
    print(
        json.dumps(
            {
                "space": plan.space_name,
                "profile": plan.profile,
                "search": plan.space.search.kind,
                "seeds": plan.seeds,
                "trials": rows,
                "removed": removed,
                "published": compare_published(plan),
                **asked,
                **answers,
            },
            indent=2,
        )
    )


def print_plan_header(plan: Plan, rows: list[dict]) -> None:
    from sweep.metrics import direction_words, tolerance_unit

    print(f"space {plan.space_name}, profile {plan.profile or 'none'}: {plan.space.question.strip()}")
    shown = [{**r, "params": human(r["params"]), "flops_per_sample": human(r["flops_per_sample"])} for r in rows]
    print(render(list(shown[0]), [tuple(r.values()) for r in shown], "table"))
    base = plan.baseline
    print(
        f"baseline: depth {base.shape.depth} × {plural(base.shape.num_heads, 'head')} of {base.shape.head_dim}, "
        f"{human(base.params)} params ({base.params:,}), {human(base.flops_per_sample)} FLOPs per sample"
    )
    metric = plan.space.metric
    print(
        f"judged on: {metric.name} ({metric.mode}: {direction_words(metric.mode)}), "
        f"tolerance {metric.tolerance} {tolerance_unit(metric.name)}"
    )


def print_plan_search(plan: Plan, rows: list[dict], removed: list[dict]) -> None:
    search = plan.space.search
    if search.kind == "grid":
        from sweep.questions import QUESTIONS

        added = ", ".join(filter(None, (q.grid_words(plan) for q in QUESTIONS)))
        arms = f" (the axes' and {added})" if added else ""
        print(
            f"grid: {plural(len(rows), 'config')}{arms} × {plural(len(plan.seeds), 'seed')} {plan.seeds} = "
            f"{plural(len(rows) * len(plan.seeds), 'trial')}"
        )
    else:
        print(
            f"optuna ({search.sampler}): {search.num_trials} trials drawn from these {len(rows)} configs, "
            f"seed {plan.seeds[0]}, objectives " + ", ".join(f"{o.metric} {o.mode}" for o in search.objectives)
        )
    if removed:
        print(f"\nremoved by the rules ({len(removed)}):")
        for row in removed:
            shape = ", ".join(f"{k}={v}" for k, v in row.items() if k != "reason")
            print(f"  {shape}: {row['reason']}")


def cmd_plan(args) -> int:
    plan = load_plan(args)
    rows = plan_rows(plan)
    removed = [{**r.combination, "reason": r.reason} for r in plan.removed]
    if args.write_configs:
        written = write_trial_configs(plan, args.write_configs)
        print(f"wrote {len(written)} trial config(s) to {args.write_configs}", file=sys.stderr)
    if args.format == "json":
        print_plan_json(plan, rows, removed)
        return 0
    if args.format == "csv":
        print(render(list(rows[0]), [tuple(r.values()) for r in rows], "csv"))
        return 0
    print_plan_header(plan, rows)
    print_stages(plan)
    print_question_lines(plan, "before published")
    print_published(plan)
    print_question_lines(plan, "after published")
    print_plan_search(plan, rows, removed)
    return 0


def write_trial_configs(plan: Plan, folder: Path) -> list[Path]:
    """Each planned trial's worker config (``trial_config``, exactly what Ray hands ``run_trial``) as
    ``folder/<config_id>-s<seed>.json``, so that one trial can be run or debugged with ``trial FILE``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for payload in plan.trials():
        path = folder / f"{payload['config_id']}-s{payload['seed']}.json"
        path.write_text(json.dumps(payload["trial_config"], indent=1) + "\n")
        written.append(path)
    return written


def cmd_spaces(args) -> int:
    """Every space with its question and each profile's description (what it runs, where, how long: the
    YAML's ``profiles.NAME.description``, the one place those words live); ``sweep spaces NAME``: one space,
    with its ``why:`` too; ``--names``: only the names (with ``--profile P``, of the spaces defining P)."""
    from sweep.space.loader import display_path, read_yaml, shipped_spaces, with_recipes
    from workers.models import FAMILIES

    if args.names:  # for scripts: `for space in $(sweep spaces --names --profile smoke)`
        for name, path in shipped_spaces().items():
            if args.profile is None or args.profile in (with_recipes(read_yaml(path), path).get("profiles") or {}):
                print(name)
        return 0
    spaces = shipped_spaces()
    if args.name is not None:
        from sweep.space.loader import find_space

        path = find_space(args.name)
        spaces = {path.stem: path}
    for name, path in spaces.items():
        raw = with_recipes(read_yaml(path), path)
        print(f"{name}  ({display_path(path)})")
        print(textwrap.fill(" ".join(str(raw.get("question", "")).split()), 110, initial_indent="    ",
                            subsequent_indent="    "))  # fmt: skip
        if args.name is not None and raw.get("why"):
            print(textwrap.fill("why: " + " ".join(str(raw["why"]).split()), 110, initial_indent="    ",
                                subsequent_indent="    "))  # fmt: skip
        profiles = raw.get("profiles") or {}
        default = raw.get("default_profile")
        print(f"    profiles{f' (default: {default})' if default else ''}:" if profiles else "    profiles: none")
        for profile, body in profiles.items():
            description = " ".join(str((body or {}).get("description") or "(no description)").split())
            print(
                textwrap.fill(f"{profile}: {description}", 110, initial_indent="      ", subsequent_indent="        ")
            )
    if args.name is None:
        print("\nmodel families (model.family):")
        for family in FAMILIES.values():
            print(f"  {family.name:6s} {family.description}")
    return 0


def cmd_validate(args) -> int:
    from sweep.plan.plan import make_plan
    from sweep.space.loader import load_space_with_notes

    name, space, profile, notes = load_space_with_notes(args.space, args.profile)
    plan = make_plan(name, space, profile)
    print(
        f"{name}: valid ({plural(len(plan.configs), 'config')}, {len(plan.removed)} combinations removed by the "
        f"rules, profiles: {', '.join(space.profiles) or 'none'})"
    )
    for note in notes:
        print(f"  {note}")
    return 0


def parse_tolerance(value: float | None) -> float | None:
    """``--tolerance``: one tolerance for every verdict, in each space's metric units; must be positive."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"--tolerance must be a positive number in the metric's units (e.g. 0.5), got {value}")
    return value


def cmd_sql(args) -> int:
    from sweep.analysis.sql import run_query

    if args.print_views:  # the same definitions the tool reads, for `duckdb -init`
        print(views_text(), end="")
        return 0
    if args.query is None:
        raise UsageError('sweep sql needs a query, e.g. sweep sql "FROM depth_edge" (or --print-views)')
    columns, rows = run_query(args.results, args.query, tolerance=parse_tolerance(args.tolerance))
    print(render(columns, rows, args.format))
    return 0


def cmd_import(args) -> int:
    from sweep.results.importer import import_file
    from sweep.results.storage import is_remote

    if is_remote(args.results):
        raise UsageError(
            f"sweep import writes to a results folder, not to object storage ({args.results}); import into a "
            f"folder, then copy its files under the prefix (e.g. `aws s3 sync DIR {args.results}`)"
        )

    written = import_file(args.file, args.results)
    for space, count in written.items():
        print(f"imported {count} trial rows into space {space!r} under {args.results}/trials/{space}/")
    return 0


def cmd_doctor(args) -> int:
    from sweep.results.doctor import cmd_doctor as doctor

    return doctor(args)


def cmd_compact(args) -> int:
    from sweep.results.compact import compact

    outcomes = compact(args.results, args.space, wait=args.wait)
    if not outcomes:
        print(f"nothing to compact under {args.results}/: no results files")
    for outcome in outcomes:
        print(f"compacted {outcome.words()}")
    return 1 if any("disagree" in why for outcome in outcomes for why in outcome.skipped) else 0


def cmd_report(args) -> int:
    from sweep.analysis.report import write_report

    # The question comes from the results (the sweeps' `spaces` rows), not the space file: reading the file
    # would load the model and data registries (torch), and a space known only from imported rows has none.
    out = args.out or Path("reports") / args.space
    index = write_report(args.space, args.results, out, tolerance=parse_tolerance(args.tolerance))
    print(f"report written: {index} and {index.with_name('index.html')} (interactive, works offline)")
    return 0


def cmd_kappa_theory(args) -> int:
    from sweep.plan import theory

    if sum(x is not None for x in (args.width, args.head_dim, args.space)) != 1:
        raise UsageError(
            "give exactly one of --space SPACE (its own shapes), --width D (fixed total width) or --head-dim d "
            "(fixed head size)"
        )
    if args.space is not None:
        groups = space_theory_groups(args)
    else:
        if args.tokens is None:
            raise UsageError("--tokens N is needed with --width or --head-dim (with --space the space gives it)")
        if min(args.tokens, args.width or 1, args.head_dim or 1) < 1:
            raise UsageError(
                f"--tokens, --width and --head-dim must be positive whole numbers, got --tokens {args.tokens}"
                + (f" --width {args.width}" if args.width is not None else f" --head-dim {args.head_dim}")
            )
        heads = parse_int_list(args.heads, "--heads")
        if args.width is not None:
            shapes = [(h, args.width // h) for h in heads if args.width % h == 0]
            groups = [(theory.FIXED_D_MODEL, f"fixed total width D = {args.width}", shapes, args.tokens)]
        else:
            shapes = [(h, args.head_dim) for h in heads]
            groups = [(theory.FIXED_HEAD_DIM, f"fixed head size d = {args.head_dim}", shapes, args.tokens)]
    columns = [*KAPPA_THEORY_COLUMNS, *(["parametrisation"] if args.format != "table" else [])]
    everything = []
    for parametrisation, title, shapes, n_tokens in groups:
        rows = theory.theory_rows(shapes, n_tokens)
        for row in rows:
            sample_kappa(row, args.samples)
        table = [tuple(row[c] for c in KAPPA_THEORY_COLUMNS) for row in rows]
        if args.format == "table":
            print(f"{title}: {parametrisation}, N = {n_tokens} tokens")
            print(textwrap.fill(theory.prediction(parametrisation, rows), width=110))
            print(
                f"κ of A = [A_1 … A_h], i.i.d. N(0,1) heads, {args.samples} samples each; kappa_theorem: "
                "Theorem 3.2's (√D+√N)/(√D−√N), only where D > N; kappa_gaussian: the Marchenko–Pastur edges, "
                "either regime"
            )
            print(render(columns, table, "table") + "\n")
        else:
            everything += [(*row, parametrisation) for row in table]
    if args.format != "table":
        print(render(columns, everything, args.format))
    return 0


KAPPA_THEORY_COLUMNS = [
    "heads",
    "head_dim",
    "width_D",
    "tokens_N",
    "D_over_N",
    "kappa_sampled_median",
    "kappa_min",
    "kappa_max",
    "kappa_theorem",
    "kappa_gaussian",
    "sampled_over_theorem",
    "regime",
]


def sample_kappa(row: dict, samples: int) -> None:
    """Add the sampled κ of Gaussian heads of ``row``'s shape (median, min, max) and its ratio to the theorem."""
    from workers.probes.kappa import gaussian_heads_kappa

    kappas = sorted(gaussian_heads_kappa(row["tokens_N"], row["head_dim"], row["heads"], samples=samples, seed=0))
    theorem = row["kappa_theorem"]
    row.update(
        kappa_sampled_median=kappas[len(kappas) // 2],
        kappa_min=kappas[0],
        kappa_max=kappas[-1],
        sampled_over_theorem=round(kappas[len(kappas) // 2] / theorem, 3) if theorem else None,
    )


def space_theory_groups(args) -> list[tuple[str, str, list[tuple[int, int]], int]]:
    """Per parametrisation the space's configs follow (its head_dim rules, read through the plan): the
    distinct (heads, head_dim) of those configs and N, tokens per sample the family's attention sees."""
    from sweep.plan import theory
    from workers.config import ModelSpec
    from workers.models import num_tokens

    plan = load_plan(args)
    label = f"space {plan.space_name}" + (f" (profile {plan.profile})" if plan.profile else "")
    groups = []
    for parametrisation in theory.parametrisations(c.shape.rule for c in plan.configs):
        configs = [c for c in plan.configs if parametrisation in theory.parametrisations([c.shape.rule])]
        tokens = {num_tokens(ModelSpec(**c.model)) for c in configs}
        if len(tokens) > 1:
            raise UsageError(f"{label}: its configs see different token counts {sorted(tokens)}; give --tokens")
        shapes = [(c.shape.num_heads, c.shape.head_dim) for c in configs]
        groups.append((parametrisation, label, shapes, args.tokens or tokens.pop()))
    return groups


def cmd_data_fetch(args) -> int:
    """Fetch the space's data through ``datasets`` (its progress bars on stderr); one line per split: rows,
    bytes, the cache folder and the data's identity. A data set on disk or generated says so."""
    from sweep.space.loader import load_space

    _, space, _ = load_space(args.space, args.profile)
    try:
        lines = space.data.fetch()
    except (FileNotFoundError, ValueError) as exc:
        raise DataUnavailableError(str(exc)) from exc
    for line in lines:
        print(line)
    return 0


def cmd_data_export(args) -> int:
    from sweep.results.data_export import cmd_data_export as export

    return export(args)


def add_data_parser(sub) -> None:
    """``sweep data export listops …`` (generated ListOps as LRA's three TSV files) and ``sweep data fetch SPACE``
    (download what a space's Hub-sourced data needs, or find it in the cache)."""
    data = sub.add_parser("data", help="fetch a space's Hub data, or write data sets generated here")
    commands = data.add_subparsers(dest="data_command", required=True)
    fetch = commands.add_parser("fetch", help="download (or find in the HF cache) what a space's data needs")
    fetch.add_argument("space", help="a shipped space name or a path to a YAML file")
    fetch.add_argument("--profile", help="the profile whose data to fetch (default: the space's default)")
    fetch.set_defaults(func=cmd_data_fetch)
    exports = commands.add_parser("export", help="write files")
    kinds = exports.add_subparsers(dest="data_set", required=True)
    lo = kinds.add_parser("listops", help="ListOps with LRA's grammar as basic_{train,val,test}.tsv (LRA's layout)")
    lo.add_argument("--rows", type=int, required=True, help="training rows")
    lo.add_argument("--out", type=Path, required=True, help="folder to write the three files to")
    lo.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    lo.add_argument("--max-depth", type=int, default=10, help="LRA: 10")
    lo.add_argument("--max-args", type=int, default=10, help="LRA: 10")
    lo.add_argument("--min-length", type=int, default=500, help="rows kept have length > this (LRA: 500)")
    lo.add_argument("--max-length", type=int, default=2000, help="rows kept have length < this (LRA: 2000)")
    lo.add_argument("--val-rows", type=int, help="default: rows // 48, at least 1 (LRA's ratio)")
    lo.add_argument("--test-rows", type=int, help="default: rows // 48, at least 1 (LRA's ratio)")
    lo.set_defaults(func=cmd_data_export)


# --- parsing ----------------------------------------------------------------------------------------------


def add_gpu_check_parser(sub) -> None:
    """`sweep gpu-check`: ``workers/gpu_check.py``'s check (what `make gpu-check` runs), for installed copies."""
    from workers.gpu_check_options import add_options

    gpu = sub.add_parser("gpu-check", help="ViT-B/16 bf16 on this GPU: memory, throughput, MFU, κ (CPU: reduced)")
    add_options(gpu)
    gpu.set_defaults(func=cmd_gpu_check)


def cmd_gpu_check(args) -> int:
    from workers.gpu_check import run

    return run(args)


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by the commands that launch trials (run, rerun)."""
    parser.add_argument("space", nargs="?", default=DEFAULT_SPACE, help=SPACE_HELP)
    parser.add_argument("--profile", help=PROFILE_HELP)
    parser.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    parser.add_argument("--data-root", type=Path, help="where the data set lives (overrides data.root)")
    parser.add_argument(
        "--data-workers",
        type=int,
        help="DataLoader workers per trial for on-disk data (overrides data.num_workers; default: CPUs per trial - 1)",
    )
    parser.add_argument("--wait", action="store_true", help="if a sweep of this space is running, wait for it")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--verbose", action="store_true", help="Ray's, Tune's and Optuna's own output too (Tune's status table)"
    )
    parser.add_argument(
        "--trials",
        type=parse_trials,
        help="an Optuna search: train N more trials now (default: what its num_trials has left)",
    )
    parser.add_argument(
        "--log",
        action="append",
        choices=TRACKERS,
        help="also log every trial to this experiment tracker (repeatable; adds to the space's log:)",
    )


def add_run_parsers(sub) -> None:
    run = sub.add_parser("run", help="run a search space's sweep on local Ray or $RAY_ADDRESS")
    add_launch_options(run)
    run.add_argument("--seeds", help="a count (3 → seeds 0,1,2) or a list (0,5,9); default: the space's")
    run.add_argument(
        "--fresh",
        action="store_true",
        help="run every trial, even those already recorded (an Optuna search: a new study, its whole budget)",
    )
    run.set_defaults(func=cmd_run)

    rerun = sub.add_parser("rerun", help="run exactly the (config, seed) pairs missing for a selection")
    add_launch_options(rerun)
    rerun.add_argument("--seeds", type=int, help="seeds wanted per config: 0 … N-1 (not with inconclusive)")
    rerun.add_argument(
        "--select",
        choices=(*SELECTIONS, "inconclusive"),
        default="all",
        help="which configs; inconclusive: more seeds only where a verdict is still open, up to --budget",
    )
    rerun.add_argument("--budget", type=int, help="--select inconclusive: at most this many more trials")
    rerun.add_argument("--top-k", type=int, help="K for --select top-k")
    rerun.add_argument("--dry-run", action="store_true", help="print what is missing, run nothing")
    rerun.set_defaults(func=cmd_rerun)


def add_plan_parsers(sub) -> None:
    plan = sub.add_parser("plan", help="list every trial a sweep would launch, and what the rules removed")
    plan.add_argument("space", nargs="?", default=DEFAULT_SPACE, help=SPACE_HELP)
    plan.add_argument("--profile", help=PROFILE_HELP)
    plan.add_argument("--seeds", help="a count (3 → seeds 0,1,2) or a list (0,5,9); default: the space's")
    plan.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    plan.add_argument(
        "--write-configs",
        type=Path,
        metavar="DIR",
        help="also write each trial's worker config as DIR/<config_id>-s<seed>.json (run one with `trial FILE`)",
    )
    plan.set_defaults(func=cmd_plan)

    spaces = sub.add_parser(
        "spaces", help="the shipped spaces: the question each answers, and what each profile runs and how long"
    )
    spaces.add_argument("name", nargs="?", help="one space (a name or a YAML file): also its why:")
    spaces.add_argument("--names", action="store_true", help="print only the spaces' names, one per line")
    spaces.add_argument("--profile", help="with --names: only the spaces that define this profile")
    spaces.set_defaults(func=cmd_spaces)

    validate = sub.add_parser("validate", help="check a space (name or file) and all its profiles")
    validate.add_argument("space", help="a shipped space name, one in ./search_spaces/, or a path to a YAML file")
    validate.add_argument("--profile", help="also check that this profile exists (every profile is validated)")
    validate.set_defaults(func=cmd_validate)


def add_results_parsers(sub) -> None:
    sql = sub.add_parser(
        "sql",
        help="read-only DuckDB SQL over the results tables and the analysis views",
        description="Read-only DuckDB SQL over the results. Tables: trials, epochs, kappa, spaces. Analysis "
        f"views (`sweep sql --print-views` prints their SQL; docs/analysis.md says what each holds): "
        f"{', '.join(analysis_views())}.",
    )
    sql.add_argument("query", nargs="?", help='one SQL query, e.g. "FROM depth_edge" or "SELECT status, count(*) '
                     'FROM trials GROUP BY ALL"')  # fmt: skip
    sql.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    sql.add_argument("--tolerance", type=float, help=TOLERANCE_HELP)
    sql.add_argument("--print-views", action="store_true", help="print every analysis view's SQL instead (for the "
                     "plain DuckDB shell: `sweep sql --print-views > views.sql; duckdb -init views.sql`)")  # fmt: skip
    sql.set_defaults(func=cmd_sql)

    imp = sub.add_parser("import", help="add trial rows from a CSV or Parquet file (all rows valid, or none)")
    imp.add_argument("file", type=Path, help="a CSV or Parquet file of trials rows (docs/schema.md: sweep import)")
    imp.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help="the results folder to add to")
    imp.set_defaults(func=cmd_import)

    doctor = sub.add_parser("doctor", help="check every results file; --fix sets damaged ones aside")
    doctor.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    doctor.add_argument("--fix", action="store_true", help="move damaged files and temporaries to DIR/.quarantine/")
    doctor.set_defaults(func=cmd_doctor)

    compact = sub.add_parser("compact", help="merge each sweep's per-trial files into one file per table")
    compact.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    compact.add_argument("--space", action="append", help="only this space (repeatable; default: every space)")
    compact.add_argument("--wait", action="store_true", help="if a sweep of a space is running, wait for it")
    compact.set_defaults(func=cmd_compact)

    report = sub.add_parser("report", help="write a Markdown + PNG report answering where the trade breaks")
    report.add_argument("space", help="the space whose trials to report (a name as recorded in the results)")
    report.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    report.add_argument("--out", type=Path, help="folder to write (default reports/SPACE)")
    report.add_argument("--tolerance", type=float, help=TOLERANCE_HELP)
    report.set_defaults(func=cmd_report)


def add_kappa_theory_parser(sub) -> None:
    theory = sub.add_parser("kappa-theory", help="sampled κ of Gaussian heads beside Theorem 3.2's value")
    theory.add_argument(
        "--space", help="the space's own shapes and tokens, grouped by its parametrisation (with --profile)"
    )
    theory.add_argument("--profile", help="with --space: the profile whose plan to read")
    theory.add_argument("--tokens", type=int, help="N, tokens per image (ViT-B/16 at 224: 197); --space gives it")
    theory.add_argument("--width", type=int, help="fixed total width D = heads × head_dim (ViT-B: 768)")
    theory.add_argument("--head-dim", type=int, help="fixed head size d; the width grows with heads")
    theory.add_argument("--heads", default="1,2,4,8,12,16,24,32,48,64", help="comma-separated head counts")
    theory.add_argument("--samples", type=int, default=16, help="Gaussian draws per shape (default 16)")
    theory.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    theory.set_defaults(func=cmd_kappa_theory)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sweep", description="Heads-for-depth sweeps: plan, run, query.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parsers(sub)
    add_plan_parsers(sub)
    add_results_parsers(sub)
    add_kappa_theory_parser(sub)
    add_data_parser(sub)
    add_gpu_check_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return args.func(args)
    except SweepError as exc:
        if args.debug:
            raise
        first, *rest = str(exc).splitlines() or [""]
        rest = [line if line.startswith("  ") else "  " + line for line in rest if line.strip()]
        print("\n".join([f"error: {first}", *rest]), file=sys.stderr)  # what follows the first line, indented
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sweep spaces | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # one line for a person; the traceback is what --debug is for
        if args.debug:
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
        if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError | IsADirectoryError):
            return 2  # a path the user gave
        print("  (not an error the tool expected: `sweep --debug …` shows where it came from)", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """``FileNotFoundError: no such file …`` on one line (the first line of a multi-line message)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


if __name__ == "__main__":
    sys.exit(main())
