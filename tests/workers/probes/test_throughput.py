"""Throughput and latency (workers/probes/throughput.py) against a forward of known wall time."""

import time

import torch

from workers.probes.throughput import batch1_latency_ms, inference_throughput


class Sleeper(torch.nn.Module):
    """A model whose forward takes a known wall time, whatever the batch: the probes' clock checked against it."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, images):
        time.sleep(self.seconds)
        return images.flatten(1) * self.scale


def test_inference_throughput_and_latency_match_a_known_forward_time():
    """16 images per 20 ms forward: at most 800 images/s (a forward cannot be faster than its sleep), and
    within 10× of it on a loaded machine; batch-1 latency likewise at least 20 ms."""
    from contextlib import nullcontext

    model, images = Sleeper(0.02), torch.randn(16, 3, 8, 8)
    assert 800 / 10 < inference_throughput(model, images, 1, 3, nullcontext) <= 800
    assert 20 <= batch1_latency_ms(model, images, 1, 3, nullcontext) < 200
    assert model.training  # restored
