"""What a sweep will cost, for ``sweep plan --gpu`` and ``sweep preflight --gpu``: the GPU, MFU and price the
options name, each config's estimated peak memory and training time (``sweep/plan/estimate.py`` defines
both), the totals in GPU-hours and cost, and the configs that will not fit."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sweep.text import duration_words, plural, size_words

if TYPE_CHECKING:
    from sweep.plan.plan import Plan


def estimate_cells(row: dict) -> dict:
    """The estimate columns as the table shows them: GiB, fits yes/NO, hours per trial."""
    if "est_peak_mem_bytes" not in row:
        return {}
    time_s = row["est_train_s"]
    return {
        "est_peak_mem_bytes": size_words(row["est_peak_mem_bytes"]),
        "fits": "yes" if row["fits"] else "NO",
        "est_train_s": duration_words(time_s) if time_s is not None else "?",
    }


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
    the configs, so each counts num_trials ÷ configs (its totals are an average over the configs); an edge search,
    its typical case."""
    if plan.pairs is not None:
        counts: dict[str, float] = {}
        for config, _ in plan.pairs:
            counts[config.config_id] = counts.get(config.config_id, 0) + 1
        return counts
    if plan.space.search.kind == "grid":
        return {c.config_id: len(plan.seeds) for c in plan.configs}
    if plan.space.search.kind == "edge":  # its typical case (sweep/analysis/edge_lattice.py)
        from sweep.analysis.edge_lattice import expected

        return expected(plan)["typical"].trials
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
        "tuned_gpu_hours": tuned_hours(plan, rows) if known else None,
    }  # fmt: skip


def tuned_hours(plan: Plan, rows: list[dict]) -> float | None:
    """A ``tune:`` space's GPU-hours with its learning-rate search: per config trained, its rates × selection seeds
    plus its verdict trials, each at the config's training time (the rate changes no step's cost); None for an
    untuned space. The configs trained and their verdict trials: a grid's, every config at its seeds; an edge
    search's typical case (``trial_counts``; each config it trains is tuned first); an Optuna search's, num_trials
    configs at the space's seeds, each config counting num_trials ÷ configs of them (as ``trial_counts``)."""
    tune = plan.space.tune
    if tune is None:
        return None
    selection = len(tune.rates()) * len(tune.selection_seeds)
    search = plan.space.search
    if search.kind == "edge":
        runs = {config_id: count + selection for config_id, count in trial_counts(plan).items()}
    else:
        share = min(1.0, search.num_trials / len(plan.configs)) if search.kind == "optuna" else 1.0
        runs = {c.config_id: share * (selection + len(plan.seeds)) for c in plan.configs}
    return sum(runs.get(r["config_id"], 0) * r["est_train_s"] for r in rows) / 3600


def print_not_fitting(plan: Plan, rows: list[dict], totals: dict) -> None:
    """The warning that comes first: the configs whose training step is estimated not to fit the GPU."""
    misfits = [r for r in rows if not r["fits"]]
    if not misfits:
        return
    print(f"WARNING: {plural(len(misfits), 'config')} predicted not to fit {totals['gpu']} "
          f"({size_words(totals['gpu_memory_bytes'])}) at batch {plan.space.train.batch_size}:")  # fmt: skip
    for row in misfits:
        print(f"  {row['config_id']}: {size_words(row['est_peak_mem_bytes'])}")


def amount(value: float) -> str:
    """Two decimals from 1 up (1,614.82), three significant digits below (0.00412), so small sweeps show a figure."""
    return f"{value:,.2f}" if value >= 1 else f"{value:.3g}"


def print_estimate_totals(plan: Plan, totals: dict) -> None:
    """The totals line: GPU-hours over every trial and the cost, or why the hours are unknown."""
    hours, cost = totals["gpu_hours"], totals["cost"]
    priced = f", {amount(cost)} at {totals['price_per_gpu_hour']:g} per GPU-hour" if cost is not None else ""
    unknown = "GPU-hours unknown: the training split's size is not known before reading it (give --train-samples N)"
    tiny = f" (= {duration_words(hours * 3600)} of GPU time)" if hours is not None and hours < 0.01 else ""
    spent = f"{amount(hours)} GPU-hours{priced}{tiny}" if hours is not None else unknown
    if totals.get("tuned_gpu_hours") is not None:
        tune = plan.space.tune
        spent += (f" untuned, {amount(totals['tuned_gpu_hours'])} tuned ({len(tune.rates())} rates × "
                  f"{plural(len(tune.selection_seeds), 'selection seed')} a config first)")  # fmt: skip
    if plan.space.search.kind == "edge":
        spent += " (the edge search's typical case; its worst and the full grid's below)"
    print(f"estimate on {totals['gpu']} at MFU {totals['mfu']:.3f} ({totals['mfu_source']}), training steps only: "
          f"{spent}; peak memory at batch {plan.space.train.batch_size} (sweep/plan/estimate.py)")  # fmt: skip


def with_estimates(rows: list[dict], estimates: list[dict]) -> list[dict]:
    by_id = {e["config_id"]: e for e in estimates}
    return [{**row, **{k: v for k, v in by_id[row["config_id"]].items() if k != "config_id"}} for row in rows]
