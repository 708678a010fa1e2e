"""Experiment trackers through Ray Tune's own callbacks (``sweep/run/trackers.py``), for real and with no network:
a sweep through the CLI logs to MLflow (a SQLite store under tmp_path), TensorBoard event files and W&B in
offline mode, and what each holds is read back with the tracker's own reader and compared with the Parquet
rows, the record. Plus the fast paths: a bad ``log:`` is a config error, a missing package one line (exit 2)
before anything runs, a tracker that fails is switched off without stopping the sweep, and the settings
never reach a config's identity."""

import logging
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import sweep.run.trackers  # noqa: F401  (imported before a test hides a package: Ray's integrations import them once)
from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.run.trackers import MLflowTracker, TensorBoardTracker
from sweep.space.loader import load_space
from sweep.space.model import Log, MLflowSettings, TensorBoardSettings

REPO = Path(__file__).resolve().parents[3]

# Two one-layer ViTs on 64 digits, 2 epochs of 2 steps each: a trial in about a second
# (tests/sweep/cli/test_run_profiles.py's TINY, two epochs so every tracker has a history). The space turns
# TensorBoard on and says where MLflow writes; the command line adds MLflow, TensorBoard again (logged once)
# and W&B.
SPACE = """
question: trackers see what the Parquet rows say
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1], num_heads: [2, 4]}
baseline: {depth: 1, num_heads: 4}
seeds: [0]
data: {name: digits, limit_train: 64, limit_val: 90}
train: {epochs: 2, batch_size: 32, warmup_steps: 0}
probes: {kappa_samples: 2, throughput_warmup_steps: 0, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1, max_concurrent_trials: 1}
log:
  trackers: [tensorboard]
  mlflow: {tracking_uri: "sqlite:///$DB"}
"""


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory, shared_ray):
    """conftest's ``local_ray``, with W&B's caches and logs in folders of the test session's, not ~/.cache (set
    before Ray starts, so its workers see them)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WANDB_CACHE_DIR", str(tmp_path_factory.mktemp("wandb-cache")))
        env.setenv("WANDB_CONFIG_DIR", str(tmp_path_factory.mktemp("wandb-config")))
        yield shared_ray.start()  # started anew: the environment changed


def write_space(folder: Path, text: str = SPACE) -> Path:
    path = folder / "tracked.yaml"
    path.write_text(textwrap.dedent(text.replace("$DB", str(folder / "mlflow.db"))))
    return path


def parquet(results: Path, query: str) -> list[dict]:
    columns, rows = run_query(results, query)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def read_wandb_records(path: Path) -> list:
    """The records of an offline W&B run file, parsed with W&B's own protobuf ``Record``. wandb 0.31 ships no
    Python reader of the file, which is wandb-core's: a 7-byte header (``:W&B``, magic, version), then
    LevelDB-log records (crc32c, length, kind) in 32 KiB blocks, a record split over blocks as first,
    middle…, last."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", "not a W&B run file (has wandb-core's format changed?)"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a record header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # full, or the last piece of a split record
            records.append(Record.FromString(pending))
            pending = b""
    return records


