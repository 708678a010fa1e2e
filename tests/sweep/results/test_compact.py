"""Compaction (``sweep/results/compact.py``): each sweep folder's per-trial files merged into one per table, with every
row read exactly as before, wherever a compaction stops: before its merged file is in place, after it and
before the files it replaces are gone, or killed at any moment (a real SIGKILL, repeatedly). Also: the
lock it shares with sweeps, files of two schema versions in one folder, and the analysis views created one
query at a time (``sweep/analysis/sql.py``'s ``Views``) giving what all of them created at once gives."""

import math
import os
import random
import shutil
import signal
import subprocess
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sweep.results.compact
import sweep.results.storage
from sweep.analysis.sql import connect, connect_lazily, run_query
from sweep.cli import main
from sweep.errors import ResultsError
from sweep.results.compact import COMPACTED_PREFIX, compact, compact_space
from sweep.results.importer import import_file
from sweep.results.schema import TABLES
from sweep.results.sink import ParquetSink
from sweep.results.storage import RETENTION_ENV, sweep_lock
from tests.helpers import PLANTED_MEANS, SWEEP, planted_rows, write_csv
from tests.sweep.results.test_sink import fake_trial, record


def sink_sweep(results, sweep_id: str, trials: int, first_seed: int = 0) -> None:
    """A sweep of ``trials`` trials as the sink writes it: three files per trial (trials, epochs, kappa)."""
    sink = ParquetSink(results, sweep_id)
    for index in range(trials):
        trial = fake_trial(f"{sweep_id}_{index:05d}", depth=1 + index % 3, seed=first_seed + index)
        sink.on_trial_result(0, [], trial, {"record": record(top1=80.0 + index % 7)})
        sink.on_trial_complete(0, [], trial)


def explode(results) -> None:
    """Each trials file of an import split into one file per row, as the sink lays out a sweep."""
    for path in list((results / "trials").rglob("*.parquet")):
        table = pq.read_table(path)
        for index in range(table.num_rows):
            pq.write_table(table.slice(index, 1), path.with_name(f"row{index:03d}.parquet"))
        path.unlink()


@pytest.fixture
def results(tmp_path):
    """Two sink sweeps of space ``unit`` (3 files per trial) and the planted space ``plant`` split into one
    file per trial, so every analysis view has rows."""
    folder = tmp_path / "results"
    import_file(write_csv(tmp_path / "plant.csv", planted_rows("plant", PLANTED_MEANS, noise=0.05)), folder)
    explode(folder)
    sink_sweep(folder, "sweepA", 6)
    sink_sweep(folder, "sweepB", 5, first_seed=100)
    return folder


def rounded(value):
    """Floats to 6 significant digits, and below 1e-9 as 0, for sorting rows only: DuckDB's parallel sums
    differ in their last bits from one run to the next (a ratio of equal spreads comes out as 0.9999999994 or
    1.0000000002; a Bartlett statistic of 0 as 1e-14, whose p-value is then 0.999999999 rather than 1), with
    or without compaction. Rows are compared with :func:`same`, within 1e-7."""
    if isinstance(value, float) and math.isfinite(value):
        return 0.0 if abs(value) < 1e-9 else round(value, 5 - math.floor(math.log10(abs(value))))
    return value


def same(a, b) -> bool:
    """Equal, floats within a relative or absolute 1e-7 (see :func:`rounded`), through dicts, lists, tuples."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-7) or (math.isnan(a) and math.isnan(b))
    return a == b


def rows_of(con, name: str) -> list[tuple]:
    """A table's or view's rows, sorted by their :func:`rounded` values (compare them with :func:`same`)."""
    rows = con.execute(f"FROM {name}").fetchall()
    return sorted(rows, key=lambda row: repr(tuple(rounded(v) for v in row)))


def snapshot(results) -> dict[str, list[tuple]]:
    """Every table's and view's rows: what an analyst can read."""
    con = connect(results)
    names = [row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    return {name: rows_of(con, name) for name in sorted(names)}


def table_rows(results) -> dict[str, list[tuple]]:
    """The three tables' rows, sorted (cheap enough to check after every kill)."""
    return {table: sorted(run_query(results, f"FROM {table}")[1], key=repr) for table in TABLES}


