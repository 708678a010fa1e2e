"""compat.sql: the tables as an analyst reads them. Here: a trial's epochs count only once its trials row is
written (the sink writes that row last, so a driver killed in between leaves epochs of an unrecorded trial)."""

import pyarrow.parquet as pq

from sweep.analysis.sql import run_query
from sweep.results.schema import table_from_rows
from tests.helpers import trial_row


def write(results, table: str, name: str, rows: list[dict]) -> None:
    folder = results / table / "s" / "sweep-1"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows(table, rows), folder / f"{name}.parquet")


def epoch(trial_id: str, number: int) -> dict:
    return {"schema_version": 2, "space": "s", "trial_id": trial_id, "config_id": "c", "seed": 0, "epoch": number,
            "train_loss": 1.0 / number, "val_score": 50.0 + number}  # fmt: skip


def test_epochs_of_a_trial_without_its_trials_row_are_left_out(tmp_path):
    results = tmp_path / "results"
    write(results, "trials", "recorded", [{**trial_row("s", 4, 4, 0, 80.0), "trial_id": "recorded"}])
    write(results, "epochs", "recorded", [epoch("recorded", 1), epoch("recorded", 2)])
    write(results, "epochs", "killed", [epoch("killed", 1)])  # its driver died before the trials row
    assert run_query(results, "SELECT count(*) FROM epochs_files")[1] == [(3,)]
    rows = run_query(results, "SELECT trial_id, epoch FROM epochs ORDER BY epoch")[1]
    assert rows == [("recorded", 1), ("recorded", 2)]
