"""Sweep efficiency: how much of the machine a local sweep keeps busy training.

    efficiency = Σ trial busy time ÷ (sweep wall time × concurrent trial slots)

Trial busy time is each trial's ``wall_s`` (the time inside ``run_trial``: data, model, training,
probes). Sweep wall time is measured around ``Tuner.fit`` (Ray already started), and also reported with
Ray's start-up included. Slots = CPUs given to Ray ÷ CPUs per trial. Target ≥ 0.85 for ≥ 8 trials of
about 20 s each on a 2-core machine. Everything lost is orchestration: actor start-up, the object-store
fetch of the data, Tune's bookkeeping and the driver-side Parquet writes.

    .venv/bin/python bench/sweep_efficiency.py [--configs 4] [--seeds 2] [--epochs 30] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import ray

from sweep.analysis.sql import run_query
from sweep.plan.plan import make_plan
from sweep.run.tuner import run_sweep
from sweep.space.loader import load_space

SPACE = """
question: sweep-efficiency benchmark (digits, ~20 s trials)
model: {{family: vit, embed_dim: 64, mlp_dim: 128, patch_size: 2}}
axes: {{depth: {depths}, num_heads: [4]}}
baseline: {{depth: {baseline}, num_heads: 4}}
seeds: {seeds}
data: {{name: digits}}
train: {{epochs: {epochs}, batch_size: 64, lr: 5.0e-3, warmup_steps: 20}}
resources: {{cpus_per_trial: 1}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=4, help="depths 1..N (one config each)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=30, help="30: trials of about 20 s on 2 cores")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs given to the local Ray")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    depths = list(range(1, args.configs + 1))
    text = SPACE.format(depths=depths, baseline=depths[-1], seeds=list(range(args.seeds)), epochs=args.epochs)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_space.yaml"
        path.write_text(text)
        name, space, profile = load_space(str(path))
        plan = make_plan(name, space, profile)
        started = time.monotonic()
        ray.init(num_cpus=args.cpus, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
        ray_start_s = time.monotonic() - started
        fit_started = time.monotonic()
        outcome = run_sweep(plan, Path(tmp) / "results", str(path), progress=False)
        fit_s = time.monotonic() - fit_started
        _, rows = run_query(Path(tmp) / "results", "SELECT count(*), sum(wall_s), avg(wall_s) FROM trials")
        ray.shutdown()
    trials, busy_s, mean_trial_s = rows[0]
    slots = args.cpus // int(space.resources.cpus_per_trial)
    figures = {
        "trials": trials,
        "statuses": outcome.statuses,
        "mean_trial_s": round(mean_trial_s, 2),
        "busy_s": round(busy_s, 2),
        "sweep_wall_s": round(fit_s, 2),
        "ray_start_s": round(ray_start_s, 2),
        "slots": slots,
        "efficiency": round(busy_s / (fit_s * slots), 3),
        "efficiency_with_ray_start": round(busy_s / ((fit_s + ray_start_s) * slots), 3),
    }
    print(json.dumps(figures, indent=2))
    print(
        f"sweep efficiency: {figures['efficiency']:.2f} (target >= 0.85); "
        f"{figures['efficiency_with_ray_start']:.2f} counting Ray's start-up; "
        f"{trials} trials of {mean_trial_s:.1f} s on {slots} slots"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
