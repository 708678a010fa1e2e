"""DuckDB over the results folder: the tables as views over their files, plus the analysis views of the SQL
files (package data), read in this order as one text (:func:`views_text`; ``sweep sql --print-views`` prints
it, for the plain ``duckdb`` shell): ``sweep/analysis/views/compat.sql`` (the tables, every schema version
read as the latest), ``macros.sql`` (statistics), the core views (``core.sql``, ``verdicts.sql``,
``costs.sql``, ``kappa.sql``), then each question's own file beside its module (``sweep/questions/*.sql``, in
the registry's order). Read-only: only queries are accepted.

``trials``, ``epochs`` and ``spaces`` may hold files of several schema versions: their files are
``trials_files``, ``epochs_files`` and ``spaces_files``, and ``compat.sql`` defines the tables over
them with version-1 rows read as version 2 (metric ``top1``, mode ``max``, score = top-1; ``val_score`` =
``val_top1``; ``tolerance_top1`` as ``tolerance``).

What a query costs does not grow with the number of files' schemas:

- Every file's footer is read once per process (``sweep/results/storage.py``'s
  :class:`~sweep.results.storage.Footer`): a
  file that cannot be read as Parquet (cut short, overwritten with something else) is left out with a
  warning on stderr that names it (``sweep doctor`` checks more thoroughly, ``--fix`` sets it aside), and a
  file whose rows a compacted file holds (``sweep/results/compact.py``) is left out silently.
- The files are grouped by schema, and each table's view reads each group with one ``read_parquet`` over
  its file list, the groups joined ``UNION ALL BY NAME``. DuckDB then binds a view from one file per group
  instead of every file's schema (``union_by_name``), and binds it again for every view that reads it.
- The tables' views and the analysis views and macros are created on demand (:class:`Views`): ``sweep sql``
  creates only those its query names and what they read, so ``SELECT 1`` lists no file and a query on
  ``trials`` reads only the trials files' footers and binds no analysis view.

Results on object storage (``s3://…``, ``gs://…``; ``sweep/results/storage.py``) are listed and their footers read
through pyarrow, and each table is handed to DuckDB as a pyarrow dataset over the readable files (the columns
of every file, as ``union_by_name`` gives them), which DuckDB scans through pyarrow's S3 or GCS client.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from sweep.analysis.views import views_text
from sweep.errors import QueryError
from sweep.results.schema import ALL_TABLES, SCHEMAS, current_schema
from sweep.results.storage import Footer, ObjectStore, cached_footer, is_remote, locate, superseded
from sweep.text import format_value

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA"}
VERSIONED_TABLES = ("trials", "epochs", "spaces")  # read through `<table>_files` and normalised by compat.sql
NAMES_SHOWN = 5  # damaged files named in the warning; `sweep doctor` lists them all
MANY_FILES = 3000  # a table read from more files than this: a hint to run `sweep compact`
# Words of a query that list or describe what exists: every analysis view is created for it
CATALOG_WORDS = frozenset({
    "information_schema", "pg_catalog", "duckdb_views", "duckdb_tables", "duckdb_columns", "duckdb_functions",
    "duckdb_dependencies", "show", "show_tables", "show_tables_expanded", "table_info",
})  # fmt: skip
_warned: set[str] = set()  # damaged files already named in this process (analyses connect many times)


def glob_view_name(table: str) -> str:
    """The name of the view over a table's raw files: ``trials_files``, ``epochs_files``, ``kappa``."""
    return f"{table}_files" if table in VERSIONED_TABLES else table


TABLE_VIEWS = {glob_view_name(table): table for table in ALL_TABLES}  # view over a table's files -> the table


