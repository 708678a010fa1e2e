"""The results tables as DuckDB views over their Parquet files: what every reader of ``results/`` shares (the
analysis, ``sweep doctor``, ``sweep compact``, ``sweep import``).

- Every file's footer is read once per process (``storage.py``'s :class:`~sweep.results.storage.Footer`): a
  file that cannot be read as Parquet (cut short, overwritten with something else) is left out with a
  warning on stderr that names it (``sweep doctor`` checks more thoroughly, ``--fix`` sets it aside), and a
  file whose rows a compacted file holds (``compact.py``) is left out silently.
- The files are grouped by schema, and each table's view reads each group with one ``read_parquet`` over
  its file list, the groups joined ``UNION ALL BY NAME``. DuckDB then binds a view from one file per group
  instead of every file's schema (``union_by_name``).
- Results on object storage (``s3://…``, ``gs://…``) are listed and their footers read through pyarrow, and each
  table is handed to DuckDB as a pyarrow dataset over the readable files (the columns of every file, as
  ``union_by_name`` gives them), which DuckDB scans through pyarrow's S3 or GCS client.

``trials``, ``epochs`` and ``spaces`` may hold files of several schema versions: their views here are
``trials_files``, ``epochs_files`` and ``spaces_files``, and ``compat.sql`` beside this module defines the
tables over them with every version read as the latest (``sweep/analysis/sql.py`` loads it first).
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pyarrow as pa

from sweep.errors import QueryError
from sweep.questions import declared_axes, declared_labels
from sweep.results.schema import ALL_TABLES, SCHEMAS, current_schema
from sweep.text import at_mark
from sweep.results.storage import Footer, ObjectStore, cached_footer, is_remote, locate, superseded

COMPAT_SQL = Path(__file__).resolve().parent / "compat.sql"  # package data: shipped in the wheel
LABELS_MARK = "-- @question-labels"  # where compat.sql and core.sql take the questions' label columns
AXES_MARK = "-- @question-axes"  # where compat.sql reads each question's axis as built, and core.sql takes them
AXIS_NULLS_MARK = "-- @question-axis-nulls"  # where compat.sql types each question's axis for files without it


def label_line(label, expression: str) -> str:
    """One select-list line for a declared label: ``expression AS name,`` and, as a comment, the question's
    definition of it (so ``--print-views`` states what every column holds)."""
    return f"{expression} AS {label.name},  -- {' '.join(label.doc.split())}"


def compat_sql() -> str:
    """``compat.sql`` with a typed NULL for each question's label (``Question.labels``) and axis
    (``Question.axes``) in the trials view's empty select: a folder whose files predate one (or hold only
    version 1) still has its column; and each axis read as the model as built where a row predates it."""
    labels = [label_line(label, f"NULL::{label.sql_type}") for label in declared_labels()]
    nulls = [label_line(axis, f"NULL::{axis.sql_type}") for axis in declared_axes()]
    as_built = [label_line(axis, f"coalesce({axis.name}, {axis.as_built_sql()})") for axis in declared_axes()]
    text = at_mark(COMPAT_SQL.read_text(), LABELS_MARK, labels)
    return at_mark(at_mark(text, AXIS_NULLS_MARK, nulls), AXES_MARK, as_built)


VERSIONED_TABLES = ("trials", "epochs", "spaces")  # read through `<table>_files` and normalised by compat.sql



NAMES_SHOWN = 5  # damaged files named in the warning; `sweep doctor` lists them all



MANY_FILES = 3000  # a table read from more files than this: a hint to run `sweep compact`



_warned: set[str] = set()  # damaged files already named in this process (analyses connect many times)



def glob_view_name(table: str) -> str:
    """The name of the view over a table's raw files: ``trials_files``, ``epochs_files``, ``kappa``."""
    return f"{table}_files" if table in VERSIONED_TABLES else table



TABLE_VIEWS = {glob_view_name(table): table for table in ALL_TABLES}  # view over a table's files -> the table



def attach_folder_table(con: duckdb.DuckDBPyConnection, results_dir: Path, table: str) -> list[tuple[Path, str]]:
    """``table`` as a view over the folder's readable files; returns the damaged files left out."""
    good, bad = readable_files(results_dir, table)
    hint_compaction(table, len(good), results_dir)
    if good:
        con.execute(f"CREATE VIEW {glob_view_name(table)} AS {read_groups(good)}\nUNION ALL BY NAME\n{no_rows(table)}")
    else:
        create_empty(con, table, glob_view_name(table))
    return bad



def read_groups(files: list[tuple[Path, pa.Schema]]) -> str:
    """A query over ``files``: one ``read_parquet`` per distinct schema, joined by column name. DuckDB binds
    each from its first file, so the cost of binding does not grow with the number of files."""
    groups: dict[str, list[Path]] = {}
    for path, schema in files:
        groups.setdefault(schema.to_string(), []).append(path)
    reads = []
    for paths in groups.values():
        listed = ", ".join(sql_text(str(path)) for path in paths)
        reads.append(f"FROM read_parquet([{listed}])")
    return "\nUNION ALL BY NAME\n".join(reads)



DUCKDB_TYPES = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.string(): "VARCHAR",
                pa.bool_(): "BOOLEAN", pa.timestamp("ms", tz="UTC"): "TIMESTAMPTZ"}  # fmt: skip



