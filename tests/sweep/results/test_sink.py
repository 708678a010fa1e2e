"""The Parquet sink (without Ray: Tune calls it with trial objects) and read-only SQL over its files."""

import json
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from sweep.analysis.sql import render, run_query
from sweep.cli import main
from sweep.errors import QueryError, ResultsError
from sweep.results.schema import SCHEMA_VERSION, SCHEMAS
from sweep.results.sink import ParquetSink


def payload(seed=0, depth=2):
    return {
        "space": "unit", "profile": None, "config_id": f"cfg{depth}", "seed": seed, "is_baseline": depth == 2,
        "family": "vit", "planned_params": 1000, "planned_flops_per_sample": 5000,
        "shape": {"depth": depth, "num_heads": 2, "head_dim": 8, "embed_dim": 16, "mlp_dim": 32, "attn_dim": 16,
                  "head_dim_rule": "fixed_d_model"},
        "trial_config": {"seed": seed},
    }  # fmt: skip


def fake_trial(trial_id, **kw):
    return SimpleNamespace(trial_id=trial_id, config={"payload": payload(**kw)}, num_failures=0, error_file=None)


def epoch_result(epoch, top1):
    row = {
        "epoch": epoch,
        "step": 10 * epoch,
        "train_loss": 1.0 / epoch,
        "val_top1": top1,
        "val_top5": 99.0,
        "val_loss": 0.5,
        "kappa_mean": 7.0,
        "kappa_max": 9.0,
        "lr": 1e-3,
    }
    kappa = [
        {"epoch": epoch, "layer": i, "layer_name": f"blocks.{i}.attn", "kappa": 7.0, "kappa_max": 9.0} for i in range(2)
    ]
    return {"epoch_row": row, "kappa_rows": kappa}


def record(status="ok", top1=91.5):
    epochs = [epoch_result(1, 80.0)["epoch_row"], epoch_result(2, top1)["epoch_row"]]
    kappa = epoch_result(1, 0)["kappa_rows"] + epoch_result(2, 0)["kappa_rows"]
    return {"status": status, "error": None if status == "ok" else "boom", "top1": top1 if status == "ok" else None,
            "params": 1010, "kappa_mean": 7.0, "wall_s": 3.5, "started_at": "2026-12-02T10:00:00.000+00:00",
            "finished_at": "2026-12-02T10:00:03.500+00:00", "epochs": epochs, "kappa": kappa}  # fmt: skip


def test_sink_writes_each_table_once_atomically(tmp_path):
    sink = ParquetSink(tmp_path, "sweepA")
    trial = fake_trial("t1")
    sink.on_trial_result(0, [], trial, epoch_result(1, 80.0))
    sink.on_trial_result(0, [], trial, {"record": record()})
    sink.on_trial_complete(0, [], trial)
    sink.on_trial_complete(0, [], trial)  # a second completion writes nothing twice
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [f"{t}/unit/sweepA/t1.parquet" for t in ("epochs", "kappa", "trials")]
    trials = pq.read_table(tmp_path / "trials/unit/sweepA/t1.parquet")
    assert trials.schema.equals(SCHEMAS["trials"])
    row = trials.to_pylist()[0]
    assert row["status"] == "ok" and row["top1"] == 91.5 and row["params"] == 1010  # measured beats planned
    assert row["schema_version"] == SCHEMA_VERSION and row["depth"] == 2 and row["wall_s"] == 3.5
    assert json.loads(row["trial_config"]) == {"seed": 0}
    assert pq.read_table(tmp_path / "epochs/unit/sweepA/t1.parquet").num_rows == 2
    assert pq.read_table(tmp_path / "kappa/unit/sweepA/t1.parquet").num_rows == 4


def test_trial_stopped_by_scheduler_is_pruned_with_its_epochs(tmp_path):
    sink = ParquetSink(tmp_path, "s")
    trial = fake_trial("t2", depth=1)
    sink.on_trial_result(0, [], trial, epoch_result(1, 55.0))
    sink.on_trial_complete(0, [], trial)
    row = pq.read_table(tmp_path / "trials/unit/s/t2.parquet").to_pylist()[0]
    assert row["status"] == "pruned" and row["top1"] == 55.0 and row["epochs_run"] == 1
    assert row["params"] == 1000  # the planner's count
    assert pq.read_table(tmp_path / "kappa/unit/s/t2.parquet").num_rows == 2


def test_crashed_trial_is_an_error_row_with_the_last_line_of_its_error(tmp_path):
    error_file = tmp_path / "error.txt"
    error_file.write_text("Traceback...\n  File x\nRayActorError: the actor died unexpectedly\n")
    sink = ParquetSink(tmp_path / "results", "s")
    trial = fake_trial("t3")
    trial.error_file = str(error_file)
    sink.on_trial_error(0, [], trial)
    row = pq.read_table(tmp_path / "results/trials/unit/s/t3.parquet").to_pylist()[0]
    assert row["status"] == "error" and row["error"] == "RayActorError: the actor died unexpectedly"


def test_failed_record_keeps_its_status(tmp_path):
    sink = ParquetSink(tmp_path, "s")
    trial = fake_trial("t4")
    sink.on_trial_result(0, [], trial, {"record": record(status="oom")})
    sink.on_trial_complete(0, [], trial)
    _, rows = run_query(tmp_path, "SELECT status, error, top1 FROM trials")
    assert rows == [("oom", "boom", None)]


