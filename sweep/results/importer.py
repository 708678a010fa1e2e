"""``sweep import FILE``: add trial rows produced elsewhere (another cluster's results, a published table
typed in by hand) to the results, after validating every row. One bad row rejects the whole file, with
every bad row's number and reason, and nothing is written.

Each row's headline metric: a row whose ``space`` names a shipped space is judged on that space's metric,
direction and tolerance (its ``score`` is the ``score`` column, or else the column named after the metric,
e.g. ``accuracy``); any other row names its metric in a ``metric`` column (``top1`` when it has none), its
direction in ``metric_mode`` (needed only for a metric ``workers/metrics.py`` does not know), and its value
in ``score`` or in the metric's own column.

Every cell is read with its column's type in ``sweep/results/schema.py`` whatever it looks like: ``git_sha``,
``config_id``, ``trial_id`` … stay text even when all digits; a cell that cannot take its column's type
is one of the file's row reasons. A file that cannot be read at all (not UTF-8, not Parquet, ragged or
empty) is rejected with one line saying why. Rows of a shipped space without an ``is_baseline`` column are
marked baseline when their shape is the space's baseline shape.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.errors import ImportRejected, ResultsError, SpaceError
from sweep.headline import Headline, direction_words
from sweep.space.shapes import enumerate_shapes, resolve_baseline
from sweep.results.reader import read_table
from sweep.results.schema import SCHEMA_VERSION, TABLES, TRIALS, table_from_rows
from sweep.results.sink import record_space, write_atomic
from sweep.space.loader import load_space, shipped_spaces
from sweep.text import plural
from workers.metrics import DEFAULT_METRIC, METRICS, natural_mode, score_of
from workers.vocabulary import SHAPE_KEYS, STATUSES

REQUIRED = ("space", "seed", "depth", "num_heads", "embed_dim", "mlp_dim", "status", "params")
SHAPE_INTS = (*SHAPE_KEYS, "attn_dim")
# Counts, sizes, rates and durations: never negative (the shape columns and params must be >= 1, below). The
# metrics' own bounds (percentages in [0, 100], losses >= 0) come from their definitions (workers/metrics.py).
NON_NEGATIVE = (
    "restarts", "epochs_run", "steps_run", "seq_len", "params_attention", "params_mlp", "params_embed_head",
    "train_samples_per_s", "infer_samples_per_s", "train_tokens_per_s",
    "infer_tokens_per_s", "latency_b1_ms", "token_latency_ms", "kappa_mean", "kappa_max", "wall_s", "train_s",
    "kappa_probe_s", "finetune_s", "resident_data_bytes", "kv_cache_bytes_per_token",
)  # fmt: skip
SHAPE_KEY = (*SHAPE_KEYS, "family")  # as sweep.space.shapes.Shape.key(), which adds the key/value heads and conditioning
SPACE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # it names a folder under results/<table>/
INT_BITS = {pa.int32(): 32, pa.int64(): 64}
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")
REIMPORT = "save it as UTF-8 CSV (or as Parquet) and import it again"


@dataclass(frozen=True)
class ShippedSpace:
    """What an import takes from a shipped space: the headline its rows are judged on, its question, its
    baselines and its family."""

    headline: Headline
    question: str | None = None
    baselines: frozenset = frozenset()  # shipped spaces: the baseline shapes' keys (SHAPE_KEY), one per family
    family: str | None = None  # shipped spaces of one model family: that family (rows without one get it)


class ShippedSettings:
    """The headline metric of each shipped space (and profile) a file's rows name, loaded once each."""

    def __init__(self):
        self.names = set(shipped_spaces())
        self.cache: dict[tuple, ShippedSpace | str] = {}

    def get(self, space, profile) -> ShippedSpace | str | None:
        """The shipped space's settings; a problem (str) when its profile does not exist; None when
        ``space`` is not a shipped space."""
        if space not in self.names:
            return None
        key = (space, profile or None)
        if key not in self.cache:
            try:
                _, loaded, _ = load_space(space, profile or None)
                shapes, _ = enumerate_shapes(loaded)
                baselines = {resolve_baseline(loaded, shapes, family) for family in loaded.families()} - {None}
                families = loaded.families()
                self.cache[key] = ShippedSpace(
                    loaded.metric,
                    loaded.question,
                    frozenset(baselines),
                    families[0] if len(families) == 1 else None,
                )
            except SpaceError as exc:  # an unknown profile (a shipped file itself is valid: a test holds it)
                self.cache[key] = f"profile: shipped space {space!r} cannot be loaded with it: {exc.issues[-1]}"
        return self.cache[key]


