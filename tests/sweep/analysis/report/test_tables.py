"""The report's shared tables (sweep/analysis/report/tables.py): what the trials cost, in words."""

from sweep.analysis.report.tables import FRONT_COLUMNS, VERDICT_COLUMNS, cost_sentence


def test_the_cost_sums_device_seconds_into_hours_and_counts_the_unrecorded():
    text = cost_sentence([3600.0, 1800.0, None])
    assert text.startswith("What it cost: 1.5 device-hours over 2 trials")
    assert "1 trials from before device-seconds were recorded are not counted" in text
    assert "not counted" not in cost_sentence([7200.0]) and "2 device-hours over 1 trials" in cost_sentence([7200.0])
    assert cost_sentence([None, None]).startswith("What it cost is not known")
    assert cost_sentence([]).startswith("What it cost is not known")


def test_the_tables_show_the_shape_first_and_units_in_names():
    assert FRONT_COLUMNS[:3] == VERDICT_COLUMNS[:3] == ["depth", "num_heads", "head_dim"]
    assert "device_hours" in VERDICT_COLUMNS and "peak_mem_bytes" in FRONT_COLUMNS
