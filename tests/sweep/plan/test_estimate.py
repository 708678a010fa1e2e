"""sweep/plan/estimate.py: peak memory and training time of a planned trial, the GPU table, and `sweep plan --gpu`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from sweep.plan import estimate
from sweep.plan.plan import make_plan
from sweep.space.loader import load_space_with_notes
from workers.batch import forward
from workers.config import ModelSpec
from workers.models import build_model, example_input

MEASURED = Path(__file__).parents[3] / "bench" / "measured" / "h200-2026-12-04"


def digits_plan(profile: str = "quick"):
    name, space, profile, _ = load_space_with_notes("local_digits", profile)
    return make_plan(name, space, profile)


def saved_bytes_on_cpu(spec: ModelSpec) -> int:
    """Independent count: a real float32 forward of one sample on CPU (the fused attention kernel CPU training
    takes), the distinct storages autograd saves by their addresses, parameters left out."""
    torch.manual_seed(0)
    model = build_model(spec).train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        forward(model, example_input(spec, "cpu"))
    return sum(saved.values())


def test_activations_counted_on_meta_match_a_real_cpu_forward():
    spec = ModelSpec(depth=3, num_heads=4, embed_dim=32, mlp_dim=64, patch_size=4, img_size=32, num_classes=10)
    counted = estimate.activation_bytes_per_sample(spec.model_dump())
    real = saved_bytes_on_cpu(spec)
    # the CPU flash kernel's log-sum-exp may be padded; every other saved tensor is the same
    assert counted == pytest.approx(real, rel=0.02)


def test_peak_memory_is_16_bytes_per_param_plus_batch_activations():
    plan = digits_plan()
    config = plan.baseline
    spec = ModelSpec(**config.model)
    params = sum(p.numel() for p in build_model(spec).parameters())
    assert params == config.params
    batch = plan.space.train.batch_size
    by_hand = 4 * params + 4 * params + 2 * 4 * params + batch * saved_bytes_on_cpu(spec)
    assert estimate.peak_memory_bytes(config, plan.space, device="cpu") == pytest.approx(by_hand, rel=0.02)
    # on CUDA, bf16 autocast: the activations scaled by the calibrated factor, the 16 B/param unchanged
    cuda = estimate.peak_memory_bytes(config, plan.space)
    activations = estimate.activation_bytes_per_sample(config.model)
    assert cuda == int(16 * params + batch * activations * estimate.BF16_ACTIVATION_FACTOR)


def test_bf16_estimate_meets_the_h200_measurement_of_vit_b():
    """The calibration the factor comes from: ViT-B/16 at batches 32, 128, 256 within 3.5% of the probe."""
    rows = json.loads((MEASURED / "cuda_memory_check.json").read_text())["rows"]
    spec = ModelSpec(depth=12, num_heads=12, embed_dim=768, mlp_dim=3072, patch_size=16, img_size=224)
    per_sample = estimate.activation_bytes_per_sample(spec.model_dump()) * estimate.BF16_ACTIVATION_FACTOR
    for row in rows:
        predicted = 16 * row["params"] + row["batch"] * per_sample
        assert predicted / row["probe_bytes"] == pytest.approx(1.0, abs=0.035), row["batch"]


def test_train_time_is_three_forward_flops_per_training_sample():
    plan = digits_plan()
    config, space = plan.baseline, plan.space
    train_rows = 1797 - math.ceil(0.2 * 1797)  # sklearn's digits, 20% held out
    samples = space.train.epochs * (train_rows // space.train.batch_size) * space.train.batch_size
    assert estimate.training_samples(space) == samples
    expected_s = 3 * config.flops_per_sample * samples / (1e12 * 0.5)
    assert estimate.train_time_s(config, space, 1e12, 0.5) == pytest.approx(expected_s)
    assert estimate.train_time_s(config, space, 1e12, 0.5, samples_per_epoch=640) == pytest.approx(
        3 * config.flops_per_sample * space.train.epochs * 640 / 5e11
    )


def test_gpu_table_and_gpu_check_mfu():
    assert estimate.gpu_named("H100-80GB").memory_bytes == 80 * 10**9
    assert estimate.gpu_named("h200-141gb").bf16_flops_per_s == 989e12
    with pytest.raises(ValueError, match=r"unknown GPU 'v100'.*h100-80gb"):
        estimate.gpu_named("v100")
    result = json.loads((MEASURED / "gpu_check_b256.json").read_text())
    assert estimate.mfu_from_gpu_check(result) == pytest.approx(
        3 * result["forward_flops_per_sample"] * result["train_samples_per_s"] / result["peak_flops_per_s"]
    )
    # against a data sheet's peak: the same achieved FLOP/s
    achieved = 3 * result["forward_flops_per_sample"] * result["train_samples_per_s"]
    assert estimate.mfu_from_gpu_check(result, 989e12) == pytest.approx(achieved / 989e12)
    with pytest.raises(ValueError, match="no MFU"):
        estimate.mfu_from_gpu_check({"mfu": None})


def run_plan(capsys, *args: str) -> str:
    from sweep.cli import main

    assert main(["plan", "local_digits", "--profile", "quick", *args]) == 0
    return capsys.readouterr().out


def test_plan_warns_first_about_trials_that_do_not_fit(capsys):
    plan = digits_plan()
    smallest = min(estimate.peak_memory_bytes(c, plan.space) for c in plan.configs)
    gib = smallest / 2**30 * 1.0001  # only the smallest config fits
    out = run_plan(capsys, "--gpu-memory-gib", f"{gib:.12f}", "--gpu-tflops", "100", "--price-per-gpu-hour", "2")
    lines = out.splitlines()
    assert lines[0].startswith(f"WARNING: {len(plan.configs) - 1} configs predicted not to fit custom")
    hours = (
        sum(len(plan.seeds) * estimate.train_time_s(c, plan.space, 100e12, estimate.DEFAULT_MFU) for c in plan.configs)
        / 3600
    )
    assert hours < 1  # shown to three significant digits
    assert f"{hours:.3g} GPU-hours, {hours * 2:.3g} at 2 per GPU-hour" in out
    assert "MFU 0.300 (assumed)" in out


def test_plan_json_carries_the_estimates(capsys):
    mfu_file = str(MEASURED / "gpu_check_b256.json")
    data = json.loads(run_plan(capsys, "--gpu", "h100-80gb", "--mfu-from", mfu_file, "--format", "json"))
    plan = digits_plan()
    by_id = {c.config_id: c for c in plan.configs}
    assert data["estimate"]["gpu"] == "h100-80gb" and data["estimate"]["not_fitting"] == []
    assert data["estimate"]["mfu"] == pytest.approx(0.367794391884614 * 783134047787556.1 / 989e12)
    for row in data["trials"]:
        assert row["est_peak_mem_bytes"] == estimate.peak_memory_bytes(by_id[row["config_id"]], plan.space)
        assert row["fits"] is True
    assert data["estimate"]["cost"] is None


def test_plan_gpu_options_errors_are_one_line(capsys):
    from sweep.cli import main

    assert main(["plan", "local_digits", "--gpu", "v100"]) == 2
    assert main(["plan", "local_digits", "--gpu-memory-gib", "80"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU 'v100'" in err and "--gpu-memory-gib and --gpu-tflops go together" in err


@pytest.mark.slow
def test_cpu_estimate_meets_the_memory_probe_of_a_real_trial():
    """A real float32 trial on CPU: the memory probe's peak within the 10% the probe meets against a
    whole-process measurement (tests/workers/probes/test_probes_truth.py)."""
    from sweep.plan.plan import worker_config
    from workers.trial import run_trial

    plan = digits_plan()
    space = plan.space.model_copy(update={"train": plan.space.train.model_copy(update={"epochs": 1})})
    config = plan.baseline
    record = run_trial({**worker_config(space, config.model, 0), "device": "cpu", "threads": 1})
    assert record["status"] == "ok", record.get("error")
    predicted = estimate.peak_memory_bytes(config, space, device="cpu")
    assert predicted == pytest.approx(record["peak_mem_bytes"], rel=0.10)
