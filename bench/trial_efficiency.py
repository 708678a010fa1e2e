"""Trial efficiency: the share of a trial's wall time spent training.

    efficiency = train_s ÷ wall_s

both from the trial's record: ``wall_s`` is the whole of ``run_trial`` (data, model build, FLOP count,
training, evaluation, κ, end-of-trial probes), ``train_s`` the training epochs alone. Trials run through
``workers.trial.run_trial``, the function the sweep's Ray trainable and ``trial CONFIG`` call, here
without Ray, with the data loaded once per space and passed in as the sweep's driver does. The rest of
``wall_s`` is broken down from the record:

- ``eval_s``: the per-epoch held-out evaluation;
- ``kappa_probe_s``: the κ probes (``kappa_every_epochs``, and after the last epoch);
- ``end_probes_s``: the end-of-trial probes (memory step, inference throughput, batch-1 latency, token
  latency), together bounded to ``probes.probe_time_fraction`` × ``train_s`` (default 0.02);
- setup: what is left (data views, model build, FLOP count, optimiser; a first trial in a process also
  pays torch's and timm's first calls).

Trials:

- **default space**: ``mqar_recall``'s default profile (cpu: 3,000 steps, 1 thread per trial, as ``make
  sweep`` runs it), every config, seed 0 (``--seeds 0 1 2`` for the sweep's 18 trials). The median over
  trials is the figure.
- **ViT-Ti**: depth 12, 3 heads, width 192, MLP 768, patch 4, on the embedded digits resized to 32 px
  (64 patches and a class token; nothing downloaded), ``--vit-epochs`` epochs of batch 64 with the default
  probes (κ every epoch) at ``--threads`` threads. Its held-out split is ImageNet's share of the data
  (``--vit-val-fraction``, default 50,000 of 1,331,167 images: 3.8%, 68 of the 1,797 digits), evaluated
  after every epoch as DeiT's recipe does (``--vit-eval-every``): per epoch, evaluation then costs
  what it costs at paper scale beside training. (At digits' own 20%, evaluating every epoch costs about
  7% of the training time by itself: the forward pass of a fifth as many samples; that is the data's
  split, not the harness, and ``train.eval_every_epochs`` is the knob for it.)

Trial length matters for one part: the end-of-trial probes have a floor (one memory step, and an inference
probe's warm-up pass and one timed pass) that their 2% share covers only in a trial of about 50 × that
floor. For this ViT-Ti on 2 CPU threads the floor is about 2 s, so a trial of at least about 100 s of
training (the default 6 epochs: 162 steps, about 3 minutes); at paper scale (300 ImageNet epochs) it is a
rounding error. ``--vit-epochs 3`` shows the short-trial figure.

Target: >= 0.95 for each. ``--unbounded`` runs the end-of-trial probes at their maximum counts (no time
bound, as before ``probe_time_fraction`` existed), for comparison.

    .venv/bin/python bench/trial_efficiency.py                 # ~10 min on a quiet 2-core machine
    .venv/bin/python bench/trial_efficiency.py --configs 2 --vit-epochs 1 --json /tmp/trial_efficiency.json
    .venv/bin/python bench/trial_efficiency.py --unbounded      # the probes without a time bound
    .venv/bin/python bench/trial_efficiency.py --no-space --vit-val-fraction 0.2 --vit-eval-every 5
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

import torch

from sweep.plan.plan import make_plan, worker_config
from sweep.space.loader import load_space
from workers.data.registry import data_spec, load_arrays
from workers.trial import run_trial

TARGET = 0.95
PARTS = ("train_s", "eval_s", "kappa_probe_s", "end_probes_s")
VIT_TI = {"family": "vit", "depth": 12, "num_heads": 3, "embed_dim": 192, "mlp_dim": 768, "patch_size": 4}
VIT_DATA = {"name": "digits", "img_size": 32}
# ImageNet-1k's held-out share of its labelled images: 50,000 validation of 1,281,167 + 50,000.
IMAGENET_VAL_FRACTION = 50_000 / 1_331_167


def breakdown(record: dict) -> dict:
    """The record's wall seconds split into its parts (module docstring), and the efficiency."""
    parts = {name: record.get(name) or 0.0 for name in PARTS}
    return {
        "wall_s": record["wall_s"],
        **parts,
        "setup_s": record["wall_s"] - sum(parts.values()),
        "efficiency": record["train_s"] / record["wall_s"],
    }


