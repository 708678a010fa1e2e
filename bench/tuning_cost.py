"""What a learning-rate search per config costs: the tuned sweep's device-seconds as a ratio of the untuned one's.

Runs one space through ``sweep run``, in one process, on the same machine: once to warm up (discarded), untuned
(its recipe's one rate), and with ``tune:`` (``--rates`` rates, ``--selection-seeds`` selection seeds a config,
then the verdict seeds at the chosen rate), each into its own results folder, and sums ``trials.device_s``
(wall × devices held) of each.
Prints both sums, the ratio, and what the trial counts alone predict: (rates × selection seeds + seeds) ÷ seeds,
since a rate changes no step's cost. Goal: ≤ 2× for four rates.

    .venv/bin/python bench/tuning_cost.py [--space tiny|mqar] [--rates 4] [--selection-seeds 1] [--keep DIR]

``--space tiny`` (default) is a 20-step ViT on digits (seconds a trial: start-up dominates); ``mqar`` is
``mqar_recall``'s tuned profile recipe at 300 steps (a minute or more a trial on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from pathlib import Path

from sweep.analysis.sql import run_query
from sweep.cli import main

TINY = """\
question: what does tuning cost?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1], num_heads: [2, 4]}
baseline: {depth: 1, num_heads: 4}
seeds: [0, 1, 2]
data: {name: digits, limit_val: 90}
train: {epochs: 1, max_steps: 20, batch_size: 32, warmup_steps: 0}
probes: {kappa_samples: 2, throughput_warmup_steps: 0, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1}
"""

MQAR = """\
question: what does tuning cost?
model: {family: gpt2, embed_dim: 64, mlp_dim: 256}
axes: {depth: [1, 2], num_heads: [1, 16]}
head_dim_rule: fixed_d_model
baseline: {depth: 2, num_heads: 1}
seeds: [0, 1, 2]
metric: {name: accuracy, mode: max, tolerance: 2.0}
data: {name: mqar, seq_len: 16, mqar: {vocab_size: 32, num_kv_pairs: 2, train_rows: 20000, val_rows: 500}}
train: {epochs: 1, max_steps: 300, batch_size: 32, eval_batch_size: 500, lr: 1.0e-3, warmup_steps: 30}
probes: {kappa_samples: 4, kappa_every_epochs: 0, throughput_steps: 2, latency_iters: 2}
resources: {cpus_per_trial: 1, gpus_per_trial: 0}
"""


def log_rates(count: int) -> str:
    """``count`` rates log-spaced from 1e-4 to 1e-2 (Zoology's range), as a YAML list."""
    return "[" + ", ".join(f"{10 ** (-4 + 2 * i / (count - 1)):.3g}" for i in range(count)) + "]"


def device_s(results: Path, space: str) -> tuple[float, int]:
    """The sum of ``device_s`` over the space's rows, and the row count."""
    _, rows = run_query(results, f"SELECT sum(device_s), count(*) FROM trials WHERE space = '{space}'")
    return float(rows[0][0] or 0.0), int(rows[0][1])


def run(folder: Path, name: str, text: str) -> tuple[float, int]:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    results = folder / f"results-{name}"
    code = main(["run", str(path), "--results", str(results), "--quiet"])
    if code != 0:
        sys.exit(f"sweep run {name} exited {code}")
    return device_s(results, name)


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", choices=("tiny", "mqar"), default="tiny")
    parser.add_argument("--rates", type=int, default=4)
    parser.add_argument("--selection-seeds", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="write the results here (default: a temporary folder)")
    args = parser.parse_args()
    base = TINY if args.space == "tiny" else MQAR
    seeds = [1000 + i for i in range(args.selection_seeds)]
    tuned = base + f"tune: {{lr: {log_rates(args.rates)}, selection_seeds: {seeds}}}\n"
    with contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder.mkdir(parents=True, exist_ok=True)
        run(folder, "warmup", base)  # discarded: the first sweep of a process pays the cold start (imports, caches)
        untuned_s, untuned_n = run(folder, "untuned", base)
        tuned_s, tuned_n = run(folder, "tuned", tuned)
    predicted = (args.rates * args.selection_seeds + 3) / 3
    print(f"space {args.space}: untuned {untuned_n} trials, {untuned_s:.1f} device-s; tuned ({args.rates} rates × "
          f"{args.selection_seeds} selection seed(s), then 3 verdict seeds) {tuned_n} trials, "
          f"{tuned_s:.1f} device-s")  # fmt: skip
    print(f"per trial: untuned {untuned_s / max(untuned_n, 1):.2f} device-s, tuned {tuned_s / max(tuned_n, 1):.2f}")
    ratio = tuned_s / untuned_s if untuned_s > 0 else math.nan
    print(f"tuned / untuned device-seconds: {ratio:.2f}x (trial counts predict {predicted:.2f}x; goal <= 2x)")


if __name__ == "__main__":
    main_bench()
