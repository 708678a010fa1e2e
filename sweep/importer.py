"""``sweep import FILE``: add trial rows produced elsewhere (another cluster's results, a published table
typed in by hand) to the results, after validating every row. One bad row rejects the whole file, with
every bad row's number and reason, and nothing is written.

Each row's headline metric: a row whose ``space`` names a shipped space is judged on that space's metric,
direction and tolerance (its ``score`` is the ``score`` column, or else the column named after the metric,
e.g. ``accuracy``); any other row names its metric in a ``metric`` column (``top1`` when it has none), its
direction in ``metric_mode`` (needed only for a metric ``sweep/metrics.py`` does not know), and its value
in ``score`` or in the metric's own column.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from sweep.errors import SpaceError, SweepError
from sweep.metrics import DEFAULT_METRIC, METRICS, PERCENT_METRICS, direction_words, natural_mode
from sweep.schema import SCHEMA_VERSION, TABLES, TRIALS, table_from_rows
from sweep.sink import record_space, write_atomic
from sweep.space import load_space, shipped_spaces
from sweep.sql import run_query

REQUIRED = ("space", "seed", "depth", "num_heads", "embed_dim", "mlp_dim", "status", "params")
SHAPE_INTS = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim")
STATUSES = ("ok", "diverged", "oom", "error", "pruned")
PERCENT_COLUMNS = ("top1", "top5", "accuracy")


@dataclass(frozen=True)
class Headline:
    """The metric a space is judged on: its name, direction, tolerance (None: the analysis default) and,
    for a shipped space, its question."""

    metric: str
    mode: str | None
    tolerance: float | None = None
    question: str | None = None


class ShippedSettings:
    """The headline metric of each shipped space (and profile) a file's rows name, loaded once each."""

    def __init__(self):
        self.names = set(shipped_spaces())
        self.cache: dict[tuple, Headline | str] = {}

    def get(self, space, profile) -> Headline | str | None:
        """The shipped space's headline; a problem (str) when its profile does not exist; None when
        ``space`` is not a shipped space."""
        if space not in self.names:
            return None
        key = (space, profile or None)
        if key not in self.cache:
            try:
                _, loaded, _ = load_space(space, profile or None)
                metric = loaded.metric
                self.cache[key] = Headline(metric.name, metric.mode, metric.tolerance, loaded.question)
            except SpaceError as exc:  # an unknown profile (a shipped file itself is valid: a test holds it)
                self.cache[key] = f"profile: shipped space {space!r} cannot be loaded with it: {exc.issues[-1]}"
        return self.cache[key]


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


def present(row: dict, name: str):
    """The row's value of ``name``, None for a missing or empty cell (CSV) or NaN (Parquet)."""
    value = row.get(name)
    return None if value == "" or (isinstance(value, float) and math.isnan(value)) else value


