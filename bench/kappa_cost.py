"""κ probe cost: the share of a trial's time spent probing κ with the default probe settings.

What is measured:

- **in the trial**: ``workers.trial.run_trial(config)`` on a small ViT and the embedded digits with the
  default probe settings (``kappa_every_epochs=1``, ``kappa_samples=16``), and the record's
  ``kappa_probe_s`` (wall seconds inside ``kappa_per_layer``, summed over the trial) as a fraction of
  ``wall_s`` (the whole trial: data, build, training, evaluation, probes) and of ``train_s`` (the training
  epochs alone). With ``--trials`` > 1 the trials run one after another and the medians are reported.
- **per call**: ``workers.probes.kappa.kappa_per_layer`` timed directly on a model of the same shape and
  the default probe batch (the trial's own ``probe_images``): median wall milliseconds of ``--calls``
  calls after two untimed ones, device synchronised after each. Compared with the in-trial per-call cost
  (``kappa_probe_s`` / number of probes) and with the trial's mean training epoch (``train_s`` / epochs).

Target: κ probing costs at most 5% of the trial's wall time.

    .venv/bin/python bench/kappa_cost.py                        # CPU, 2 threads, about a minute
    .venv/bin/python bench/kappa_cost.py --trials 5 --json /tmp/kappa_cost.json
    .venv/bin/python bench/kappa_cost.py --device cuda --embed-dim 192 --depth 12
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time

import torch
from common import add_trial_options, trial_config

from workers.config import ModelSpec, ProbeSpec
from workers.data.batches import TensorBatches
from workers.data.registry import data_spec, load_arrays
from workers.devices import resolve_device, synchronize
from workers.models import build_model
from workers.probes.kappa import kappa_per_layer
from workers.train import seed_everything
from workers.trial import run_trial, spec_for_data

TARGET = 0.05


def kappa_call_ms(config: dict, arrays, calls: int) -> tuple[float, int, int]:
    """Median ms of one ``kappa_per_layer`` call on a model of the trial's shape and the default probe
    batch; also the probe batch size and the number of attention layers probed."""
    device = resolve_device(config["device"])
    torch.set_num_threads(config["threads"])
    seed_everything(config["seed"], deterministic=True)
    data = TensorBatches(arrays, data_spec(name="digits"), device)
    spec = spec_for_data(ModelSpec.model_validate(config["model"]), data.meta)
    model = build_model(spec).to(device)
    model.train()  # as in the trial: the probe switches to eval and back
    images = data.probe_images(ProbeSpec().kappa_samples)
    times = []
    rows: list[dict] = []
    for i in range(calls + 2):
        synchronize(device)
        start = time.perf_counter()
        rows = kappa_per_layer(spec, model, images)
        synchronize(device)
        if i >= 2:
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times), len(images), len(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="κ probe cost as a share of trial time, default probe settings. "
        f"Target: <= {TARGET:.0%} of the trial's wall time."
    )
    parser.add_argument("--trials", type=int, default=3, help="trials run; medians are reported")
    parser.add_argument("--epochs", type=int, default=10, help="epochs per trial (digits: 22 steps each)")
    parser.add_argument("--calls", type=int, default=20, help="direct kappa_per_layer calls timed")
    add_trial_options(parser)
    return parser.parse_args(argv)


def probe_share(record: dict) -> dict:
    """One trial's κ cost: seconds, calls, and its share of wall and training time."""
    probes = len({row["epoch"] for row in record["kappa"]})
    return {
        "wall_s": record["wall_s"],
        "train_s": record["train_s"],
        "kappa_probe_s": record["kappa_probe_s"],
        "probes": probes,
        "epochs": record["epochs_run"],
        "of_wall": record["kappa_probe_s"] / record["wall_s"],
        "of_train": record["kappa_probe_s"] / record["train_s"],
        "per_probe_ms": 1000.0 * record["kappa_probe_s"] / probes,
        "epoch_ms": 1000.0 * record["train_s"] / record["epochs_run"],
    }


def run_trials(config: dict, arrays, trials: int) -> list[dict]:
    rows = []
    for index in range(trials):
        record = run_trial(config, arrays=arrays)
        if record["status"] != "ok":
            raise SystemExit(f"trial failed ({record['status']}): {record['error']}")
        row = probe_share(record)
        rows.append(row)
        print(
            f"trial {index + 1}/{trials}: wall {row['wall_s']:.2f} s, train {row['train_s']:.2f} s, "
            f"κ probes {row['kappa_probe_s'] * 1000:.1f} ms over {row['probes']} calls "
            f"= {row['of_wall']:.2%} of wall, {row['of_train']:.2%} of train",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    config = trial_config(args)
    device = resolve_device(args.device)
    arrays = load_arrays(data_spec(name="digits"))
    torch.set_num_threads(args.threads)
    print(
        f"device {device}, threads {args.threads}, vit depth {args.depth} heads {args.num_heads} "
        f"dim {args.embed_dim} mlp {args.mlp_dim} patch {args.patch_size}, batch {args.batch_size}, "
        f"{args.epochs} epochs, {args.trials} trials, probe: {ProbeSpec().kappa_samples} images "
        f"every {ProbeSpec().kappa_every_epochs} epoch(s)",
        flush=True,
    )
    rows = run_trials(config, arrays, args.trials)
    call_ms, probe_images, layers = kappa_call_ms(config, arrays, args.calls)
    median = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    print(
        f"direct: kappa_per_layer {call_ms:.2f} ms per call ({probe_images} images, {layers} layers; "
        f"median of {args.calls}); in trial {median['per_probe_ms']:.2f} ms per call; "
        f"mean training epoch {median['epoch_ms']:.0f} ms -> {call_ms / median['epoch_ms']:.2%} per epoch"
    )
    print(
        f"median over {args.trials} trials: κ {median['kappa_probe_s'] * 1000:.1f} ms, "
        f"{median['of_train']:.2%} of train time, {median['of_wall']:.2%} of wall time"
    )
    print(f"kappa probe cost: {median['of_wall']:.1%} of trial wall time (target <= {TARGET:.0%})")
    if args.json:
        summary = {
            "kappa_fraction_of_wall": median["of_wall"],
            "kappa_fraction_of_train": median["of_train"],
            "target": TARGET,
            "kappa_call_ms_direct": call_ms,
            "kappa_call_ms_in_trial": median["per_probe_ms"],
            "train_epoch_ms": median["epoch_ms"],
            "probe_images": probe_images,
            "layers": layers,
            "trials": rows,
            "device": str(device),
            "torch_version": torch.__version__,
            "config": config,
        }
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
