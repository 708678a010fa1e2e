"""DuckDB over the results folder: the tables as views (one glob each), plus the analysis views in
``sweep/views.sql`` (package data). Read-only: only queries are accepted.

``trials``, ``epochs`` and ``spaces`` may hold files of several schema versions: their globs are
``trials_files``, ``epochs_files`` and ``spaces_files``, and ``sweep/views.sql`` defines the tables over
them with version-1 rows read as version 2 (metric ``top1``, mode ``max``, score = top-1; ``val_score`` =
``val_top1``; ``tolerance_top1`` as ``tolerance``).

A file that cannot be read as Parquet (cut short, overwritten with something else) does not stop the
analysis: every file's footer is checked first (cheaply, once per file version in a process), the damaged
ones are left out with a warning on stderr that names them, and the views read the rest. ``sweep doctor``
checks more thoroughly and ``sweep doctor --fix`` sets damaged files aside.

Results on object storage (``s3://…``, ``gs://…``; ``sweep/storage.py``) are listed and their footers checked
through pyarrow, and each table is handed to DuckDB as a pyarrow dataset over the readable files (the columns
of every file, as ``union_by_name`` gives them), which DuckDB scans through pyarrow's S3 or GCS client.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from sweep.errors import QueryError
from sweep.schema import ALL_TABLES, SCHEMAS
from sweep.storage import ObjectStore, is_remote, locate

VIEWS_SQL = Path(__file__).resolve().parent / "views.sql"  # package data: shipped in the wheel
READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA"}
VERSIONED_TABLES = ("trials", "epochs", "spaces")  # read through `<table>_files` and normalised by views.sql
NAMES_SHOWN = 5  # damaged files named in the warning; `sweep doctor` lists them all
_footer_checks: dict[tuple[str, int, int], str | None] = {}  # (path, size, mtime) -> why unreadable, or None
_warned: set[str] = set()  # damaged files already named in this process (analyses connect many times)


def glob_view_name(table: str) -> str:
    """The name of the view over a table's raw files: ``trials_files``, ``epochs_files``, ``kappa``."""
    return f"{table}_files" if table in VERSIONED_TABLES else table


def table_glob(results_dir: Path, table: str) -> str:
    return str(Path(results_dir).resolve() / table / "**" / "*.parquet")


