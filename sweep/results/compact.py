"""Compaction: each sweep's per-trial files merged into one file per table, so a query opens a few files
instead of three per trial ever run.

The sink writes one file per trial and table (``TABLE/SPACE/SWEEP/TRIAL.parquet``, ``sweep/results/sink.py``), so a
killed sweep loses at most the trials it was running; but a sweep of 200 trials leaves 600 files, and every
query opens each one. Compacting merges the files of each sweep folder into one,
``TABLE/SPACE/SWEEP/compacted-<id>.parquet``, whose Parquet key-value metadata (``sweep.replaces``) names the
files whose rows it holds. It runs after every ``sweep run`` and ``sweep rerun`` (on the space just run), and
as ``sweep compact`` (every space, or those named). A sweep stays one folder per table, so removing a sweep
or an import is still removing its folders. The ``spaces`` table is one file per sweep already and is left
as it is.

Nothing is lost and nothing is counted twice, wherever a compaction is killed:

1. The merged file is written under a temporary name and renamed into place (on object storage it is stored
   in one request). Killed before that: the folder is as it was, plus a temporary that no reader matches.
2. From that moment every reader here (``reader.py``: the analysis, ``sweep doctor``, this module) reads the merged file
   and leaves out the files it names (:func:`sweep.results.storage.superseded`), whether or not they still exist.
3. The named files are *superseded*, and kept for a retention period (``$SWEEP_COMPACT_RETENTION_S``, an hour by
   default; ``sweep/results/storage.py`` retention_s), as Delta Lake and Iceberg keep theirs: a reader that
   listed them before the compacted file existed (and so does not read it) still finds them, so a query never
   fails or miscounts because a compaction ran beside it. A compaction after the retention period deletes
   them (with a retention of 0, at once). Every reader leaves them out: the analysis (this module's
   :func:`~sweep.results.storage.superseded`), and the plain ``duckdb`` shell through the views of
   ``compat.sql``, which leave out every file a compacted file's ``sweep.replaces`` names
   (``parquet_kv_metadata``). ``sweep doctor`` names only those past the retention period.

One writer: ``sweep compact`` holds each space's sweep lock while it compacts that space, so it never merges
a folder that a sweep or a rerun is still writing; a space whose lock is held is skipped, and said so. (An
import writes one file per table into a folder of its own, and a folder of one file is never merged.) A
file that cannot be read (damaged) stays where it is, for ``sweep doctor``; a folder whose files disagree
on a column's type is left as it is and reported.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweep.errors import ResultsError, SweepLocked
from sweep.results.schema import TABLES
from sweep.results.reader import table_footers
from sweep.results.storage import REPLACES_KEY, Footer, ObjectStore, age_s, is_remote, locate, retention_s
from sweep.results.storage import split_path, superseding, sweep_lock
from sweep.results.storage import write_atomic as write_file

COMPACTED_PREFIX = "compacted-"


@dataclass
class Compaction:
    """What compacting one space did: files merged and written, superseded files deleted, folders left."""

    space: str
    merged: int = 0  # files whose rows went into a compacted file (kept for the retention period, then deleted)
    written: int = 0  # compacted files written
    leftovers: int = 0  # superseded files past the retention period (or left by an interrupted compaction), now deleted
    retained: int = 0  # files merged now and kept for the retention period (storage.retention_s)
    skipped: list[str] = field(default_factory=list)  # why a space or folder was left as it was

    def words(self) -> str:
        if self.skipped and not (self.merged or self.leftovers):
            return f"{self.space}: " + "; ".join(self.skipped)
        parts = [f"{self.merged} files merged into {self.written}" if self.written else "nothing to merge"]
        if self.leftovers:
            parts.append(f"deleted {self.leftovers} merged files past their retention")
        parts += self.skipped
        return f"{self.space}: " + "; ".join(parts)


class Folder:
    """A results folder's files for compaction: listing, reading, writing, deleting (the local side)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()

    def footers(self, table: str, space: str) -> list[tuple[str, Footer]]:
        return [(str(path), found) for path, found in table_footers(self.root, table, space)]

    def spaces(self) -> set[str]:
        folders = [self.root / table for table in TABLES if (self.root / table).is_dir()]
        return {path.name for folder in folders for path in folder.iterdir() if path.is_dir()}

    def read(self, path: str) -> pa.Table:
        return pq.read_table(path)

    def write(self, path: str, table: pa.Table) -> None:
        write_file(table, Path(path))

    def delete(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)

    def age_s(self, path: str) -> float | None:
        return age_s(path)


