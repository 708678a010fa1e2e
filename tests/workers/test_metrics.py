"""Metric-agnostic analysis: a planted break in a loss (lower is better) is found by the same views, edges,
Pareto front and top-k as a break in top-1; version-1 files are still read (their score is top-1); a
tolerance can be set per query; imports and the sink carry each space's metric, direction and tolerance."""

import json
import math
import re
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis.report import write_report
from sweep.cli import main
from sweep.results.importer import ImportRejected, import_file
from sweep.results.schema import SCHEMAS
from sweep.results.sink import ParquetSink, record_space
from sweep.run.rerun import select_configs
from sweep.space.model import SPACES_DIR_ENV
from sweep.space.shapes import Shape
from tests.helpers import PLANTED_MEANS, VIEWS, planted_rows, query, trial_row, write_csv


def loss_row(space, depth, heads, seed, loss, baseline=(4, 4)):
    """A trials row judged on val_loss (nats, lower is better), with no top-1 at all."""
    row = trial_row(space, depth, heads, seed, None, baseline=baseline)
    del row["top1"]
    return {**row, "metric": "val_loss", "score": loss}


# Planted truth in a loss, baseline depth 4 × 4 heads (head_dim 16 at d_model 64) at 0.40 nats, three seeds
# of ±0.002 noise, tolerance 0.05 nats (recorded for the space as a sweep would):
#   4 heads:  holds at depth 2 (+0.01), breaks at depth 1 (+0.20)     16 heads: better or within, down to 1
#   1 head:   holds at 4 (+0.03), breaks at depth 2 already           64 heads: holds at 4, breaks at 2 and 1
LOSS_MEANS = {(1, 1): 0.90, (2, 1): 0.70, (4, 1): 0.43, (1, 4): 0.60, (2, 4): 0.41, (4, 4): 0.40, (1, 16): 0.42,
              (2, 16): 0.39, (4, 16): 0.38, (1, 64): 0.80, (2, 64): 0.50, (4, 64): 0.41}  # fmt: skip


@pytest.fixture
def planted_loss(tmp_path):
    rows = [loss_row("loss", d, h, seed, mean + (seed - 1) * 0.002)
            for (d, h), mean in LOSS_MEANS.items() for seed in range(3)]  # fmt: skip
    results = tmp_path / "results"
    assert import_file(write_csv(tmp_path / "loss.csv", rows), results) == {"loss": 36}
    record_space(results, "loss", "sweep-1", None, "Where does the loss break?", "val_loss", "min", 0.05)
    return results


def test_planted_break_in_a_loss_is_found(planted_loss):
    verdicts = {(v["depth"], v["num_heads"]): v for v in query(planted_loss, "FROM vs_baseline")}
    assert {v["metric"] for v in verdicts.values()} == {"val_loss"}
    assert {v["metric_mode"] for v in verdicts.values()} == {"min"}
    assert {v["tolerance"] for v in verdicts.values()} == {0.05}
    broken = verdicts[(1, 4)]
    assert broken["verdict"] == "breaks" and broken["significant"]  # 0.20 nats *higher*: worse
    assert broken["delta"] == pytest.approx(0.20) and broken["delta_lo"] > 0.05
    better = verdicts[(4, 16)]
    assert better["verdict"] == "holds" and better["delta"] == pytest.approx(-0.02)  # lower loss: fine
    assert verdicts[(4, 1)]["verdict"] == "holds"  # +0.03: worse, but within the tolerance
    assert verdicts[(4, 4)]["evidence"] == "baseline"


def test_planted_loss_edges(planted_loss):
    depth = {e["num_heads"]: (e["holds_down_to_depth"], e["breaks_at_depth"])
             for e in query(planted_loss, "FROM depth_edge")}  # fmt: skip
    assert depth == {1: (4, 2), 4: (2, 1), 16: (1, None), 64: (4, 2)}
    head_dim = {e["depth"]: (e["holds_down_to_head_dim"], e["breaks_at_head_dim"])
                for e in query(planted_loss, "FROM head_dim_edge")}  # fmt: skip
    assert head_dim == {1: (None, 16), 2: (4, 1), 4: (1, None)}


