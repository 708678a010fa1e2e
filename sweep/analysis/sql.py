"""DuckDB over the results folder: the tables as views over their files (``sweep/results/reader.py``), plus
the analysis views of the SQL files (package data), read in this order as one text (:func:`views_text`;
``sweep sql --print-views`` prints it, for the plain ``duckdb`` shell): ``sweep/results/compat.sql`` (the
tables, every schema version read as the latest), ``macros.sql`` (statistics), the core views (``core.sql``,
``verdicts.sql``, ``costs.sql``, ``kappa.sql``), then each question's own file beside its module
(``sweep/questions/*.sql``, in the registry's order). Read-only: only queries are accepted.

What a query costs does not grow with the number of files' schemas (``sweep/results/reader.py`` says how the
tables are read), and the tables' views and the analysis views and macros are created on demand
(:class:`Views`): ``sweep sql`` creates only those its query names and what they read, so ``SELECT 1`` lists
no file and a query on ``trials`` reads only the trials files' footers and binds no analysis view.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from sweep.analysis.views import views_text
from sweep.errors import QueryError
from sweep.results.reader import TABLE_VIEWS, VERSIONED_TABLES, attach_table, glob_view_name, warn_damaged
from sweep.results.storage import ObjectStore, locate
from sweep.text import format_value

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA"}
# Words of a query that list or describe what exists: every analysis view is created for it
CATALOG_WORDS = frozenset({
    "information_schema", "pg_catalog", "duckdb_views", "duckdb_tables", "duckdb_columns", "duckdb_functions",
    "duckdb_dependencies", "show", "show_tables", "show_tables_expanded", "table_info",
})  # fmt: skip


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
    register_python_functions(con)

    def attach(table: str) -> list:
        return attach_table(con, results_dir, table)

    if tolerance is not None:
        con.execute("SET VARIABLE tolerance = ?", [float(tolerance)])
    if views_sql is not None:  # "all": every analysis view (views_text()); or a text of definitions
        views = Views(con, views_text() if views_sql == "all" else views_sql, attach)
    else:  # no analysis views: the versioned tables as their files are
        text = "".join(f"CREATE VIEW {t} AS FROM {glob_view_name(t)};\n" for t in VERSIONED_TABLES)
        views = Views(con, text, attach)
    return con, views


def python_functions() -> dict[str, tuple]:
    """The questions' statistics in Python (``Question.python_functions``), by the name their SQL calls."""
    from sweep.questions import QUESTIONS

    return {name: spec for q in QUESTIONS for name, spec in q.python_functions().items()}


def register_python_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Each question's Python statistic as a DuckDB scalar function of its name (NULL in, NULL out); the
    views file's stand-in macro of that name is then skipped (:class:`Views`)."""
    from duckdb import sqltypes

    for name, (function, arguments, returns) in python_functions().items():
        types = [getattr(sqltypes, t) for t in arguments]
        con.create_function(name, function, types, getattr(sqltypes, returns), null_handling="special")


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
        python = python_functions()  # registered on the connection: their stand-in macros are not created
        for definition in self.definitions.values():  # in file order: what a definition reads comes first
            if definition.name in wanted:
                if definition.name not in python:
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


def reads_results(query: str) -> bool:
    """Whether ``query`` reads the results: it names a table, an analysis view or macro, or the catalog
    (``SELECT 1`` does not)."""
    names = {d.name for d in definitions(views_text())} | set(TABLE_VIEWS) | set(TABLE_VIEWS.values())
    return bool(words(query) & (names | CATALOG_WORDS | {"query_table"}))


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
