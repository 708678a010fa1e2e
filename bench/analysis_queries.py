"""Analysis-query speed: the edge and Pareto views over 1,000,000 trial rows.

Generates a synthetic results folder (default: 100 spaces × 1,000 configs × 10 seeds = 1,000,000 trial
rows, written as Parquet with the real ``trials`` schema), then times, through ``sweep sql``'s connection
with the versioned views, ``FROM depth_edge``, ``FROM head_dim_edge`` and ``FROM pareto``, each run
``--repeats`` times (median reported). Target: under 2 s each on a 2-core machine.

    .venv/bin/python bench/analysis_queries.py [--spaces 100] [--configs 1000] [--seeds 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.analysis.sql import connect
from sweep.results.schema import SCHEMA_VERSION, TRIALS, table_from_rows

DEPTHS = (1, 2, 3, 4, 6, 8, 10, 12, 16, 24)
HEADS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
MLPS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144)
QUERIES = {"depth_edge": "FROM depth_edge", "head_dim_edge": "FROM head_dim_edge", "pareto": "FROM pareto"}


def space_table(space: int, configs: int, seeds: int, rng: np.random.Generator) -> pa.Table:
    """One space's trials: shapes from the grids above (d_model 768), accuracy falling off with depth."""
    grid = [(d, h, m) for d in DEPTHS for h in HEADS for m in MLPS][:configs]
    depth, heads, mlp = (np.repeat(np.array(column), seeds) for column in zip(*grid, strict=True))
    n = len(depth)
    top1 = 80 - 30 / depth - 0.02 * heads + 0.001 * mlp / 100 + rng.normal(0, 0.3, n)
    config = np.repeat(np.arange(len(grid)), seeds)
    baseline = (depth == 12) & (heads == 12) & (mlp == 3072)
    columns = {
        "schema_version": np.full(n, SCHEMA_VERSION, np.int32), "space": np.full(n, f"s{space:03d}"),
        "sweep_id": np.full(n, "bench"), "metric": np.full(n, "top1"), "metric_mode": np.full(n, "max"), "score": top1,
        "trial_id": [f"s{space}-t{i}" for i in range(n)], "config_id": [f"s{space}-c{c}" for c in config],
        "seed": np.tile(np.arange(seeds), len(grid)), "is_baseline": baseline, "family": np.full(n, "vit"),
        "depth": depth, "num_heads": heads, "head_dim": 768 // heads, "embed_dim": np.full(n, 768), "mlp_dim": mlp,
        "attn_dim": np.full(n, 768), "status": np.where(rng.random(n) < 0.02, "oom", "ok"), "top1": top1,
        "params": depth * (4 * 768 * 768 + 2 * 768 * mlp), "train_samples_per_s": 1e4 / depth,
        "infer_samples_per_s": 3e4 / depth, "peak_mem_bytes": depth * 10**8, "kappa_mean": 100.0 / heads,
    }  # fmt: skip
    empty = table_from_rows("trials", [])
    arrays = [pa.array(columns[name], type=field.type) if name in columns else pa.nulls(n, field.type)
              for name, field in zip(empty.schema.names, TRIALS, strict=True)]  # fmt: skip
    return pa.Table.from_arrays(arrays, schema=TRIALS)


def generate(root: Path, spaces: int, configs: int, seeds: int) -> int:
    rng = np.random.default_rng(0)
    rows = 0
    for table in ("epochs", "kappa"):
        (root / table / "bench").mkdir(parents=True, exist_ok=True)
        pq.write_table(table_from_rows(table, []), root / table / "bench" / "empty.parquet")
    for space in range(spaces):
        folder = root / "trials" / f"s{space:03d}" / "bench"
        folder.mkdir(parents=True, exist_ok=True)
        table = space_table(space, configs, seeds, rng)
        pq.write_table(table, folder / "trials.parquet")
        rows += table.num_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", type=int, default=100)
    parser.add_argument("--configs", type=int, default=1000, help="per space, at most 1000")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the synthetic results here and keep them")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        started = time.perf_counter()
        rows = generate(root, args.spaces, args.configs, args.seeds)
        print(f"generated {rows:,} trial rows in {time.perf_counter() - started:.1f}s")
        con = connect(root)
        for name, sql in QUERIES.items():
            times, count = [], 0
            for _ in range(args.repeats):
                begun = time.perf_counter()
                count = len(con.sql(sql).fetchall())
                times.append(time.perf_counter() - begun)
            median = statistics.median(times)
            verdict = "under" if median < 2.0 else "OVER"
            print(
                f"{name}: {median:.2f} s median of {args.repeats} ({rows / median:,.0f} trial rows/s, "
                f"{count:,} result rows) - {verdict} the 2 s target"
            )


if __name__ == "__main__":
    main()
