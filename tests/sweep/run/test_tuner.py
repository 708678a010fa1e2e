"""Local sweeps end to end through Ray Tune: a grid and an Optuna search, each with a trial that fails on
purpose (a model too large to allocate), recorded once in Parquet and read back through DuckDB."""

import json

import pytest
from ray import tune

from sweep.analysis.sql import run_query
from sweep.plan.plan import make_plan
from sweep.run.tuner import run_sweep
from sweep.space.loader import load_space

HUGE_MLP = 2**36  # fc1 of d_model 16 × 2^36 float32 needs 4 TiB: the allocation fails at once (OOM)

SPACE = """
question: end-to-end test space
model: {{family: vit, embed_dim: 16, patch_size: 2}}
axes: {{depth: [1, 2], num_heads: [2, 4], mlp_dim: [32, {huge}]}}
constraints: {{}}
baseline: {{depth: 2, num_heads: 4, mlp_dim: 32}}
seeds: [0]
data: {{name: digits}}
train: {{epochs: 1, max_steps: 6, batch_size: 64, warmup_steps: 1}}
probes: {{kappa_samples: 4, throughput_steps: 1, latency_iters: 1}}
resources: {{cpus_per_trial: 1}}
{search}
"""


class ReportRecorder(tune.Callback):
    """Keeps each trial's final report: what the trial itself said, to compare with the Parquet."""

    def __init__(self):
        self.records = {}

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if "record" in result:
            self.records[trial.trial_id] = result["record"]


def run_space(tmp_path, search: str, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPACE.format(huge=HUGE_MLP, search=search))
    space_name, space, profile = load_space(str(path))
    plan = make_plan(space_name, space, profile)
    recorder = ReportRecorder()
    results = tmp_path / "results"
    outcome = run_sweep(plan, results, str(path), progress=False, extra_callbacks=[recorder])
    return outcome, recorder, results


def rows(results, query):
    columns, values = run_query(results, query)
    return [dict(zip(columns, row, strict=True)) for row in values]


def assert_parquet_equals_reports(results, recorder, sweep_id):
    trials = rows(results, f"SELECT * FROM trials WHERE sweep_id = '{sweep_id}'")
    assert len(trials) == len(recorder.records)
    assert len({t["trial_id"] for t in trials}) == len(trials)  # none twice
    for trial in trials:
        record = recorder.records[trial["trial_id"]]
        assert trial["status"] == record["status"] and trial["error"] == record.get("error")
        assert (trial["metric"], trial["metric_mode"], trial["score"]) == ("top1", "max", record.get("top1"))
        for column in (
            "top1",
            "top5",
            "params",
            "flops_per_sample",
            "peak_mem_bytes",
            "kappa_mean",
            "train_samples_per_s",
            "infer_samples_per_s",
            "wall_s",
            "epochs_run",
        ):
            if record.get(column) is not None or column not in ("params", "flops_per_sample"):
                assert trial[column] == record.get(column), column
            else:  # failed before measuring: the planner's count (meta device) stands in
                assert trial[column] > 0, column
        config = json.loads(trial["trial_config"])
        assert (config["model"]["depth"], config["model"]["mlp_dim"]) == (trial["depth"], trial["mlp_dim"])
        epochs = rows(results, f"SELECT * FROM epochs WHERE trial_id = '{trial['trial_id']}' ORDER BY epoch")
        assert [e["val_top1"] for e in epochs] == [e["val_top1"] for e in record["epochs"]]
        assert [e["val_score"] for e in epochs] == [e["val_top1"] for e in epochs]
        kappa = rows(results, f"SELECT * FROM kappa WHERE trial_id = '{trial['trial_id']}' ORDER BY epoch, layer")
        assert [k["kappa"] for k in kappa] == [k["kappa"] for k in record["kappa"]]
    return trials


@pytest.mark.slow
def test_grid_sweep_records_every_trial_once_with_failures_as_data(tmp_path, local_ray):
    outcome, recorder, results = run_space(tmp_path, "", "grid")
    assert outcome.trials == 8
    trials = assert_parquet_equals_reports(results, recorder, outcome.sweep_id)
    by_status = {}
    for trial in trials:
        by_status.setdefault(trial["status"], []).append(trial)
    assert {t["mlp_dim"] for t in by_status["oom"]} == {HUGE_MLP} and len(by_status["oom"]) == 4
    assert {t["mlp_dim"] for t in by_status["ok"]} == {32} and len(by_status["ok"]) == 4
    assert all("allocate" in t["error"] for t in by_status["oom"])
    assert all(t["params"] > 0 and t["top1"] is None for t in by_status["oom"])  # planned params kept
    assert sum(t["is_baseline"] for t in trials) == 1
    assert rows(results, "SELECT count(*) AS n FROM trials")[0]["n"] == 8
    leftovers = [p for p in results.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.slow
def test_optuna_sweep_obeys_the_space_and_records_failures(tmp_path, local_ray):
    search = (
        "search: {kind: optuna, sampler: random, num_trials: 6, seed: 3,"
        " objectives: [{metric: top1, mode: max}, {metric: params, mode: min}]}"
    )
    outcome, recorder, results = run_space(tmp_path, search, "optuna")
    assert outcome.trials == 6
    trials = assert_parquet_equals_reports(results, recorder, outcome.sweep_id)
    shapes = {(t["depth"], t["num_heads"], t["mlp_dim"]) for t in trials}
    assert shapes <= {(d, h, m) for d in (1, 2) for h in (2, 4) for m in (32, HUGE_MLP)}
    assert len(shapes) == 6  # six trials, six configs: a suggestion of a pair already trained is not trained again
    statuses = {t["status"] for t in trials}
    assert statuses == {"ok", "oom"}, statuses  # random sampler, seed 3: both kinds drawn
    assert all((t["status"] == "oom") == (t["mlp_dim"] == HUGE_MLP) for t in trials)


def test_a_sweep_records_what_its_questions_record_in_its_spaces_row(tmp_path):
    """record_plan_space writes ``{question: record}`` (Question.record) as the row's ``questions`` JSON, and
    space_settings reads it back: here the known answers' claims with the config ids the plan resolved."""
    from sweep.run.tuner import record_plan_space

    name, space, profile = load_space("known_more_heads_hurt", "smoke")
    plan = make_plan(name, space, profile)
    record_plan_space(plan, tmp_path, "sid")
    _, [(text, search)] = run_query(tmp_path, "SELECT questions, search FROM space_settings")
    assert json.loads(search) == {"kind": "grid"}  # its search as validated (an edge search's adds its lattice)
    [claim] = json.loads(text)["expectations"]
    by_heads = {c.shape.num_heads: c.config_id for c in plan.configs}
    assert (claim["name"], claim["a_config"], claim["b_config"]) == (
        "one_full_rank_head_beats_eight",
        by_heads[1],
        by_heads[8],
    )