def test_planted_loss_pareto_prefers_lower_loss(planted_loss):
    configs = query(planted_loss, "SELECT config_id, score_mean, params FROM configs")
    dominated = {a["config_id"] for a in configs for b in configs
                 if b is not a and b["score_mean"] <= a["score_mean"] and b["params"] <= a["params"]
                 and (b["score_mean"] < a["score_mean"] or b["params"] < a["params"])}  # fmt: skip
    front = query(planted_loss, "FROM pareto")
    assert {p["config_id"] for p in front} == {c["config_id"] for c in configs} - dominated
    assert {(p["depth"], p["num_heads"]) for p in front} == {(1, 1), (1, 4), (1, 16), (2, 4), (2, 16), (4, 16)}


def planned(space, means):
    """A stand-in for the plan ``select_configs`` reads: one config per planted shape at d_model 64."""
    configs = [
        SimpleNamespace(shape=Shape(d, h, 64 // h, 64, 128, "fixed_d_model", "vit"), is_baseline=(d, h) == (4, 4))
        for d, h in means
    ]
    baseline = next(c for c in configs if c.is_baseline)
    return SimpleNamespace(space_name=space, configs=configs, baseline=baseline)


def test_top_k_orders_by_the_metric_direction(planted_loss, tmp_path):
    chosen = select_configs(planned("loss", LOSS_MEANS), planted_loss, "top-k", 2)
    assert {(c.shape.depth, c.shape.num_heads) for c in chosen} == {(4, 16), (2, 16), (4, 4)}  # lowest + baseline
    top1 = {(4, 4): 90.0, (2, 4): 91.0, (1, 4): 80.0, (2, 16): 92.0, (1, 16): 60.0}
    results = tmp_path / "top1"
    import_file(write_csv(tmp_path / "top.csv", [trial_row("top", d, h, 0, v) for (d, h), v in top1.items()]), results)
    chosen = select_configs(planned("top", top1), results, "top-k", 2)
    assert {(c.shape.depth, c.shape.num_heads) for c in chosen} == {(2, 16), (2, 4), (4, 4)}  # highest + baseline


@pytest.mark.slow
def test_report_on_a_loss_names_the_metric_and_its_direction(planted_loss, tmp_path):
    text = write_report("loss", planted_loss, tmp_path / "report").read_text()
    assert "judged on `val_loss` (validation loss, lower is better)" in text
    assert "no more than 0.05 nats above the baseline's" in text
    assert "**4 heads of 16**: holds down to depth 2; breaks at depth 1" in text
    assert "depth 1: breaks (Δ +0.200, 95% CI" in text and "depth 4: 0.400 nats (the baseline)" in text
    assert "## Validation loss against parameters" in text and "![Δval_loss heatmap](delta_heatmap.png)" in text


# --- a tolerance per query ------------------------------------------------------------------------------


@pytest.mark.slow
def test_tolerance_option_on_sql_and_report(planted_loss, tmp_path, capsys):
    sql = "SELECT DISTINCT verdict, tolerance FROM vs_baseline WHERE depth = 1 AND num_heads = 4"
    assert main(["sql", sql, "--results", str(planted_loss), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"verdict": "breaks", "tolerance": 0.05}]
    assert main(["sql", sql, "--results", str(planted_loss), "--format", "json", "--tolerance", "0.3"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"verdict": "holds", "tolerance": 0.3}]
    assert main(["sql", "SET VARIABLE tolerance = 1", "--results", str(planted_loss)]) == 2  # still read-only
    assert main(["sql", "SELECT 1", "--results", str(planted_loss), "--tolerance", "0"]) != 0
    out = tmp_path / "report"
    assert main(["report", "loss", "--results", str(planted_loss), "--out", str(out), "--tolerance", "0.3"]) == 0
    text = (out / "index.md").read_text()
    assert "no more than 0.3 nats above" in text and "**4 heads of 16**: holds down to depth 1" in text


# --- version-1 files ------------------------------------------------------------------------------------

# The trials, epochs and spaces columns as schema version 1 wrote them (before metric, metric_mode, score).
V1_TRIALS = pa.schema(
    [("schema_version", pa.int32())]
    + [(n, pa.string()) for n in ("space", "profile", "sweep_id", "trial_id", "config_id")]
    + [("seed", pa.int64()), ("is_baseline", pa.bool_()), ("family", pa.string())]
    + [(n, pa.int64()) for n in ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim")]
    + [(n, pa.string()) for n in ("head_dim_rule", "status", "error")]
    + [(n, pa.float64()) for n in ("top1", "top5", "val_loss")]
    + [(n, pa.int64()) for n in ("params", "params_attention", "params_mlp", "params_embed_head")]
    + [("flops_per_sample", pa.int64()), ("peak_mem_bytes", pa.int64()), ("peak_mem_method", pa.string())]
    + [(n, pa.float64()) for n in ("train_samples_per_s", "infer_samples_per_s", "latency_b1_ms")]
    + [("kappa_mean", pa.float64()), ("kappa_max", pa.float64())]
    + [("epochs_run", pa.int32()), ("steps_run", pa.int64()), ("restarts", pa.int32())]
    + [(n, pa.float64()) for n in ("wall_s", "train_s", "kappa_probe_s")]
    + [(n, pa.string()) for n in ("dataset", "device", "node_id", "git_sha")]
    + [("started_at", pa.timestamp("ms", tz="UTC")), ("finished_at", pa.timestamp("ms", tz="UTC"))]
    + [("trial_config", pa.string())]
)
V1_KEY = [("schema_version", pa.int32())] + [(n, pa.string()) for n in ("space", "sweep_id", "trial_id", "config_id")]
V1_EPOCHS = pa.schema(
    [*V1_KEY, ("seed", pa.int64()), ("epoch", pa.int32()), ("step", pa.int64())]
    + [(n, pa.float64()) for n in ("train_loss", "val_top1", "val_top5", "val_loss", "kappa_mean", "kappa_max", "lr")]
)
V1_SPACES = pa.schema(
    [("schema_version", pa.int32())]
    + [(n, pa.string()) for n in ("space", "sweep_id", "profile", "question")]
    + [("tolerance_top1", pa.float64()), ("written_at", pa.timestamp("ms", tz="UTC"))]
)


def write_v1(results: Path, space: str) -> None:
    """The planted top-1 space as a version-1 sweep wrote it, with its space's tolerance of 20 points."""
    rows = []
    for index, ((depth, heads), mean) in enumerate(PLANTED_MEANS.items()):
        for seed in range(3):
            row = trial_row(space, depth, heads, seed, mean + (seed - 1) * 0.05)
            rows.append({**row, "schema_version": 1, "sweep_id": "v1", "trial_id": f"t{index}-{seed}", "attn_dim": 64})
    for table, schema, table_rows in (
        ("trials", V1_TRIALS, rows),
        ("epochs", V1_EPOCHS, [{**rows[0], "epoch": 1, "val_top1": rows[0]["top1"]}]),
        ("kappa", SCHEMAS["kappa"], []),  # unchanged by version 2
        ("spaces", V1_SPACES, [{"schema_version": 1, "space": space, "sweep_id": "v1", "question": "old?",
                               "tolerance_top1": 20.0, "written_at": datetime.now(UTC)}]),
    ):  # fmt: skip
        folder = results / table / space / ("v1" if table != "spaces" else "")
        folder.mkdir(parents=True, exist_ok=True)
        columns = {name: [row.get(name) for row in table_rows] for name in schema.names}
        pq.write_table(pa.Table.from_pydict(columns, schema=schema), folder / ("v1.parquet"))


def sql_json(results, sql, capsys):
    assert main(["sql", sql, "--results", str(results), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_version_1_files_are_read_as_top1(tmp_path, capsys):
    results = tmp_path / "results"
    write_v1(results, "old")
    rows = sql_json(results, "SELECT DISTINCT metric, metric_mode, score = top1 AS same FROM trials", capsys)
    assert rows == [{"metric": "top1", "metric_mode": "max", "same": True}]
    assert sql_json(results, "SELECT val_score = val_top1 AS same FROM epochs", capsys) == [{"same": True}]
    settings = sql_json(results, "SELECT metric, metric_mode, tolerance FROM spaces", capsys)
    assert settings == [{"metric": "top1", "metric_mode": "max", "tolerance": 20.0}]
    # the v1 space's own tolerance (20 points): depth 1 × 4 heads, 10 points down, holds
    verdict = sql_json(results, "SELECT verdict, tolerance FROM vs_baseline WHERE depth = 1 AND num_heads = 4", capsys)
    assert verdict == [{"verdict": "holds", "tolerance": 20.0}]
    edges = {e["num_heads"]: e["holds_down_to_depth"] for e in sql_json(results, "FROM depth_edge", capsys)}
    assert edges == {1: 1, 4: 1, 16: 1, 64: 4}  # 64 heads, 20 points down at depth 2: inconclusive


def test_version_1_and_2_files_mixed(tmp_path, capsys):
    results = tmp_path / "results"
    write_v1(results, "old")
    rows = [loss_row("new", d, h, seed, mean) for (d, h), mean in LOSS_MEANS.items() for seed in range(2)]
    import_file(write_csv(tmp_path / "new.csv", rows), results)
    record_space(results, "new", "sweep-2", None, "q", "val_loss", "min", 0.05)
    by_space = sql_json(results, "SELECT space, metric, metric_mode, count(*) AS n, bool_and(score IS NOT NULL) "
                                 "AS scored FROM trials GROUP BY ALL ORDER BY space", capsys)  # fmt: skip
    assert by_space == [
        {"space": "new", "metric": "val_loss", "metric_mode": "min", "n": 24, "scored": True},
        {"space": "old", "metric": "top1", "metric_mode": "max", "n": 36, "scored": True},
    ]
    verdicts = sql_json(results, "SELECT space, verdict FROM vs_baseline WHERE depth = 1 AND num_heads = 4 "
                                 "ORDER BY space", capsys)  # fmt: skip
    assert verdicts == [{"space": "new", "verdict": "breaks"}, {"space": "old", "verdict": "holds"}]


@pytest.mark.skipif(shutil.which("duckdb", path=str(Path(sys.executable).parent)) is None,
                    reason="the duckdb shell (dev dependency duckdb-cli) is not installed")  # fmt: skip
def test_plain_duckdb_shell_reads_version_1_files(tmp_path):
    results = tmp_path / "results"
    write_v1(results, "old")
    shell = str(Path(sys.executable).parent / "duckdb")
    sql = "SELECT metric, verdict FROM vs_baseline WHERE depth = 1 AND num_heads = 4"
    result = subprocess.run([shell, "-init", str(VIEWS), "-json", "-c", sql], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"metric": "top1", "verdict": "holds"}]


# --- import -------------------------------------------------------------------------------------------


def test_import_takes_metric_and_score_columns(tmp_path):
    results = tmp_path / "results"
    rows = [{**loss_row("seq", 4, 4, 0, 0.4), "metric_mode": "min"}, loss_row("seq", 2, 4, 0, 0.5)]
    import_file(write_csv(tmp_path / "seq.csv", rows), results)
    stored = query(results, "SELECT depth, metric, metric_mode, score, top1 FROM trials ORDER BY depth")
    assert stored == [
        {"depth": 2, "metric": "val_loss", "metric_mode": "min", "score": 0.5, "top1": None},
        {"depth": 4, "metric": "val_loss", "metric_mode": "min", "score": 0.4, "top1": None},
    ]
    assert query(results, "SELECT metric, metric_mode, tolerance FROM spaces") == [
        {"metric": "val_loss", "metric_mode": "min", "tolerance": None}
    ]


def test_import_rejects_bad_metrics(tmp_path):
    results = tmp_path / "results"
    rows = [
        {**loss_row("bad", 4, 4, 0, 0.4), "metric_mode": "max"},
        {**loss_row("bad", 2, 4, 0, 0.4), "metric": "bleu"},
        {**loss_row("bad", 1, 4, 0, 0.4), "metric": "accuracy", "accuracy": 140.0, "score": None},
        {**loss_row("bad", 1, 1, 0, None)},
    ]
    with pytest.raises(ImportRejected) as info:
        import_file(write_csv(tmp_path / "bad.csv", rows), results)
    message = str(info.value)
    assert "row 1: metric_mode: must be min for val_loss (lower is better), got 'max'" in message
    assert "row 2: metric_mode: required for 'bleu', which is not a known metric" in message
    assert "row 3: accuracy: must be a percentage in [0, 100] (got 140.0)" in message
    assert "row 4: score: required when status is ok; give the score column or the val_loss column" in message
    assert not results.exists()
    named = {**loss_row("bleu", 4, 4, 0, 30.0), "metric": "bleu", "metric_mode": "max"}
    import_file(write_csv(tmp_path / "ok.csv", [named]), results)
    assert query(results, "SELECT metric, metric_mode, score FROM trials") == [
        {"metric": "bleu", "metric_mode": "max", "score": 30.0}
    ]


LOSS_SPACE = """
question: where does the validation loss break?
model: {family: vit, embed_dim: 64, mlp_dim: 128, patch_size: 2}
axes: {depth: [1, 2, 4], num_heads: [1, 4, 16, 64]}
baseline: {depth: 4, num_heads: 4}
data: {name: digits}
metric: {name: val_loss, tolerance: 0.05}
"""


def test_import_of_a_shipped_space_takes_its_metric_and_tolerance(tmp_path, monkeypatch):
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    (spaces / "lossy.yaml").write_text(textwrap.dedent(LOSS_SPACE))
    monkeypatch.setenv(SPACES_DIR_ENV, str(spaces))
    results = tmp_path / "results"
    rows = [{k: v for k, v in loss_row("lossy", d, h, seed, None).items() if k not in ("metric", "score")}
            | {"val_loss": mean + (seed - 1) * 0.002}
            for (d, h), mean in LOSS_MEANS.items() for seed in range(3)]  # fmt: skip
    import_file(write_csv(tmp_path / "lossy.csv", rows), results)  # only the space's metric column: val_loss
    assert query(results, "SELECT DISTINCT metric, metric_mode, score = val_loss AS same FROM trials") == [
        {"metric": "val_loss", "metric_mode": "min", "same": True}
    ]
    assert query(results, "SELECT metric, tolerance, question FROM spaces") == [
        {"metric": "val_loss", "tolerance": 0.05, "question": "where does the validation loss break?"}
    ]
    edges = {
        e["num_heads"]: (e["holds_down_to_depth"], e["breaks_at_depth"]) for e in query(results, "FROM depth_edge")
    }
    assert edges == {1: (4, 2), 4: (2, 1), 16: (1, None), 64: (4, 2)}
    wrong = [{**rows[0], "seed": 9, "metric": "top1", "top1": 90.0}]
    with pytest.raises(ImportRejected, match="row 1: metric: space 'lossy' is a shipped space judged on val_loss"):
        import_file(write_csv(tmp_path / "wrong.csv", wrong), results)


def test_import_of_local_digits_rows_uses_its_tolerance(tmp_path):
    results = tmp_path / "results"
    rows = planted_rows("local_digits", PLANTED_MEANS, noise=0.05)
    import_file(write_csv(tmp_path / "digits.csv", rows), results)
    assert query(results, "SELECT DISTINCT metric, tolerance FROM vs_baseline") == [
        {"metric": "top1", "tolerance": 2.0}
    ]


# --- the sink -----------------------------------------------------------------------------------------


def sequence_payload():
    return {
        "space": "seq", "profile": None, "config_id": "cfg", "seed": 0, "is_baseline": True, "family": "vit",
        "metric": "accuracy", "metric_mode": "max", "planned_params": 1000, "planned_flops_per_sample": 5000,
        "shape": {"depth": 2, "num_heads": 2, "head_dim": 8, "embed_dim": 16, "mlp_dim": 32, "attn_dim": 16,
                  "head_dim_rule": "fixed_d_model"},
        "trial_config": {"seed": 0},
    }  # fmt: skip


def epoch(number, accuracy):
    return {"epoch": number, "step": 10 * number, "train_loss": 1.0, "val_accuracy": accuracy, "val_loss": 0.7}


def test_sink_writes_metric_score_and_val_score(tmp_path):
    sink = ParquetSink(tmp_path, "s")
    trial = SimpleNamespace(trial_id="t1", config={"payload": sequence_payload()}, num_failures=0, error_file=None)
    record = {"status": "ok", "error": None, "accuracy": 61.0, "val_loss": 0.7, "train_tokens_per_s": 5e4,
              "infer_tokens_per_s": 2e5, "seq_len": 512, "epochs": [epoch(1, 40.0), epoch(2, 61.0)],
              "kappa": []}  # fmt: skip
    sink.on_trial_result(0, [], trial, {"record": record})
    sink.on_trial_complete(0, [], trial)
    row = pq.read_table(tmp_path / "trials/seq/s/t1.parquet").to_pylist()[0]
    assert (row["metric"], row["metric_mode"], row["score"], row["accuracy"], row["top1"]) == (
        "accuracy", "max", 61.0, 61.0, None)  # fmt: skip
    assert (row["train_tokens_per_s"], row["infer_tokens_per_s"], row["seq_len"]) == (5e4, 2e5, 512)
    epochs = pq.read_table(tmp_path / "epochs/seq/s/t1.parquet").to_pylist()
    assert [e["val_score"] for e in epochs] == [40.0, 61.0]


def test_pruned_trial_scores_from_its_last_epoch(tmp_path):
    sink = ParquetSink(tmp_path, "s")
    payload = {**sequence_payload(), "metric": "val_loss", "metric_mode": "min"}
    trial = SimpleNamespace(trial_id="t2", config={"payload": payload}, num_failures=0, error_file=None)
    sink.on_trial_result(0, [], trial, {"epoch_row": epoch(1, 40.0), "kappa_rows": []})
    sink.on_trial_complete(0, [], trial)
    row = query(tmp_path, "SELECT status, metric, score, accuracy, epochs_run FROM trials")[0]
    assert row == {"status": "pruned", "metric": "val_loss", "score": 0.7, "accuracy": 40.0, "epochs_run": 1}


def test_each_epoch_reports_every_held_out_metric_under_its_record_name():
    from sweep.run.tuner import epoch_metrics

    vision = {"epoch": 1, "val_top1": 90.0, "val_top5": 99.0, "val_loss": 0.3, "kappa_mean": None, "lr": 1e-3}
    assert epoch_metrics(vision) == {"top1": 90.0, "top5": 99.0, "val_loss": 0.3}
    sequence = {"epoch": 1, "val_accuracy": 61.0, "val_loss": 0.7, "kappa_mean": 5.0}
    assert epoch_metrics(sequence) == {"accuracy": 61.0, "val_loss": 0.7, "kappa_mean": 5.0}


def test_the_analysis_default_tolerance_is_the_registrys(tmp_path):
    """A space that names no tolerance is judged at workers.metrics.DEFAULT_TOLERANCE by the SQL views and by
    the report alike: verdicts.sql's fallback is the same number as the registry's (one default, two languages)."""
    from workers.metrics import DEFAULT_TOLERANCE, METRICS

    rows = [trial_row("untold", d, h, seed, 80.0) for (d, h) in ((4, 4), (2, 4)) for seed in range(2)]
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "untold.csv", rows), results)
    record_space(results, "untold", "sweep-1", None, "?", "top1", "max", None)
    [row] = query(results, "SELECT DISTINCT tol FROM space_tolerance_at(NULL) WHERE space = 'untold'")
    assert row["tol"] == DEFAULT_TOLERANCE
    assert all(info.default_tolerance in (None, DEFAULT_TOLERANCE) for info in METRICS.values())


def test_a_metric_is_one_definition_that_reaches_schema_importer_sink_space_and_sql(tmp_path, monkeypatch):
    """Adding a metric is one entry in workers/metrics.py: a metric planted there (BLEU, percent, scored per
    epoch) becomes a trials and an epochs column, gets the importer's percent bounds, is kept by the sink from
    a last epoch row, may be an objective and an ASHA metric, and is a typed NULL column for SQL over files
    written before it existed."""
    from sweep.analysis import sql
    from sweep.results import importer, reader, schema, sink
    from sweep.space import model as space
    from workers import metrics

    bleu = metrics.Metric("bleu", "max", "percent", "BLEU", "BLEU on held-out translations", 0.5, 1)
    monkeypatch.setitem(metrics.METRICS, "bleu", bleu)
    assert schema.trials_schema().field("bleu").type == pa.float64()
    assert schema.epochs_schema().field("val_bleu").type == pa.float64()
    assert "bleu" not in schema.TRIALS.names  # the module's constant was built before the plant: no leak
    assert importer.metric_bounds()["bleu"] == (0.0, 100.0)
    assert "bleu: must be a percentage in [0, 100] (got 120.0)" in importer.metric_bound_problems({"bleu": 120.0})
    assert importer.metric_bound_problems({"bleu": 35.0, "val_loss": 0.2}) == []
    assert importer.metric_bound_problems({"val_loss": -1.0}) == ["val_loss: must not be negative (got -1.0)"]
    assert sink.epoch_columns()["val_bleu"] == "bleu"
    assert space.reported_metrics()["bleu"] == bleu.description and "bleu" in space.epoch_reported()
    assert metrics.natural_mode("bleu") == "max"

    old = tmp_path / "results" / "trials" / "old" / "sweep-1"
    old.mkdir(parents=True)  # a file written before BLEU: no such column
    pq.write_table(schema.table_from_rows("trials", [trial_row("old", 4, 4, 0, 80.0)]), old / "t.parquet")
    assert "NULL::DOUBLE AS bleu" in reader.no_rows("trials")
    assert sql.run_query(tmp_path / "results", "SELECT count(*), count(bleu) FROM trials")[1] == [(1, 0)]


def test_the_worker_evaluates_only_defined_metrics():
    """Every held-out score the training loop emits (workers/train.py) is a metric defined once in
    workers/metrics.py, it emits the names the task's list there gives, and every metric a data set's
    modality reports is defined."""
    import inspect

    from workers import metrics, train

    emitted = set(re.findall(r'"(\w+)": ', inspect.getsource(train.evaluate))) - {"input_ids"}
    assert emitted and emitted <= set(metrics.METRICS)
    tasks = (metrics.IMAGE_METRICS, metrics.SEQUENCE_CLASSIFICATION_METRICS, metrics.LANGUAGE_MODEL_METRICS)
    assert {name for names in tasks for name in names} <= emitted  # evaluate scores what each task's list names
    assert {name for names in metrics.MODALITY_METRICS.values() for name in names} <= set(metrics.METRICS)


@pytest.mark.parametrize("outcomes", [2, 3, 10, 100])
def test_each_metrics_chance_is_what_a_uniform_guess_scores(outcomes):
    """A metric's ``chance`` of k outcomes equals what a model that learned nothing scores, measured: random
    logits against random labels give top-1 and top-5 accuracy (100 / k and 100 · min(5, k) / k percent, within
    sampling noise), and uniform logits give the cross-entropy ln k and the perplexity k exactly."""
    import torch
    import torch.nn.functional as F

    from workers.metrics import METRICS

    generator = torch.Generator().manual_seed(outcomes)
    rows = 40_000
    logits = torch.randn(rows, outcomes, generator=generator)
    labels = torch.randint(outcomes, (rows,), generator=generator)
    top = logits.topk(min(5, outcomes), dim=1).indices
    top1 = 100 * (top[:, 0] == labels).float().mean().item()
    top5 = 100 * (top == labels[:, None]).any(dim=1).float().mean().item()
    assert METRICS["top1"].chance(outcomes) == METRICS["accuracy"].chance(outcomes) == pytest.approx(top1, abs=1.0)
    assert METRICS["top5"].chance(outcomes) == pytest.approx(top5, abs=1.0)
    uniform = F.cross_entropy(torch.zeros(rows, outcomes, dtype=torch.float64), labels).item()
    assert METRICS["val_loss"].chance(outcomes) == pytest.approx(uniform, rel=1e-12)
    assert METRICS["perplexity"].chance(outcomes) == pytest.approx(math.exp(uniform), rel=1e-9)
    assert METRICS["glue_avg"].chance is None


def test_a_trials_score_is_read_from_its_record_in_one_place():
    """``score_of``: the worker's record holds the score under the metric's name, a trials row may say
    ``score``, which wins; ``epoch_score``: an epoch row's ``val_<name>``. The sink, the trackers and the
    importer read a score only through these (nowhere else indexes a record by the metric)."""
    from workers.metrics import epoch_score, score_of

    assert score_of({"top1": 81.0, "val_loss": 0.7}, "top1") == 81.0
    assert score_of({"top1": 81.0, "val_loss": 0.7}, "val_loss") == 0.7
    assert score_of({"score": 80.0, "top1": 81.0}, "top1") == 80.0
    assert score_of({"score": None, "top1": 81.0}, "top1") == 81.0
    assert score_of({"top5": 99.0}, "top1") is None
    assert epoch_score({"val_top1": 70.0, "val_loss": 0.9}, "top1") == 70.0
    assert epoch_score({"val_top1": 70.0, "val_loss": 0.9}, "val_loss") == 0.9
    readers = [Path("sweep/results/sink.py"), Path("sweep/run/trackers.py"), Path("sweep/results/importer.py")]
    for path in readers:
        text = (Path(__file__).parents[2] / path).read_text()
        assert "score_of(" in text, path
        assert not re.search(r"\.get\((self\.)?metric\)|\.get\(epoch_key\((self\.)?metric\)\)", text), path
