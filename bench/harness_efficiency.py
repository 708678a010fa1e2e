"""Harness efficiency: training throughput through the trial code vs. a bare PyTorch loop.

What is measured, side by side in one process:

- **trial**: ``workers.trial.run_trial(config)`` on a small ViT and the embedded digits, with the default
  probe settings (κ every epoch, evaluation every epoch, memory/throughput/latency probes at the end), and
  the record's ``train_samples_per_s``: steady-state training samples per second that the trial measures
  itself (first ``throughput_warmup_steps`` steps excluded, device synchronised at both ends of each
  epoch's window; evaluation and probes fall outside the window).
- **bare**: the same model (``workers.models.build_model``), batch size, device, precision, thread count,
  global torch settings and data tensors (``workers.data.batches.TensorBatches``), trained by a minimal loop: plain
  ``AdamW``, ``CrossEntropyLoss(label_smoothing=0.1)``, gradient clipping; no schedule, no loss
  bookkeeping, no divergence checks. Timed like the trial's window (same warm-up steps, per-epoch windows).

The two are interleaved so that noise on a shared machine hits both alike. By default (``--interleave
epoch``) each round is one trial, and after each of its epochs the trial's ``on_epoch`` callback (the hook
the sweep uses to report to Ray Tune; it runs outside the trial's timed window) trains one epoch of the
bare loop. The trial's own per-epoch window (the ``EpochStats`` its ``train_one_epoch`` returns, observed
by a pass-through wrapper) is paired with the bare epoch that follows it, a second or so later; the
headline figure is the median over all epochs of all rounds of the per-epoch ratio trial / bare, which
a burst of load on the machine moves far less than a ratio of whole runs. Also printed: the medians over
rounds of the trial's ``record["train_samples_per_s"]`` and of the bare loop's samples/s, and their ratio.
``--interleave run`` alternates whole trial and whole bare runs instead (ABBA order) and reports the
ratio of the medians.

Target: harness efficiency >= 0.95 (the trial code costs at most 5% of training throughput).

    .venv/bin/python bench/harness_efficiency.py      # CPU, 2 threads: ~2 min on a quiet 2-core machine
    .venv/bin/python bench/harness_efficiency.py --rounds 5 --json /tmp/harness.json
    .venv/bin/python bench/harness_efficiency.py --device cuda --epochs 40
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch
from common import add_trial_options, trial_config
from torch import nn

import workers.trial
from workers.config import ModelSpec, ProbeSpec, TrainSpec
from workers.data.batches import TensorBatches
from workers.data.registry import data_spec, load_arrays
from workers.devices import resolve_device, synchronize
from workers.models import build_model
from workers.train import autocast_for, seed_everything

TARGET = 0.95


def harness_trial_config(args: argparse.Namespace) -> dict:
    return trial_config(args, amp_bf16=not args.no_amp, deterministic=not args.nondeterministic)


class BareLoop:
    """The bare loop: same model, batch, device, precision and data as the trial, nothing else.

    :meth:`epoch` trains one epoch and returns (timed samples, timed seconds), timed like the trial's
    window: the first ``warmup_steps`` steps of the first epoch are left out, and each epoch's window
    starts after synchronising at its first timed step and ends synchronised after its last.
    """

    def __init__(self, config: dict, arrays, warmup_steps: int):
        self.train = TrainSpec.model_validate(config["train"])
        self.device = resolve_device(config["device"])
        torch.set_num_threads(config["threads"])
        # The same global torch settings as the trial (seeding, deterministic-algorithms switch).
        seed_everything(config["seed"], self.train.deterministic)
        self.data = TensorBatches(arrays, data_spec(name="digits"), self.device)
        spec = workers.trial.spec_for_data(ModelSpec.model_validate(config["model"]), self.data.meta)
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
            if train.grad_clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip_norm)
            optimizer.step()
            if start is not None:
                samples += len(labels)
        synchronize(self.device)
        self.warmup_left = 0
        return samples, (time.perf_counter() - start if start is not None else 0.0)

    def run(self, epochs: int) -> float:
        """samples/s over ``epochs`` epochs."""
        samples, seconds = 0, 0.0
        for _ in range(epochs):
            epoch_samples, epoch_seconds = self.epoch()
            samples += epoch_samples
            seconds += epoch_seconds
        return samples / seconds


@dataclass
class RoundResult:
    trial_rate: float  # record["train_samples_per_s"]
    bare_rate: float
    epoch_ratios: list[float] = field(default_factory=list)  # paired per-epoch trial/bare (epoch mode)


def run_trial_checked(config: dict, arrays, on_epoch=None) -> float:
    record = workers.trial.run_trial(config, arrays=arrays, on_epoch=on_epoch)
    if record["status"] != "ok":
        raise SystemExit(f"trial failed ({record['status']}): {record['error']}")
    return record["train_samples_per_s"]


def run_round_epoch_interleaved(config: dict, arrays, warmup_steps: int) -> RoundResult:
    """One trial; after each of its epochs, one bare epoch (in the trial's on_epoch callback)."""
    loop = BareLoop(config, arrays, warmup_steps)
    trial_epochs: list[tuple[int, float]] = []
    bare_epochs: list[tuple[int, float]] = []
    original = workers.trial.train_one_epoch

    def observed_train_one_epoch(*args, **kwargs):
        # Pass-through: the trial's own EpochStats, kept so each epoch can be paired with a bare one.
        stats = original(*args, **kwargs)
        trial_epochs.append((stats.timed_samples, stats.timed_s))
        return stats

    def bare_epoch(*_callback_args) -> None:  # (row, kappa_rows[, state]): unused
        bare_epochs.append(loop.epoch())

    workers.trial.train_one_epoch = observed_train_one_epoch
    try:
        trial_rate = run_trial_checked(config, arrays, on_epoch=bare_epoch)
    finally:
        workers.trial.train_one_epoch = original
    if len(trial_epochs) != len(bare_epochs):
        # The trial no longer calls workers.trial.train_one_epoch per epoch: no pairs, whole-round ratio only.
        print(
            f"warning: observed {len(trial_epochs)} trial epochs for {len(bare_epochs)} bare epochs; "
            "per-epoch pairing skipped",
            file=sys.stderr,
        )
        trial_epochs = []
    ratios = [
        (ts / tt) / (bs / bt)
        for (ts, tt), (bs, bt) in zip(trial_epochs, bare_epochs, strict=False)
        if tt > 0 and bt > 0 and ts > 0 and bs > 0
    ]
    bare_rate = sum(s for s, _ in bare_epochs) / sum(t for _, t in bare_epochs)
    return RoundResult(trial_rate, bare_rate, ratios)


def run_round_whole_runs(config: dict, arrays, epochs: int, warmup_steps: int, index: int) -> RoundResult:
    """A whole trial and a whole bare run; bare first on odd rounds (ABBA)."""
    if index % 2 == 0:
        trial_rate = run_trial_checked(config, arrays)
        bare_rate = BareLoop(config, arrays, warmup_steps).run(epochs)
    else:
        bare_rate = BareLoop(config, arrays, warmup_steps).run(epochs)
        trial_rate = run_trial_checked(config, arrays)
    return RoundResult(trial_rate, bare_rate)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Training throughput through workers.trial.run_trial vs. a bare PyTorch loop "
        f"(same model, batch, device, data), interleaved. Target: ratio >= {TARGET}."
    )
    parser.add_argument("--rounds", type=int, default=3, help="trial/bare rounds")
    parser.add_argument(
        "--interleave",
        choices=("epoch", "run"),
        default="epoch",
        help="epoch: a bare epoch after each trial epoch, paired per epoch (default); "
        "run: whole trial and whole bare runs alternated ABBA",
    )
    parser.add_argument(
        "--epochs", type=int, default=30, help="epochs per trial (digits: 22 steps each; 30 is the default config)"
    )
    parser.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA (both sides)")
    parser.add_argument(
        "--nondeterministic",
        action="store_true",
        help="train.deterministic=false on both sides (the default config asks for deterministic kernels)",
    )
    add_trial_options(parser)
    return parser.parse_args(argv)


