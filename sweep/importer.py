"""``sweep import FILE``: add trial rows produced elsewhere (another cluster's results, a published table
typed in by hand) to the results, after validating every row. One bad row rejects the whole file, with
every bad row's number and reason, and nothing is written."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from sweep.errors import SweepError
from sweep.schema import SCHEMA_VERSION, TABLES, TRIALS, table_from_rows
from sweep.sink import record_space, write_atomic
from sweep.sql import run_query

REQUIRED = ("space", "seed", "depth", "num_heads", "embed_dim", "mlp_dim", "status", "params")
SHAPE_INTS = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim")
STATUSES = ("ok", "diverged", "oom", "error", "pruned")


class ImportRejected(SweepError):
    """The file was rejected whole; the message lists every bad row."""

    exit_code = 2


def read_rows(path: Path) -> list[dict]:
    """Rows of a CSV or Parquet file as dicts (CSV columns typed by pyarrow's inference)."""
    if not path.is_file():
        raise ImportRejected(f"{path}: no such file")
    try:
        table = pq.read_table(path) if path.suffix == ".parquet" else pcsv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as exc:
        kind = "Parquet" if path.suffix == ".parquet" else "CSV"
        raise ImportRejected(f"{path}: cannot read as {kind}: {exc}") from exc
    return table.to_pylist()


def is_integer(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def row_problems(row: dict) -> list[str]:
    """Every reason ``row`` cannot be a trials row (empty when it can)."""
    problems = [f"{name}: missing" for name in REQUIRED if row.get(name) in (None, "")]
    for name in (*SHAPE_INTS, "params", "flops_per_sample", "peak_mem_bytes"):
        value = row.get(name)
        if value is not None and (not is_integer(value) or value < 1):
            problems.append(f"{name}: must be a positive whole number (got {value!r})")
    seed = row.get("seed")
    if seed is not None and (not is_integer(seed) or seed < 0):
        problems.append(f"seed: must be a whole number >= 0 (got {seed!r})")
    status = row.get("status")
    if status is not None and status not in STATUSES:
        problems.append(f"status: must be one of {', '.join(STATUSES)} (got {status!r})")
    for name in ("top1", "top5"):
        value = row.get(name)
        if value is not None and (not isinstance(value, (int, float)) or not 0 <= value <= 100):
            problems.append(f"{name}: must be a percentage in [0, 100] (got {value!r})")
    if status == "ok" and row.get("top1") is None:
        problems.append("top1: required when status is ok")
    if not problems:
        problems += shape_problems(row)
    return problems


def shape_problems(row: dict) -> list[str]:
    heads, width = int(row["num_heads"]), int(row["embed_dim"])
    head_dim = row.get("head_dim")
    if head_dim is None and width % heads:
        return [f"head_dim: missing, and num_heads={heads} does not divide embed_dim={width} to derive it"]
    attn = row.get("attn_dim")
    head_dim = int(head_dim) if head_dim is not None else width // heads
    if attn is not None and int(attn) != heads * head_dim:
        return [f"attn_dim: must equal num_heads × head_dim = {heads * head_dim} (got {attn})"]
    return []


def imported_config_id(row: dict) -> str:
    """For rows without one: a hash of the family, the shape and the data set (marked as imported)."""
    identity = {k: row.get(k) for k in ("family", "dataset", *SHAPE_INTS)}
    return "imp-" + hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


def complete(row: dict, sweep_id: str, index: int) -> dict:
    """Fill the derived columns an imported row may leave out."""
    row = dict(row)
    row["family"] = row.get("family") or "vit"
    row["head_dim"] = int(row.get("head_dim") or int(row["embed_dim"]) // int(row["num_heads"]))
    row["attn_dim"] = int(row["num_heads"]) * row["head_dim"]
    row["config_id"] = row.get("config_id") or imported_config_id(row)
    row["trial_id"] = row.get("trial_id") or f"{sweep_id}-{index:05d}"
    row["sweep_id"] = row.get("sweep_id") or sweep_id
    row["is_baseline"] = bool(row.get("is_baseline") or False)
    row["schema_version"] = SCHEMA_VERSION
    for name in ("started_at", "finished_at"):
        if isinstance(row.get(name), str):
            row[name] = datetime.fromisoformat(row[name])
    for name, value in list(row.items()):
        if isinstance(value, float) and math.isnan(value):
            row[name] = None
    return row


def existing_keys(results_dir: Path) -> set[tuple]:
    _, rows = run_query(results_dir, "SELECT space, config_id, seed, trial_id FROM trials")
    return {tuple(row) for row in rows}


def import_file(path: Path, results_dir: Path) -> dict[str, int]:
    """Validate every row of ``path``; write them all (one file per space) or nothing. Returns rows per space."""
    rows = read_rows(path)
    if not rows:
        raise ImportRejected(f"{path}: no rows")
    unknown = sorted(set(rows[0]) - set(TRIALS.names))
    if unknown:
        raise ImportRejected(
            f"{path}: unknown columns {', '.join(unknown)}; the trials columns are listed in the README "
            "(Results: layout and schema). Nothing was written."
        )
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    sweep_id = f"import-{stamp}"
    problems = [f"row {i}: {p}" for i, row in enumerate(rows, start=1) for p in row_problems(row)]
    completed = [complete(row, sweep_id, i) for i, row in enumerate(rows, start=1)] if not problems else []
    problems += duplicate_problems(completed, existing_keys(results_dir))
    if problems:
        shown = "\n  ".join(problems[:50]) + (f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else "")
        raise ImportRejected(f"{path}: rejected, nothing written ({len(problems)} problems):\n  {shown}")
    per_space: dict[str, list[dict]] = {}
    for row in completed:
        per_space.setdefault(row["space"], []).append(row)
    for space, space_rows in per_space.items():
        for table in TABLES:  # empty epochs/kappa files keep every table's glob non-empty for the duckdb shell
            target = results_dir / table / space / sweep_id / f"{path.stem}.parquet"
            write_atomic(table_from_rows(table, space_rows if table == "trials" else []), target)
        record_space(results_dir, space, sweep_id, None, None, None)  # settings unknown: analysis defaults
    return {space: len(space_rows) for space, space_rows in per_space.items()}


def duplicate_problems(rows: list[dict], existing: set[tuple]) -> list[str]:
    seen: dict[tuple, int] = {}
    problems = []
    for index, row in enumerate(rows, start=1):
        key = (row["space"], row["config_id"], row["seed"])
        if key in seen:
            problems.append(f"row {index}: same (space, config_id, seed) as row {seen[key]}")
        seen.setdefault(key, index)
        if any(e[:3] == key for e in existing):
            problems.append(f"row {index}: (space, config_id, seed) = {key} is already in the results")
    return problems
