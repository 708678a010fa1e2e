"""The importer (sweep/results/importer.py): a file is imported whole or not at all, unknown columns and
duplicates are refused, and Parquet rows get their derived columns."""

import pytest

from sweep.cli import main
from sweep.results.importer import ImportRejected, import_file
from tests.helpers import query, trial_row, write_csv


def test_import_rejects_a_file_with_bad_rows_whole(tmp_path):
    rows = [trial_row("bad", 4, 4, 0, 90.0), trial_row("bad", 2, 4, 0, 91.0), trial_row("bad", 1, 4, 0, 92.0)]
    rows[1]["depth"] = -2
    rows[2]["status"] = "fine"
    rows[2]["top1"] = 140
    results = tmp_path / "results"
    with pytest.raises(ImportRejected) as info:
        import_file(write_csv(tmp_path / "bad.csv", rows), results)
    message = str(info.value)
    assert "row 2: depth: must be a positive whole number (got -2)" in message
    assert "row 3: status: must be one of" in message and "row 3: top1: must be a percentage" in message
    assert "nothing written" in message and not results.exists()


def test_import_rejects_unknown_columns_and_duplicates(tmp_path):
    results = tmp_path / "results"
    row = trial_row("dup", 4, 4, 0, 90.0)
    with pytest.raises(ImportRejected, match="unknown columns bleu"):
        import_file(write_csv(tmp_path / "a.csv", [{**row, "bleu": 1}]), results)
    with pytest.raises(ImportRejected, match=r"row 2: same .* as row 1"):
        import_file(write_csv(tmp_path / "b.csv", [row, row]), results)
    import_file(write_csv(tmp_path / "c.csv", [row]), results)
    with pytest.raises(ImportRejected, match="already in the results"):
        import_file(write_csv(tmp_path / "d.csv", [row]), results)
    assert query(results, "SELECT count(*) AS n FROM trials") == [{"n": 1}]


def test_import_reads_parquet_and_fills_derived_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {k: v for k, v in trial_row("pq", 4, 4, 0, 90.0).items() if k not in ("config_id", "head_dim")}
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "rows.parquet")
    assert main(["import", str(tmp_path / "rows.parquet"), "--results", str(tmp_path / "r")]) == 0
    stored = query(tmp_path / "r", "SELECT head_dim, attn_dim, config_id FROM trials")[0]
    assert stored["head_dim"] == 16 and stored["attn_dim"] == 64 and stored["config_id"].startswith("imp-")
