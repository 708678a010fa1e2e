"""`sweep plan --write-configs` and `python -m workers.trial_batch` (make gpu-smoke): the trial configs a sweep
would hand Ray, written as files, and run one process each, with failures and time-outs as rows."""

import json
import subprocess
import sys

import pytest

from sweep.plan.identity import config_id
from workers.data.registry import data_spec
from workers.trial_batch import gpu_totals, main
from workers.trial_config import TrialConfig


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_plan_writes_one_config_per_trial_named_by_its_config_id_and_seed(tmp_path):
    listed = json.loads(run_cli("plan", "mqar_recall", "--profile", "smoke", "--format", "json").stdout)
    written = run_cli("plan", "mqar_recall", "--profile", "smoke", "--write-configs", str(tmp_path), "--format", "json")
    assert written.returncode == 0, written.stderr
    files = sorted(tmp_path.glob("*.json"))
    planned_ids = sorted(row["config_id"] for row in listed["trials"])
    assert len(files) == len(planned_ids) == 4  # 4 configs × 1 seed
    for path in files:
        config = json.loads(path.read_text())
        TrialConfig.model_validate(config)  # what run_trial validates
        # The name is the identity recomputed from the file's own content, not copied from the plan.
        spec = TrialConfig.model_validate(config)
        recomputed = config_id(config["model"], data_spec(**config["data"]), spec.train, spec.probes)
        assert path.name == f"{recomputed}-s{config['seed']}.json"
        assert recomputed in planned_ids


@pytest.mark.slow
def test_spaces_names_lists_only_the_spaces_with_a_profile():
    names = run_cli("spaces", "--names", "--profile", "smoke").stdout.split()
    assert "mqar_recall" in names and "gqa_heads" in names
    assert "local_digits" not in names  # its profiles: quick, fine, full, optuna
    assert run_cli("spaces", "--names", "--profile", "quick").stdout.split() == ["local_digits"]


def tiny_gpt2_config() -> dict:
    return {
        "model": {"family": "gpt2", "depth": 1, "num_heads": 2, "embed_dim": 16, "mlp_dim": 32},
        "data": {"name": "mqar", "seq_len": 16, "mqar": {"vocab_size": 32, "num_kv_pairs": 2, "train_rows": 64,
                                                          "val_rows": 16}},
        "train": {"epochs": 1, "max_steps": 2, "batch_size": 16, "warmup_steps": 0},
        "probes": {"kappa_samples": 2, "throughput_steps": 1, "latency_iters": 1},
        "seed": 0,
        "threads": 1,
    }  # fmt: skip


@pytest.mark.slow
def test_batch_runs_each_config_in_its_own_process_and_records_failures_as_rows(tmp_path, capsys):
    configs = tmp_path / "configs"
    (configs / "space_a").mkdir(parents=True)
    (configs / "space_a" / "good.json").write_text(json.dumps(tiny_gpt2_config()))
    broken = tiny_gpt2_config()
    broken["model"]["num_heads"] = 3  # 16 is not a multiple of 3: the worker's validation refuses it
    (configs / "space_a" / "broken.json").write_text(json.dumps(broken))
    (configs / "not_json.json").write_text("{")
    out = tmp_path / "out"

    code = main([str(configs), "--out", str(out), "--jobs", "2", "--timeout-s", "300"])

    summary = json.loads((out / "summary.json").read_text())
    rows = {row["name"]: row["fields"] for row in summary["rows"]}
    assert code == 1 and summary["trials"] == 3 and summary["ok"] == 1
    assert rows["space_a__good"]["status"] == "ok" and rows["space_a__good"]["depth"] == 1
    assert rows["space_a__good"]["device"].startswith("cpu:")
    assert rows["space_a__broken"]["status"] == "error" and "num_heads" in rows["space_a__broken"]["error"]
    assert rows["not_json"]["status"] == "error" and "not valid JSON" in rows["not_json"]["error"]
    assert (out / "records" / "space_a__good.json").exists() and (out / "logs" / "space_a__broken.log").exists()
    assert "space_a__broken" in capsys.readouterr().out


def test_a_trial_past_its_limit_is_an_error_row_that_says_so(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "slow.json").write_text(json.dumps(tiny_gpt2_config()))
    main([str(tmp_path / "configs"), "--out", str(tmp_path / "out"), "--timeout-s", "0.2"])  # less than an import
    row = json.loads((tmp_path / "out" / "summary.json").read_text())["rows"][0]["fields"]
    assert row == {"status": "error", "error": "trial_batch: stopped at the 0.2 s limit"}


def test_gpu_totals_read_nvidia_smi_samples(tmp_path):
    samples = tmp_path / "gpu_samples.csv"
    samples.write_text(
        "2026/12/04 10:00:00.000, 0, 500\n2026/12/04 10:00:01.000, 40, 1500\n"
        "2026/12/04 10:00:02.000, 80, 1200\n2026/12/04 10:00:03.000, [N/A], [N/A]\n"
    )
    assert gpu_totals(samples) == {"gpu_samples": 3, "gpu_util_mean_pct": 40.0, "gpu_util_max_pct": 80,
                                   "gpu_mem_max_mib": 1500}  # fmt: skip
    assert gpu_totals(tmp_path / "absent.csv") == {}


def test_an_empty_folder_is_a_one_line_error(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no trial configs (*.json, *.yaml) under {tmp_path}"