def read_rows(path: Path) -> tuple[list[str], list[dict | str]]:
    """The file's column names and its rows: a dict of raw cells per row (CSV: text; Parquet: the file's
    values), or, for a CSV row that does not fit the header, the reason. Raises :class:`ImportRejected` for
    a file that cannot be read at all."""
    if not path.is_file():
        raise ImportRejected(f"{path}: no such file")
    return read_parquet(path) if path.suffix == ".parquet" else read_csv(path)


def read_parquet(path: Path) -> tuple[list[str], list[dict | str]]:
    try:
        table = pq.read_table(path)
        rows = table.to_pylist()
    except Exception as exc:  # whatever the reader of an untrusted file raises, the file is the cause
        raise ImportRejected(f"{path}: cannot read as Parquet ({first_line(exc)}); {REIMPORT}") from exc
    columns = [str(name) for name in table.column_names]
    header_problem(path, columns)
    return columns, rows


def read_csv(path: Path) -> tuple[list[str], list[dict | str]]:
    """Comma-separated UTF-8 text (a UTF-8 byte-order mark is allowed), first line the column names."""
    data = path.read_bytes()
    if not data.strip():
        raise ImportRejected(f"{path}: the file is empty; it needs a header line of trials columns and rows")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ImportRejected(f"{path}: the file is UTF-16 text; {REIMPORT}")
    if data.startswith(b"PAR1"):
        raise ImportRejected(f"{path}: the file is Parquet, not CSV; name it {path.stem}.parquet")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportRejected(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}; Latin-1 or another encoding?); "
            f"{REIMPORT}"
        ) from exc
    if "\x00" in text:
        raise ImportRejected(f"{path}: the file holds NUL bytes, so it is not CSV text (UTF-16?); {REIMPORT}")
    try:
        lines = [cells for cells in csv.reader(io.StringIO(text, newline="")) if cells]
    except csv.Error as exc:
        raise ImportRejected(f"{path}: cannot read as CSV ({exc}); {REIMPORT}") from exc
    if not lines:
        raise ImportRejected(f"{path}: the file is empty; it needs a header line of trials columns and rows")
    columns = [name.strip() for name in lines[0]]
    header_problem(path, columns)
    rows: list[dict | str] = []
    for cells in lines[1:]:
        if len(cells) != len(columns):
            rows.append(f"has {len(cells)} cells, but the header has {len(columns)} columns")
        else:
            rows.append(dict(zip(columns, cells, strict=True)))
    return columns, rows


def header_problem(path: Path, columns: list[str]) -> None:
    """Reject a header with an unnamed or repeated column, or columns that are not trials columns."""
    for index, name in enumerate(columns, start=1):
        if not name:
            raise ImportRejected(f"{path}: column {index} has no name; name it after a trials column or remove it")
        if columns.index(name) != index - 1:
            raise ImportRejected(
                f"{path}: column {name!r} appears twice (columns {columns.index(name) + 1} and {index}); keep one"
            )
    unknown = sorted(name for name in columns if name not in TRIALS.names)
    if unknown:
        separators = (("\t", "tab"), (";", "semicolon"))
        separated = next((f" (it looks {word}-separated: use commas)" for sep, word in separators
                          if any(sep in name for name in unknown)), "")  # fmt: skip
        names = ", ".join(name if name.isidentifier() else shown(name) for name in unknown[:20])
        raise ImportRejected(
            f"{path}: unknown columns {names}"
            f"{' …' if len(unknown) > 20 else ''}{separated}; the trials columns are listed in docs/schema.md. "
            "Nothing was written."
        )


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