def connect(
    results_dir: Path | ObjectStore, views_sql: str | None = "all", tolerance: float | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with ``trials``, ``epochs``, ``kappa`` and ``spaces`` as views over the Parquet
    files (empty, correctly typed tables when a table has no file yet) and every analysis view.

    ``results_dir``: a folder, or an object-store prefix (an ``ObjectStore``, or ``s3://…``/``gs://…`` text).
    ``tolerance``: one tolerance for every space's verdicts, in each metric's own units (``SET VARIABLE
    tolerance``, which ``vs_baseline`` reads); None keeps each space's own.
    """
    con, views = connect_lazily(results_dir, views_sql, tolerance)
    views.create_all()
    return con


def connect_lazily(
    results_dir: Path | ObjectStore, views_sql: str | None = "all", tolerance: float | None = None
) -> tuple[duckdb.DuckDBPyConnection, Views]:
    """:func:`connect` with nothing created yet, and the :class:`Views` that create the tables' views and the
    analysis views on that connection as queries need them."""
    con = duckdb.connect(":memory:")
    results_dir = locate(results_dir)
    attach = attach_store_table if is_remote(results_dir) else attach_folder_table

    def attach_table(table: str) -> list:
        return attach(con, results_dir, table)

    if tolerance is not None:
        con.execute("SET VARIABLE tolerance = ?", [float(tolerance)])
    if views_sql is not None:  # "all": every analysis view (views_text()); or a text of definitions
        views = Views(con, views_text() if views_sql == "all" else views_sql, attach_table)
    else:  # no analysis views: the versioned tables as their files are
        text = "".join(f"CREATE VIEW {t} AS FROM {glob_view_name(t)};\n" for t in VERSIONED_TABLES)
        views = Views(con, text, attach_table)
    return con, views


@dataclass(frozen=True)
class Definition:
    """One ``CREATE … VIEW`` or ``MACRO`` statement of the views file: its name, its text, and the names of
    the other definitions it reads."""

    name: str
    kind: str
    sql: str
    reads: frozenset[str]


@functools.cache
def definitions(text: str) -> tuple[Definition, ...]:
    """The views file's statements in file order (each after those it reads), minus the tables' block."""
    statements = duckdb.connect(":memory:").extract_statements(without_base_tables(text))
    found: list[tuple[str, str, str, str]] = []
    for statement in statements:
        code = re.sub(r"--[^\n]*", "", statement.query)  # the comments name views they do not read
        match = re.search(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\w*\s+)?(VIEW|MACRO|TABLE)\s+(\w+)", code, re.I)
        if match is None:
            raise QueryError(f"the views' SQL: a statement that creates no view or macro: {code.strip()[:80]!r}")
        found.append((match.group(2).lower(), match.group(1).upper(), statement.query, code))
    names = {found_name for found_name, *_ in found} | set(TABLE_VIEWS)
    return tuple(
        Definition(name, kind, query, frozenset(words(code) & names - {name})) for name, kind, query, code in found
    )


def words(text: str) -> set[str]:
    """The identifiers (and words) of ``text``, lower case."""
    return set(re.findall(r"[a-z_][a-z0-9_]*", text.lower()))


class Views:
    """The tables' views and the analysis views and macros of a views file, created on one connection as
    they are needed.

    Binding every analysis view costs about half a second whatever the results hold, and each table's view
    lists and checks that table's files; :meth:`for_query` creates only what a query names, with what that
    reads, in the file's order (``attach(table)`` creates a table's view over its files and returns the
    damaged files it left out). A query that lists what exists (``information_schema``, ``SHOW TABLES``,
    ``duckdb_views()``) gets everything."""

    def __init__(self, con: duckdb.DuckDBPyConnection, text: str, attach: Callable[[str], list]):
        self.con, self.attach = con, attach
        self.definitions = {d.name: d for d in definitions(text)}
        self.created: set[str] = set()

    @property
    def view_names(self) -> list[str]:
        """The tables' views and the views this file defines (not its macros)."""
        return [*TABLE_VIEWS, *(d.name for d in self.definitions.values() if d.kind != "MACRO")]

    def create(self, names) -> None:
        """Create ``names`` (unknown ones are ignored) and everything they read."""
        known = set(self.definitions) | set(TABLE_VIEWS)
        wanted, stack = set(), [n for n in names if n in known]
        while stack:
            name = stack.pop()
            if name not in wanted and name not in self.created:
                wanted.add(name)
                stack += self.definitions[name].reads if name in self.definitions else ()
        damaged = []
        for name, table in TABLE_VIEWS.items():
            if name in wanted:
                damaged += self.attach(table)
                self.created.add(name)
        warn_damaged(damaged)  # the files left out, named in one line
        for definition in self.definitions.values():  # in file order: what a definition reads comes first
            if definition.name in wanted:
                self.con.execute(definition.sql)
                self.created.add(definition.name)

    @property
    def everything(self) -> set[str]:
        return {*TABLE_VIEWS, *self.definitions}

    def create_all(self) -> None:
        self.create(self.everything)

    def for_query(self, query: str) -> None:
        """Create what ``query`` reads: the definitions it names (all of them when it lists the catalog)."""
        named = words(query)
        self.create(self.everything if named & CATALOG_WORDS else named)


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
    empty = SCHEMAS[table].empty_table()  # noqa: F841 (read by DuckDB's replacement scan)
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
        schema = pa.unify_schemas([*(schema for _, schema in good), SCHEMAS[table]], promote_options="permissive")
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
    """Run a read-only query; return column names and rows. ``tolerance``: as in :func:`connect`. Only the
    analysis views the query names are created (:class:`Views`)."""
    con, views = connect_lazily(results_dir, tolerance=tolerance)
    check_read_only(con, query)
    views.for_query(query)
    try:
        relation = sql_with_views(con, views, query)
        if relation is None:
            return [], []
        return list(relation.columns), relation.fetchall()
    except (duckdb.IOException, duckdb.InvalidInputException) as exc:  # reading a file failed, not the query
        raise QueryError(f"{exc}\n(a results file may be damaged: `sweep doctor` checks every file)") from exc
    except duckdb.Error as exc:
        raise QueryError(f"{exc}\n(tables: trials, epochs, kappa; views: `sweep sql --print-views`)") from exc


def sql_with_views(con: duckdb.DuckDBPyConnection, views: Views, query: str) -> duckdb.DuckDBPyRelation | None:
    """``con.sql(query)``; a name the query builds at run time (not in its text) is a catalog error the
    first time: then every view is created and the query tried again."""
    try:
        return con.sql(query)
    except duckdb.CatalogException:
        if views.created >= views.everything:
            raise
        views.create_all()
        return con.sql(query)


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
