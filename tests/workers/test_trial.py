"""One trial end to end: it learns, records every number, and turns failures into records."""

import copy
import json
import math

import pytest

from sweep.results.schema import TRIALS
from tests.helpers import TORCH_THREADS
from workers.trial import main, run_trial

NUMBERS_WITH_UNITS = [
    "top1", "top5", "params", "params_attention", "params_mlp", "params_embed_head", "flops_per_sample",
    "peak_mem_bytes", "train_samples_per_s", "infer_samples_per_s", "latency_b1_ms", "kappa_mean",
    "kappa_max", "wall_s", "train_s", "kappa_probe_s",
]  # fmt: skip


@pytest.fixture(scope="module")
def trained_record():
    """A small ViT (4 blocks × 4 heads, d_model 64) trained 30 epochs on the embedded digits."""
    config = {
        "model": {
            "family": "vit",
            "depth": 4,
            "num_heads": 4,
            "embed_dim": 64,
            "mlp_dim": 128,
            "patch_size": 2,
        },
        "data": {"name": "digits"},
        "train": {"epochs": 30, "batch_size": 64, "lr": 2e-3},
        "seed": 0,
        "threads": TORCH_THREADS,
    }
    return run_trial(config)


# The tests of `trained_record` all go to one pytest-xdist process (--dist loadgroup), so the 30-epoch training
# runs once, not once on each process that picks up one of them.
trained_record_group = pytest.mark.xdist_group("trained_record")


@pytest.mark.slow
@trained_record_group
def test_small_vit_learns_digits_to_over_90_percent(trained_record):
    assert trained_record["status"] == "ok", trained_record.get("error")
    assert trained_record["top1"] >= 90.0
    assert trained_record["epochs_run"] == 30 and trained_record["steps_run"] == 30 * (1437 // 64)


@pytest.mark.slow
@trained_record_group
def test_record_holds_every_number(trained_record):
    for name in NUMBERS_WITH_UNITS:
        value = trained_record[name]
        assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, name
    assert trained_record["peak_mem_method"].startswith("cpu_")
    assert trained_record["params"] == 136_138  # 4 × (attention 16,640 + MLP 16,576) + embeddings and head
    assert trained_record["params_attention"] == 4 * (64 * 192 + 192 + 64 * 64 + 64)
    assert trained_record["kappa_probe_s"] < trained_record["train_s"]  # the cost ratio itself is bench/kappa_cost.py


@pytest.mark.slow
@trained_record_group
def test_every_key_of_the_record_has_a_column_to_go_to(trained_record):
    """Nothing a trial measures is dropped on the way to Parquet: each key is a trials column (the schema is the
    list), or one of the child tables' rows."""
    assert set(trained_record) - set(TRIALS.names) == {"epochs", "kappa"}
    assert trained_record["train_samples"] == 1437 and trained_record["val_samples"] == 360  # digits, 80/20


@pytest.mark.slow
@trained_record_group
def test_epoch_and_kappa_rows(trained_record):
    epochs = trained_record["epochs"]
    assert [row["epoch"] for row in epochs] == list(range(1, 31))
    assert epochs[-1]["val_top1"] == trained_record["top1"]
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    kappa = trained_record["kappa"]
    assert len(kappa) == 30 * 4 and {row["layer"] for row in kappa} == {0, 1, 2, 3}
    assert all(row["kappa_max"] >= row["kappa"] >= 1.0 for row in kappa)


@pytest.mark.slow
def test_same_seed_same_numbers(tiny_vit_config):
    first, second = run_trial(tiny_vit_config), run_trial(tiny_vit_config)
    assert first["status"] == "ok"
    assert [r["train_loss"] for r in first["epochs"]] == [r["train_loss"] for r in second["epochs"]]
    assert first["top1"] == second["top1"] and first["kappa_mean"] == second["kappa_mean"]
    other = copy.deepcopy(tiny_vit_config) | {"seed": 1}
    assert run_trial(other)["epochs"][0]["train_loss"] != first["epochs"][0]["train_loss"]


@pytest.mark.slow
def test_max_steps_budget(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["train"].update(epochs=5, max_steps=30)
    record = run_trial(config)
    assert record["steps_run"] == 30 and record["epochs_run"] == 2  # 22 steps per epoch at batch 64


def test_huge_learning_rate_diverges(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["train"].update(lr=1e6, grad_clip_norm=None, warmup_steps=0, max_steps=40, epochs=2)
    record = run_trial(config)
    assert record["status"] == "diverged"
    assert "loss became" in record["error"]
    assert record["params"] > 0  # measured before the failure, kept


def test_model_too_large_for_memory_is_oom(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["model"]["mlp_dim"] = 2**36  # fc1 alone would need 32 · 2^36 · 4 B = 8 TiB
    record = run_trial(config)
    assert record["status"] == "oom", record["error"]
    assert record["flops_per_sample"] > 0  # counted on the meta device before the allocation failed


def test_invalid_config_is_an_error_record(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["model"]["num_heads"] = 5
    record = run_trial(config)
    assert record["status"] == "error"
    assert "num_heads must divide embed_dim" in record["error"]


def test_missing_data_is_an_error_record_naming_the_variable(tiny_vit_config, monkeypatch, tmp_path):
    monkeypatch.delenv("CIFAR_ROOT", raising=False)
    config = copy.deepcopy(tiny_vit_config)
    config["data"] = {"name": "cifar10", "root": str(tmp_path / "nowhere")}
    record = run_trial(config)
    assert record["status"] == "error" and "CIFAR_ROOT" in record["error"]


def test_catch_false_raises_for_debugging(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["model"]["num_heads"] = 5
    with pytest.raises(ValueError, match="num_heads"):
        run_trial(config, catch=False)


@pytest.mark.slow
def test_epoch_callback_sees_each_epoch(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["train"].update(epochs=2, max_steps=None)
    seen = []
    record = run_trial(config, on_epoch=lambda row, kappa, _snapshot: seen.append((row["epoch"], len(kappa))))
    assert seen == [(1, 2), (2, 2)] and record["status"] == "ok"


@pytest.mark.slow
def test_resuming_from_an_epoch_snapshot_gives_the_uninterrupted_numbers(tiny_vit_config):
    config = copy.deepcopy(tiny_vit_config)
    config["train"].update(epochs=3, max_steps=None)
    config["probes"]["memory"] = False
    uninterrupted = run_trial(config)
    snapshots = []

    def crash_after_first_epoch(row, kappa, snapshot):
        snapshots.append(copy.deepcopy(snapshot()))
        raise SystemExit("worker lost")  # not an Exception: escapes run_trial like a dying process

    with pytest.raises(SystemExit):
        run_trial(config, on_epoch=crash_after_first_epoch)
    resumed = run_trial(config, resume_from=snapshots[0])
    assert resumed["status"] == "ok" and resumed["epochs_run"] == 3
    assert [r["train_loss"] for r in resumed["epochs"]] == [r["train_loss"] for r in uninterrupted["epochs"]]
    assert resumed["top1"] == uninterrupted["top1"] and resumed["kappa_mean"] == uninterrupted["kappa_mean"]
    assert len(resumed["kappa"]) == len(uninterrupted["kappa"])
    assert resumed["started_at"] == snapshots[0]["record"]["fields"]["started_at"]


def test_command_line_prints_the_record(tiny_vit_config, tmp_path, capsys):
    path = tmp_path / "trial.json"
    path.write_text(json.dumps(tiny_vit_config))
    assert main([str(path), "--quiet", "--out", str(tmp_path / "record.json")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "ok" and printed == json.loads((tmp_path / "record.json").read_text())