def no_rows(table: str) -> str:
    """A select of no rows with every column of ``table``'s current schema (``sweep/results/schema.py``), typed: joined
    by name to a table's files, it supplies the columns their files lack (older files, or a metric added since,
    ``workers/metrics.py``) as NULL, so a view that names a column never fails on a folder of older files."""
    columns = ", ".join(f"NULL::{DUCKDB_TYPES[f.type]} AS {f.name}" for f in current_schema(table))
    return f"SELECT {columns} WHERE false"



def create_empty(con: duckdb.DuckDBPyConnection, table: str, name: str) -> None:
    """``name`` as an empty table with ``table``'s columns and types: a table with no file yet."""
    empty = current_schema(table).empty_table()  # noqa: F841 (read by DuckDB's replacement scan)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM empty")



def attach_store_table(con: duckdb.DuckDBPyConnection, store: ObjectStore, table: str) -> list[tuple[str, str]]:
    """``table`` as a pyarrow dataset over the prefix's readable files, registered in DuckDB under the name
    the folder's view has; returns the damaged files (by URI) left out."""
    import pyarrow.dataset as ds  # here, not above: it loads pandas, which a folder's analysis does not need

    good, bad = store.readable(table)
    damaged = [(store.uri_of(path), problem) for path, problem in bad]
    hint_compaction(table, len(good), store)
    if not good:
        create_empty(con, table, glob_view_name(table))
        return damaged
    try:  # the columns of every file, each file's missing ones read as NULL: read_parquet's union_by_name
        schema = pa.unify_schemas([*(schema for _, schema in good), current_schema(table)], promote_options="permissive")
    except (pa.ArrowException, ValueError) as exc:
        hint = f"`sweep doctor --results {store}` names the files"
        raise QueryError(f"the {table} files under {store} disagree on a column's type ({exc}); {hint}") from exc
    paths = [path for path, _ in good]
    con.register(glob_view_name(table), ds.dataset(paths, schema, "parquet", store.filesystem))
    return damaged



def sql_text(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"



def footer(path: Path) -> Footer:
    """``path``'s footer (``sweep/results/storage.py``), read once per (path, size, modification time) in a process."""
    try:
        stat = path.stat()
    except OSError as exc:
        return Footer(f"cannot be opened ({exc.strerror or exc})")
    return cached_footer(str(path), stat.st_size, stat.st_mtime_ns)



def footer_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as Parquet, judged by its footer (cut short, not Parquet), or None."""
    return footer(path).problem



def table_footers(results_dir: Path, table: str, space: str | None = None) -> list[tuple[Path, Footer]]:
    """(path, footer) of every Parquet file of ``table`` (of one ``space``) under the folder: absolute paths,
    in path order."""
    folder = Path(results_dir).resolve() / table / (space or "")
    return [(path, footer(path)) for path in sorted(folder.glob("**/*.parquet"))]



def readable_files(results_dir: Path, table: str) -> tuple[list[tuple[Path, pa.Schema]], list[tuple[Path, str]]]:
    """A table's files under the results folder: (path, schema) of those the analysis reads, and (path, why)
    of the damaged ones. Files whose rows a compacted file holds (``sweep/results/compact.py``) are in neither."""
    footers = table_footers(results_dir, table)
    replaced = superseded([(str(path), f) for path, f in footers])
    good = [(path, f.schema) for path, f in footers if f.problem is None and str(path) not in replaced]
    bad = [(path, f.problem) for path, f in footers if f.problem]
    return good, bad



def hint_compaction(table: str, files: int, results) -> None:
    """One line on stderr (once per process) when a table is read from many files: results written before
    sweeps compacted their files, or by sweeps still running."""
    if files > MANY_FILES and "compact" not in _warned:
        _warned.add("compact")
        print(
            f"note: {files:,} {table} files under {results}; `sweep compact --results {results}` merges each "
            "finished sweep's files into one per table, and every query then opens far fewer",
            file=sys.stderr,
        )



def warn_damaged(damaged: list[tuple[Path, str]]) -> None:
    """One line on stderr naming the damaged files left out (each file once per process)."""
    new = [path for path, _ in damaged if str(path) not in _warned]
    if not new:
        return
    _warned.update(str(path) for path in new)
    names = ", ".join(str(path) for path in new[:NAMES_SHOWN])
    more = f" and {len(new) - NAMES_SHOWN} more" if len(new) > NAMES_SHOWN else ""
    count = f"{len(new)} damaged results file{'s' if len(new) != 1 else ''}"
    print(
        f"warning: left out {count} that cannot be read as Parquet ({names}{more}); the rest were read. "
        "`sweep doctor` lists what is wrong and `sweep doctor --fix` sets them aside.",
        file=sys.stderr,
    )


def attach_table(con: duckdb.DuckDBPyConnection, results: Path | ObjectStore, table: str) -> list:
    """``table``'s view over its files under ``results`` (a folder or an object-store prefix) on ``con``;
    returns the damaged files it left out, for :func:`warn_damaged`."""
    attach = attach_store_table if is_remote(results) else attach_folder_table
    return attach(con, results, table)


def read_table(results: Path | ObjectStore | str, table: str, columns: str) -> list[tuple]:
    """``SELECT columns`` over ``table``'s files as they are (no schema version read as another: the columns
    every version has), damaged files left out with a warning."""
    con = duckdb.connect(":memory:")
    warn_damaged(attach_table(con, locate(results), table))
    return con.execute(f"SELECT {columns} FROM {glob_view_name(table)}").fetchall()