class Prefix(Folder):
    """:class:`Folder` for an object-store prefix (``sweep/results/storage.py``)."""

    def __init__(self, store: ObjectStore):
        self.store = store

    def footers(self, table: str, space: str) -> list[tuple[str, Footer]]:
        return self.store.footers(f"{table}/{space}")

    def spaces(self) -> set[str]:
        parts = [self.store.relative(info.path).split("/") for table in TABLES for info in self.store.files(table)]
        return {part[1] for part in parts if len(part) > 2}  # TABLE/SPACE/…: a file beside the spaces is none

    def read(self, path: str) -> pa.Table:
        return pq.read_table(path, filesystem=self.store.filesystem)

    def write(self, path: str, table: pa.Table) -> None:
        self.store.put_parquet(self.store.relative(path), table)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # deleted by an earlier, interrupted compaction
            self.store.delete(path)

    def age_s(self, path: str) -> float | None:
        return age_s(path, self.store.filesystem)


def side(results) -> Folder:
    results = locate(results)
    return Prefix(results) if is_remote(results) else Folder(results)


def compact(results, spaces: list[str] | None = None, wait: bool = False) -> list[Compaction]:
    """Compact every space under ``results`` (or those in ``spaces``), each while holding its sweep lock; a
    space whose lock another process holds is skipped (``wait``: wait for it instead)."""
    where = side(results)
    outcomes = []
    for space in sorted(spaces or where.spaces()):
        try:
            with sweep_lock(results, space, wait):
                outcomes.append(compact_space(results, space))
        except SweepLocked:
            outcomes.append(Compaction(space, skipped=["a sweep of it is writing now; compact it after that ends"]))
    return outcomes


def compact_space(results, space: str) -> Compaction:
    """Compact one space's sweep folders. The caller holds the space's sweep lock (a sweep does, after it
    has run; :func:`compact` takes it)."""
    where, outcome = side(results), Compaction(space)
    try:
        for table in TABLES:
            by_folder: dict[str, list[tuple[str, Footer]]] = {}
            for path, found in where.footers(table, space):
                by_folder.setdefault(split_path(path)[0], []).append((path, found))
            for folder, footers in sorted(by_folder.items()):
                compact_folder(where, table, folder, footers, outcome)
    except OSError as exc:
        raise ResultsError(
            f"cannot compact {space!r} under {results}: {exc}. No row is lost or counted twice: run "
            "`sweep compact` again when the results can be written"
        ) from exc
    return outcome


def compact_folder(where: Folder, table: str, folder: str, footers: list[tuple[str, Footer]], outcome) -> None:
    """One sweep folder: delete what a compacted file written more than the retention period ago holds, then
    merge the readable rest, if more than one file, into a new compacted file that names them (deleted at once
    only with a retention of 0; else by a compaction after the retention period)."""
    replaced = superseding(footers)
    keep_s = retention_s()
    ages = {by: where.age_s(by) for by in set(replaced.values())}  # one request per compacted file, not per file
    for path, by in sorted(replaced.items()):
        if ages[by] is not None and ages[by] < keep_s:
            continue  # within the retention period: a reader that listed it before `by` existed may read it
        where.delete(path)
        outcome.leftovers += 1
    live = [(path, found) for path, found in footers if path not in replaced and found.problem is None]
    if len(live) < 2:
        return
    try:
        merged = pa.concat_tables([where.read(path) for path, _ in live], promote_options="permissive")
    except (pa.ArrowException, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        outcome.skipped.append(f"{folder} left as it is: its {table} files disagree ({first}); `sweep doctor`")
        return
    names = [split_path(path)[1] for path, _ in live]
    merged = merged.replace_schema_metadata({REPLACES_KEY: json.dumps(names).encode()})
    where.write(f"{folder}/{COMPACTED_PREFIX}{uuid.uuid4().hex[:12]}.parquet", merged)  # the commit
    if keep_s == 0:
        for path, _ in live:
            where.delete(path)
    else:
        outcome.retained += len(live)  # deleted by a compaction after the retention period
    outcome.merged += len(live)
    outcome.written += 1