def parquet_files(results, table: str = "trials") -> list[str]:
    return sorted(str(p.relative_to(results / table)) for p in (results / table).rglob("*.parquet"))


@pytest.mark.slow
def test_compacting_reads_every_row_as_before_from_one_file_per_sweep_and_table(results, monkeypatch):
    before = snapshot(results)
    assert len(before["trials"]) == 3 * len(PLANTED_MEANS) + 11 and before["depth_edge"]  # the planted views have rows
    assert len(parquet_files(results)) == 3 * len(PLANTED_MEANS) + 11
    (outcome,) = [o for o in compact(results) if o.space == "unit"]
    assert (outcome.merged, outcome.written, outcome.leftovers) == (3 * 11, 3 * 2, 0)
    assert same(snapshot(results), before)
    kept = {"trials": 3 * len(PLANTED_MEANS) + 11, "epochs": 11, "kappa": 11}  # merged, kept for the retention
    for table in TABLES:  # one compacted file per sweep folder and table (the import's trials, one per row, too)
        files = parquet_files(results, table)
        compacted = sum(f.split("/")[-1].startswith(COMPACTED_PREFIX) for f in files if "plant" not in f)
        assert compacted == 2 and len(files) == 3 + kept[table]
    assert len(list((results / "spaces").rglob("*.parquet"))) == 1  # one per sweep already: left as it is
    again = compact(results)  # nothing left to merge, and the merged files are within their retention: kept
    assert all(o.merged == o.written == o.leftovers == 0 for o in again) and same(snapshot(results), before)
    assert len(parquet_files(results)) == 3 + kept["trials"]
    assert main(["doctor", "--results", str(results)]) == 0  # files kept for the retention period are no finding
    monkeypatch.setenv(RETENTION_ENV, "0")  # past the retention period, the next compaction deletes them
    assert sum(o.leftovers for o in compact(results)) == sum(kept.values()) and same(snapshot(results), before)
    for table in TABLES:  # an import's folders held one file each
        files = parquet_files(results, table)
        assert len(files) == 3 and all(f.split("/")[-1].startswith(COMPACTED_PREFIX) for f in files if "plant" not in f)
    assert main(["doctor", "--results", str(results)]) == 0


def test_stopped_before_the_merged_file_is_in_place_nothing_changes(results, monkeypatch):
    before, files = table_rows(results), {t: parquet_files(results, t) for t in TABLES}

    def disk_full(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sweep.results.storage.os, "replace", disk_full)
    with pytest.raises(ResultsError, match="No row is lost or counted twice: run `sweep compact` again"):
        compact_space(results, "unit")
    monkeypatch.undo()
    assert {t: parquet_files(results, t) for t in TABLES} == files  # the temporary is gone too
    assert not list(results.rglob("*.tmp")) and table_rows(results) == before


class Killed(BaseException):
    """Stands for the process dying (not an Exception: nothing catches it)."""


