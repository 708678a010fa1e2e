"""The sink's ``devices_held`` and ``device_s`` (sweep/results/schema.py defines them), without Ray."""

import time

import pyarrow.parquet as pq
import pytest

from sweep.results.sink import ParquetSink
from tests.sweep.results.test_sink import epoch_result, fake_trial, record


def held_trial(trial_id, devices_held):
    trial = fake_trial(trial_id)
    if devices_held is not None:
        trial.config["payload"]["devices_held"] = devices_held
    return trial


def written_row(results, trial_id) -> dict:
    (path,) = (results / "trials").rglob(f"{trial_id}.parquet")
    return pq.read_table(path).to_pylist()[0]


@pytest.mark.parametrize("devices_held", [2.0, 0.5, 1.0])
def test_a_reported_trial_costs_its_record_wall_seconds_times_its_devices(tmp_path, devices_held):
    sink = ParquetSink(tmp_path, "sweepA")
    trial = held_trial("t1", devices_held)
    sink.on_trial_start(0, [], trial)
    sink.on_trial_result(0, [], trial, {"record": record()})  # wall_s 3.5
    sink.on_trial_complete(0, [], trial)
    row = written_row(tmp_path, "t1")
    assert row["devices_held"] == devices_held
    assert row["device_s"] == pytest.approx(3.5 * devices_held)
    assert sink.device_s == {"t1": pytest.approx(3.5 * devices_held)}


def test_a_trial_stopped_without_a_record_costs_the_drivers_wall_seconds(tmp_path):
    sink = ParquetSink(tmp_path, "sweepA")
    trial = held_trial("t2", 2.0)
    before = time.monotonic()
    sink.on_trial_start(0, [], trial)
    sink.on_trial_result(0, [], trial, epoch_result(1, 80.0))
    time.sleep(0.3)
    sink.on_trial_complete(0, [], trial)  # a scheduler stopped it: no record
    after = time.monotonic()
    row = written_row(tmp_path, "t2")
    assert row["status"] == "pruned"
    assert 2.0 * 0.3 <= row["device_s"] <= 2.0 * (after - before)


def test_a_payload_from_before_devices_were_planned_records_null(tmp_path):
    sink = ParquetSink(tmp_path, "sweepA")
    trial = held_trial("t3", None)
    sink.on_trial_result(0, [], trial, {"record": record()})
    sink.on_trial_complete(0, [], trial)
    row = written_row(tmp_path, "t3")
    assert row["devices_held"] is None and row["device_s"] is None
    assert sink.device_s == {}
