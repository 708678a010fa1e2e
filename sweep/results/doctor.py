"""``sweep doctor [--results DIR] [--fix]``: check every file of a results folder, and set damaged ones aside.

Each Parquet file of ``trials``, ``epochs``, ``kappa`` and ``spaces`` must read whole, carry a
``schema_version`` this version knows (1 or 2), hold its table's key columns and give every column the
table knows the type ``sweep/results/schema.py`` gives it. Temporary files (``.*.tmp``) a crash left behind are
problems too, and so are *superseded* files kept past the retention period (``sweep/results/compact.py``: a
compaction keeps the files it merged for ``$SWEEP_COMPACT_RETENTION_S``, an hour by default, for readers that
listed them before; one that is still there later was left by an interrupted compaction, or no compaction ran
since): their rows are in the compacted file beside them, and every reader leaves them out. Within the
retention period they are neither findings nor checked (their rows are the compacted file's). A (space, config_id, seed) recorded ``ok`` more than once (by two sweeps or imports)
is reported as a note: the analysis averages every such row but counts the seed once.

Without ``--fix`` it only reports: one line per finding, then a summary; the exit status is 1 when a
problem was found. With ``--fix`` it moves each file with a problem (and each temporary) to
``DIR/.quarantine/<time>/<its path under DIR>``, out of every table's glob, and says where.

On object storage (``--results s3://bucket/prefix``) the same checks read each object through pyarrow, and
``--fix`` moves objects (a copy, then a delete). There are no temporaries there: each file is stored in one
request, so none is looked for.
"""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.errors import DoctorError
from sweep.results.schema import ALL_TABLES, SCHEMAS, TRIAL_KEY
from sweep.results.reader import footer, footer_problem
from sweep.results.storage import RETENTION_ENV, ObjectStore, age_s, is_remote, retention_s, superseding

KNOWN_VERSIONS = (1, 2)
QUARANTINE = ".quarantine"
# Columns of version-1 files that version 2 dropped; read by sweep/results/compat.sql, so not problems.
VERSION_1_COLUMNS = {"spaces": {"tolerance_top1": pa.float64()}}
KEY_COLUMNS = {
    **{table: [name for name, _ in TRIAL_KEY] for table in ("trials", "epochs", "kappa")},
    "spaces": ["schema_version", "space", "sweep_id"],
}
RECENT_S = 300  # a temporary younger than this may belong to a sweep writing right now: reported, not moved
NOTES_SHOWN = 20
DUPLICATE_COLUMNS = ("space", "config_id", "seed", "sweep_id", "status")


@dataclass(frozen=True)
class Finding:
    """A problem (with the file ``--fix`` moves) or a note (nothing to move)."""

    path: Path | None
    message: str
    problem: bool = True