@pytest.mark.slow
def test_stopped_after_the_merged_file_is_in_place_nothing_is_counted_twice(results, monkeypatch, capsys):
    """With a retention of 0 a compaction deletes what it merged at once; stopped half-way through those deletes,
    it leaves superseded files that every reader leaves out, that doctor names, and the next compaction deletes."""
    monkeypatch.setenv(RETENTION_ENV, "0")
    before = snapshot(results)
    deleted = []
    real_delete = sweep.results.compact.Folder.delete

    def die_after_two(self, path):
        if len(deleted) == 2:
            raise Killed
        real_delete(self, path)
        deleted.append(path)

    monkeypatch.setattr(sweep.results.compact.Folder, "delete", die_after_two)
    with pytest.raises(Killed):
        compact_space(results, "unit")
    monkeypatch.setattr(sweep.results.compact.Folder, "delete", real_delete)
    (merged,) = [p for p in parquet_files(results) if COMPACTED_PREFIX in p]  # the first folder's, in place
    superseded = [p for p in parquet_files(results) if p.startswith(merged.rsplit("/", 1)[0]) and p != merged]
    assert len(superseded) == 6 - 2  # sweepA's trials files the killed compaction had not deleted yet
    assert same(snapshot(results), before)  # read once: the superseded files are left out
    glob = f"{results}/trials/unit/**/*.parquet"
    shell = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{glob}', union_by_name=true)")
    assert shell.fetchone()[0] == 11 + 4  # a bare glob counts them twice; the printed views do not (test_compact_readers)
    assert main(["doctor", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert out.count("its rows are in a compacted file beside it") == 4, out
    outcome = compact_space(results, "unit")  # the next compaction deletes them and finishes the rest
    assert outcome.leftovers == 4 and same(snapshot(results), before)
    assert main(["doctor", "--results", str(results)]) == 0


def test_a_compacted_folder_that_gets_more_files_is_compacted_again_into_one(results, monkeypatch):
    monkeypatch.setenv(RETENTION_ENV, "0")  # what it merged is deleted at once (the retention: test_compact_readers)
    compact_space(results, "unit")
    folder = results / "trials" / "unit" / "sweepA"
    (first,) = folder.iterdir()
    late = pq.read_table(first).slice(0, 1)
    pq.write_table(late.set_column(late.schema.get_field_index("trial_id"), "trial_id", pa.array(["late"])),
                   folder / "late.parquet")  # fmt: skip
    before = table_rows(results)

    def die(self, path):
        raise Killed

    real_delete = sweep.results.compact.Folder.delete
    monkeypatch.setattr(sweep.results.compact.Folder, "delete", die)
    with pytest.raises(Killed):  # the second merge is in place; neither the first nor `late` is deleted yet
        compact_space(results, "unit")
    monkeypatch.setattr(sweep.results.compact.Folder, "delete", real_delete)
    assert len(list(folder.iterdir())) == 3 and table_rows(results) == before
    compact_space(results, "unit")
    (merged,) = folder.iterdir()
    assert merged != first and pq.read_table(merged).num_rows == 7 and table_rows(results) == before


def compact_process(results) -> subprocess.Popen:
    """`sweep compact` with a retention of 0: it deletes what it merged at once, so a kill can land among the
    deletes (with a retention period there are none to land among)."""
    env = {**os.environ, RETENTION_ENV: "0"}
    return subprocess.Popen([SWEEP, "compact", "--results", str(results)], stdout=subprocess.DEVNULL, env=env)


@pytest.mark.slow
def test_killed_at_any_moment_no_row_is_lost_or_counted_twice(tmp_path):
    """`sweep compact` in a process of its own, killed (SIGKILL) at eight moments spread over how long a whole
    compaction takes on this machine, each on a fresh copy of the same results; the rows are checked after
    the kill, and again after a second compaction finishes the job. (The moments between a merged file's rename
    and the deletes of what it replaced last milliseconds, which a timed kill rarely hits: the tests above
    stop a compaction there on purpose.)"""
    original = tmp_path / "original"
    for index in range(4):
        sink_sweep(original, f"sweep{index}", 40, first_seed=100 * index)
    before = table_rows(original)
    whole = []
    for attempt in range(2):  # how long an uninterrupted compaction takes here, start-up included
        shutil.copytree(original, tmp_path / f"timed{attempt}")
        started = time.monotonic()
        assert compact_process(tmp_path / f"timed{attempt}").wait() == 0
        whole.append(time.monotonic() - started)
    codes = []
    for index, fraction in enumerate(random.Random(0).sample([0.3 + 0.08 * i for i in range(8)], 8)):
        results = shutil.copytree(original, tmp_path / f"killed{index}")
        process = compact_process(results)
        time.sleep(fraction * min(whole))
        os.kill(process.pid, signal.SIGKILL)
        codes.append(process.wait())
        assert table_rows(results) == before, f"after a kill at {fraction:.2f} of a whole compaction"
        assert compact_process(results).wait() == 0
        assert table_rows(results) == before
        for table in TABLES:
            assert [f.split("/")[-1][:10] for f in parquet_files(results, table)] == ["compacted-"] * 4
    assert codes.count(-signal.SIGKILL) >= 4, codes  # the kills landed while it ran (0: it had finished)


def test_a_space_a_sweep_is_writing_is_left_alone(results, capsys):
    files = parquet_files(results)
    with sweep_lock(results, "unit", wait=False):
        assert main(["compact", "--results", str(results), "--space", "unit"]) == 0
    assert "unit: a sweep of it is writing now; compact it after that ends" in capsys.readouterr().out
    assert parquet_files(results) == files


def test_a_folder_whose_files_disagree_on_a_type_is_left_as_it_is(tmp_path, capsys):
    results = tmp_path / "results"
    sink_sweep(results, "clash", 2)
    path = results / "trials" / "unit" / "clash" / "clash_00001.parquet"
    rows = pq.read_table(path)
    pq.write_table(rows.set_column(rows.schema.get_field_index("seed"), "seed", pa.array(["one"])), path)
    files = parquet_files(results)
    assert main(["compact", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"{path.parent} left as it is: its trials files disagree" in out and "4 files merged into 2" in out
    assert parquet_files(results) == files  # trials untouched; epochs and kappa compacted


@pytest.mark.slow
def test_files_of_two_schema_versions_in_one_folder_merge_and_read_as_before(tmp_path):
    """A version-1 trials file (no metric, no score: read as top-1) beside a version-2 one."""
    results = tmp_path / "results"
    sink_sweep(results, "mixed", 2)
    folder = results / "trials" / "unit" / "mixed"
    old = pq.read_table(folder / "mixed_00001.parquet")
    old = old.drop_columns(["metric", "metric_mode", "score", "control", "conditioning", "num_kv_heads"])
    old = old.set_column(0, "schema_version", pa.array([1], pa.int32()))
    pq.write_table(old, folder / "mixed_00001.parquet")
    before = snapshot(results)
    assert compact_space(results, "unit").written == 3
    names = sorted(path.name for path in folder.iterdir())  # the two kept for the retention period beside it
    assert [name[:10] for name in names] == ["compacted-", "mixed_0000", "mixed_0000"]
    assert same(snapshot(results), before)


@pytest.mark.slow
def test_each_view_created_for_its_query_gives_what_all_views_give(results):
    everything = connect(results)
    con, views = connect_lazily(results)
    views.for_query("SELECT 1")
    assert views.created == set()
    assert con.execute("SELECT count(*) FROM information_schema.tables").fetchone() == (0,)  # no file listed yet
    views.for_query("SELECT count(*) FROM trials")
    assert views.created == {"trials", "trials_files"}
    views.for_query("FROM depth_edge")
    assert {"depth_edge", "vs_baseline", "vs_baseline_at", "configs", "t95", "spaces_files"} <= views.created
    assert not views.created & {"pareto", "kappa_accuracy", "budget_pairs", "mlp_control", "epochs_files"}
    tables = everything.execute("SELECT table_name FROM information_schema.tables").fetchall()
    assert sorted(views.view_names) == sorted(row[0] for row in tables)
    for name in views.view_names:
        con, views = connect_lazily(results)  # a fresh connection per view: only what it reads is created
        views.for_query(f"SELECT * FROM {name}")
        assert same(rows_of(con, name), rows_of(everything, name)), name
    built = run_query(results, "FROM query_table('depth' || '_edge')")  # a name the query's text does not hold
    assert built == run_query(results, "FROM depth_edge")
    listed = run_query(results, "SELECT table_name FROM information_schema.tables")[1]
    assert {"vs_baseline", "pareto", "trials"} <= {row[0] for row in listed}
