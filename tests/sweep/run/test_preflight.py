"""``sweep preflight`` (sweep/run/preflight.py): one test per failure class it claims to catch, each a one-line
problem in its row before any trial of a sweep starts, and the shipped smoke profile of a small space passing
through the CLI."""

from pathlib import Path

import pytest
import timm.models.vision_transformer as vision_transformer
import torch
import yaml

from sweep.cli import main
from sweep.cli.parsers import build_parser
from sweep.cli.run import load_plan
from sweep.results.storage import ObjectStore
from sweep.run.preflight import check_config, check_results_row, preflight, resource_problem, runs_full_size
from sweep.space.model import Resources
from tests.sweep.results.test_storage_buckets import s3_server  # noqa: F401  (the S3-compatible server fixture)

PLENTY_BYTES = 64 * 2**30


def digits_plan(*extra: str):
    args = build_parser().parse_args(["plan", "local_digits", "--profile", "quick", *extra])
    return load_plan(args)


def zeta_on_logits(monkeypatch):
    """ViT's head followed by Hurwitz's zeta of its logits: ``torch.special.zeta`` has no bfloat16 CPU kernel
    (and autocast leaves it alone), so the forward works in fp32 and fails only where autocast made the
    logits bf16."""
    original = vision_transformer.VisionTransformer.forward_head

    def forward_head(self, x, pre_logits=False):
        logits = original(self, x, pre_logits)
        torch.special.zeta(logits, logits)
        return logits

    monkeypatch.setattr(vision_transformer.VisionTransformer, "forward_head", forward_head)


def test_a_dtype_error_only_under_bf16_autocast_is_caught(monkeypatch):
    zeta_on_logits(monkeypatch)
    plan = digits_plan()
    config = plan.configs[0]
    bf16 = check_config(plan.space, config, False, PLENTY_BYTES, {})
    assert bf16.problem is not None and "\n" not in bf16.problem
    assert "BFloat16" in bf16.problem, bf16.problem
    fp32_space = plan.space.model_copy(update={"train": plan.space.train.model_copy(update={"amp_bf16": False})})
    fp32 = check_config(fp32_space, config, False, PLENTY_BYTES, {})
    assert fp32.ok, fp32.problem  # the same config passes at fp32: only the bf16 path has the error
    assert "bf16 autocast" in bf16.checked and "fp32" in fp32.checked


def space_file(tmp_path, name: str, **changes) -> Path:
    """local_digits.yaml with top-level sections updated by ``changes``, written to ``tmp_path``."""
    space = yaml.safe_load((Path(__file__).parents[3] / "search_spaces" / "local_digits.yaml").read_text())
    for key, value in changes.items():
        space[key] = {**space.get(key, {}), **value} if isinstance(value, dict) and key == "model" else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def missing_folder_space(tmp_path) -> Path:
    """ImageFolder data at a folder that does not exist; the quick profile's depths 1 and 4, heads 1 and 4."""
    data = {"name": "imagefolder", "root": str(tmp_path / "no-such-folder"), "num_classes": 10}
    return space_file(
        tmp_path, "missing", data=data, model={"patch_size": 16}, axes={"depth": [4], "num_heads": [1, 4]}
    )


