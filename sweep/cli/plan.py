"""``sweep plan``, ``sweep spaces`` and ``sweep validate``: the plan as a table, JSON or worker configs, with the
stages, the published rows and each question's lines; the shipped spaces; a space's problems, all at once."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.text import human, plural

if TYPE_CHECKING:
    from sweep.plan.plan import Plan
from sweep.cli.estimates import (
    estimate_cells,
    estimate_rows,
    estimate_settings,
    estimate_totals,
    print_estimate_totals,
    print_not_fitting,
    with_estimates,
)
from sweep.cli.results import render
from sweep.cli.run import load_plan


def plan_rows(plan: Plan) -> list[dict]:
    """``sweep plan``'s table: each config's shape, params and FLOPs, with each question's columns: its axes
    (``Question.axes``) where some config is off the model as built and its labels (``Question.labels``) where
    some config has one, each after the column it names, and ``plan_columns``."""
    from sweep.questions import QUESTIONS

    rows = []
    several = len(plan.space.families()) > 1
    labels, axes = shown_labels(plan), shown_axes(plan)
    for config in plan.configs:
        shape = config.shape
        asked = {name: value for q in QUESTIONS for name, value in q.plan_columns(plan, config).items()}
        row = {
            "config_id": config.config_id, "baseline": config.is_baseline,
            **({"family": shape.family} if several else {}), "depth": shape.depth,
            "num_heads": shape.num_heads,
            "head_dim": shape.head_dim, "embed_dim": shape.embed_dim,
            "mlp_dim": shape.mlp_dim, "attn_dim": shape.attn_dim, "rule": shape.rule,
            "params": config.params, "flops_per_sample": config.flops_per_sample,
            "seeds": len(plan.seeds), **asked,
        }  # fmt: skip
        for axis in axes:
            row = with_column(row, axis.name, shape.as_dict()[axis.name], axis.plan_after)
        for label in labels:
            value = config.label(label.name)
            row = with_column(row, label.name, label.plan_blank if value is None else value, label.plan_after)
        rows.append(row)
    return rows


def shown_labels(plan: Plan) -> list:
    """The declared labels (``Question.labels``) ``sweep plan`` shows: those in the table that some config has."""
    from sweep.questions import declared_labels

    return [
        label
        for label in declared_labels()
        if label.in_plan and any(c.label(label.name) is not None for c in plan.configs)
    ]


def shown_axes(plan: Plan) -> list:
    """The declared axes (``Question.axes``) ``sweep plan`` shows: those in the table that some config has off
    the model as built (a model field its worker config carries)."""
    from sweep.questions import declared_axes

    return [
        axis
        for axis in declared_axes()
        if axis.in_plan and any(axis.field in c.shape.worker_fields() for c in plan.configs)
    ]


def with_column(row: dict, name: str, value, after: str | None) -> dict:
    """``row`` with ``name: value`` after the column ``after`` (at the end when None or absent)."""
    if after not in row:
        return {**row, name: value}
    items = list(row.items())
    at = [key for key, _ in items].index(after) + 1
    return dict([*items[:at], (name, value), *items[at:]])


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
        head += label_words(row)
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


def label_words(row: dict) -> str:
    """What a published row's config is labelled, in the words its labels declare (``Label.words``):
    `` [the half_mlp control]``, or ''."""
    from sweep.questions import declared_labels

    said = [label.words.format(row[label.name]) for label in declared_labels() if label.words and row.get(label.name)]
    return "".join(f" [{words}]" for words in said)


def print_question_lines(plan: Plan, place: str) -> None:
    """The lines ``sweep plan`` prints for each question (``sweep/questions/``) whose lines go at ``place``."""
    from sweep.questions import QUESTIONS

    for question in QUESTIONS:
        if question.plan_place == place:
            for line in question.plan_lines(plan):
                print(line)


def print_plan_json(plan: Plan, rows: list[dict], removed: list[dict], estimate: dict | None = None) -> None:
    from sweep.plan.plan import compare_published
    from sweep.questions import QUESTIONS

    answers = {key: value for q in QUESTIONS for key, value in q.plan_json(plan).items()}  # in registry order
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
                **(
                    {"edge_search": edge_expectation(plan, train_seconds(rows))}
                    if plan.space.search.kind == "edge"
                    else {}
                ),
                **answers,
                **({"estimate": estimate} if estimate is not None else {}),
            },
            indent=2,
        )
    )


def print_plan_header(plan: Plan, rows: list[dict]) -> None:
    from sweep.headline import direction_words, tolerance_unit

    print(f"space {plan.space_name}, profile {plan.profile or 'none'}: {plan.space.question.strip()}")
    shown = [{**r, "params": human(r["params"]), "flops_per_sample": human(r["flops_per_sample"]),
              **estimate_cells(r)} for r in rows]  # fmt: skip
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


def print_plan_search(plan: Plan, rows: list[dict], removed: list[dict], train_s: dict | None = None) -> None:
    """The search's line(s): the grid's trials, Optuna's budget, or the edge search's expected cost (``train_s``:
    each config's estimated seconds per trial, with ``--gpu``)."""
    search = plan.space.search
    if search.kind == "grid":
        from sweep.questions import QUESTIONS

        added = ", ".join(filter(None, (q.grid_words(plan) for q in QUESTIONS)))
        arms = f" (the axes' and {added})" if added else ""
        print(
            f"grid: {plural(len(rows), 'config')}{arms} × {plural(len(plan.seeds), 'seed')} {plan.seeds} = "
            f"{plural(len(rows) * len(plan.seeds), 'trial')}"
        )
    elif search.kind == "edge":
        for line in edge_plan_lines(plan, train_s):
            print(line)
    else:
        print(
            f"optuna ({search.sampler}): {plural(search.num_trials, 'trial')} drawn from these "
            f"{plural(len(rows), 'config')}, "
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
    settings = estimate_settings(args)
    totals = None
    if settings is not None:
        estimates = estimate_rows(plan, settings)
        totals = estimate_totals(plan, estimates, settings)
        rows = with_estimates(rows, estimates)
    removed = [{**r.combination, "reason": r.reason} for r in plan.removed]
    if args.write_configs:
        written = write_trial_configs(plan, args.write_configs)
        print(f"wrote {len(written)} trial config(s) to {args.write_configs}", file=sys.stderr)
    if args.format == "json":
        print_plan_json(plan, rows, removed, totals)
        return 0
    if args.format == "csv":
        print(render(list(rows[0]), [tuple(r.values()) for r in rows], "csv"))
        return 0
    if totals is not None:
        print_not_fitting(plan, rows, totals)
    print_plan_header(plan, rows)
    if totals is not None:
        print_estimate_totals(plan, totals)
    print_stages(plan)
    print_question_lines(plan, "before published")
    print_published(plan)
    print_question_lines(plan, "after published")
    print_plan_search(plan, rows, removed, train_seconds(rows))
    return 0


def train_seconds(rows: list[dict]) -> dict | None:
    """Each config's estimated seconds per trial (``--gpu``), or None without estimates."""
    if not rows or "est_train_s" not in rows[0]:
        return None
    return {row["config_id"]: row["est_train_s"] for row in rows}


def edge_expectation(plan: Plan, train_s: dict | None) -> dict:
    """The edge search's typical and worst cases beside the full grid at 3 seeds (``sweep/analysis/edge_lattice.py``
    defines them): trials, waves and device-hours (None without ``--gpu``), as ``sweep plan``'s JSON carries them."""
    from sweep.analysis.edge_lattice import expected

    tune = plan.space.tune
    selection = len(tune.rates()) * len(tune.selection_seeds) if tune is not None else 0
    return {
        case: {"trials": cost.total, "waves": cost.waves,
               "gpu_hours": cost.device_s / 3600 if cost.device_s is not None else None,
               # with `tune:`, every config trained first runs its selection runs (sweep/run/edge.py)
               **({"tuned_trials": cost.total + selection * len(cost.trials)} if tune is not None else {})}
        for case, cost in expected(plan, train_s).items()
    }  # fmt: skip


def edge_plan_lines(plan: Plan, train_s: dict | None) -> list[str]:
    """What the edge search is expected to cost, typical and worst, beside the full grid at 3 seeds."""
    from sweep.cli.estimates import amount

    search = plan.space.search
    cases = edge_expectation(plan, train_s)
    grid = cases["grid"]

    def said(case: dict) -> str:
        hours = f", {amount(case['gpu_hours'])} GPU-hours" if case["gpu_hours"] is not None else ""
        share = f" ({case['trials'] / grid['trials']:.0%} of the grid's trials)" if case is not grid else ""
        return f"{plural(case['trials'], 'trial')} in {plural(case['waves'], 'wave')}{hours}{share}"

    tuned = []
    if plan.space.tune is not None:
        tune = plan.space.tune
        tuned = [f"  learning rate tuned: each config it trains first runs its {len(tune.rates())} rates × "
                 f"{plural(len(tune.selection_seeds), 'selection seed')}: typical {cases['typical']['tuned_trials']} "
                 f"trials, worst {cases['worst']['tuned_trials']}, the tuned full grid at 3 seeds "
                 f"{grid['tuned_trials']} (selection runs included)"]  # fmt: skip
    return [
        f"edge search over these {plural(len(plan.configs), 'config')}: {search.min_seeds} to {search.max_seeds} "
        f"seeds a config, {search.baseline_seeds} for the baseline, alpha {search.alpha:g}"
        + (f", at most {plural(search.max_trials, 'trial')}" if search.max_trials else ""),
        f"  typical: {said(cases['typical'])}; worst: {said(cases['worst'])}; the full grid at 3 seeds: {said(grid)}",
        "  typical: a noise-free lattice whose edge sits mid-column, every config settling at min_seeds"
        + (" (and each column's implied ends measured: check_ends)" if search.check_ends else "")
        + "; worst: every config "
        + ("" if search.check_ends else "not implied by the baseline ")
        + "measured to max_seeds; a wave: the trials proposed together "
        "(all at once given enough devices)" + ("" if train_s else "; GPU-hours with --gpu NAME"),
        *tuned,
    ]


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
    with its ``why:`` too; ``--names``: only the names (with ``--profile P``, of the spaces defining P).

    A personal space that shadows another of the same name says so. A file that cannot be read as a space
    (bad YAML, an ``extends:`` that names nothing) is listed with its first problem, the others as usual,
    and the command ends with one line naming the bad files and exit code 2."""
    from sweep.space.loader import find_space, space_files

    files = space_files()
    if args.name is not None:
        path = find_space(args.name)
        files = {path.stem: [path, *[p for p in files.get(path.stem, []) if p != path]]}
    bad: list[str] = []
    for name, (path, *shadowed) in files.items():
        raw, problem = space_raw(path)
        if raw is None:
            bad.append(display_path_of(path))
            if not args.names:
                print(f"{name}  ({display_path_of(path)})\n    not a valid space: {problem}")
            continue
        if args.names:  # for scripts: `for space in $(sweep spaces --names --profile smoke)`
            if args.profile is None or args.profile in (raw.get("profiles") or {}):
                print(name)
            continue
        print_space(name, path, raw, shadowed, why=args.name is not None)
    if args.name is None and not args.names:
        from workers.families import FAMILY_DESCRIPTIONS  # not the families' modules: no timm, no transformers

        print("\nmodel families (model.family):")
        for family, description in FAMILY_DESCRIPTIONS.items():
            print(f"  {family:6s} {description}")
    if bad:
        print(f"error: {plural(len(bad), 'space file')} could not be read ({', '.join(bad)}); the others are listed; "
              f"`sweep validate {bad[0]}` shows every problem", file=sys.stderr)  # fmt: skip
        return 2
    return 0


def display_path_of(path: Path) -> str:
    from sweep.space.loader import display_path

    return display_path(path)


def space_raw(path: Path) -> tuple[dict | None, str]:
    """The space file's keys with its recipes laid under them, or None and the first problem in one line."""
    from sweep.errors import SpaceError
    from sweep.space.loader import read_yaml, with_recipes

    try:
        raw = with_recipes(read_yaml(path), path)
    except SpaceError as exc:
        first = exc.issues[0] if exc.issues else None
        return None, str(first).strip() if first else str(exc)
    if not isinstance(raw.get("profiles") or {}, dict):
        return None, f"{display_path_of(path)}: profiles: must be a mapping of profile names"
    return raw, ""


def print_space(name: str, path: Path, raw: dict, shadowed: list[Path], why: bool) -> None:
    """One space: name and file, what it shadows, its question (and ``why:``), and its profiles."""
    from sweep.space.loader import package_spaces_dir

    print(f"{name}  ({display_path_of(path)})")
    shipped = package_spaces_dir().resolve()
    for other in shadowed:
        whose = "the shipped space" if other.resolve().parent == shipped else "the space"
        print(f"    shadows {whose} {name} ({display_path_of(other)}); `extends: {name}` starts from it")
    print(textwrap.fill(" ".join(str(raw.get("question", "")).split()), 110, initial_indent="    ",
                        subsequent_indent="    "))  # fmt: skip
    if why and raw.get("why"):
        print(textwrap.fill("why: " + " ".join(str(raw["why"]).split()), 110, initial_indent="    ",
                            subsequent_indent="    "))  # fmt: skip
    profiles = raw.get("profiles") or {}
    default = raw.get("default_profile")
    print(f"    profiles{f' (default: {default})' if default else ''}:" if profiles else "    profiles: none")
    for profile, body in profiles.items():
        body = body if isinstance(body, dict) else {}
        description = " ".join(str(body.get("description") or "(no description)").split())
        print(textwrap.fill(f"{profile}: {description}", 110, initial_indent="      ", subsequent_indent="        "))


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