def is_integer(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def row_problems(row: dict, shipped: Headline | str | None = None) -> list[str]:
    """Every reason ``row`` cannot be a trials row (empty when it can). ``shipped``: the headline of the
    shipped space the row names (or why it cannot be had), None for any other space."""
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
    for name in PERCENT_COLUMNS:
        value = row.get(name)
        if value is not None and (not isinstance(value, (int, float)) or not 0 <= value <= 100):
            problems.append(f"{name}: must be a percentage in [0, 100] (got {value!r})")
    if isinstance(shipped, str):
        problems.append(shipped)
    else:
        problems += headline_problems(row, shipped)
    if not problems:
        problems += shape_problems(row)
    return problems


def row_headline(row: dict, shipped: Headline | None) -> Headline:
    """The row's metric and direction: the shipped space's, else the row's ``metric`` (top1 when it has
    none) with its ``metric_mode`` or, when it has none, the metric's own direction."""
    if shipped is not None:
        return shipped
    metric = present(row, "metric") or DEFAULT_METRIC
    return Headline(metric, present(row, "metric_mode") or natural_mode(metric))


def row_score(row: dict, metric: str):
    """The row's score: its ``score`` column, else the column named after its metric (if a trials column)."""
    score = present(row, "score")
    if score is None and metric in TRIALS.names and metric != "score":
        score = present(row, metric)
    return score


def headline_problems(row: dict, shipped: Headline | None) -> list[str]:
    """Every reason the row's metric, metric_mode and score cannot stand."""
    headline, given = row_headline(row, shipped), present(row, "metric")
    metric, natural, mode = headline.metric, natural_mode(headline.metric), present(row, "metric_mode")
    problems = []
    if shipped is not None and given not in (None, metric):
        problems.append(
            f"metric: space {row['space']!r} is a shipped space judged on {metric} (search_spaces/"
            f"{row['space']}.yaml), got {given!r}; leave the column empty or write {metric}"
        )
    if mode is not None and mode not in ("max", "min"):
        problems.append(f"metric_mode: must be max or min (got {mode!r})")
    elif mode is None and natural is None:
        problems.append(
            f"metric_mode: required for {metric!r}, which is not a known metric ({', '.join(METRICS)}); "
            "write max (higher is better) or min (lower is better)"
        )
    elif mode is not None and natural is not None and mode != natural:
        problems.append(f"metric_mode: must be {natural} for {metric} ({direction_words(natural)}), got {mode!r}")
    return problems + score_problems(row, metric)


def score_problems(row: dict, metric: str) -> list[str]:
    """The score is a number (a percentage for top1, top5, accuracy), agrees with the metric's own column
    when both are given, and is there when the trial finished."""
    score, column = row_score(row, metric), present(row, metric) if metric in TRIALS.names else None
    given = present(row, "score")
    if given is not None and column is not None and given != column:
        return [f"score: {given!r} differs from the {metric} column ({column!r}); give one, or the same value"]
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        return [f"score: must be a number (got {score!r})"]
    if score is not None and metric in PERCENT_METRICS and not 0 <= score <= 100:
        return [f"score: {metric} is a percentage, must be in [0, 100] (got {score!r})"]
    if score is None and row.get("status") == "ok":
        where = f"or the {metric} column" if metric in TRIALS.names else f"({metric} has no column of its own)"
        return [f"score: required when status is ok; give the score column {where}"]
    return []


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


def complete(row: dict, sweep_id: str, index: int, shipped: Headline | None = None) -> dict:
    """Fill the derived columns an imported row may leave out, its headline metric and score among them."""
    headline = row_headline(row, shipped)
    row = {**row, "metric": headline.metric, "metric_mode": headline.mode, "score": row_score(row, headline.metric)}
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
    settings = ShippedSettings()
    shipped = [settings.get(row.get("space"), present(row, "profile")) for row in rows]
    problems = [f"row {i}: {p}" for i, row in enumerate(rows, start=1) for p in row_problems(row, shipped[i - 1])]
    completed = (
        [complete(row, sweep_id, i, shipped[i - 1]) for i, row in enumerate(rows, start=1)] if not problems else []
    )
    problems += one_metric_problems(completed) + duplicate_problems(completed, existing_keys(results_dir))
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
        first = space_rows[0]
        headline = settings.get(space, present(first, "profile")) or Headline(first["metric"], first["metric_mode"])
        # A shipped space's question and tolerance; any other: its metric, tolerance left to the analysis
        record_space(
            results_dir, space, sweep_id, None, headline.question, headline.metric, headline.mode, headline.tolerance
        )
    return {space: len(space_rows) for space, space_rows in per_space.items()}


def one_metric_problems(rows: list[dict]) -> list[str]:
    """Rows of one space in one file are judged on one metric."""
    first: dict[str, tuple[int, str]] = {}
    problems = []
    for index, row in enumerate(rows, start=1):
        seen = first.setdefault(row["space"], (index, row["metric"]))
        if seen[1] != row["metric"]:
            problems.append(
                f"row {index}: metric: {row['metric']!r}, but row {seen[0]} of space {row['space']!r} is judged "
                f"on {seen[1]!r}; a space has one headline metric (import them as separate spaces)"
            )
    return problems


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
