"""Trials that spend their time training: the end-of-trial probes keep to a time budget (counted on a fake
clock, so no test depends on this machine's speed), the training throughput window warms up again after a
resume, a trial records where its time went, and deterministic CUDA runs get a fixed cuBLAS workspace."""

import copy
import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import workers.trial as trial_module
from workers.probes import throughput
from workers.probes.throughput import (
    batch1_latency_ms,
    generated_token_latency_ms,
    inference_throughput,
    iteration_counts,
    share_of_budget,
)
from workers.train import CUBLAS_WORKSPACE_CONFIG, cublas_determinism_env
from workers.trial import run_trial


@pytest.mark.parametrize(
    ("budget_s", "pilot_s", "warmup_max", "timed_max", "expected"),
    [
        (None, 0.1, 3, 10, (3, 10)),  # no budget: the maxima
        (100.0, 0.1, 3, 10, (3, 10)),  # 1000 passes fit: the maxima
        (1.0, 0.1, 3, 10, (1, 9)),  # 10 fit: the pilot (warm-up) and 9 timed
        (1.25, 0.1, 3, 10, (2, 10)),  # 12 fit: 10 timed, then a second warm-up
        (0.01, 0.1, 3, 10, (1, 2)),  # less than one pass: the pilot and the two-pass minimum
        (0.01, 0.1, 0, 10, (0, 2)),  # no warm-up asked: the pilot is the first timed pass
        (0.01, 0.1, 0, 1, (0, 1)),  # a maximum of 1 lowers the minimum
        (1.0, 0.0, 3, 10, (3, 10)),  # a pilot too fast to time: the maxima
    ],
)
def test_iteration_counts_fit_the_budget(budget_s, pilot_s, warmup_max, timed_max, expected):
    assert iteration_counts(budget_s, pilot_s, warmup_max, timed_max) == expected


def test_each_probe_gets_an_even_share_of_what_is_left():
    assert share_of_budget(1.2, 0.0, 3) == pytest.approx(0.4)
    assert share_of_budget(1.2, 0.6, 2) == pytest.approx(0.3)
    assert share_of_budget(1.2, 2.0, 1) == 0.0  # overspent: the next probe runs its minimum
    assert share_of_budget(None, 5.0, 2) is None


