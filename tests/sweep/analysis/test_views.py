"""The views (sweep/analysis/views/): they find planted edges, verdicts respond to seed noise honestly, and the
plain duckdb shell agrees with `sweep sql`."""

import json
import shutil
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

from sweep.results.importer import import_file
from tests.helpers import VIEWS, query, trial_row, write_csv


def test_depth_edge_finds_the_planted_edges(planted):
    edges = {e["num_heads"]: (e["holds_down_to_depth"], e["breaks_at_depth"])
             for e in query(planted, "FROM depth_edge")}  # fmt: skip
    assert edges == {1: (4, 2), 4: (2, 1), 16: (1, None), 64: (4, 2)}


def test_head_dim_edge_finds_the_planted_edges(planted):
    edges = {e["depth"]: (e["holds_down_to_head_dim"], e["breaks_at_head_dim"])
             for e in query(planted, "FROM head_dim_edge")}  # fmt: skip
    # depth 1: the baseline's own head_dim (16) already breaks; depth 2: 4 holds, 1 breaks; depth 4: all hold
    assert edges == {1: (None, 16), 2: (4, 1), 4: (1, None)}


def test_pareto_and_infeasible(planted):
    front = {(p["depth"], p["num_heads"]) for p in query(planted, "FROM pareto")}
    # (1, 1) is the cheapest at 85%; (1, 16) reaches 90% with fewer parameters than any other 90% config
    assert front == {(1, 1), (1, 16)}
    assert query(planted, "SELECT infeasible_fraction FROM infeasible") == [{"infeasible_fraction": 0.0}]


def test_vs_baseline_reports_deltas_in_percent(planted):
    row = query(planted, "FROM vs_baseline WHERE depth = 2 AND num_heads = 4")[0]
    assert row["delta_params_pct"] == pytest.approx(100 * (2004 - 4004) / 4004)
    assert row["delta_train_throughput_pct"] == pytest.approx(100.0)
    assert row["delta_mem_pct"] == pytest.approx(-50.0)
    assert row["evidence"] == "welch t, 95%" and row["significant"]


def noisy(space, spread, n):
    """n seeds each for baseline and a config with the same true mean, values at mean ± spread."""
    rows = []
    for seed in range(n):
        offset = spread * (1 if seed % 2 else -1) if n > 1 else 0.0
        rows.append(trial_row(space, 4, 4, seed, 90.0 + offset))
        rows.append(trial_row(space, 2, 4, seed, 90.0 - offset))
    return rows


def verdict(results, space):
    return query(results, f"SELECT verdict, significant, evidence FROM vs_baseline WHERE space = '{space}' "
                          "AND depth = 2")[0]  # fmt: skip


def test_verdict_moves_with_seed_noise_and_back_with_more_seeds(tmp_path):
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "quiet.csv", noisy("quiet", 0.1, 4)), results)
    import_file(write_csv(tmp_path / "noisy.csv", noisy("noisy", 1.0, 4)), results)
    import_file(write_csv(tmp_path / "many.csv", noisy("many", 1.0, 40)), results)
    assert verdict(results, "quiet")["verdict"] == "holds"
    assert verdict(results, "noisy")["verdict"] == "inconclusive"
    assert verdict(results, "many")["verdict"] == "holds"


def test_tolerance_is_a_setting(planted):
    # depth 1 × 4 heads is 10 points down: breaks at 0.5, holds at a 20-point tolerance
    assert query(planted, "SELECT verdict FROM vs_baseline_at(20) WHERE depth = 1 AND num_heads = 4")[0] == {
        "verdict": "holds"
    }
    assert query(planted, "SELECT DISTINCT tolerance FROM vs_baseline") == [{"tolerance": 0.5}]


def test_a_space_carries_its_own_tolerance(planted):
    from sweep.results.sink import record_space

    record_space(planted, "plant", "later", None, "q", "top1", "max", 20.0)
    assert query(planted, "SELECT verdict, tolerance FROM vs_baseline WHERE depth = 1 AND num_heads = 4") == [
        {"verdict": "holds", "tolerance": 20.0}
    ]


