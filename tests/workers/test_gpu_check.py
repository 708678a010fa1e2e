"""`make gpu-check` in its CPU mode (what runs where no GPU is): it runs the trial's own code end to end,
says plainly that it is the reduced check, its figures follow their definitions, and a failed check fails."""

import contextlib
import io
import json

import pytest
import torch

import workers.gpu_check
from workers.gpu_check import CPU_MODE, main

# The CPU mode's ViT (depth 2, width D = 64, MLP M = 128, 32 px in patches of 4, 10 classes), counted by hand:
D, M, DEPTH, CLASSES, PATCH_PIXELS = 64, 128, 2, 10, 3 * 4 * 4
N = (32 // 4) ** 2 + 1  # 64 patches and the class token
PARAMS = (
    PATCH_PIXELS * D + D  # patch embedding (a 4×4 convolution) and its bias
    + D + N * D  # class token, position embeddings
    + DEPTH * (2 * 2 * D + (D * 3 * D + 3 * D) + (D * D + D) + (D * M + M) + (M * D + D))  # norms, qkv, proj, MLP
    + 2 * D + (D * CLASSES + CLASSES)  # final norm, head
)  # fmt: skip
# Forward FLOPs per image (2 per multiply-add): patch embedding, then per block q/k/v, QKᵀ, AV, the output
# projection and the MLP, then the head on the class token.
FLOPS = (
    2 * (N - 1) * PATCH_PIXELS * D
    + DEPTH * (2 * N * D * 3 * D + 2 * N * N * D + 2 * N * N * D + 2 * N * D * D + 2 * N * D * M + 2 * N * M * D)
    + 2 * D * CLASSES
)  # fmt: skip


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One run of the CPU mode with its defaults: (exit code, figures from --json, printed summary)."""
    out = tmp_path_factory.mktemp("gpu_check") / "figures.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["--device", "cpu", "--json", str(out)])
    return code, json.loads(out.read_text()), printed.getvalue()


def test_cpu_mode_runs_and_its_figures_follow_their_definitions(cpu_run):
    code, figures, _ = cpu_run
    assert code == 0, figures["checks"]
    assert figures["mode"] == "cpu" and [c["ok"] for c in figures["checks"]] == [True] * 4
    assert figures["params"] == PARAMS == 75_082
    assert figures["forward_flops_per_sample"] == FLOPS
    assert figures["peak_mem_method"].startswith("cpu_")
    assert figures["kappa_layers"] == DEPTH and 1.0 <= figures["kappa_mean"] <= figures["kappa_max"]
    # MFU is the model's training FLOP rate over the matmul peak measured in the same run
    rate = 3 * FLOPS * figures["train_samples_per_s"]
    assert figures["mfu"] == pytest.approx(rate / figures["peak_flops_per_s"], rel=1e-9)
    assert figures["batch_size"] == CPU_MODE.batch_size


def test_summary_says_plainly_it_is_the_reduced_cpu_check(cpu_run):
    out = cpu_run[2]
    assert "this is the reduced CPU check" in out and "say nothing about a GPU" in out
    assert "checks: 4 of 4 passed" in out
    assert len(out.splitlines()) <= 20  # one screen


def test_a_failed_check_fails_the_run(monkeypatch, capsys):
    # A matmul peak below what the model itself reaches: MFU above 1 means the peak or the FLOP count is wrong.
    monkeypatch.setattr(workers.gpu_check, "matmul_peak_flops", lambda *args: 1.0)
    code = main(["--device", "cpu", "--steps", "1", "--warmup", "0", "--infer-steps", "1", "--latency-iters", "1"])
    assert code == 1
    assert "FAILED: 0 < MFU <= 1" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible here")
def test_asking_for_cuda_without_one_is_a_clear_error(capsys):
    assert main(["--device", "cuda"]) == 2
    assert "no CUDA device is visible" in capsys.readouterr().err