class FakeClock:
    """``time.perf_counter`` for the probes: advances only when the fake model works."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class TickingModel(nn.Module):
    """Each forward pass costs the next of ``costs_s`` (the last one repeats) on the fake clock."""

    def __init__(self, clock: FakeClock, costs_s: list[float]):
        super().__init__()
        self.clock, self.costs_s, self.calls = clock, costs_s, 0

    def forward(self, x):
        self.clock.now += self.costs_s[min(self.calls, len(self.costs_s) - 1)]
        self.calls += 1
        return x.sum(dim=1)

    def generate(self, prompt, tokens):  # a decoder: 2 ms of prefill, then 1 ms per token
        self.clock.now += 0.002 + 0.001 * tokens
        self.calls += 1


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(throughput, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def no_autocast():
    return torch.autocast("cpu", enabled=False)


def test_inference_throughput_runs_what_fits_and_times_only_the_window(clock):
    images = torch.zeros(8, 4)
    model = TickingModel(clock, [0.3, 0.1])  # a cold first pass, then 0.1 s per batch of 8
    # 1.0 s at a 0.3 s pilot: 3 passes, the pilot (warm-up) and 2 timed: 8 × 2 / 0.2 s
    assert inference_throughput(model, images, 3, 10, no_autocast, budget_s=1.0) == pytest.approx(80.0)
    assert model.calls == 3 and clock.now == pytest.approx(0.5)
    model.calls, clock.now = 0, 0.0
    assert inference_throughput(model, images, 3, 10, no_autocast) == pytest.approx(80.0)  # no budget
    assert model.calls == 13
    model.calls = 0
    # No warm-up asked for: 3 passes fit, all timed, the cold pilot inside the window: 8 × 3 / 0.5 s
    assert inference_throughput(model, images, 0, 10, no_autocast, budget_s=1.0) == pytest.approx(48.0)
    assert model.calls == 3
    model.calls, clock.now = 0, 0.0
    # Over budget from the pilot on (0.2 s at a 0.3 s pilot): the pilot (warm-up) and a one-pass window
    assert inference_throughput(model, images, 3, 10, no_autocast, budget_s=0.2) == pytest.approx(80.0)
    assert model.calls == 2


def test_batch1_latency_is_the_median_of_the_timed_passes_in_budget(clock):
    model = TickingModel(clock, [0.040, 0.010, 0.030, 0.020, 0.500])
    # 0.16 s at a 40 ms pilot: 4 passes, the pilot dropped as warm-up, median of 10, 30, 20 ms
    assert batch1_latency_ms(model, torch.zeros(5, 4), 3, 20, no_autocast, budget_s=0.16) == pytest.approx(20.0)
    assert model.calls == 4


def test_token_latency_keeps_its_definition_under_a_budget(clock):
    model = TickingModel(clock, [0.0])
    window = torch.arange(16)  # prompt 8 tokens, 8 generated: 10 ms, and 3 ms for the prefill alone
    # 0.05 s at a 13 ms pilot pair: 3 pairs (one warm-up, two timed); (10 − 3) ms / 7 tokens
    assert generated_token_latency_ms(model, window, 3, 20, no_autocast, budget_s=0.05) == pytest.approx(1.0)
    assert model.calls == 6


@pytest.fixture
def short_config(tiny_vit_config):
    """3 steps of 32 per epoch, 2 epochs, warm-up 2 steps; 64 held-out images, κ after training only."""
    config = copy.deepcopy(tiny_vit_config)
    config["data"].update(limit_train=96, limit_val=64)
    config["train"].update(epochs=2, max_steps=None, batch_size=32, eval_batch_size=64)
    config["probes"].update(throughput_warmup_steps=2, memory=False, kappa_every_epochs=0)
    return config


def spy_on_epochs(monkeypatch) -> list[tuple[int, int]]:
    """(warm-up steps asked for, samples timed) of every epoch trained from now on."""
    seen = []
    real = trial_module.train_one_epoch

    def spy(ctx, batches, warmup_steps_left):
        stats = real(ctx, batches, warmup_steps_left)
        seen.append((warmup_steps_left, stats.timed_samples))
        return stats

    monkeypatch.setattr(trial_module, "train_one_epoch", spy)
    return seen


@pytest.mark.slow
def test_throughput_window_warms_up_again_after_a_resume(short_config, monkeypatch):
    seen = spy_on_epochs(monkeypatch)
    snapshots = []

    def crash_after_first_epoch(row, kappa, snapshot):
        snapshots.append(copy.deepcopy(snapshot()))
        raise SystemExit("worker lost")

    assert run_trial(short_config)["status"] == "ok"
    # One attempt: only its first epoch warms up; 3 steps of 32, 2 of them warm-up, then all 3 timed.
    assert seen == [(2, 32), (0, 96)]
    seen.clear()
    with pytest.raises(SystemExit):
        run_trial(short_config, on_epoch=crash_after_first_epoch)
    seen.clear()
    resumed = run_trial(short_config, resume_from=snapshots[0])
    assert resumed["status"] == "ok" and resumed["epochs_run"] == 2
    assert seen == [(2, 32)]  # the resumed attempt's first epoch warms up again


@pytest.mark.slow
def test_a_trial_records_where_its_time_went(short_config, monkeypatch):
    budgets, spent = [], []  # each probe's budget, and the wall seconds it took

    def timed(real):
        def probe(*args):
            budgets.append(args[-1])
            start = time.perf_counter()
            value = real(*args)
            spent.append(time.perf_counter() - start)
            return value

        return probe

    for name in ("inference_throughput", "batch1_latency_ms"):
        monkeypatch.setattr(trial_module, name, timed(getattr(trial_module, name)))
    short_config["probes"]["probe_time_fraction"] = 0.5
    started = time.perf_counter()
    record = run_trial(short_config)
    outer_s = time.perf_counter() - started
    assert record["status"] == "ok"
    parts = [record[name] for name in ("train_s", "eval_s", "kappa_probe_s", "end_probes_s")]
    assert all(part > 0 for part in parts)
    # Disjoint spans inside the trial, and the trial inside the caller's clock.
    assert sum(parts) <= record["wall_s"] <= outer_s
    # The two probes share half of train_s: the first gets at most half of it, the second what the first
    # (and the memory step before it) left.
    total_s = 0.5 * record["train_s"]
    assert 0 < budgets[0] <= total_s / 2 and budgets[1] <= max(total_s - spent[0], 0.0)
    assert sum(spent) <= record["end_probes_s"]


@pytest.mark.slow
def test_without_a_time_fraction_the_probes_are_unbounded(short_config, monkeypatch):
    budgets = []
    real = trial_module.inference_throughput
    monkeypatch.setattr(trial_module, "inference_throughput", lambda *a: budgets.append(a[-1]) or real(*a))
    short_config["train"]["epochs"] = 1
    short_config["probes"]["probe_time_fraction"] = None
    assert run_trial(short_config)["status"] == "ok" and budgets == [None]


@pytest.mark.parametrize(
    ("deterministic", "cuda", "environ", "expected"),
    [
        (True, True, {}, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}),
        (True, True, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}, {}),  # the user's value is kept
        (True, False, {}, {}),  # CPU: cuBLAS is not used
        (False, True, {}, {}),  # not asked for
    ],
)
def test_deterministic_cuda_sets_a_fixed_cublas_workspace(deterministic, cuda, environ, expected):
    assert cublas_determinism_env(deterministic, cuda, environ) == expected
    assert CUBLAS_WORKSPACE_CONFIG == ":4096:8"


@pytest.mark.slow
def test_evaluation_every_k_epochs_and_after_the_last(short_config, monkeypatch):
    """Training never depends on evaluation, so a trial that evaluates after epochs 2 and 3 only must train
    exactly as one that evaluates every epoch, and score what it scores at those epochs."""
    calls = []
    real = trial_module.evaluate
    monkeypatch.setattr(trial_module, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
    short_config["train"]["epochs"] = 3
    every_epoch = run_trial(copy.deepcopy(short_config))
    assert len(calls) == 3
    calls.clear()
    short_config["train"]["eval_every_epochs"] = 2
    sparse = run_trial(short_config)
    assert sparse["status"] == every_epoch["status"] == "ok" and len(calls) == 2
    dense_rows, sparse_rows = every_epoch["epochs"], sparse["epochs"]
    assert [r["train_loss"] for r in sparse_rows] == [r["train_loss"] for r in dense_rows]
    assert "val_top1" not in sparse_rows[0] and "val_loss" not in sparse_rows[0]
    for epoch in (1, 2):  # epochs 2 and 3: the same scores as the run that evaluated every epoch
        assert sparse_rows[epoch]["val_top1"] == dense_rows[epoch]["val_top1"]
        assert sparse_rows[epoch]["val_loss"] == dense_rows[epoch]["val_loss"]
    assert sparse["top1"] == dense_rows[2]["val_top1"]


@pytest.mark.slow
def test_a_resumed_trial_times_every_attempt(short_config, monkeypatch):
    """``compile_s`` and ``data_wait_fraction`` of a trial resumed after epoch 1 cover both attempts: the
    sum of each attempt's compiling step, and the data waits of both epochs over both epochs' windows.
    (torch.compile is replaced by the identity: the first step is still timed as the compiling one.)"""
    monkeypatch.setattr(torch, "compile", lambda model: model)
    short_config["train"]["compile"] = True
    epochs = []  # (compile_s of the attempt so far, the epoch's stats)
    real = trial_module.train_one_epoch

    def spy(ctx, batches, warmup_steps_left):
        stats = real(ctx, batches, warmup_steps_left)
        epochs.append((ctx.compile_s, stats))
        return stats

    monkeypatch.setattr(trial_module, "train_one_epoch", spy)
    snapshots = []

    def crash_after_first_epoch(row, kappa, snapshot):
        snapshots.append(copy.deepcopy(snapshot()))
        raise SystemExit("worker lost")

    with pytest.raises(SystemExit):
        run_trial(short_config, on_epoch=crash_after_first_epoch)
    resumed = run_trial(short_config, resume_from=snapshots[0])
    assert resumed["status"] == "ok" and len(epochs) == 2
    (first_compile_s, first), (second_compile_s, second) = epochs
    assert resumed["compile_s"] == pytest.approx(first_compile_s + second_compile_s)
    assert second_compile_s > 0  # the resumed attempt compiled (timed) again
    waited = (first.data_wait_s + second.data_wait_s) / (first.timed_s + second.timed_s)
    assert resumed["data_wait_fraction"] == pytest.approx(waited)
    assert resumed["data_wait_fraction"] != pytest.approx(second.data_wait_s / second.timed_s)
