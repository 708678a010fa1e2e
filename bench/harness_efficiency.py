"""Harness efficiency: training throughput through the trial code vs. a bare PyTorch loop.

What is measured, side by side in one process:

- **trial**: ``workers.trial.run_trial(config)`` on a small ViT and the embedded digits, with the default
  probe settings (κ every epoch, evaluation every epoch, memory/throughput/latency probes at the end), and
  the record's ``train_samples_per_s``: steady-state training samples per second that the trial measures
  itself (first ``throughput_warmup_steps`` steps excluded, device synchronised at both ends of each
  epoch's window; evaluation and probes fall outside the window).
- **bare**: the same model (``workers.models.build_model``), batch size, device, precision, thread count
  and data tensors (``workers.data.TensorBatches``), trained by a minimal loop: plain ``AdamW``,
  ``CrossEntropyLoss(label_smoothing=0.1)``, gradient clipping, no schedule, no loss bookkeeping, no
  divergence checks. Timed exactly like the trial's window (same warm-up steps, same per-epoch windows).

The two are interleaved so that noise on a shared machine hits both alike. By default (``--interleave
epoch``) each round is one trial, and after each of its epochs the trial's ``on_epoch`` callback (the hook
the sweep uses to report to Ray Tune; it runs outside the trial's timed window) trains one epoch of the
bare loop: both sides are sampled within the same second or two, all through the run. ``--interleave run``
alternates whole trial and whole bare runs instead (ABBA order). The result is the ratio of the medians
over ``--rounds`` rounds, trial / bare.

Target: harness efficiency >= 0.95 (the trial code costs at most 5% of training throughput).

    .venv/bin/python bench/harness_efficiency.py                    # CPU, 2 threads, ~2-3 minutes
    .venv/bin/python bench/harness_efficiency.py --device cuda --epochs 40
    .venv/bin/python bench/harness_efficiency.py --json /tmp/harness.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from workers.config import DataSpec, ModelSpec, ProbeSpec, TrainSpec
from workers.data import TensorBatches, load_arrays
from workers.models import build_model
from workers.train import autocast_for, resolve_device, seed_everything, synchronize
from workers.trial import run_trial, spec_for_data

TARGET = 0.95


def trial_config(args: argparse.Namespace) -> dict:
    """A trial config like tests/conftest.py's tiny_vit_config, at the benchmark's model size."""
    return {
        "model": {
            "family": "vit",
            "depth": args.depth,
            "num_heads": args.num_heads,
            "embed_dim": args.embed_dim,
            "mlp_dim": args.mlp_dim,
            "patch_size": args.patch_size,
        },
        "data": {"name": "digits"},
        "train": {
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "amp_bf16": not args.no_amp,
            "deterministic": not args.nondeterministic,
        },
        # Default probe settings (κ every epoch), so the real trial path is measured.
        "probes": {},
        "seed": args.seed,
        "device": args.device,
        "threads": args.threads,
    }


class BareLoop:
    """The bare loop: same model, batch, device, precision and data as the trial, nothing else.

    Built once per round; :meth:`epoch` trains one epoch and returns (timed samples, timed seconds),
    timed like the trial's window: the first ``warmup_steps`` steps of the first epoch are left out, and
    each epoch's window starts after synchronising at its first timed step and ends synchronised.
    """

    def __init__(self, config: dict, arrays, warmup_steps: int):
        self.train = TrainSpec.model_validate(config["train"])
        self.device = resolve_device(config["device"])
        torch.set_num_threads(config["threads"])
        # The same global torch settings as the trial (seeding, deterministic-algorithms switch).
        seed_everything(config["seed"], self.train.deterministic)
        self.data = TensorBatches(arrays, DataSpec(name="digits"), self.device)
        spec = spec_for_data(ModelSpec.model_validate(config["model"]), self.data.meta)
        self.model = build_model(spec).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.train.lr, weight_decay=self.train.weight_decay
        )
        self.loss_fn = nn.CrossEntropyLoss(label_smoothing=self.train.label_smoothing)
        self.generator = torch.Generator().manual_seed(config["seed"])
        self.warmup_left = warmup_steps

    def epoch(self) -> tuple[int, float]:
        model, optimizer, loss_fn, train = self.model, self.optimizer, self.loss_fn, self.train
        model.train()
        samples, start = 0, None
        for step, (images, labels) in enumerate(self.data.train_batches(train.batch_size, self.generator)):
            if step == self.warmup_left:
                synchronize(self.device)
                start = time.perf_counter()
            with autocast_for(self.device, train):
                loss = loss_fn(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip_norm)
            optimizer.step()
            if start is not None:
                samples += len(labels)
        synchronize(self.device)
        self.warmup_left = 0
        return samples, (time.perf_counter() - start if start is not None else 0.0)


def run_trial_once(config: dict, arrays, on_epoch=None) -> float:
    """samples/s the trial measured itself (record["train_samples_per_s"])."""
    record = run_trial(config, arrays=arrays, on_epoch=on_epoch)
    if record["status"] != "ok":
        raise SystemExit(f"trial failed ({record['status']}): {record['error']}")
    return record["train_samples_per_s"]


def run_bare_once(config: dict, arrays, epochs: int, warmup_steps: int) -> float:
    loop = BareLoop(config, arrays, warmup_steps)
    samples, seconds = 0, 0.0
    for _ in range(epochs):
        epoch_samples, epoch_seconds = loop.epoch()
        samples += epoch_samples
        seconds += epoch_seconds
    return samples / seconds


def run_round(config: dict, arrays, epochs: int, warmup_steps: int, interleave: str, index: int):
    """One (trial, bare) pair of samples/s.

    ``epoch``: one trial, and after each of its epochs (in the trial's ``on_epoch`` callback, outside
    its timed window) one epoch of the bare loop, so both see the machine in the same second.
    ``run``: a whole trial, then a whole bare run (reversed on odd rounds: ABBA).
    """
    if interleave == "epoch":
        loop = BareLoop(config, arrays, warmup_steps)
        totals = [0, 0.0]

        def bare_epoch(_row: dict, _kappa_rows: list[dict]) -> None:
            epoch_samples, epoch_seconds = loop.epoch()
            totals[0] += epoch_samples
            totals[1] += epoch_seconds

        trial_rate = run_trial_once(config, arrays, on_epoch=bare_epoch)
        return trial_rate, totals[0] / totals[1]
    if index % 2 == 0:
        trial_rate = run_trial_once(config, arrays)
        return trial_rate, run_bare_once(config, arrays, epochs, warmup_steps)
    bare_rate = run_bare_once(config, arrays, epochs, warmup_steps)
    return run_trial_once(config, arrays), bare_rate


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Training throughput through workers.trial.run_trial vs. a bare PyTorch loop "
        f"(same model, batch, device, data), interleaved. Target: ratio >= {TARGET}."
    )
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads, the same for both")
    parser.add_argument("--rounds", type=int, default=3, help="trial/bare pairs; the result is the medians")
    parser.add_argument(
        "--interleave",
        choices=("epoch", "run"),
        default="epoch",
        help="epoch: a bare epoch after each trial epoch (in the trial's on_epoch callback); "
        "run: whole trial and whole bare runs alternated ABBA",
    )
    parser.add_argument("--epochs", type=int, default=20, help="epochs per run (digits: 22 steps each)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--mlp-dim", type=int, default=128)
    parser.add_argument("--patch-size", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA (both sides)")
    parser.add_argument(
        "--nondeterministic",
        action="store_true",
        help="train.deterministic=false (both sides; the default config asks for deterministic kernels)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this path")
    parser.add_argument("--verbose", action="store_true", help="the trial's per-epoch log lines")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    config = trial_config(args)
    device = resolve_device(args.device)
    arrays = load_arrays(DataSpec(name="digits"))
    warmup_steps = ProbeSpec().throughput_warmup_steps
    torch.set_num_threads(args.threads)
    print(
        f"device {device}, threads {args.threads}, model vit depth {args.depth} heads {args.num_heads} "
        f"dim {args.embed_dim} mlp {args.mlp_dim} patch {args.patch_size}, batch {args.batch_size}, "
        f"{args.epochs} epochs x {len(arrays.y_train) // args.batch_size} steps, {args.rounds} rounds",
        flush=True,
    )
    # Untimed: first-use costs of the process (kernel selection, thread pool, allocator) hit neither side.
    run_bare_once(config, arrays, 1, warmup_steps)

    load_before = os.getloadavg()[0]
    trial_rates: list[float] = []
    bare_rates: list[float] = []
    for index in range(args.rounds):
        trial_rate, bare_rate = run_round(config, arrays, args.epochs, warmup_steps, args.interleave, index)
        trial_rates.append(trial_rate)
        bare_rates.append(bare_rate)
        print(
            f"round {index + 1}/{args.rounds}: trial {trial_rate:8.1f} samples/s   "
            f"bare {bare_rate:8.1f} samples/s   ratio {trial_rate / bare_rate:.3f}",
            flush=True,
        )
    load_after = os.getloadavg()[0]

    trial_median = statistics.median(trial_rates)
    bare_median = statistics.median(bare_rates)
    ratio = trial_median / bare_median
    round_ratios = [t / b for t, b in zip(trial_rates, bare_rates, strict=True)]
    spread = max(bare_rates) / min(bare_rates)
    print(
        f"median: trial {trial_median:.1f} samples/s, bare {bare_median:.1f} samples/s; "
        f"per-round ratios {', '.join(f'{r:.3f}' for r in round_ratios)}"
    )
    if spread > 1.2 or max(load_before, load_after) > os.cpu_count():
        print(
            f"note: noisy machine (bare throughput varied {spread:.2f}x across rounds, load average "
            f"{load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs); rerun with more --rounds",
            file=sys.stderr,
        )
    print(f"harness efficiency: {ratio:.2f} (target >= {TARGET})")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "harness_efficiency": ratio,
                    "target": TARGET,
                    "trial_samples_per_s": trial_rates,
                    "bare_samples_per_s": bare_rates,
                    "trial_median": trial_median,
                    "bare_median": bare_median,
                    "round_ratios": round_ratios,
                    "interleave": args.interleave,
                    "load_average": [load_before, load_after],
                    "device": str(device),
                    "torch_version": torch.__version__,
                    "config": config,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
