"""Analysis speed as results grow: N trials' results built from a real sweep's files, and what an analyst runs.

The source is a results folder a sweep wrote (``--source``, default ``results/``); where it holds none, the
bench first runs ``sweep run local_digits`` into a temporary folder (2-3 minutes on 2 cores). Its trials,
with their epochs and κ rows, are copied under new trial ids, sweep ids and seeds (each copy of a (config,
seed) gets seed + 1000 × its copy number, so no pair repeats), in sweeps of ``--trials-per-sweep`` trials
over ``--spaces`` spaces (the source's own name, then ``NAME_2``, ``NAME_3``, …). Each sweep is written as
the sink writes it (one file per trial and table, written atomically) plus its ``spaces`` row, then
compacted as ``sweep run`` does when it ends (``sweep/results/compact.py``); ``--layout loose`` leaves the per-trial
files, as a results folder from before compaction holds them. The folder grows to each N of ``--trials`` in
turn, and at each the times are taken in fresh processes, start-up included, as a user meets them:

- ``sweep --help``; ``sweep sql "SELECT 1"``; ``sweep sql`` on ``trials`` (a count by space and status);
- connect: ``from sweep import open_results; open_results(folder)`` (tables and views are created when
  first read, so this is mostly the imports);
- the first row of each analysis view, each on a fresh ``open_results`` (connect included); the slowest;
- ``sweep report`` on the source's space.

Each figure is the median of ``--repeats`` runs: wall time and, beside it, the CPU time (user + system,
all threads) the process spent; on a shared machine the wall time grows with the other work, the CPU time
much less. Also the source folder itself (``sweep sql "SELECT 1"`` on the default results), and what
compacting one sweep took. Goals (issue 28): ``--help`` and ``SELECT 1`` ≤ 0.5 s; at 10,000 trials over 50
sweeps and 3 spaces, the first row of any view ≤ 2 s, ``sweep sql`` on trials ≤ 1 s, ``sweep report`` ≤ 60
s. Last, each figure fitted against trials (least squares) and what the fit gives at 100,000 trials.

    .venv/bin/python bench/analysis_scale.py [--source results] [--trials 500,2000,10000] [--spaces 3]
                                             [--trials-per-sweep 200] [--layout compacted|loose] [--repeats 3]
                                             [--keep DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("trials", "epochs", "kappa")
GOALS_S = {"help": 0.5, "select_1": 0.5, "sql_trials": 1.0, "first_row_max": 2.0, "report": 60.0}
# Timed in a process of its own: open_results, then each view's first row on a fresh open_results
VIEWS_PROBE = """
import json, sys, time
started, cpu = time.perf_counter(), time.process_time()
from sweep import open_results
results = open_results(sys.argv[1])
connect = [time.perf_counter() - started, time.process_time() - cpu]
views = [name for name in results.names if name not in ("trials", "epochs", "kappa", "spaces", "trials_files",
                                                         "epochs_files", "spaces_files")]
first_row = {}
for name in views:
    begun, cpu = time.perf_counter(), time.process_time()
    open_results(sys.argv[1]).sql(f"FROM {name} LIMIT 1").fetchall()
    first_row[name] = [time.perf_counter() - begun, time.process_time() - cpu]
print(json.dumps({"connect": connect, "first_row": first_row}))
"""


class Source:
    """The source sweep's rows, per trial: {trial_id: {table: pa.Table}}, and its ``spaces`` row."""

    def __init__(self, folder: Path):
        self.trials: dict[str, dict[str, pa.Table]] = {}
        for table in TABLES:
            for path in sorted((folder / table).rglob("*.parquet")):
                rows = pq.read_table(path)
                for trial_id in pc.unique(rows["trial_id"]).to_pylist():
                    self.trials.setdefault(trial_id, {})[table] = rows.filter(pc.equal(rows["trial_id"], trial_id))
        spaces = sorted((folder / "spaces").rglob("*.parquet"))
        if not self.trials or not spaces:
            raise SystemExit(f"no sweep's results under {folder}: run `make sweep SPACE=local_digits` first")
        self.spaces_row = pq.read_table(spaces[-1]).slice(0, 1)
        self.space = self.spaces_row["space"][0].as_py()
        self.ids = sorted(self.trials)


