"""``from sweep import open_results``: the views a notebook reads, checked against the planted truth and
against the same queries through ``sweep sql``'s path (``run_query``)."""

import duckdb
import pandas as pd
import pytest

from sweep import open_results
from sweep.analysis.sql import run_query
from sweep.errors import QueryError, ResultsError
from sweep.results.importer import import_file
from tests.helpers import PLANTED_MEANS, planted_rows, write_csv


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    import_file(write_csv(tmp_path / "plant.csv", planted_rows("plant", PLANTED_MEANS, noise=0.05)), folder)
    return folder


def test_views_are_relations_and_dataframes_with_what_sweep_sql_gives(results):
    with open_results(results) as found:
        assert {"trials", "epochs", "kappa", "vs_baseline", "depth_edge", "pareto", "configs"} <= set(found.names)
        assert isinstance(found.vs_baseline, duckdb.DuckDBPyRelation)
        frame = found.df("vs_baseline")
        columns, rows = run_query(results, "FROM vs_baseline")
        assert isinstance(frame, pd.DataFrame) and list(frame.columns) == columns and len(frame) == len(rows)
        means = found.df("SELECT depth, num_heads, avg(score) AS mean FROM trials GROUP BY ALL")
        assert {(r.depth, r.num_heads): round(r.mean, 6) for r in means.itertuples()} == {
            key: pytest.approx(value, abs=0.06) for key, value in PLANTED_MEANS.items()
        }
        assert len(found.trials.filter("depth = 1").df()) == 3 * sum(1 for d, _ in PLANTED_MEANS if d == 1)


def test_only_queries_run_and_unknown_names_say_what_exists(results, tmp_path):
    found = open_results(results, tolerance=0.3)
    with pytest.raises(QueryError, match="only queries are allowed"):
        found.sql("DROP VIEW trials")
    with pytest.raises(AttributeError, match=r"no table or view 'trails'.*trials"):
        found.trails  # noqa: B018 (the attribute access is the test)
    assert "vs_baseline" in dir(found)
    with pytest.raises(ResultsError, match="no results folder"):
        open_results(tmp_path / "nowhere")