def test_one_seed_is_never_significant(tmp_path):
    rows = [trial_row("one", 4, 4, 0, 90.0), trial_row("one", 2, 4, 0, 80.0), trial_row("one", 1, 4, 0, 89.9)]
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "one.csv", rows), results)
    verdicts = query(results, "SELECT depth, verdict, point_verdict, significant, evidence FROM vs_baseline "
                              "ORDER BY depth")  # fmt: skip
    # one seed is never a verdict: inconclusive, with the way it leans beside it; the baseline is the reference
    assert [(v["depth"], v["verdict"], v["point_verdict"]) for v in verdicts] == [
        (1, "inconclusive", "holds"), (2, "inconclusive", "breaks"), (4, "baseline", None)]  # fmt: skip
    assert all(not v["significant"] for v in verdicts)
    assert [v["evidence"] for v in verdicts] == ["single seed", "single seed", "baseline"]
    # so no edge rests on it either
    assert query(results, "SELECT holds_down_to_depth, breaks_at_depth FROM depth_edge") == [
        {"holds_down_to_depth": None, "breaks_at_depth": None}
    ]


@pytest.mark.skipif(shutil.which("duckdb", path=str(Path(sys.executable).parent)) is None,
                    reason="the duckdb shell (dev dependency duckdb-cli) is not installed")  # fmt: skip
def test_plain_duckdb_shell_gives_the_same_answer(planted):
    shell = str(Path(sys.executable).parent / "duckdb")
    result = subprocess.run([shell, "-init", str(VIEWS), "-json", "-c", "FROM depth_edge"], cwd=planted.parent,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    from_shell = {(r["num_heads"], r["holds_down_to_depth"], r["breaks_at_depth"]) for r in json.loads(result.stdout)}
    from_tool = {(r["num_heads"], r["holds_down_to_depth"], r["breaks_at_depth"])
                 for r in query(planted, "FROM depth_edge")}  # fmt: skip
    assert from_shell == from_tool == {(1, 4, 2), (4, 2, 1), (16, 1, None), (64, 4, 2)}


def test_pareto_equals_the_pairwise_definition(tmp_path):
    import random

    rng = random.Random(7)
    rows = []
    for index in range(40):
        depth, heads = rng.choice([1, 2, 3, 4, 6, 8]), rng.choice([1, 2, 4, 8, 16])
        row = trial_row("rand", depth, heads, 0, round(rng.uniform(60, 95), 1), baseline=(0, 0))
        row.update(config_id=f"c{index}", params=rng.choice([1000, 2000, 3000, 4000, 5000]), is_baseline=index == 0)
        rows.append(row)
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "rand.csv", rows), results)
    dominated = {a["config_id"] for a in rows for b in rows
                 if b is not a and b["top1"] >= a["top1"] and b["params"] <= a["params"]
                 and (b["top1"] > a["top1"] or b["params"] < a["params"])}  # fmt: skip
    expected = {r["config_id"] for r in rows} - dominated
    assert {p["config_id"] for p in query(results, "FROM pareto")} == expected


def test_a_seed_recorded_twice_counts_once_by_its_latest_row(tmp_path):
    """configs: the same (config, seed) finished in two sweeps is one seed, its latest row; n_seeds, the mean
    and the sd all describe the same seeds (a failed rerun of a seed counts only as a failure)."""
    import statistics
    from datetime import datetime

    import pyarrow.parquet as pq

    from sweep.results.schema import table_from_rows

    def write(sweep, seed, score, finished_hour, status="ok"):
        row = {"schema_version": 2, "space": "dup", "sweep_id": sweep, "trial_id": f"{sweep}-{seed}",
               "config_id": "c", "seed": seed, "is_baseline": True, "family": "vit", "depth": 2, "num_heads": 2,
               "head_dim": 8, "embed_dim": 16, "mlp_dim": 32, "status": status, "metric": "top1",
               "metric_mode": "max", "score": score, "top1": score,
               "finished_at": datetime(2026, 1, 1, finished_hour, tzinfo=UTC)}  # fmt: skip
        path = tmp_path / "results" / "trials" / "dup" / sweep / f"{sweep}-{seed}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table_from_rows("trials", [row]), path)

    write("sweep-1", 0, 90.0, 1)
    write("sweep-1", 1, 85.0, 1)
    write("sweep-2", 0, 80.0, 2)  # seed 0 again, later: this row is the one that counts
    write("sweep-3", 1, None, 3, status="error")
    (row,) = query(tmp_path / "results", "SELECT n_seeds, n_failed, score_mean, score_sd FROM configs")
    assert row["n_seeds"] == 2 and row["n_failed"] == 1
    assert row["score_mean"] == pytest.approx(82.5)
    assert row["score_sd"] == pytest.approx(statistics.stdev([80.0, 85.0]))