def relabel(rows: pa.Table, **values) -> pa.Table:
    """``rows`` with each named column set to one value (``seed``: added to)."""
    for name, value in values.items():
        index = rows.schema.get_field_index(name)
        if index < 0:
            continue
        if name == "seed":
            column = pc.add(rows[name], pa.scalar(value, rows.schema.field(name).type))
        else:
            column = pa.array([value] * rows.num_rows, rows.schema.field(name).type)
        rows = rows.set_column(index, name, column)
    return rows


def write_sweep(folder: Path, source: Source, number: int, trials: int, spaces: int, layout: str) -> float:
    """Sweep ``number`` (``trials`` trials) as the sink writes it, then compacted; returns the compaction's s."""
    from sweep.results.compact import compact_space
    from sweep.results.storage import write_atomic

    space = source.space if number % spaces == 0 else f"{source.space}_{number % spaces + 1}"
    sweep_id = f"bench-{number:05d}"
    for index in range(trials):
        copy, original = divmod(number // spaces * trials + index, len(source.ids))
        trial_id = f"{sweep_id}_{index:05d}"
        for table, rows in source.trials[source.ids[original]].items():
            rows = relabel(rows, space=space, sweep_id=sweep_id, trial_id=trial_id, seed=1000 * copy)
            write_atomic(rows, folder / table / space / sweep_id / f"{trial_id}.parquet")
    spaces_row = relabel(source.spaces_row, space=space, sweep_id=sweep_id)
    write_atomic(spaces_row, folder / "spaces" / space / f"{sweep_id}.parquet")
    if layout == "loose":
        return 0.0
    started = time.perf_counter()
    compact_space(folder, space)
    return time.perf_counter() - started


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> list[float]:
    """[wall s, CPU s] of ``sweep COMMAND`` in a process of its own (it must succeed)."""
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run([sys.executable, "-m", "sweep.cli", *command], capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise SystemExit(f"sweep {' '.join(command)} failed: {done.stderr[-2000:]}")
    return [time.perf_counter() - started, children_cpu() - cpu]


def median_of(runs: list[list[float]]) -> list[float]:
    """[median wall, median CPU] of repeated [wall, CPU] figures."""
    return [statistics.median(run[0] for run in runs), statistics.median(run[1] for run in runs)]


def probe_views(folder: Path) -> dict:
    probe = subprocess.run([sys.executable, "-c", VIEWS_PROBE, str(folder)], capture_output=True, text=True, env=ENV)
    if probe.returncode != 0:
        raise SystemExit(f"the views probe failed: {probe.stderr[-2000:]}")
    return json.loads(probe.stdout.strip().splitlines()[-1])


def measure(folder: Path, space: str, out: Path, repeats: int) -> dict:
    """Each figure as [wall s, CPU s], the median of ``repeats`` runs; ``slowest_view`` names the view whose
    first row took longest."""
    results = ["--results", str(folder)]
    commands = {
        "help": ["--help"],
        "select_1": ["sql", "SELECT 1", *results],
        "sql_trials": ["sql", "SELECT space, status, count(*) FROM trials GROUP BY ALL ORDER BY ALL", *results],
        "report": ["report", space, *results, "--out", str(out / "report")],
    }
    figures = {key: median_of([timed(command) for _ in range(repeats)]) for key, command in commands.items()}
    probes = [probe_views(folder) for _ in range(repeats)]
    first_row = {name: median_of([p["first_row"][name] for p in probes]) for name in probes[0]["first_row"]}
    slowest = max(first_row, key=lambda name: first_row[name][0])
    figures.update(connect=median_of([p["connect"] for p in probes]), first_row_max=first_row[slowest])
    figures["slowest_view"] = slowest
    figures["first_row_median"] = [statistics.median(v[i] for v in first_row.values()) for i in (0, 1)]
    return figures


def run_source(folder: Path) -> Path:
    """``sweep run local_digits`` into ``folder``: the real sweep the results are built from."""
    print(f"no sweep's results to copy: running `sweep run local_digits --results {folder}` (2-3 minutes)")
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "local_digits", "--results", str(folder),
                           "--quiet"], capture_output=True, text=True, env=ENV)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"sweep run local_digits failed: {done.stderr[-2000:]}")
    return folder


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (intercept s, slope s per trial) of seconds against trials."""
    if len(points) < 2:
        return points[0][1], 0.0
    xs, ys = zip(*points, strict=True)
    slope = statistics.covariance(xs, ys) / statistics.variance(xs)
    return statistics.mean(ys) - slope * statistics.mean(xs), slope


COLUMNS = {"help": "--help", "select_1": "sql SELECT 1", "sql_trials": "sql on trials", "connect": "connect",
           "first_row_median": "first row, median view", "first_row_max": "first row, slowest view",
           "report": "report"}  # fmt: skip


def print_figures(label: str, files: int, figures: dict) -> None:
    print(f"{label}, {files:,} Parquet files:")
    for key, name in COLUMNS.items():
        wall, cpu = figures[key]
        goal = GOALS_S.get(key)
        mark = "" if goal is None else (f"  (goal ≤ {goal:g} s)" if wall <= goal else f"  (OVER the {goal:g} s goal)")
        view = f" [{figures['slowest_view']}]" if key == "first_row_max" else ""
        print(f"  {name:<24} {wall:7.2f} s wall {cpu:7.2f} s cpu{view}{mark}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("results"), help="a results folder a sweep wrote")
    parser.add_argument("--trials", default="500,2000,10000", help="comma-separated N, ascending")
    parser.add_argument("--spaces", type=int, default=3)
    parser.add_argument("--trials-per-sweep", type=int, default=200, help="10,000 trials: 50 sweeps")
    parser.add_argument("--layout", choices=["compacted", "loose"], default="compacted")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each figure; the median is shown")
    parser.add_argument("--keep", type=Path, help="build the results here and keep them (default: a temporary)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this path")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.trials.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        source_dir = args.source if (args.source / "trials").is_dir() else run_source(Path(tmp) / "source")
        source = Source(source_dir)
        folder = args.keep or Path(tmp) / "results"
        print(f"source: {source_dir}/, space {source.space}, {len(source.ids)} trials; layout {args.layout}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
        table = {"source": measure(source_dir, source.space, Path(tmp), args.repeats)}
        print_figures("the source", sum(1 for _ in source_dir.rglob("*.parquet")), table["source"])
        written, sweeps, compaction = 0, 0, []
        for size in sizes:
            while written < size:
                count = min(args.trials_per_sweep, size - written)
                compaction.append(write_sweep(folder, source, sweeps, count, args.spaces, args.layout))
                written, sweeps = written + count, sweeps + 1
            table[size] = measure(folder, source.space, Path(tmp), args.repeats)
            label = f"{size:,} trials in {sweeps} sweeps"
            print_figures(label, sum(1 for _ in folder.rglob("*.parquet")), table[size])
        if args.layout == "compacted":
            median = statistics.median(compaction)
            print(f"compacting one sweep of {args.trials_per_sweep} trials: {median:.2f} s wall (median)")
        print(f"\nload average {os.getloadavg()[0]:.1f}; fitted against trials (least squares over the sizes above):")
        for key, name in COLUMNS.items():
            for index, kind in enumerate(("wall", "cpu")):
                intercept, slope = fit([(n, table[n][key][index]) for n in sizes])
                print(f"  {name:<24} {kind:<4} {intercept:6.2f} s + {slope * 10_000:6.3f} s per 10,000 trials → "
                      f"{intercept + slope * 100_000:7.2f} s at 100,000 trials")  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps({str(k): v for k, v in table.items()}, indent=2))


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

if __name__ == "__main__":
    main()