@pytest.mark.slow
def test_a_sweep_logs_every_trial_to_mlflow_tensorboard_and_wandb_as_parquet_records_it(tmp_path, local_ray):
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    space, results = write_space(tmp_path), tmp_path / "results"
    args = ["run", str(space), "--results", str(results), "--quiet"]
    assert main([*args, "--log", "mlflow", "--log", "tensorboard", "--log", "wandb"]) == 0
    rows = parquet(results, "SELECT trial_id, config_id, seed, score, status, params, train_s, kappa_mean FROM trials")
    trials = {t["trial_id"]: t for t in rows}
    epochs = parquet(results, "SELECT trial_id, epoch, val_score, train_loss, kappa_mean FROM epochs ORDER BY epoch")
    assert len(trials) == 2 and {t["status"] for t in trials.values()} == {"ok"}
    planned = make_plan(*load_space(str(space))).configs
    assert {t["config_id"] for t in trials.values()} == {c.config_id for c in planned}

    def epochs_of(trial_id: str, column: str) -> list[tuple[int, float]]:
        return [(e["epoch"], e[column]) for e in epochs if e["trial_id"] == trial_id]

    # MLflow: one run per trial in the experiment named for the space, tagged, its history the epochs rows
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tracked").experiment_id])
    assert len(runs) == len(trials)
    for run in runs:
        tags, trial = run.data.tags, trials[run.data.tags["trial_id"]]
        assert (tags["config_id"], tags["seed"]) == (trial["config_id"], str(trial["seed"]))
        assert run.info.run_name == f"tracked-{trial['config_id']}-seed{trial['seed']}"
        assert (run.info.status, tags["status"]) == ("FINISHED", "ok")
        for column in ("score", "params", "train_s", "kappa_mean"):  # the final record, as the trials row has it
            assert run.data.metrics[column] == trial[column], column
        assert run.data.params["config_id"] == trial["config_id"] and run.data.params["train.epochs"] == "2"
        for column in ("val_score", "train_loss", "kappa_mean"):
            history = client.get_metric_history(run.info.run_id, column)
            assert [(m.step, m.value) for m in history][:2] == epochs_of(trial["trial_id"], column), column
        assert len(client.get_metric_history(run.info.run_id, "kappa_layer_00")) == 2  # one layer's κ per epoch

    # TensorBoard: a folder per trial named for it, its scalars the same numbers (stored as float32)
    folders = {p.name: p for p in results.glob("_tune/tracked-*/tensorboard/*")}
    assert set(folders) == {f"tracked-{t['config_id']}-seed{t['seed']}-{i}" for i, t in trials.items()}
    for name, folder in folders.items():
        trial = trials[name.rsplit("-", 1)[1]]
        events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        events.Reload()
        for column in ("val_score", "train_loss"):
            scalars = [(s.step, s.value) for s in events.Scalars(f"ray/tune/{column}")]
            assert scalars == [(e, pytest.approx(v, rel=1e-6)) for e, v in epochs_of(trial["trial_id"], column)]
        assert events.Scalars("ray/tune/score")[-1].value == pytest.approx(trial["score"], rel=1e-6)
        assert "_hparams_/session_start_info" in events.PluginTagToContent("hparams")

    # W&B, offline: a run per trial beside Tune's trial state, grouped by config id, the same history
    for trial_id, trial in trials.items():
        (run_file,) = results.glob(f"_tune/tracked-*/{trial_id}/wandb/offline-run-*/run-*-{trial_id}.wandb")
        records = read_wandb_records(run_file)
        (run,) = [r.run for r in records if r.HasField("run")]
        assert (run.display_name, run.run_group) == (f"tracked-{trial['config_id']}-seed0", trial["config_id"])
        assert {f"config_id:{trial['config_id']}", "seed:0"} <= set(run.tags)
        history = [
            {item.key or "/".join(item.nested_key): item.value_json for item in r.history.item}
            for r in records
            if r.HasField("history")
        ]
        val_scores = [(int(h["training_iteration"]), float(h["val_score"])) for h in history if "val_score" in h]
        assert val_scores == epochs_of(trial_id, "val_score")
        assert [float(h["score"]) for h in history if "score" in h] == [trial["score"]]


@pytest.mark.parametrize(
    ("log", "where", "says"),
    [
        ("[nope]", "log.trackers[0]", "'mlflow', 'tensorboard' or 'wandb'"),
        ("{mlflow: {tracking_url: x}}", "log.mlflow.tracking_url", "Extra inputs are not permitted"),
        ("{wandb: {mode: loud}}", "log.wandb.mode", "'offline' or 'online'"),
    ],
)
def test_a_bad_log_section_is_a_config_error_naming_what_is_allowed(log, where, says, tmp_path, capsys):
    space = write_space(tmp_path, SPACE.split("log:")[0] + f"log: {log}\n")
    assert main(["validate", str(space)]) == 2
    err = capsys.readouterr().err
    assert f"tracked.yaml: {where}:" in err and says in err, err


