"""Run a folder of trial configs on this machine without Ray, a few at a time, and table what happened.

For checking a machine before a sweep spends hours on it (``make gpu-smoke``): every shipped space's
``smoke`` profile, written as trial configs by ``sweep plan --write-configs DIR``, run here on the GPU with
the code a Ray trial runs (``workers.trial.run_trial``, one process per trial, as Ray's workers are), so a
dtype error under bf16 autocast or a CUDA-only failure shows up in minutes, as a row, not hours into a sweep.

Each trial runs as ``python -m workers.trial CONFIG --quiet --out OUT/records/NAME.json`` under a wall-clock
limit (``--timeout-s``); its stderr goes to ``OUT/logs/NAME.log``. A trial that exits without a record
(killed at the limit, a crash of the interpreter) is a row with status ``error`` and the log's last line.
While trials run, ``nvidia-smi`` (when there is one) samples GPU utilisation and memory once a second into
``OUT/gpu_samples.csv``. ``OUT/summary.json`` holds the rows and the totals:

- ``trials_per_hour`` = trials finished ÷ the batch's wall hours (all ``--jobs`` slots together);
- ``gpu_util_mean_pct`` / ``gpu_util_max_pct``: mean and max of nvidia-smi's ``utilization.gpu`` samples (the
  share of each sample period in which a kernel ran, not how much of the GPU it used);
- ``gpu_mem_max_mib``: the largest ``memory.used`` sample (every process on the GPU, the CUDA contexts too).

    python -m workers.trial_batch CONFIG_DIR --out /tmp/smoke --jobs 8 --timeout-s 300
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

# The record fields a row keeps; the whole record stays in OUT/records/.
ROW_FIELDS = ("status", "device", "family", "depth", "num_heads", "wall_s", "train_samples_per_s", "peak_mem_bytes",
              "peak_mem_method", "kappa_mean", "accuracy", "top1", "val_loss", "glue_avg", "error")  # fmt: skip
GPU_QUERY = "timestamp,utilization.gpu,memory.used"


@dataclass
class Row:
    """One trial's outcome: its config file's name, the process's wall seconds, and the record's fields."""

    name: str
    process_s: float
    fields: dict


def config_files(folder: Path) -> list[Path]:
    """Every ``*.json``/``*.yaml`` under ``folder`` (subfolders too: one per space), sorted."""
    suffixes = {".json", ".yaml", ".yml"}
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes)


def trial_name(path: Path, folder: Path) -> str:
    """A file name for ``path``'s outputs: its path under ``folder`` with ``/`` as ``__``."""
    return "__".join(path.relative_to(folder).with_suffix("").parts)


def run_one(path: Path, name: str, out: Path, timeout_s: float) -> Row:
    """``python -m workers.trial`` on one config in its own process; a missing record becomes an error row."""
    record_path, log_path = out / "records" / f"{name}.json", out / "logs" / f"{name}.log"
    command = [sys.executable, "-m", "workers.trial", str(path), "--quiet", "--out", str(record_path)]
    started = time.perf_counter()
    with log_path.open("w") as log:
        try:
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=log, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            log.write(f"\ntrial_batch: stopped at the {timeout_s:g} s limit\n")
    process_s = time.perf_counter() - started
    if record_path.exists():
        record = json.loads(record_path.read_text())
        return Row(name, process_s, {key: record.get(key) for key in ROW_FIELDS if record.get(key) is not None})
    return Row(name, process_s, {"status": "error", "error": last_line(log_path)})


def last_line(path: Path) -> str:
    """The last non-empty line of a log file (where a dying process says why)."""
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "the trial process exited without a record or a message"


def start_gpu_sampler(out: Path) -> subprocess.Popen | None:
    """``nvidia-smi`` writing one CSV line a second to OUT/gpu_samples.csv; None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    command = ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits", "-l", "1"]
    return subprocess.Popen(command, stdout=(out / "gpu_samples.csv").open("w"), stderr=subprocess.DEVNULL)


def gpu_totals(path: Path) -> dict:
    """Mean and max utilisation (%) and max memory (MiB) of the samples, over every GPU sampled."""
    samples = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            samples.append((int(parts[1]), int(parts[2])))
    if not samples:
        return {}
    utils = [util for util, _ in samples]
    return {
        "gpu_samples": len(samples),
        "gpu_util_mean_pct": round(sum(utils) / len(utils), 1),
        "gpu_util_max_pct": max(utils),
        "gpu_mem_max_mib": max(mem for _, mem in samples),
    }


def run_batch(folder: Path, out: Path, jobs: int, timeout_s: float) -> dict:
    """Every config under ``folder``, ``jobs`` at a time; returns (and writes to OUT/summary.json) the rows
    and the totals."""
    for sub in ("records", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    paths = config_files(folder)
    sampler = start_gpu_sampler(out)
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            rows = list(pool.map(lambda p: run_one(p, trial_name(p, folder), out, timeout_s), paths))
    finally:
        if sampler is not None:
            sampler.terminate()
            sampler.wait()
    wall_s = time.perf_counter() - started
    summary = {
        "trials": len(rows),
        "ok": sum(row.fields.get("status") == "ok" for row in rows),
        "jobs": jobs,
        "wall_s": round(wall_s, 1),
        "trials_per_hour": round(len(rows) / wall_s * 3600, 1) if wall_s > 0 else None,
        **gpu_totals(out / "gpu_samples.csv"),
        "rows": [asdict(row) for row in rows],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary


def format_row(row: dict) -> str:
    """One line: name, status, process and trial seconds, device, peak memory; the error when failed."""
    fields = row["fields"]
    text = f"{row['name']:<48} {fields.get('status', '?'):<8} {row['process_s']:6.1f} s"
    if fields.get("wall_s") is not None:
        text += f" (trial {fields['wall_s']:6.1f} s)"
    if fields.get("device"):
        text += f"  {fields['device']:<22}"
    if fields.get("peak_mem_bytes"):
        text += f"  peak {fields['peak_mem_bytes'] / 2**20:8.1f} MiB"
    if fields.get("status") != "ok":
        text += "\n    " + str(fields.get("error")).splitlines()[0]
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.trial_batch", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="trial configs (sweep plan --write-configs DIR), subfolders too")
    parser.add_argument("--out", type=Path, required=True, help="records, logs, GPU samples and summary.json")
    parser.add_argument("--jobs", type=int, default=4, help="trials at a time (each its own process)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="wall-clock limit of one trial's process")
    args = parser.parse_args(argv)
    if not config_files(args.folder):
        print(f"error: no trial configs (*.json, *.yaml) under {args.folder}", file=sys.stderr)
        return 2
    summary = run_batch(args.folder, args.out, args.jobs, args.timeout_s)
    for row in summary["rows"]:
        print(format_row(row))
    totals = {key: value for key, value in summary.items() if key != "rows"}
    print(json.dumps(totals))
    return 0 if summary["ok"] == summary["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
