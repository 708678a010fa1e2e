"""The results of a folder in a notebook: every table and analysis view as a DuckDB relation or a pandas
DataFrame, on one read-only connection::

    from sweep import open_results

    results = open_results("results")            # or open_results("results", tolerance=0.3)
    results.names                                 # ['configs', 'depth_edge', …, 'trials', 'vs_baseline']
    results.vs_baseline.filter("space = 'mqar_recall'").df()   # a view, narrowed, as pandas
    results.df("SELECT depth, num_heads, avg(score) FROM trials GROUP BY ALL")
    results.sql("FROM pareto").show()             # a relation: chain DuckDB's methods, or .df(), .arrow()

The views are ``sweep/analysis/views/``'s and the questions' (what ``sweep sql`` and ``sweep report``
read); their columns are in
docs/schema.md and docs/analysis.md. Each is created on the connection the first time it is read (with what
it reads), as ``sweep sql`` does, so opening the results binds none of them. Only queries run here: results
are written by sweeps and ``sweep import``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from sweep.analysis.sql import check_read_only, connect_lazily, sql_with_views
from sweep.errors import ResultsError


class Results:
    """One results folder, read-only: ``results.<view>`` is a relation, :meth:`df` a DataFrame."""

    def __init__(self, results_dir: str | Path = "results", tolerance: float | None = None):
        self.results_dir = Path(results_dir)
        if not self.results_dir.is_dir():
            raise ResultsError(f"no results folder at {self.results_dir.resolve()}: run a sweep, or pass its folder")
        self.con, self._views = connect_lazily(self.results_dir, tolerance=tolerance)
        tables = self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        self._names = sorted({row[0] for row in tables} | set(self._views.view_names))

    @property
    def names(self) -> list[str]:
        """Every table and view, sorted."""
        return list(self._names)

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """A read-only query as a relation (``QueryError`` for anything that would write)."""
        check_read_only(self.con, query)
        self._views.for_query(query)
        return sql_with_views(self.con, self._views, query)

    def df(self, name_or_query: str):
        """A table or view by name, or a query, as a pandas DataFrame."""
        query = f"FROM {name_or_query}" if name_or_query in self.names else name_or_query
        return self.sql(query).df()

    def __getattr__(self, name: str) -> duckdb.DuckDBPyRelation:
        if name.startswith("_") or name not in self.names:
            raise AttributeError(f"no table or view {name!r}; these exist: {', '.join(self.names)}")
        self._views.create([name])
        return self.con.table(name)

    def __dir__(self) -> list[str]:  # tab completion in notebooks lists the views
        return [*super().__dir__(), *self.names]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_results(results_dir: str | Path = "results", tolerance: float | None = None) -> Results:
    """The results in ``results_dir`` for a notebook (:class:`Results`); ``tolerance`` as ``sweep sql``'s."""
    return Results(results_dir, tolerance)