def shown(value) -> str:
    """A cell for a message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def typed_row(raw: dict) -> tuple[dict, dict[str, str]]:
    """The row with every cell read as its column's type (``sweep/results/schema.py``), and the reason for each cell
    that cannot be (those cells keep their raw value). Empty cells and NaN are missing (None)."""
    row, problems = {}, {}
    for name, value in raw.items():
        try:
            row[name] = as_type(value, TRIALS.field(name).type)
        except ValueError as exc:
            row[name], problems[name] = value, f"{name}: {exc} (got {shown(value)})"
    return row, problems


def as_type(value, kind: pa.DataType):
    """``value`` as a Python value of the Arrow type ``kind``; ValueError says what it must be."""
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if pa.types.is_string(kind):
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # an all-digit id or sha stored as a number in a Parquet file
        raise ValueError("must be text")
    if pa.types.is_integer(kind):
        return as_int(value, INT_BITS[kind])
    if pa.types.is_floating(kind):
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ValueError("must be a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number")
        number = float(value)
        return None if math.isnan(number) else number
    if pa.types.is_boolean(kind):
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise ValueError("must be true or false")
    if pa.types.is_timestamp(kind):
        return as_time(value)
    raise ValueError(f"has a type ({kind}) the importer does not read")  # a schema change would show here


def as_int(value, bits: int) -> int:
    """``value`` as a whole number that fits in ``bits`` signed bits (``3``, ``3.0`` and ``" 3 "`` are 3);
    a fraction, text that is no number, or a number out of range is a ValueError saying so."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise ValueError("must be a whole number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a whole number")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError("must be a whole number")
        value = int(value)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(f"must be a whole number between -2**{bits - 1} and 2**{bits - 1} - 1")
    return value


def as_time(value) -> datetime:
    """A time (ISO 8601 text, or a Parquet timestamp or date); without a time zone it is read as UTC."""
    if hasattr(value, "to_pydatetime"):  # a pandas Timestamp (nanosecond Parquet timestamps)
        value = value.to_pydatetime()
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time())
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("must be an ISO 8601 time such as 2025-01-31T12:00:00+00:00") from None
    if not isinstance(value, datetime):
        raise ValueError("must be an ISO 8601 time such as 2025-01-31T12:00:00+00:00")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def present(row: dict, name: str):
    """The row's value of ``name``, None for a missing or empty cell (CSV) or NaN (Parquet)."""
    value = row.get(name)
    return None if value == "" or (isinstance(value, float) and math.isnan(value)) else value


