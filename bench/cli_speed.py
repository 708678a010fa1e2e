"""Wall time of the commands that train nothing, each run as a subprocess the way a user runs it.

Each command runs ``--repeats`` times (median reported) in a fresh interpreter, so imports count as they do
for a user; the table gives each command's median wall time, its target and the ratio (≤ 1 meets it). The
reference is ``sweep --help`` (what an interpreter and the parser cost), timed in the same run, so a loaded
machine shows up in it. Targets (issue 38): ``sweep spaces`` and ``sweep validate`` ≤ 1 s, ``sweep plan`` of
a shipped space ≤ 2 s (once its counts are stored: the first plan of a space on a machine measures its models,
listed as ``(counts not stored)``); ``sweep report`` and ``sweep sql`` are listed for what they take, with no target
(``report`` runs over a results folder of planted rows this script imports first).

    .venv/bin/python bench/cli_speed.py [--repeats 3] [--space vit_b_fixed_mlp] [--json PATH]

docs/benchmarks.md records its output and what each command spends its time on (``python -X importtime``
and cProfile).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


UNSTORED = {"SWEEP_COUNT_CACHE": "0"}  # every parameter and FLOP count measured (a model library imported)


def commands(space: str, results: Path, out: Path) -> list[tuple[str, list[str], float | None, dict]]:
    """(label, arguments after ``sweep``, target seconds or None, extra environment). ``plan`` and ``validate``
    read the counts stored by an earlier plan (``sweep/space/counts.py``; this script plans each space once
    first); the ``(counts not stored)`` rows measure every model, as the first plan on a machine does."""
    rows = [
        ("sweep --help", ["--help"], None),
        ("sweep spaces", ["spaces"], 1.0),
        ("sweep spaces --names", ["spaces", "--names"], 1.0),
        (f"sweep validate {space}", ["validate", space], 1.0),
        ("sweep validate local_digits", ["validate", "local_digits"], 1.0),
        (f"sweep plan {space}", ["plan", space], 2.0),
        ("sweep plan local_digits", ["plan", "local_digits"], 2.0),
        ("sweep validate mqar_recall", ["validate", "mqar_recall"], 1.0),
        ("sweep plan mqar_recall", ["plan", "mqar_recall"], 2.0),
        (f"sweep plan {space} (counts not stored)", ["plan", space], None),
        ('sweep sql "FROM configs"', ["sql", "FROM configs", "--results", str(results)], None),
        ("sweep report bench", ["report", "bench", "--results", str(results), "--out", str(out)], None),
    ]
    return [(label, arguments, target, UNSTORED if "not stored" in label else {}) for label, arguments, target in rows]


def planted_results(folder: Path) -> Path:
    """A results folder with 12 configs × 3 seeds of one imported space, for ``sql`` and ``report``."""
    rows = []
    for depth in (1, 2, 4):
        for heads in (1, 2, 4, 8):
            for seed in range(3):
                rows.append({
                    "space": "bench", "config_id": f"bench-d{depth}-h{heads}", "seed": seed,
                    "is_baseline": (depth, heads) == (4, 4), "family": "vit", "depth": depth, "num_heads": heads,
                    "head_dim": 64 // heads, "embed_dim": 64, "mlp_dim": 128, "status": "ok",
                    "top1": 90.0 - 5.0 / depth - heads * 0.1 + seed * 0.2, "params": 1000 * depth + heads,
                    "train_samples_per_s": 100.0 / depth, "infer_samples_per_s": 300.0 / depth,
                    "peak_mem_bytes": 10**6 * depth, "kappa_mean": 1000.0 / heads,
                })  # fmt: skip
    path = folder / "rows.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    results = folder / "results"
    run_sweep(["import", str(path), "--results", str(results)])
    return results


def run_sweep(arguments: list[str], extra_env: dict | None = None) -> float:
    """One ``python -m sweep.cli …`` in a fresh interpreter from the repository root: its wall time in seconds."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {})}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sweep.cli", *arguments], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"sweep {' '.join(arguments)} failed ({done.returncode}):\n{done.stderr}")
    return wall_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command (median reported)")
    parser.add_argument("--space", default="vit_b_fixed_mlp", help="the shipped space to validate and plan")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = planted_results(Path(tmp))
        for space in dict.fromkeys([args.space, "local_digits", "mqar_recall"]):
            run_sweep(["plan", space])  # stores the counts the timed runs read
        measured = {}
        print(f"{'command':48s} {'median s':>9s} {'target s':>9s} {'ratio':>6s} {'÷ help':>7s}   runs (s)")
        for label, arguments, target, extra_env in commands(args.space, results, Path(tmp) / "report"):
            runs = [run_sweep(arguments, extra_env) for _ in range(args.repeats)]
            median = statistics.median(runs)
            measured[label] = {"median_s": median, "target_s": target, "runs_s": runs}
            ratio = f"{median / target:6.2f}" if target else f"{'–':>6s}"
            target_text = f"{target:9.1f}" if target else f"{'–':>9s}"
            of_help = median / measured["sweep --help"]["median_s"]  # the machine's load cancels out
            print(f"{label:48s} {median:9.2f} {target_text} {ratio} {of_help:7.1f}   "
                  f"{', '.join(f'{r:.2f}' for r in runs)}")  # fmt: skip
    missed = [label for label, m in measured.items() if m["target_s"] and m["median_s"] > m["target_s"]]
    print(f"\nratio = median ÷ target (≤ 1 meets it); {len(missed)} of "
          f"{sum(1 for m in measured.values() if m['target_s'])} targets missed" + (f": {', '.join(missed)}" if missed
                                                                                    else ""))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(measured, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
