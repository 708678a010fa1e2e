"""`sweep plan --gpu`'s estimates against measurements on this CPU: training time and peak memory.

For the baseline config of a few shipped spaces' CPU and smoke profiles, one real trial (``workers.trial.run_trial``,
float32 on CPU, ``--epochs`` epochs) is run and compared with ``sweep/plan/estimate.py``:

- time: ``train_time_s`` with this machine's measured float32 matmul rate (``torch.matmul`` of n×n
  matrices, 2n³ FLOPs each, at the trial's thread count) as the peak and MFU 1, ÷ the trial's ``train_s``
  (wall seconds of its training epochs). At MFU 1 the ratio is the utilisation the trial achieved: a GPU
  estimate at an MFU m is right when the run reaches m of the peak, so this prints what m a CPU run reaches.
  "steady state": the same from the trial's ``train_samples_per_s`` (after warm-up), without first steps.
- memory: ``peak_memory_bytes(device="cpu")`` (float32) ÷ the trial's ``peak_mem_bytes`` (the memory probe's
  CPU measurement, which agrees with a whole-process measurement within 10%: tests/workers/probes/
  test_probes_truth.py). Within that tolerance is the target.

    .venv/bin/python bench/estimate_calibration.py                 # 6 spaces, 1 epoch each: ~1 min, 1 thread
    .venv/bin/python bench/estimate_calibration.py --spaces local_digits:quick --epochs 2
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from sweep.plan import estimate
from sweep.plan.plan import make_plan, worker_config
from sweep.space.loader import load_space_with_notes
from workers.trial import run_trial

SPACES = (
    "local_digits:quick,vit_b_fixed_mlp:cpu,vit_b_fixed_mlp:smoke,xcit_m:smoke,mqar_recall:smoke,gpt2_tinystories:smoke"
)


def matmul_flops_per_s(threads: int, n: int = 1024, repeats: int = 20) -> float:
    """Float32 matmul FLOP/s at ``threads`` threads: the best of ``repeats`` n×n products (2n³ FLOPs each)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)  # warm-up
    best_s = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        best_s = min(best_s, time.perf_counter() - start)
    return 2 * n**3 / best_s


def calibrate(space_name: str, profile: str, epochs: int, peak_flops: float, threads: int) -> dict:
    name, space, profile, _ = load_space_with_notes(space_name, profile)
    space = space.model_copy(update={"train": space.train.model_copy(update={"epochs": epochs, "max_steps": None})})
    plan = make_plan(name, space, profile, seeds=[0])
    config = plan.baseline
    trial = {**worker_config(space, config.model, 0), "device": "cpu", "threads": threads}
    record = run_trial(trial)
    if record.get("status") != "ok":
        raise RuntimeError(f"{space_name}:{profile}: the trial failed: {record.get('error')}")
    predicted_s = estimate.train_time_s(config, space, peak_flops, 1.0, samples_per_epoch=record.get("train_samples"))
    predicted_bytes = estimate.peak_memory_bytes(config, space, device="cpu")
    return {
        "space": f"{space_name}:{profile}", "family": config.shape.family, "params": config.params,
        "batch": space.train.batch_size, "epochs": epochs, "train_samples": record.get("train_samples"),
        "predicted_s": predicted_s, "measured_s": record["train_s"], "time_ratio": predicted_s / record["train_s"],
        "steady_ratio": 3 * config.flops_per_sample * record["train_samples_per_s"] / peak_flops,
        "predicted_bytes": predicted_bytes, "measured_bytes": record["peak_mem_bytes"],
        "memory_ratio": predicted_bytes / record["peak_mem_bytes"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spaces", default=SPACES, help="comma-separated SPACE:PROFILE (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=1, help="training epochs per trial")
    # 1 by default: on a shared machine (load above the core count) two OpenMP threads that wait on each other
    # made the same epochs 20-100x slower here, which measures the machine's load, not the estimate
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for the matmul rate and trials")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this path")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    peak = matmul_flops_per_s(args.threads)
    print(f"float32 matmul at {args.threads} threads: {peak / 1e9:.1f} GFLOP/s (the 'peak'; MFU 1)")
    rows = []
    for item in args.spaces.split(","):
        space_name, profile = item.split(":")
        row = calibrate(space_name, profile, args.epochs, peak, args.threads)
        rows.append(row)
        print(
            f"{row['space']:28s} {row['family']:6s} batch {row['batch']:4d}: time predicted {row['predicted_s']:7.2f} s"
            f" / measured {row['measured_s']:7.2f} s = {row['time_ratio']:.3f} "
            f"(steady state {row['steady_ratio']:.3f}); memory predicted "
            f"{row['predicted_bytes'] / 2**20:8.1f} MiB / measured {row['measured_bytes'] / 2**20:8.1f} MiB = "
            f"{row['memory_ratio']:.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"matmul_flops_per_s": peak, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