def same_kind(found: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether DuckDB reads ``found`` as ``wanted`` without changing its meaning: the same type, or one of
    the same family (integers, floats, text, timestamps), or a column of nulls."""
    if found == wanted or pa.types.is_null(found):
        return True
    families = (
        pa.types.is_integer,
        pa.types.is_floating,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        pa.types.is_timestamp,
    )
    return any(family(found) and family(wanted) for family in families)


def check_file(path: Path, table: str) -> tuple[list[Finding], pa.Table | None]:
    """The findings for one Parquet file of ``table``, and its contents when it reads."""
    problem = footer_problem(path)
    if problem is not None:
        return [Finding(path, f"{path}: {problem}")], None
    return check_contents(path, table)


def check_contents(path, table: str, store: ObjectStore | None = None) -> tuple[list[Finding], pa.Table | None]:
    """The findings for a file whose footer reads, and its contents when they pass. ``store``: ``path`` is an
    object's path in that store's filesystem, named by its URI in the findings."""
    shown = path if store is None else store.uri_of(path)
    try:
        data = pq.read_table(path, filesystem=None if store is None else store.filesystem)
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return [Finding(path, f"{shown}: its data cannot be read ({first})")], None
    problems, notes = content_problems(data, table, shown)
    if problems:
        return [Finding(path, f"{shown}: {'; '.join(problems)}")], None
    return notes, data


def content_problems(data: pa.Table, table: str, shown) -> tuple[list[str], list[Finding]]:
    """What is wrong with a file's contents (key columns, column types, schema version), and notes."""
    schema, problems, notes = SCHEMAS[table], [], []
    names = data.column_names
    missing = [name for name in KEY_COLUMNS[table] if name not in names]
    if missing:
        problems.append(f"missing the {table} column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    for field in data.schema:
        wanted = schema.field(field.name).type if field.name in schema.names else None
        wanted = wanted or VERSION_1_COLUMNS.get(table, {}).get(field.name)
        if wanted is None:
            notes.append(
                Finding(None, f"{shown}: column {field.name!r} is not a {table} column; it is read as is", False)
            )
        elif not same_kind(field.type, wanted):
            problems.append(f"column {field.name} is {field.type}, the {table} table's is {wanted}")
    if "schema_version" in names and not missing:
        versions = set(data.column("schema_version").to_pylist())
        unknown = sorted(versions - set(KNOWN_VERSIONS), key=str)
        if unknown:
            problems.append(
                f"schema_version {', '.join(map(str, unknown))} is not one this version reads "
                f"({', '.join(map(str, KNOWN_VERSIONS))})"
            )
    return problems, notes


def expired(replaced: dict[str, str], filesystem=None) -> set[str]:
    """The superseded files kept past the retention period (``sweep/results/compact.py``): within it they are kept
    on purpose, for readers that listed them before their compacted file was written, and are no finding."""
    keep_s = retention_s()
    ages = {by: age_s(by, filesystem) for by in set(replaced.values())}  # one look per compacted file
    return {path for path, by in replaced.items() if ages[by] is None or ages[by] >= keep_s}


def superseded_message(path) -> str:
    return (
        f"{path}: its rows are in a compacted file beside it, written longer than the retention period ago "
        f"(${RETENTION_ENV}); every reader leaves it out (the plain duckdb shell too, through `sweep sql "
        "--print-views`); `sweep compact` deletes it"
    )


def temporaries(results_dir: Path) -> list[Finding]:
    """Temporary files (``.*.tmp``) a writer left behind; the young ones may still be in use."""
    findings = []
    now = time.time()
    for table in ALL_TABLES:
        for path in sorted((results_dir / table).rglob(".*.tmp")):
            try:
                age = now - path.stat().st_mtime
            except OSError:
                continue  # renamed into place meanwhile
            if age < RECENT_S:
                message = f"{path}: a temporary file {age:.0f} s old; a sweep may be writing it, so it is left alone"
                findings.append(Finding(None, message, False))
            else:
                findings.append(Finding(path, f"{path}: a temporary file left by an interrupted write; never read"))
    return findings


def duplicate_notes(trials: list[pa.Table]) -> list[Finding]:
    """A note per (space, config_id, seed) recorded ``ok`` by more than one row."""
    sweeps: dict[tuple, list[str]] = defaultdict(list)
    for data in trials:
        if "status" not in data.column_names:
            continue
        columns = [data.column(name).to_pylist() for name in DUPLICATE_COLUMNS]
        for space, config_id, seed, sweep_id, status in zip(*columns, strict=True):
            if status == "ok":
                sweeps[(space, config_id, seed)].append(str(sweep_id))
    repeated = [(key, ids) for key, ids in sweeps.items() if len(ids) > 1]
    notes = [
        Finding(
            None,
            f"space {space!r}, config {config_id}, seed {seed}: {len(ids)} ok rows (sweeps {', '.join(sorted(ids))}); "
            "the analysis averages them all but counts the seed once",
            False,
        )
        for (space, config_id, seed), ids in sorted(repeated, key=lambda item: tuple(map(str, item[0])))
    ]
    if len(notes) > NOTES_SHOWN:
        rest = len(notes) - NOTES_SHOWN
        notes = [*notes[:NOTES_SHOWN], Finding(None, f"… and {rest} more (space, config, seed) recorded twice", False)]
    return notes


def examine(results_dir: Path) -> tuple[int, list[Finding]]:
    """How many files were checked, and every finding."""
    if is_remote(results_dir):
        return examine_store(results_dir)
    if not results_dir.is_dir():
        raise DoctorError(f"no results folder at {results_dir}; give the one a sweep wrote with --results DIR")
    findings, trials, checked = [], [], 0
    for table in ALL_TABLES:
        paths = sorted((results_dir / table).glob("**/*.parquet"))
        replaced = superseding([(str(path), footer(path)) for path in paths])
        past = expired(replaced)
        for path in paths:
            checked += 1
            if str(path) in past:
                findings.append(Finding(path, superseded_message(path)))
                continue
            if str(path) in replaced:  # kept on purpose for the retention period; its rows are the compacted file's
                continue
            file_findings, data = check_file(path, table)
            findings += file_findings
            if data is not None and table == "trials":
                trials.append(data.select([name for name in data.column_names if name in DUPLICATE_COLUMNS]))
    findings += temporaries(results_dir)
    return checked, findings + duplicate_notes(trials)


def examine_store(store: ObjectStore) -> tuple[int, list[Finding]]:
    """:func:`examine` for an object-store prefix: the footers read at once, then each readable file whole."""
    if not store.exists():
        raise DoctorError(f"nothing under {store}; give the prefix a sweep wrote with --results")
    findings, trials, checked = [], [], 0
    for table in ALL_TABLES:
        footers = store.footers(table)
        replaced = superseding(footers)
        past = expired(replaced, store.filesystem)
        good, bad = store.readable(table)
        checked += len(footers)
        findings += [Finding(path, f"{store.uri_of(path)}: {problem}") for path, problem in bad if path not in replaced]
        findings += [Finding(path, superseded_message(store.uri_of(path))) for path in sorted(past)]
        for path, _ in good:
            file_findings, data = check_contents(path, table, store)
            findings += file_findings
            if data is not None and table == "trials":
                trials.append(data.select([name for name in data.column_names if name in DUPLICATE_COLUMNS]))
    return checked, findings + duplicate_notes(trials)


def quarantine_store(store: ObjectStore, paths: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """:func:`quarantine` for an object-store prefix: each object copied to ``.quarantine/<time>/…``, then
    deleted (``move``); returns (moved, failures) by URI."""
    folder = f"{QUARANTINE}/{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    moved, failures = [], []
    for path in paths:
        target = store.path(folder, store.relative(path))
        try:
            store.move(path, target)
            moved.append((store.uri_of(path), store.uri_of(target)))
        except OSError as exc:
            failures.append(f"cannot move {store.uri_of(path)} to {store.uri_of(target)}: {exc}")
    return moved, failures


def quarantine(results_dir: Path, paths: list[Path]) -> tuple[list[tuple[Path, Path]], list[str]]:
    """Move each file to ``results_dir/.quarantine/<time>/<its path under results_dir>``: (moved, failures)."""
    if is_remote(results_dir):
        return quarantine_store(results_dir, paths)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = results_dir / QUARANTINE / stamp
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = results_dir / QUARANTINE / f"{stamp}-{suffix}"
    moved, failures = [], []
    for path in paths:
        target = folder / path.relative_to(results_dir)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(target))
            moved.append((path, target))
        except OSError as exc:
            failures.append(f"cannot move {path} to {target}: {exc.strerror or exc}")
    return moved, failures


def cmd_doctor(args) -> int:
    results_dir = args.results if is_remote(args.results) else Path(args.results)
    checked, findings = examine(results_dir)
    problems = [f for f in findings if f.problem]
    for finding in findings:
        print(f"{'problem' if finding.problem else 'note'}: {finding.message}")
    where = f"{checked} file{'s' if checked != 1 else ''} under {results_dir}/"
    if not problems:
        print(f"doctor: checked {where}: no problems")
        return 0
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    if not args.fix:
        print(
            f"doctor: checked {where}: {count}. `sweep doctor --fix` moves the files named above to "
            f"{results_dir}/{QUARANTINE}/<time>/, out of the analysis"
        )
        return 1
    moved, failures = quarantine(results_dir, [f.path for f in problems if f.path is not None])
    for source, target in moved:
        print(f"moved {source} -> {target}")
    for failure in failures:
        print(f"error: {failure}")
    if failures:
        print(f"doctor: checked {where}: {count}; {len(moved)} files moved, {len(failures)} could not be")
        return 1
    print(f"doctor: checked {where}: {count}; moved {len(moved)} file{'s' if len(moved) != 1 else ''} aside")
    return 0
