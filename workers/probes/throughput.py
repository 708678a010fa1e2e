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


# Tokens generated per timed run of the per-token latency (fewer when the context window is shorter).
GENERATED_TOKENS = 32


@torch.inference_mode()
def generated_token_latency_ms(model: nn.Module, window: torch.Tensor, warmup_steps: int, iters: int, autocast):
    """Wall milliseconds per generated token of a causal LM at batch 1, decoding greedily with HF's
    ``generate`` and its KV cache.

    The prompt is the first half of ``window`` (one held-out window, (1, N) or (N,) token ids); T =
    min(``GENERATED_TOKENS``, N - prompt) tokens are generated after it, so the context never exceeds
    N. One run generating T tokens and one generating 1 (the prompt's forward pass, the prefill, and
    nothing else) are each timed ``iters`` times after ``warmup_steps`` untimed ones, device synchronised,
    and the latency is (median T-token time − median 1-token time) / (T − 1): the cost of one decoding
    step, without the prefill. Needs the model's ``generate(input_ids, new_tokens)`` (``CausalLM``).
    """
    ids = window.reshape(1, -1)
    prompt = ids[:, : max(ids.shape[1] // 2, 1)]
    new_tokens = min(GENERATED_TOKENS, ids.shape[1] - prompt.shape[1])
    if new_tokens < 2:
        raise ValueError(f"a window of {ids.shape[1]} tokens leaves fewer than 2 to generate after the prompt")
    model.eval()

    def median_ms(tokens: int) -> float:
        times = []
        for i in range(warmup_steps + iters):
            start = time.perf_counter()
            with autocast():
                model.generate(prompt, tokens)
            synchronize(prompt.device)
            if i >= warmup_steps:
                times.append((time.perf_counter() - start) * 1000.0)
        return statistics.median(times)

    per_token = (median_ms(new_tokens) - median_ms(1)) / (new_tokens - 1)
    model.train()
    return per_token