def test_a_missing_tracker_package_is_one_line_naming_pip_before_anything_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` now fails as if it were not installed
    results = tmp_path / "results"
    assert main(["run", str(write_space(tmp_path)), "--log", "mlflow", "--results", str(results), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # the sweep's own first line, then the error
    errors = [line for line in lines if line.startswith("error:")]
    assert errors == lines[-1:], lines
    err = errors[0]
    assert err.startswith("error: the mlflow tracker (--log / log:) needs the mlflow package"), err
    assert "pip install mlflow-skinny" in err and "heads-for-depth[trackers]" in err
    assert not (results / "_tune").exists() and not (results / "trials").exists()  # no trial ran


def test_a_tracker_that_fails_is_switched_off_and_the_sweep_goes_on(caplog):
    """An MLflow server that does not answer: setup warns once (in seconds, not after MLflow's retries) and
    turns the tracker off; no hook raises into Tune's loop, where an exception would stop the sweep and its
    Parquet sink, and the later hooks do nothing."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tracker = MLflowTracker(MLflowSettings(tracking_uri=f"http://127.0.0.1:{port}"), "tracked", "sweep-1")
    with caplog.at_level(logging.WARNING, logger="sweep.run.trackers"):
        tracker.setup(stop=None, num_samples=1, total_num_samples=1)
        tracker.on_trial_result(iteration=1, trials=[], trial=object(), result={})
    assert tracker.off
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("mlflow stopped (setup failed: ConnectionRefusedError") and "Parquet" in message


def test_tensorboard_writes_a_folder_per_trial_named_for_it_under_dir_or_tunes_experiment(tmp_path):
    payload = {"space": "tracked", "config_id": "0123456789abcdef", "seed": 3}
    trial = SimpleNamespace(
        config={"payload": payload},
        trial_id="abcde_00001",
        experiment_dir_name="tracked-sweep-1",
        local_experiment_path=str(tmp_path / "staging" / "tracked-sweep-1"),
    )
    run = "tracked-0123456789abcdef-seed3-abcde_00001"
    default = TensorBoardTracker(TensorBoardSettings(), "sweep-1").run_folder(trial)
    assert default == tmp_path / "staging" / "tracked-sweep-1" / "tensorboard" / run and default.is_dir()
    chosen = TensorBoardTracker(TensorBoardSettings(dir=str(tmp_path / "tb")), "sweep-1").run_folder(trial)
    assert chosen == tmp_path / "tb" / "tracked-sweep-1" / run and chosen.is_dir()


def test_log_settings_stay_out_of_the_config_ids_and_the_cli_adds_to_the_space(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with_log = make_plan(*load_space(str(write_space(tmp_path))))
    without = make_plan(*load_space(str(write_space(plain, SPACE.split("log:")[0]))))
    assert [c.config_id for c in with_log.configs] == [c.config_id for c in without.configs]
    assert "mlflow" not in str(with_log.trials()) and "tensorboard" not in str(with_log.trials())
    assert with_log.space.log.trackers == ["tensorboard"]
    assert with_log.space.log.adding(["mlflow", "tensorboard"]).trackers == ["tensorboard", "mlflow"]
    assert Log.model_validate(["wandb", "wandb"]).trackers == ["wandb"]


def test_make_passes_log_to_sweep_run_and_rerun():
    for target, command in (("sweep", "sweep run"), ("rerun", "sweep rerun")):
        dry = subprocess.run(
            ["make", "-n", target, "LOG=mlflow,tensorboard"], cwd=REPO, capture_output=True, text=True, check=True
        )
        (line,) = [line for line in dry.stdout.splitlines() if command in line]
        assert re.search(r"--log mlflow --log tensorboard\b", line), line