def connect(
    results_dir: Path | ObjectStore, views_sql: Path | None = VIEWS_SQL, tolerance: float | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with ``trials``, ``epochs``, ``kappa`` and ``spaces`` as views over the Parquet
    files (empty, correctly typed tables when a table has no file yet) and the analysis views.

    ``results_dir``: a folder, or an object-store prefix (an ``ObjectStore``, or ``s3://…``/``gs://…`` text).
    ``tolerance``: one tolerance for every space's verdicts, in each metric's own units (``SET VARIABLE
    tolerance``, which ``vs_baseline`` reads); None keeps each space's own.
    """
    con = duckdb.connect(":memory:")
    results_dir = locate(results_dir)
    attach = attach_object_store if is_remote(results_dir) else attach_folder
    damaged = attach(con, results_dir)
    if tolerance is not None:
        con.execute("SET VARIABLE tolerance = ?", [float(tolerance)])
    if views_sql is not None and views_sql.exists():
        con.execute(without_base_tables(views_sql.read_text()))
    else:  # no analysis views: the versioned tables as their files are
        for table in VERSIONED_TABLES:
            con.execute(f"CREATE VIEW {table} AS FROM {glob_view_name(table)}")
    warn_damaged(damaged)
    return con


def attach_folder(con: duckdb.DuckDBPyConnection, results_dir: Path) -> list[tuple[Path, str]]:
    """Each table as a view over the folder's files (one glob); returns the damaged files left out."""
    damaged: list[tuple[Path, str]] = []
    for table in ALL_TABLES:
        pattern, name = table_glob(results_dir, table), glob_view_name(table)
        good, bad = readable_files(results_dir, table)
        damaged += bad
        if good:  # the table's glob, or the readable files by name when some are damaged
            source = sql_text(pattern) if not bad else "[" + ", ".join(sql_text(str(p.resolve())) for p in good) + "]"
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({source}, union_by_name = true)")
        else:
            create_empty(con, table, name)
    return damaged


def create_empty(con: duckdb.DuckDBPyConnection, table: str, name: str) -> None:
    """``name`` as an empty table with ``table``'s columns and types: a table with no file yet."""
    empty = SCHEMAS[table].empty_table()  # noqa: F841 (read by DuckDB's replacement scan)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM empty")


def attach_object_store(con: duckdb.DuckDBPyConnection, store: ObjectStore) -> list[tuple[str, str]]:
    """Each table as a pyarrow dataset over the prefix's readable files, registered in DuckDB under the name
    the folder's view has; returns the damaged files (by URI) left out."""
    import pyarrow.dataset as ds  # here, not above: it loads pandas, which a folder's analysis does not need

    damaged: list[tuple[str, str]] = []
    for table in ALL_TABLES:
        good, bad = store.readable(table)
        damaged += [(store.uri_of(path), problem) for path, problem in bad]
        if not good:
            create_empty(con, table, glob_view_name(table))
            continue
        try:  # the columns of every file, each file's missing ones read as NULL: read_parquet's union_by_name
            schema = pa.unify_schemas([schema for _, schema in good], promote_options="permissive")
        except (pa.ArrowException, ValueError) as exc:
            hint = f"`sweep doctor --results {store}` names the files"
            raise QueryError(f"the {table} files under {store} disagree on a column's type ({exc}); {hint}") from exc
        paths = [path for path, _ in good]
        con.register(glob_view_name(table), ds.dataset(paths, schema, "parquet", store.filesystem))
    return damaged


def sql_text(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def footer_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as Parquet, judged by its footer (cut short, not Parquet), or None.
    Remembered per (path, size, modification time), so a process that connects often reads each footer once."""
    try:
        stat = path.stat()
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _footer_checks:
        try:
            pq.read_metadata(path)
            _footer_checks[key] = None
        except (pa.ArrowException, OSError, ValueError) as exc:
            detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            _footer_checks[key] = f"cannot be read as Parquet: {detail}"
    return _footer_checks[key]


def readable_files(results_dir: Path, table: str) -> tuple[list[Path], list[tuple[Path, str]]]:
    """A table's Parquet files under the results folder: those whose footer reads, and the others with why."""
    good, bad = [], []
    for path in sorted(Path(results_dir).glob(f"{table}/**/*.parquet")):
        problem = footer_problem(path)
        if problem is None:
            good.append(path)
        else:
            bad.append((path, problem))
    return good, bad


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


def without_base_tables(sql: str) -> str:
    """The views file minus its block that defines the tables' globs relative to the working folder (for the
    plain duckdb shell); here those are already defined over the chosen results folder."""
    start, end = "-- @base-tables-begin", "-- @base-tables-end"
    if start not in sql:
        return sql
    return sql[: sql.index(start)] + sql[sql.index(end) + len(end) :]


def check_read_only(con: duckdb.DuckDBPyConnection, query: str) -> None:
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(f"cannot parse the query: {exc}") from exc
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise QueryError(
                f"only queries are allowed here (got a {kind} statement); results are written by sweeps and "
                "`sweep import`, never by SQL"
            )


def run_query(results_dir: Path, query: str, tolerance: float | None = None) -> tuple[list[str], list[tuple]]:
    """Run a read-only query; return column names and rows. ``tolerance``: as in :func:`connect`."""
    con = connect(results_dir, tolerance=tolerance)
    check_read_only(con, query)
    try:
        relation = con.sql(query)
        if relation is None:
            return [], []
        return list(relation.columns), relation.fetchall()
    except (duckdb.IOException, duckdb.InvalidInputException) as exc:  # reading a file failed, not the query
        raise QueryError(f"{exc}\n(a results file may be damaged: `sweep doctor` checks every file)") from exc
    except duckdb.Error as exc:
        raise QueryError(f"{exc}\n(tables: trials, epochs, kappa; views in {VIEWS_SQL.name})") from exc


def format_value(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    """Rows as an aligned text table, CSV, or JSON (a list of objects)."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2, default=str)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        writer.writerows([[format_value(v) for v in row] for row in rows])
        return buffer.getvalue().rstrip("\n")
    cells = [[format_value(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
