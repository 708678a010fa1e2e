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
from sweep.cli.results import render
from sweep.cli.run import load_plan


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


def estimate_cells(row: dict) -> dict:
    """The estimate columns as the table shows them: GiB, fits yes/NO, hours per trial."""
    if "est_peak_mem_bytes" not in row:
        return {}
    time_s = row["est_train_s"]
    return {
        "est_peak_mem_bytes": f"{row['est_peak_mem_bytes'] / 2**30:.2f} GiB",
        "fits": "yes" if row["fits"] else "NO",
        "est_train_s": f"{time_s / 3600:.3g} h" if time_s is not None else "?",
    }


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


def print_plan_json(plan: Plan, rows: list[dict], removed: list[dict], estimate: dict | None = None) -> None:
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
                **({"estimate": estimate} if estimate is not None else {}),
            },
            indent=2,
        )
    )


def print_plan_header(plan: Plan, rows: list[dict]) -> None:
    from sweep.metrics import direction_words, tolerance_unit

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


def estimate_settings(args) -> dict | None:
    """The GPU, MFU and price the estimates use (None when no GPU was named): ``--gpu`` from the table, or
    ``--gpu-memory-gib`` and ``--gpu-tflops``; the MFU from ``--mfu-from`` (a gpu-check JSON), ``--mfu``, or
    the stated default."""
    from sweep.errors import UsageError
    from sweep.plan import estimate

    explicit = args.gpu_memory_gib is not None or args.gpu_tflops is not None
    if args.gpu is None and not explicit:
        return None
    if args.gpu is not None and explicit:
        raise UsageError("give either --gpu NAME or --gpu-memory-gib with --gpu-tflops, not both")
    try:
        if args.gpu is not None:
            gpu = estimate.gpu_named(args.gpu)
        elif args.gpu_memory_gib is None or args.gpu_tflops is None:
            raise ValueError("--gpu-memory-gib and --gpu-tflops go together: give both (or --gpu NAME)")
        else:
            gpu = estimate.Gpu("custom", int(args.gpu_memory_gib * estimate.GIB), args.gpu_tflops * 1e12, "--gpu-*")
        if args.mfu_from is not None:
            mfu, source = (
                estimate.mfu_from_gpu_check(json.loads(args.mfu_from.read_text()), gpu.bf16_flops_per_s),
                str(args.mfu_from),
            )
        elif args.mfu is not None:
            mfu, source = args.mfu, "--mfu"
        else:
            mfu, source = estimate.DEFAULT_MFU, "assumed"
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from None
    return {"gpu": gpu, "mfu": mfu, "mfu_source": source, "price": args.price_per_gpu_hour,
            "train_samples": args.train_samples}  # fmt: skip


def estimate_rows(plan: Plan, settings: dict) -> list[dict]:
    """Per config: estimated peak memory of a training step on the GPU, whether it fits, and the training
    time of one trial (``sweep/plan/estimate.py`` defines both)."""
    from sweep.plan import estimate

    gpu = settings["gpu"]
    rows = []
    for config in plan.configs:
        peak = estimate.peak_memory_bytes(config, plan.space)
        time_s = estimate.train_time_s(config, plan.space, gpu.bf16_flops_per_s, settings["mfu"],
                                       settings["train_samples"])  # fmt: skip
        rows.append({"config_id": config.config_id, "est_peak_mem_bytes": peak,
                     "fits": peak <= gpu.memory_bytes, "est_train_s": time_s})  # fmt: skip
    return rows


def trial_counts(plan: Plan) -> dict[str, float]:
    """Trials per config id: seeds per config on a grid (or the planned pairs); Optuna draws its trials from
    the configs, so each counts num_trials ÷ configs (its totals are an average over the configs)."""
    if plan.pairs is not None:
        counts: dict[str, float] = {}
        for config, _ in plan.pairs:
            counts[config.config_id] = counts.get(config.config_id, 0) + 1
        return counts
    if plan.space.search.kind == "grid":
        return {c.config_id: len(plan.seeds) for c in plan.configs}
    return {c.config_id: plan.space.search.num_trials / len(plan.configs) for c in plan.configs}


def estimate_totals(plan: Plan, rows: list[dict], settings: dict) -> dict:
    """GPU-hours over every trial (one GPU each), the cost at the price when given, and the trials that do not fit."""
    counts = trial_counts(plan)
    known = all(r["est_train_s"] is not None for r in rows)
    hours = sum(counts.get(r["config_id"], 0) * r["est_train_s"] for r in rows) / 3600 if known else None
    price = settings["price"]
    gpu = settings["gpu"]
    return {
        "gpu": gpu.name, "gpu_memory_bytes": gpu.memory_bytes, "gpu_bf16_flops_per_s": gpu.bf16_flops_per_s,
        "mfu": settings["mfu"], "mfu_source": settings["mfu_source"], "gpu_hours": hours,
        "price_per_gpu_hour": price, "cost": hours * price if hours is not None and price is not None else None,
        "not_fitting": [r["config_id"] for r in rows if not r["fits"]],
    }  # fmt: skip


def print_not_fitting(plan: Plan, rows: list[dict], totals: dict) -> None:
    """The warning that comes first: the configs whose training step is estimated not to fit the GPU."""
    misfits = [r for r in rows if not r["fits"]]
    if not misfits:
        return
    print(f"WARNING: {plural(len(misfits), 'config')} predicted not to fit {totals['gpu']} "
          f"({totals['gpu_memory_bytes'] / 2**30:.1f} GiB) at batch {plan.space.train.batch_size}:")  # fmt: skip
    for row in misfits:
        print(f"  {row['config_id']}: {row['est_peak_mem_bytes'] / 2**30:.1f} GiB")


def amount(value: float) -> str:
    """Two decimals from 1 up (1,614.82), three significant digits below (0.00412), so small sweeps show a figure."""
    return f"{value:,.2f}" if value >= 1 else f"{value:.3g}"


def print_estimate_totals(plan: Plan, totals: dict) -> None:
    """The totals line: GPU-hours over every trial and the cost, or why the hours are unknown."""
    hours, cost = totals["gpu_hours"], totals["cost"]
    priced = f", {amount(cost)} at {totals['price_per_gpu_hour']:g} per GPU-hour" if cost is not None else ""
    unknown = "GPU-hours unknown: the training split's size is not known before reading it (give --train-samples N)"
    spent = f"{amount(hours)} GPU-hours{priced}" if hours is not None else unknown
    print(f"estimate on {totals['gpu']} at MFU {totals['mfu']:.3f} ({totals['mfu_source']}), training steps only: "
          f"{spent}; peak memory at batch {plan.space.train.batch_size} (sweep/plan/estimate.py)")  # fmt: skip


def with_estimates(rows: list[dict], estimates: list[dict]) -> list[dict]:
    by_id = {e["config_id"]: e for e in estimates}
    return [{**row, **{k: v for k, v in by_id[row["config_id"]].items() if k != "config_id"}} for row in rows]


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
