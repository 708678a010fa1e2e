"""Inference throughput and batch-1 latency. (Training throughput is measured during training itself:
see ``workers.train.train_one_epoch``.)"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from workers.batch import Inputs, batch_size, device_of, forward, head
from workers.train import synchronize


@torch.inference_mode()
def inference_throughput(model: nn.Module, inputs: Inputs, warmup_steps: int, timed_steps: int, autocast) -> float:
    """Samples per second of ``model`` in eval mode on the batch ``inputs``, in steady state.

    ``warmup_steps`` untimed forward passes, then ``timed_steps`` passes timed as one window with the
    device synchronised at both ends. ``autocast`` is a factory for the trial's precision context.
    """
    model.eval()
    for _ in range(warmup_steps):
        with autocast():
            forward(model, inputs)
    synchronize(device_of(inputs))
    start = time.perf_counter()
    for _ in range(timed_steps):
        with autocast():
            forward(model, inputs)
    synchronize(device_of(inputs))
    elapsed = time.perf_counter() - start
    model.train()
    return batch_size(inputs) * timed_steps / elapsed


@torch.inference_mode()
def batch1_latency_ms(model: nn.Module, inputs: Inputs, warmup_steps: int, iters: int, autocast) -> float:
    """Median wall milliseconds of one forward pass on a single sample, the first of ``inputs`` (eval mode,
    device synchronised after each pass), over ``iters`` passes after ``warmup_steps`` untimed ones."""
    model.eval()
    single = head(inputs, 1)
    times = []
    for i in range(warmup_steps + iters):
        start = time.perf_counter()
        with autocast():
            forward(model, single)
        synchronize(device_of(single))
        if i >= warmup_steps:
            times.append((time.perf_counter() - start) * 1000.0)
    model.train()
    return statistics.median(times)
