"""What each config cost (configs.device_s_total, vs_baseline.device_hours) and the report's words for it, on
planted rows with known device-seconds."""

import pytest

from sweep.analysis.report import write_report
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from tests.helpers import query, trial_row

# (depth, heads, seed, status, device_s): the baseline 4×4 without device_s (rows from before it), 2×4 with three
# seeds, an error and a seed run twice (every row counts: the repeat and the failure spent their devices too).
PLANTED = [
    (4, 4, 0, "ok", None), (4, 4, 1, "ok", None), (4, 4, 2, "ok", None),
    (2, 4, 0, "ok", 10.0), (2, 4, 1, "ok", 20.0), (2, 4, 2, "ok", 30.0), (2, 4, 3, "error", 5.0),
    (2, 4, 0, "ok", 7.0),
]  # fmt: skip


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    for index, (depth, heads, seed, status, device_s) in enumerate(PLANTED):
        row = {**trial_row("cost", depth, heads, seed, 90.0 + seed * 0.1, status=status), "device_s": device_s}
        row.update(trial_id=f"t{index}", metric="top1", metric_mode="max", score=row["top1"])
        write_atomic(table_from_rows("trials", [row]), folder / "trials" / "cost" / "s1" / f"t{index}.parquet")
    return folder


def test_each_config_costs_every_row_of_it(results):
    configs = {r["depth"]: r for r in query(results, "SELECT depth, n_seeds, device_s_total FROM configs")}
    assert configs[2]["device_s_total"] == pytest.approx(10.0 + 20.0 + 30.0 + 5.0 + 7.0)
    assert configs[2]["n_seeds"] == 3  # the repeat counts once as a seed, but its cost is counted
    assert configs[4]["device_s_total"] is None
    verdicts = {r["depth"]: r for r in query(results, "SELECT depth, device_hours FROM vs_baseline")}
    assert verdicts[2]["device_hours"] == pytest.approx(72.0 / 3600)
    assert verdicts[4]["device_hours"] is None


@pytest.mark.slow
def test_the_report_says_the_total_and_each_verdicts_cost(results, tmp_path):
    text = write_report("cost", results, tmp_path / "report").read_text()
    assert f"What it cost: {72.0 / 3600:.4g} device-hours over 5 trials" in text
    assert "3 trials from before device-seconds were recorded are not counted" in text
    header = next(line for line in text.splitlines() if line.startswith("| depth | num_heads | head_dim | attn_dim"))
    assert header.rstrip(" |").endswith("device_hours")