def run(label: str, config: dict, arrays) -> dict:
    record = run_trial(config, arrays=arrays)
    if record["status"] != "ok":
        raise SystemExit(f"{label}: trial failed ({record['status']}): {record['error']}")
    row = {"trial": label, **breakdown(record)}
    wall = row["wall_s"]
    print(
        f"{label:<36} wall {wall:7.2f} s  train {row['train_s']:7.2f}  eval {row['eval_s']:5.2f} "
        f"({row['eval_s'] / wall:.1%})  κ {row['kappa_probe_s']:5.2f} ({row['kappa_probe_s'] / wall:.1%})  "
        f"end probes {row['end_probes_s']:5.2f} ({row['end_probes_s'] / wall:.1%})  "
        f"setup {row['setup_s']:5.2f} ({row['setup_s'] / wall:.1%})  -> {row['efficiency']:.3f}",
        flush=True,
    )
    return row


def space_rows(args: argparse.Namespace) -> list[dict]:
    """The default space's trials (module docstring), one row each."""
    name, space, profile = load_space(args.space, args.profile)
    plan = make_plan(name, space, profile)
    arrays = load_arrays(space.data)
    rows = []
    for planned in plan.configs[: args.configs]:
        for seed in args.seeds:
            config = with_probes(worker_config(space, planned.model, seed), args)
            if args.max_steps:
                config["train"]["max_steps"] = args.max_steps
            shape = planned.shape
            rows.append(run(f"{name} d{shape.depth} h{shape.num_heads} s{seed}", config, arrays))
    return rows


def vit_ti_row(args: argparse.Namespace) -> dict:
    data = {**VIT_DATA, "val_fraction": args.vit_val_fraction}
    config = {
        "model": VIT_TI,
        "data": data,
        "train": {
            "epochs": args.vit_epochs,
            "batch_size": 64,
            "warmup_steps": 10,
            "eval_every_epochs": args.vit_eval_every,
        },
        "probes": {},
        "seed": 0,
        "device": args.device,
        "threads": args.threads,
    }
    arrays = load_arrays(data_spec(**data))
    label = f"ViT-Ti 32px {args.vit_epochs} ep, val {args.vit_val_fraction:.1%}"
    return run(label, with_probes(config, args), arrays)


def with_probes(config: dict, args: argparse.Namespace) -> dict:
    if args.unbounded:
        config["probes"] = {**config["probes"], "probe_time_fraction": None}
    return config


def summary(label: str, rows: list[dict]) -> dict:
    ratios = [row["efficiency"] for row in rows]
    median = statistics.median(ratios)
    print(
        f"{label}: median train_s/wall_s {median:.3f} over {len(rows)} trial(s) "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target >= {TARGET}"
    )
    return {"median": median, "min": min(ratios), "max": max(ratios), "trials": rows}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="mqar_recall", help="the default space (make sweep's)")
    parser.add_argument("--profile", help="the space's profile (default: its default_profile)")
    parser.add_argument("--configs", type=int, help="only the first N configs of the plan")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-steps", type=int, help="shorten the space's trials (then not its figure)")
    parser.add_argument("--vit-epochs", type=int, default=6, help="ViT-Ti epochs (27 steps each at 3.8%% held out)")
    parser.add_argument(
        "--vit-val-fraction", type=float, default=IMAGENET_VAL_FRACTION, help="ViT-Ti: digits' held-out share"
    )
    parser.add_argument("--vit-eval-every", type=int, default=1, help="ViT-Ti: train.eval_every_epochs")
    parser.add_argument("--no-vit", action="store_true", help="the default space only")
    parser.add_argument("--no-space", action="store_true", help="the ViT-Ti only")
    parser.add_argument("--unbounded", action="store_true", help="end-of-trial probes without a time bound")
    parser.add_argument("--device", default="auto", help="ViT-Ti: auto (cuda if available), cpu, cuda, cuda:N")
    parser.add_argument("--threads", type=int, default=2, help="ViT-Ti: torch CPU threads")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this path")
    parser.add_argument("--verbose", action="store_true", help="the trials' per-epoch log lines")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    print(
        f"torch {torch.__version__}; end-of-trial probes "
        f"{'unbounded' if args.unbounded else 'bounded (default probe_time_fraction)'}",
        flush=True,
    )
    figures: dict = {"target": TARGET, "unbounded": args.unbounded}
    if not args.no_space:
        figures["space"] = summary(f"default space {args.space}", space_rows(args))
    if not args.no_vit:
        figures["vit_ti"] = summary("ViT-Ti", [vit_ti_row(args)])
    headline = min(part["median"] for part in figures.values() if isinstance(part, dict))
    print(f"trial efficiency: {headline:.3f} (the lower of the figures above; target >= {TARGET})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
