"""Readers beside a compaction (issue 38): superseded files are kept for the retention period, so a reader that
listed them before the compacted file existed still reads them, and no reader (the tool's views, plain duckdb
over views.sql) counts their rows twice."""

import os
import threading

import duckdb

from sweep.analysis.sql import run_query
from sweep.cli import main, one_line
from sweep.results.compact import compact_space
from sweep.results.reader import attach_table
from sweep.results.schema import table_from_rows
from sweep.results.storage import RETENTION_ENV, write_atomic
from tests.helpers import VIEWS


def plant(results, trials: int, sweeps: int = 1) -> None:
    for sweep in range(sweeps):
        for index in range(trials):
            row = {"space": "unit", "sweep_id": f"s{sweep}", "trial_id": f"t{index}", "config_id": f"c{index}",
                   "seed": sweep, "status": "ok"}  # fmt: skip
            write_atomic(table_from_rows("trials", [row]), results / "trials" / "unit" / f"s{sweep}" / f"t{index}.parquet")


def test_a_reader_that_listed_before_a_compaction_reads_after_it_without_failing_or_double_counting(tmp_path):
    results = tmp_path / "results"
    plant(results, 30)
    con = duckdb.connect()
    attach_table(con, results, "trials")  # listed: the 30 per-trial files
    outcome = compact_space(results, "unit")  # then merged; the 30 are kept for the retention period
    assert outcome.merged == 30 and outcome.retained == 30
    assert con.execute("SELECT count(*) FROM trials_files").fetchone() == (30,)  # then read
    assert run_query(results, "SELECT count(*) FROM trials")[1] == [(30,)]  # a new reader: the compacted file


def test_past_the_retention_a_compaction_deletes_what_it_merged(tmp_path, monkeypatch):
    results = tmp_path / "results"
    plant(results, 5)
    compact_space(results, "unit")
    assert len(list(results.glob("trials/unit/s0/*.parquet"))) == 6
    monkeypatch.setenv(RETENTION_ENV, "0")
    assert compact_space(results, "unit").leftovers == 5
    assert [p.name[:10] for p in results.glob("trials/unit/s0/*.parquet")] == ["compacted-"]


def test_plain_duckdb_over_the_folder_leaves_superseded_files_out(tmp_path):
    results = tmp_path / "results"
    plant(results, 4, sweeps=2)
    for table in ("epochs", "kappa", "spaces"):  # the views read every table: none of them holds a row here
        write_atomic(table_from_rows(table, []), results / table / "unit" / "s0" / "empty.parquet")
    compact_space(results, "unit")
    assert len(list(results.glob("trials/**/*.parquet"))) == 10  # 8 kept + 2 compacted
    os.chdir(tmp_path)  # as docs/schema.md says: duckdb -init views.sql in the folder that holds results/
    con = duckdb.connect()
    con.execute(VIEWS.read_text())
    assert con.execute("SELECT count(*) FROM trials").fetchone() == (8,)


def test_queries_in_a_loop_during_a_compaction_of_thousands_of_files_all_answer_right(tmp_path, capsys):
    results = tmp_path / "results"
    plant(results, 500, sweeps=4)  # 2,000 files
    done, answers = threading.Event(), []
    worker = threading.Thread(target=lambda: (compact_space(results, "unit"), done.set()))
    worker.start()
    while not done.is_set() or len(answers) < 3:
        answers.append(main(["sql", "SELECT count(*) AS n FROM trials", "--results", str(results), "--format", "csv"]))
    worker.join()
    out = capsys.readouterr().out
    assert answers == [0] * len(answers), capsys.readouterr().err
    assert out.count("2000") == len(answers), out


def test_an_error_without_words_is_said_as_a_sentence():
    error = duckdb.Error("")
    assert one_line(error) == f"{type(error).__module__}.Error was raised with no message"
