"""Readers beside a compaction (issue 38): superseded files are kept for the retention period, so a reader that
listed them before the compacted file existed still reads them, and no reader (the tool's views, plain duckdb
over views.sql) counts their rows twice."""

import os
import threading
import time

import duckdb
import pytest

import sweep.analysis.sql
import sweep.results.storage
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
            write_atomic(
                table_from_rows("trials", [row]), results / "trials" / "unit" / f"s{sweep}" / f"t{index}.parquet"
            )


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


def test_plain_duckdb_over_the_folder_leaves_superseded_files_out(tmp_path, monkeypatch):
    results = tmp_path / "results"
    plant(results, 4, sweeps=2)
    for table in ("epochs", "kappa", "spaces"):  # the views read every table: none of them holds a row here
        write_atomic(table_from_rows(table, []), results / table / "unit" / "s0" / "empty.parquet")
    compact_space(results, "unit")
    assert len(list(results.glob("trials/**/*.parquet"))) == 10  # 8 kept + 2 compacted
    monkeypatch.chdir(tmp_path)  # as docs/schema.md says: duckdb -init views.sql in the folder that holds results/
    con = duckdb.connect()
    con.execute(VIEWS.read_text())
    assert con.execute("SELECT count(*) FROM trials").fetchone() == (8,)


def sql_count(results, capsys) -> int:
    """`sweep sql "SELECT count(*) … FROM trials"` through the CLI: exit 0 and its one number."""
    assert main(["sql", "SELECT count(*) AS n FROM trials", "--results", str(results), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert not err, err
    return int(out.split()[1])


def between_list_and_read(monkeypatch, action) -> None:
    """Run ``action`` after `sweep sql` lists a table's files (its view is created) and before it reads them."""
    real = sweep.analysis.sql.attach_table

    def listed_then(con, results, table):
        damaged = real(con, results, table)
        action()
        return damaged

    monkeypatch.setattr(sweep.analysis.sql, "attach_table", listed_then)


def age(folder, seconds: float) -> None:
    """Every file in ``folder`` as if written ``seconds`` ago."""
    for path in folder.iterdir():
        os.utime(path, (time.time() - seconds, time.time() - seconds))


def test_forced_order_list_then_compact_then_read_answers_right(tmp_path, monkeypatch, capsys):
    """List -> a compaction merges (and, past the retention, deletes what an earlier one merged) -> read."""
    results = tmp_path / "results"
    plant(results, 20)
    between_list_and_read(monkeypatch, lambda: compact_space(results, "unit"))
    assert sql_count(results, capsys) == 20  # read the 20 per-trial files, kept for the retention period
    assert len(list(results.glob("trials/unit/s0/*.parquet"))) == 21
    folder = results / "trials" / "unit" / "s0"
    write_atomic(table_from_rows("trials", [{"space": "unit", "sweep_id": "s0", "trial_id": "late", "config_id": "c",
                                             "seed": 9, "status": "ok"}]), folder / "late.parquet")  # fmt: skip
    age(folder, 7200)  # the first compaction is past its retention: the next one deletes the 20 it merged
    assert sql_count(results, capsys) == 21  # listed: the compacted file and late; then merged and deleted; read
    assert len(list(folder.iterdir())) == 3  # the second compacted file, and the two it merged, kept


def test_forced_order_list_then_delete_then_read_with_retention_zero_answers_in_words(tmp_path, monkeypatch, capsys):
    """With a retention of 0 (deleting at once, what the user chose), a reader whose files were deleted under it
    fails, but says so in words, never as an empty message."""
    results = tmp_path / "results"
    plant(results, 5)
    monkeypatch.setenv(RETENTION_ENV, "0")
    between_list_and_read(monkeypatch, lambda: compact_space(results, "unit"))
    code = main(["sql", "SELECT count(*) AS n FROM trials", "--results", str(results), "--format", "csv"])
    err = capsys.readouterr().err
    assert code != 0 and "error:" in err and ".parquet" in err, err


@pytest.mark.slow
def test_plain_duckdb_over_the_printed_views_in_a_loop_during_a_compaction_answers_right(tmp_path, monkeypatch):
    results = tmp_path / "results"
    plant(results, 60, sweeps=4)  # 240 files: each plain query reads every footer twice (docs/schema.md)
    for table in ("epochs", "kappa", "spaces"):
        write_atomic(table_from_rows(table, []), results / table / "unit" / "s0" / "empty.parquet")
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    con.execute(VIEWS.read_text())
    done, answers = threading.Event(), []
    worker = threading.Thread(target=lambda: (compact_space(results, "unit"), done.set()))
    worker.start()
    while not done.is_set() or len(answers) < 2:
        answers.append(con.execute("SELECT count(*) FROM trials").fetchone()[0])
    worker.join()
    assert answers == [240] * len(answers)


@pytest.mark.slow
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
    assert out.count("2000") == len(answers) >= 3, out


def test_footers_are_read_once_per_file_however_many_queries(tmp_path, monkeypatch):
    """The `sweep.replaces` lists come from the footer cache (sweep/results/storage.py): a second query in the same
    process reads no footer again, so leaving superseded files out costs one footer per file, once."""
    results = tmp_path / "results"
    plant(results, 40)
    compact_space(results, "unit")
    calls = []
    real = sweep.results.storage.read_footer
    monkeypatch.setattr(sweep.results.storage, "read_footer", lambda *a: calls.append(a[0]) or real(*a))
    for _ in range(3):
        assert run_query(results, "SELECT count(*) FROM trials")[1] == [(40,)]
    assert len(calls) == len(set(calls)) <= 41  # the 40 kept and the compacted one, each once at most


def test_an_error_without_words_is_said_as_a_sentence():
    error = duckdb.Error("")
    assert one_line(error) == f"{type(error).__module__}.Error was raised with no message"