def run_rounds(args, config: dict, arrays, warmup_steps: int) -> tuple[list[RoundResult], float, float]:
    """Every round, each printed as it ends; the rounds and the load average before and after."""
    load_before = os.getloadavg()[0]
    rounds: list[RoundResult] = []
    for index in range(args.rounds):
        if args.interleave == "epoch":
            result = run_round_epoch_interleaved(config, arrays, warmup_steps)
        else:
            result = run_round_whole_runs(config, arrays, args.epochs, warmup_steps, index)
        rounds.append(result)
        paired = f"   per-epoch median {statistics.median(result.epoch_ratios):.3f}" if result.epoch_ratios else ""
        print(
            f"round {index + 1}/{args.rounds}: trial {result.trial_rate:8.1f} samples/s   "
            f"bare {result.bare_rate:8.1f} samples/s   ratio {result.trial_rate / result.bare_rate:.3f}{paired}",
            flush=True,
        )
    return rounds, load_before, os.getloadavg()[0]


def summarise_rounds(rounds: list[RoundResult], load_before: float, load_after: float) -> dict:
    """Print and return the medians over rounds, the paired per-epoch ratio and the harness efficiency
    (the paired ratio's median when there are pairs, else the ratio of medians)."""
    trial_rates = [r.trial_rate for r in rounds]
    bare_rates = [r.bare_rate for r in rounds]
    trial_median = statistics.median(trial_rates)
    bare_median = statistics.median(bare_rates)
    ratio_of_medians = trial_median / bare_median
    epoch_ratios = [x for r in rounds for x in r.epoch_ratios]
    paired = statistics.median(epoch_ratios) if epoch_ratios else None
    print(
        f"median over rounds: trial {trial_median:.1f} samples/s, bare {bare_median:.1f} samples/s, "
        f"ratio {ratio_of_medians:.3f}"
    )
    if paired is not None:
        quartiles = statistics.quantiles(epoch_ratios, n=4)
        print(
            f"paired per-epoch ratio: median {paired:.3f} over {len(epoch_ratios)} epochs "
            f"(quartiles {quartiles[0]:.3f} .. {quartiles[2]:.3f})"
        )
    spread = max(bare_rates) / min(bare_rates)
    if spread > 1.2 or max(load_before, load_after) > (os.cpu_count() or 1):
        print(
            f"note: noisy machine (bare throughput varied {spread:.2f}x across rounds, load average "
            f"{load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs); rerun, or add --rounds",
            file=sys.stderr,
        )
    efficiency = paired if paired is not None else ratio_of_medians
    print(f"harness efficiency: {efficiency:.2f} (target >= {TARGET})")
    return {
        "harness_efficiency": efficiency,
        "target": TARGET,
        "estimator": "median paired per-epoch ratio" if paired is not None else "ratio of medians",
        "ratio_of_medians": ratio_of_medians,
        "paired_epoch_ratio_median": paired,
        "trial_samples_per_s": trial_rates,
        "bare_samples_per_s": bare_rates,
        "epoch_ratios": epoch_ratios,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    config = harness_trial_config(args)
    device = resolve_device(args.device)
    arrays = load_arrays(data_spec(name="digits"))
    warmup_steps = ProbeSpec().throughput_warmup_steps
    torch.set_num_threads(args.threads)
    print(
        f"device {device}, threads {args.threads}, vit depth {args.depth} heads {args.num_heads} "
        f"dim {args.embed_dim} mlp {args.mlp_dim} patch {args.patch_size}, batch {args.batch_size}, "
        f"{args.epochs} epochs x {len(arrays.y_train) // args.batch_size} steps, {args.rounds} rounds, "
        f"interleave {args.interleave}",
        flush=True,
    )
    # Untimed: first-use costs of the process (kernel selection, thread pool, allocator) hit neither side.
    BareLoop(config, arrays, warmup_steps).run(1)
    rounds, load_before, load_after = run_rounds(args, config, arrays, warmup_steps)
    summary = summarise_rounds(rounds, load_before, load_after)
    if args.json:
        extra = {
            "interleave": args.interleave,
            "load_average": [load_before, load_after],
            "device": str(device),
            "torch_version": torch.__version__,
            "config": config,
        }
        args.json.write_text(json.dumps(summary | extra, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