def test_full_results_folder_is_a_clear_error_and_keeps_what_was_written(tmp_path, monkeypatch):
    """The sink (Tune calls it on the driver) fails loudly when the disk is full; earlier rows stay."""
    import sweep.results.sink

    results = tmp_path / "results"
    sink = ParquetSink(results, "s")
    first, second = fake_trial("t1"), fake_trial("t2", seed=1)
    sink.on_trial_result(0, [], first, {"record": record()})
    sink.on_trial_complete(0, [], first)
    written = sorted(results.rglob("*.parquet"))

    def disk_full(table, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sweep.results.sink, "write_atomic", disk_full)
    sink.on_trial_result(0, [], second, {"record": record()})
    with pytest.raises(ResultsError, match=r"No space left on device.*Rows already written are intact"):
        sink.on_trial_complete(0, [], second)
    assert sorted(results.rglob("*.parquet")) == written and len(written) == 3
    assert run_query(results, "SELECT status FROM trials WHERE space = 'unit'")[1] == [("ok",)]


@pytest.fixture
def results(tmp_path):
    sink = ParquetSink(tmp_path, "s")
    for index, (depth, seed) in enumerate([(1, 0), (2, 0), (2, 1)]):
        trial = fake_trial(f"t{index}", depth=depth, seed=seed)
        sink.on_trial_result(0, [], trial, {"record": record(top1=90.0 + index)})
        sink.on_trial_complete(0, [], trial)
    return tmp_path


def test_sql_over_one_glob_per_table(results):
    columns, rows = run_query(results, "SELECT depth, count(*) n, avg(top1) top1 FROM trials GROUP BY depth ORDER BY 1")
    assert columns == ["depth", "n", "top1"] and rows == [(1, 1, 90.0), (2, 2, 91.5)]
    assert run_query(results, "SELECT count(*) FROM epochs")[1] == [(6,)]


def test_sql_on_empty_results_has_typed_empty_tables(tmp_path):
    assert run_query(tmp_path, "SELECT count(*) FROM trials")[1] == [(0,)]
    columns, _ = run_query(tmp_path, "SELECT * FROM kappa")
    assert columns == SCHEMAS["kappa"].names


@pytest.mark.parametrize("statement", [
    "DELETE FROM trials", "CREATE TABLE x AS SELECT 1", "COPY trials TO 'x.csv'", "INSERT INTO trials VALUES (1)",
    "SELECT 1; DROP VIEW trials",
])  # fmt: skip
def test_sql_is_read_only(results, statement):
    with pytest.raises(QueryError, match="only queries are allowed"):
        run_query(results, statement)


def test_sql_errors_are_clear(results):
    with pytest.raises(QueryError, match="tables: trials, epochs, kappa"):
        run_query(results, "SELECT nope FROM trials")


def test_sql_command_formats(results, capsys):
    assert (
        main(
            [
                "sql",
                "SELECT depth, seed FROM trials ORDER BY trial_id",
                "--results",
                str(results),
                "--format",
                "json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [
        {"depth": 1, "seed": 0},
        {"depth": 2, "seed": 0},
        {"depth": 2, "seed": 1},
    ]
    assert main(["sql", "SELECT depth FROM trials ORDER BY 1", "--results", str(results), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["depth", "1", "2", "2"]
    assert main(["sql", "UPDATE trials SET top1 = 0", "--results", str(results)]) == 2


def test_render_table_aligns_and_counts():
    text = render(["a", "long_name"], [(1, 2.5), (None, float("inf"))], "table")
    assert text.splitlines()[0] == "a  long_name" and text.endswith("(2 rows)")


class SearchSpec(SimpleNamespace):
    """A space's ``search:`` as pydantic gives it (``model_dump``), whatever its kind."""

    def model_dump(self, mode="python"):
        return dict(vars(self))


def planned(config_id, depth, heads, baseline=False, **axes):
    from sweep.space.shapes import Shape

    shape = Shape(depth=depth, num_heads=heads, head_dim=64 // heads, embed_dim=64, mlp_dim=128, rule="fixed_d_model",
                  **axes)  # fmt: skip
    return SimpleNamespace(config_id=config_id, shape=shape, is_baseline=baseline)


def test_the_search_json_records_the_settings_and_an_edge_searchs_lattice():
    from sweep.questions import declared_axes
    from sweep.results.sink import search_json

    configs = [planned("a", 1, 4), planned("b", 2, 4, baseline=True), planned("c", 1, 8, num_kv_heads=2)]
    grid = json.loads(
        search_json(SimpleNamespace(space=SimpleNamespace(search=SearchSpec(kind="grid")), configs=configs))
    )
    assert grid == {"kind": "grid"}  # the settings as validated; no lattice but an edge search's
    spec = SearchSpec(kind="edge", min_seeds=2, max_seeds=5, baseline_seeds=5, alpha=0.05, max_trials=None)
    edge = json.loads(search_json(SimpleNamespace(space=SimpleNamespace(search=spec), configs=configs)))
    assert {k: v for k, v in edge.items() if k != "lattice"} == spec.model_dump()
    assert [(c["config_id"], c["depth"], c["is_baseline"]) for c in edge["lattice"]] == [
        ("a", 1, False), ("b", 2, True), ("c", 1, False)]  # fmt: skip
    column = edge["lattice"][2]["column"]
    assert set(column) == {
        "family",
        "num_heads",
        "head_dim",
        "embed_dim",
        "mlp_dim",
        *(a.name for a in declared_axes()),
    }
    assert (column["num_heads"], column["head_dim"], column["num_kv_heads"], column["conditioning"]) == (
        8,
        8,
        2,
        "none",
    )
    # one column for configs that differ in depth alone, another where any other axis differs
    assert edge["lattice"][0]["column"] == edge["lattice"][1]["column"] != column