def is_integer(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def metric_bounds() -> dict[str, tuple[float | None, float | None]]:
    """(lowest, highest) of each metric's column that has a bound, from the metrics' definitions."""
    return {name: metric.bounds for name, metric in METRICS.items() if metric.bounds != (None, None)}


def metric_bound_problems(row: dict) -> list[str]:
    """A metric's value outside its bounds (:func:`metric_bounds`): a percentage outside [0, 100], a loss
    below 0."""
    problems = []
    for name, (low, high) in metric_bounds().items():
        value = row.get(name)
        if value is None:
            continue
        if high is not None:  # bounded on both sides: a percentage
            if not isinstance(value, (int, float)) or not low <= value <= high:
                problems.append(f"{name}: must be a percentage in [{low:g}, {high:g}] (got {value!r})")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value < low:
            problems.append(f"{name}: must not be negative (got {value!r})")
    return problems


def row_problems(row: dict, shipped: ShippedSpace | str | None = None) -> list[str]:
    """Every reason ``row`` cannot be a trials row (empty when it can). ``shipped``: the settings of the
    shipped space the row names (or why it cannot be had), None for any other space."""
    problems = [f"{name}: missing" for name in REQUIRED if row.get(name) in (None, "")]
    space = row.get("space")
    if isinstance(space, str) and not SPACE_NAME.fullmatch(space):
        problems.append(
            f"space: must be a name of letters, digits, _ . - not starting with . or - (it names a folder under "
            f"results/), got {shown(space)}"
        )
    for name in NON_NEGATIVE:
        value = row.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            problems.append(f"{name}: must not be negative (got {value!r})")
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
    problems += metric_bound_problems(row)
    if isinstance(shipped, str):
        problems.append(shipped)
    else:
        problems += headline_problems(row, shipped)
    if not problems:
        problems += shape_problems(row)
    return problems


def row_headline(row: dict, shipped: ShippedSpace | None) -> Headline:
    """The row's metric and direction: the shipped space's, else the row's ``metric`` (top1 when it has
    none) with its ``metric_mode`` or, when it has none (or one :func:`headline_problems` rejects), the
    metric's own direction; the tolerance is left to the analysis."""
    if shipped is not None:
        return shipped.headline
    metric, mode = str(present(row, "metric") or DEFAULT_METRIC), present(row, "metric_mode")
    return Headline(name=metric, mode=mode if mode in ("max", "min") else natural_mode(metric))


def row_score(row: dict, metric: str):
    """The row's score (``workers.metrics.score_of``): its ``score`` column, else the column named after its
    metric; an empty cell or NaN is no value."""
    return score_of({name: present(row, name) for name in ("score", metric)}, metric)


def headline_problems(row: dict, shipped: ShippedSpace | None) -> list[str]:
    """Every reason the row's metric, metric_mode and score cannot stand."""
    headline, given = row_headline(row, shipped), present(row, "metric")
    metric, natural, mode = headline.name, natural_mode(headline.name), present(row, "metric_mode")
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
    if score is not None and not math.isfinite(score):
        return [f"score: must be a finite number (got {score!r}); leave it empty for a trial without one"]
    if score is not None and metric in METRICS and METRICS[metric].unit == "percent" and not 0 <= score <= 100:
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


def complete(row: dict, sweep_id: str, index: int, shipped: ShippedSpace | None = None) -> dict:
    """Fill the derived columns an imported row may leave out, its headline metric and score among them."""
    headline = row_headline(row, shipped)
    row = {**row, "metric": headline.name, "metric_mode": headline.mode, "score": row_score(row, headline.name)}
    row["family"] = row.get("family") or (shipped.family if shipped and shipped.family else "vit")
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


def existing_rows(results_dir: Path) -> tuple[set[tuple], set[str]]:
    """The (space, config_id, seed) of every trial in the results, and the spaces with a baseline row."""
    rows = read_table(results_dir, "trials", "space, config_id, seed, is_baseline")
    return {tuple(row[:3]) for row in rows}, {row[0] for row in rows if row[3]}


def import_file(path: Path, results_dir: Path) -> dict[str, int]:
    """Validate every row of ``path``; write them all (one file per space) or nothing. Returns rows per space.

    Warns (on stderr) about each space that ends up with no baseline row, as its verdicts stay empty."""
    columns, raw_rows = read_rows(path)
    if not raw_rows:
        raise ImportRejected(f"{path}: no rows, only the header; nothing was written")
    rows, failed, problems = type_rows(raw_rows)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    sweep_id = f"import-{stamp}-{uuid.uuid4().hex[:6]}"  # unique: two imports in one second never collide
    settings = ShippedSettings()
    shipped = [shipped_headline(settings, row) for row in rows]
    for index, row in enumerate(rows, start=1):
        if row:  # a cell that could not be read is named once, by typed_row, not again by the checks below
            reasons = row_problems(row, shipped[index - 1])
            problems += [f"row {index}: {p}" for p in reasons if p.split(":")[0] not in failed[index - 1]]
    completed = (
        [complete(row, sweep_id, i, shipped[i - 1]) for i, row in enumerate(rows, start=1)] if not problems else []
    )
    existing, with_baseline = existing_rows(results_dir)
    problems += one_metric_problems(completed) + duplicate_problems(completed, existing)
    if problems:
        listed = "\n  ".join(problems[:50]) + (f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else "")
        raise ImportRejected(f"{path}: rejected, nothing written ({plural(len(problems), 'problem')}):\n  {listed}")
    if "is_baseline" not in columns or all(row.get("is_baseline") is None for row in rows):
        mark_baselines(completed, shipped)
    per_space: dict[str, list[dict]] = {}
    for row in completed:
        per_space.setdefault(row["space"], []).append(row)
    write_all(path, results_dir, sweep_id, per_space, settings)
    for space, space_rows in per_space.items():
        if space not in with_baseline and not any(row["is_baseline"] for row in space_rows):
            warn_no_baseline(space, results_dir, sweep_id)
    return {space: len(space_rows) for space, space_rows in per_space.items()}


def type_rows(raw_rows: list[dict | str]) -> tuple[list[dict], list[dict], list[str]]:
    """Each raw row typed by the schema: the rows (``{}`` for one that could not be read), per row the
    cells that failed (column → reason), and every problem as ``row N: reason``."""
    rows, failed, problems = [], [], []
    for index, raw in enumerate(raw_rows, start=1):
        if isinstance(raw, str):  # a CSV line that does not fit the header
            row, bad = {}, {}
            problems.append(f"row {index}: {raw}")
        else:
            row, bad = typed_row(raw)
            problems += [f"row {index}: {reason}" for reason in bad.values()]
        rows.append(row)
        failed.append(bad)
    return rows, failed, problems


def warn_no_baseline(space: str, results_dir: Path, sweep_id: str) -> None:
    print(
        f"warning: no row of space {space!r} is marked as its baseline, so its verdicts (vs_baseline, "
        "depth_edge, head_dim_edge) stay empty until one is: add an is_baseline column (true on the "
        "baseline's rows) to the file; to import it again, first remove this import "
        f"({results_dir}/{{trials,epochs,kappa}}/{space}/{sweep_id}/ and "
        f"{results_dir}/spaces/{space}/{sweep_id}.parquet)",
        file=sys.stderr,
    )


def shipped_headline(settings: ShippedSettings, row: dict) -> ShippedSpace | str | None:
    """The settings of the shipped space the row names (None: not a shipped space, or not readable as one)."""
    space, profile = row.get("space"), present(row, "profile")
    if not isinstance(space, str) or not isinstance(profile, (str, type(None))):
        return None
    return settings.get(space, profile)


def mark_baselines(rows: list[dict], shipped: list) -> None:
    """For a file without ``is_baseline``: mark the rows of a shipped space whose shape is its baseline's."""
    for row, space in zip(rows, shipped, strict=True):
        if isinstance(space, ShippedSpace):
            row["is_baseline"] = shape_key(row) in space.baselines


def shape_key(row: dict) -> tuple:
    """``row``'s shape as :meth:`sweep.space.shapes.Shape.key` spells it: a row without ``num_kv_heads`` or
    ``conditioning`` is multi-head attention as built."""
    kv_heads = row.get("num_kv_heads") or row.get("num_heads")
    return (*(row.get(key) for key in SHAPE_KEY), kv_heads, row.get("conditioning") or "none")


def write_all(path: Path, results_dir: Path, sweep_id: str, per_space: dict, settings: ShippedSettings) -> None:
    """Every table's file for every space, or (when the folder cannot take them) none: built first, then
    written, and what was written removed again if a later write fails."""
    tables = {}
    try:
        for space, space_rows in per_space.items():
            for table in TABLES:  # empty epochs/kappa files keep every table's glob non-empty for the duckdb shell
                target = results_dir / table / space / sweep_id / f"{path.stem}.parquet"
                tables[target] = table_from_rows(table, space_rows if table == "trials" else [])
    except (pa.ArrowException, OverflowError) as exc:  # a value the checks let through but Arrow cannot hold
        raise ImportRejected(f"{path}: rejected, nothing written: {first_line(exc)}") from exc
    written: list[Path] = []
    try:
        for target, table in tables.items():
            write_atomic(table, target)
            written.append(target)
        for space, space_rows in per_space.items():
            first = space_rows[0]
            shipped = settings.get(space, present(first, "profile"))
            if not isinstance(shipped, ShippedSpace):
                shipped = ShippedSpace(Headline(name=first["metric"], mode=first["metric_mode"]))
            # A shipped space's question and tolerance; any other: its metric, tolerance left to the analysis
            written.append(Path(results_dir) / "spaces" / space / f"{sweep_id}.parquet")
            headline = shipped.headline
            settings_row = (shipped.question, headline.name, headline.mode, headline.tolerance)
            record_space(results_dir, space, sweep_id, None, *settings_row)
    except OSError as exc:
        for target in written:
            target.unlink(missing_ok=True)
            for folder in target.relative_to(results_dir).parents[:-1]:  # the folders made for it, if now empty
                with contextlib.suppress(OSError):
                    (results_dir / folder).rmdir()
        raise ResultsError(
            f"cannot write under {results_dir}: {exc}; nothing was imported (free space or fix permissions, then "
            "import again)"
        ) from exc


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
        if key in existing:
            problems.append(f"row {index}: (space, config_id, seed) = {key} is already in the results")
    return problems