def test_a_missing_data_folder_fails_the_data_row_and_every_config(tmp_path, capsys):
    path = missing_folder_space(tmp_path)
    code = main(["preflight", str(path), "--profile", "quick", "--results", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert code == 1
    data_row = next(line for line in out.splitlines() if line.startswith("data "))
    assert "no-such-folder" in data_row
    assert out.count("not run: the data check failed") == 4  # the quick profile: depths 1 and 4


def test_with_stand_in_data_a_folder_that_is_elsewhere_is_said_and_every_config_runs(tmp_path, capsys):
    """--stand-in-data: the data lives on the cluster. The row says it is not here (in one line); each config
    runs its step and probes on stand-in batches of ImageFolder's shapes (3 × 224², 10 classes)."""
    path = missing_folder_space(tmp_path)
    command = ["preflight", str(path), "--profile", "quick", "--stand-in-data", "--results", str(tmp_path / "r")]
    code = main(command)
    out = capsys.readouterr().out
    assert code == 0, out
    data_row = next(line for line in out.splitlines() if line.startswith("data "))
    assert "not here, so configs ran on stand-in batches" in data_row and "no-such-folder" in data_row
    config_rows = [line for line in out.splitlines()[1:] if line.split()[0] not in ("results", "resources", "data")]
    assert len(config_rows) == 4
    assert all("stand-in data" in line and line.rstrip().endswith("ok") for line in config_rows)


def test_a_stated_node_is_what_resources_are_checked_against(tmp_path, capsys):
    """--node-gpus / --node-cpus: the trials run on a cluster of such nodes, not on this CPU machine."""
    path = space_file(tmp_path, "two_gpus", resources={"gpus_per_trial": 2, "cpus_per_trial": 8})
    base = ["preflight", str(path), "--profile", "quick", "--results", str(tmp_path / "r")]
    assert main([*base, "--node-gpus", "1", "--node-cpus", "16"]) == 1
    resources_row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("resources"))
    assert "needs 2 GPUs" in resources_row and "the stated node (1 GPU, 16 CPU)" in resources_row
    assert main([*base, "--node-gpus", "8", "--node-cpus", "96"]) == 0
    assert main([*base, "--node-gpus", "8"]) == 2  # a node is both
    assert "--node-gpus and --node-cpus go together" in capsys.readouterr().err


def test_an_unwritable_bucket_and_folder_are_caught(s3_server, tmp_path):  # noqa: F811
    row = check_results_row(ObjectStore("s3://no-such-bucket/sweeps"))
    assert row.problem is not None and "\n" not in row.problem
    assert row.problem.startswith("cannot write to s3://no-such-bucket/sweeps")
    assert check_results_row(ObjectStore("s3://sweep-results/preflight")).ok
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    row = check_results_row(blocker / "results")
    assert row.problem is not None and "\n" not in row.problem and str(blocker) in row.problem


def test_a_trial_needing_more_gpus_than_any_node_has_is_caught():
    nodes = [{"CPU": 32.0, "GPU": 2.0}, {"CPU": 32.0, "GPU": 1.0}]
    problem = resource_problem(Resources(gpus_per_trial=4), "the test cluster", nodes)
    assert problem is not None and "\n" not in problem
    assert "needs 4 GPUs" in problem and "more than 2" in problem
    assert resource_problem(Resources(gpus_per_trial=2), "the test cluster", nodes) is None
    # data-parallel: each of 2 workers takes 2 GPUs, which one node holds
    assert resource_problem(Resources(cpus_per_trial=4, gpus_per_trial=4, workers_per_trial=2), "c", nodes) is None
    assert "64 CPUs" in resource_problem(Resources(cpus_per_trial=64), "the test cluster", nodes)


def test_resources_row_fails_the_preflight(tmp_path):
    plan = digits_plan()
    plan.space = plan.space.model_copy(update={"resources": Resources(gpus_per_trial=8)})
    plan.configs = plan.configs[:1]
    rows = preflight(plan, "local_digits", tmp_path, nodes=("the test cluster", [{"CPU": 8.0, "GPU": 4.0}]))
    problems = {row.config_id: row.problem for row in rows if not row.ok}
    assert list(problems) == ["resources"]
    assert "needs 8 GPUs" in problems["resources"]


def test_too_big_for_memory_builds_on_meta_and_steps_a_one_block_copy(tmp_path):
    plan = digits_plan()
    config = max(plan.configs, key=lambda c: c.shape.depth)
    assert config.shape.depth == 4
    small_bytes = config.params * 16  # training bytes over half of it: not run at full size
    assert not runs_full_size(config, small_bytes)
    row = check_config(plan.space, config, False, small_bytes, {})
    assert row.ok, row.problem
    assert row.checked.startswith("meta build + params; 1 step + probes on a 1-block copy")


@pytest.mark.slow
def test_the_smoke_profile_of_a_small_space_passes_through_the_cli(tmp_path, capsys):
    code = main(["preflight", "mqar_recall", "--profile", "smoke", "--results", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 0, captured.out
    plan = load_plan(build_parser().parse_args(["plan", "mqar_recall", "--profile", "smoke"]))
    rows = captured.out.splitlines()[1:]
    assert len(rows) == len(plan.configs) + 3 and all(line.rstrip().endswith("ok") for line in rows)
    assert captured.err.count("[preflight] ") == len(rows) + 2  # a line per check, a first and a last
    assert not any((tmp_path / "results").iterdir())  # the probe object is gone


def test_with_a_gpu_each_config_shows_its_estimates_and_one_that_will_not_fit_fails(tmp_path, capsys):
    """--gpu adds sweep plan --gpu's estimates (sweep/plan/estimate.py) as columns; a config whose estimated
    peak exceeds the GPU's memory is a problem before any GPU hour is spent. A 0.001 GiB GPU fits nothing."""
    from sweep.plan.estimate import peak_memory_bytes

    results = str(tmp_path / "results")
    assert main(["preflight", "local_digits", "--profile", "quick", "--results", results, "--gpu", "h100-80gb"]) == 0
    out = capsys.readouterr().out
    plan = digits_plan()
    header, *rows = out.splitlines()
    assert "est. memory" in header and "est. time" in header
    for config in plan.configs:  # the memory column is the estimate module's figure, in MiB here
        line = next(row for row in rows if row.startswith(config.config_id))
        assert f"{peak_memory_bytes(config, plan.space) / 2**20:.3g} MiB" in line and line.rstrip().endswith("ok")
    tiny = ["--gpu-memory-gib", "0.001", "--gpu-tflops", "100"]
    assert main(["preflight", "local_digits", "--profile", "quick", "--results", results, *tiny]) == 1
    out = capsys.readouterr().out
    assert out.count("does not fit custom") == len(plan.configs)


def test_an_unreachable_hub_makes_the_preflight_read_the_cache_only(tmp_path, capsys, monkeypatch):
    """No network: HF_HUB_OFFLINE=1 is set for the process before the Hub's libraries load, and it says so."""
    import os
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")  # nothing listens there
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # restored after the test
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert main(["preflight", "local_digits", "--profile", "quick", "--results", str(tmp_path / "r")]) == 0
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "the Hugging Face Hub cannot be reached" in capsys.readouterr().err


@pytest.mark.slow
def test_with_ray_address_resources_are_checked_against_the_live_nodes(monkeypatch, local_ray):
    """RAY_ADDRESS: the nodes are Ray's live ones (here conftest's 2-CPU local Ray, reached at its GCS address),
    not this machine's cores."""
    from sweep.run.preflight import cluster_nodes

    address = local_ray
    monkeypatch.setenv("RAY_ADDRESS", address)
    where, nodes = cluster_nodes()
    assert where == f"the Ray cluster at {address}"
    assert nodes == [{"CPU": 2.0, "GPU": 0.0}]
    assert "more than 2" in resource_problem(Resources(cpus_per_trial=3), where, nodes)


def test_with_compile_the_step_goes_through_torch_compile_and_a_compile_error_is_its_rows(monkeypatch):
    """--compile: the worker's trial compiles its step (workers/train.py's torch.compile; here with the
    aot_eager backend, which traces forward and backward without building C++ on 2 cores), and an error only
    the compiled step meets is the config's one-line problem, while the same config passes uncompiled."""
    import workers.train

    original = torch.compile
    calls = []

    def traced(model, **options):
        calls.append(options)
        return original(model, backend="aot_eager")

    def unbuildable(model, **options):
        raise RuntimeError("InductorError: no working C++ compiler found\nthe log")

    plan = digits_plan()
    config = min(plan.configs, key=lambda c: (c.shape.depth, c.shape.num_heads))
    monkeypatch.setattr(workers.train.torch, "compile", traced)
    row = check_config(plan.space, config, True, PLENTY_BYTES, {})
    assert row.ok, row.problem
    assert "compiled" in row.checked and len(calls) >= 1
    monkeypatch.setattr(workers.train.torch, "compile", unbuildable)
    failed = check_config(plan.space, config, True, PLENTY_BYTES, {})
    assert failed.problem is not None and "\n" not in failed.problem
    assert "no working C++ compiler found" in failed.problem
    assert check_config(plan.space, config, False, PLENTY_BYTES, {}).ok  # not compiled: nothing calls it


@pytest.mark.slow
def test_with_ray_address_the_data_is_looked_for_on_each_node_that_can_hold_a_trial(tmp_path, monkeypatch, local_ray):
    """RAY_ADDRESS: the data check runs as a Ray task pinned to each live node (here the local Ray's one node),
    so a folder missing on a worker node is a one-line problem naming the node before any trial."""
    import ray

    args = build_parser().parse_args(["plan", str(missing_folder_space(tmp_path)), "--profile", "quick"])
    missing = load_plan(args)
    found = digits_plan()
    found.configs = found.configs[:1]
    monkeypatch.setenv("RAY_ADDRESS", local_ray)
    node_ip = ray.nodes()[0]["NodeManagerAddress"]
    found_rows = preflight(found, "local_digits", tmp_path / "r1")
    missing_rows = preflight(missing, str(tmp_path / "missing.yaml"), tmp_path / "r2")
    on_nodes = next(row for row in found_rows if row.config_id == "data on nodes")
    assert on_nodes.ok and on_nodes.checked.startswith("found on each of the 1 node(s)")
    assert all(row.ok for row in found_rows)
    lacking = next(row for row in missing_rows if row.config_id == "data on nodes")
    assert lacking.problem is not None and "\n" not in lacking.problem
    assert lacking.problem.startswith(f"not on 1 of 1 nodes ({node_ip}): DataUnavailableError: imagefolder")
