"""Inference throughput, batch-1 latency and per-token latency, each bounded by a time budget, and the KV
cache's bytes per token that per-token decoding reads. (Training throughput is measured during training
itself: see ``workers.train.train_one_epoch``.)

Every probe starts with one pilot pass, device synchronised, whose wall time sets how many passes fit in
the probe's ``budget_s`` (:func:`iteration_counts`); the pilot is the probe's first warm-up pass (its first
timed one when no warm-up is asked for). A budget changes how many passes a figure is taken over, never
what the figure is. ``budget_s=None`` runs the maximum counts.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from workers.batch import Inputs, batch_size, device_of, forward, head
from workers.config import ModelSpec
from workers.devices import synchronize

# The fewest timed passes a probe runs whatever its budget (fewer only if its maximum is lower), so every
# probe still gives its number when one pass costs more than the budget. The latencies are medians, of two
# passes at least. Inference throughput is one synchronised window over whole batches, and one batch's
# pass is already such a window: a second would only double a probe that is over its budget already.
MIN_TIMED_ITERS = 2
MIN_WINDOW_PASSES = 1


def iteration_counts(
    budget_s: float | None, pilot_s: float, warmup_max: int, timed_max: int, min_timed: int = MIN_TIMED_ITERS
) -> tuple[int, int]:
    """(warm-up, timed) passes for a probe that may spend ``budget_s`` in all and whose pilot pass took
    ``pilot_s``; both counts include the pilot (a warm-up pass when ``warmup_max`` ≥ 1, else a timed one).

    n = ⌊budget_s / pilot_s⌋ passes fit (the pilot, cold, is the slowest, so n errs low). One warm-up pass
    is kept when ``warmup_max`` ≥ 1; the timed passes get the rest first: timed = n − that one, clamped to
    [min(``min_timed``, ``timed_max``), ``timed_max``]; then warm-up = n − timed, clamped to [that one,
    ``warmup_max``]. No budget (None) or a pilot too fast to time: (``warmup_max``, ``timed_max``).
    """
    if budget_s is None or pilot_s <= 0.0:
        return warmup_max, timed_max
    fit = int(budget_s / pilot_s)
    warm_min = min(1, warmup_max)
    timed = min(max(fit - warm_min, min(min_timed, timed_max)), timed_max)
    warm = min(max(fit - timed, warm_min), warmup_max)
    return warm, timed


def share_of_budget(total_s: float | None, spent_s: float, probes_left: int) -> float | None:
    """One probe's budget: what is left of ``total_s`` after ``spent_s``, split evenly over the
    ``probes_left`` probes still to run (this one included), never below 0; None when ``total_s`` is."""
    if total_s is None:
        return None
    return max(total_s - spent_s, 0.0) / max(probes_left, 1)


def timed_ms(run: Callable[[], object], device: torch.device) -> float:
    """Wall milliseconds of one call of ``run``, the device synchronised after it."""
    start = time.perf_counter()
    run()
    synchronize(device)
    return (time.perf_counter() - start) * 1000.0


def budgeted_passes(
    measure: Callable[[], Sequence[float]], budget_s: float | None, warmup_max: int, timed_max: int
) -> list[Sequence[float]]:
    """The timed passes' measurements: ``measure()`` runs one pass and returns its durations in ms (one or
    several parts); the first call is the pilot (its parts summed give its cost), then passes up to the
    counts :func:`iteration_counts` gives. Warm-up passes are run and dropped."""
    pilot = measure()
    warm, timed = iteration_counts(budget_s, sum(pilot) / 1000.0, warmup_max, timed_max)
    passes = [pilot] + [measure() for _ in range(warm + timed - 1)]
    return passes[warm:]


@torch.inference_mode()
def inference_throughput(
    model: nn.Module, inputs: Inputs, warmup_steps: int, timed_steps: int, autocast, budget_s: float | None = None
) -> float:
    """Samples per second of ``model`` in eval mode on the batch ``inputs``, in steady state.

    Warm-up forward passes (untimed), then timed passes as one window with the device synchronised at
    both ends: batch size × timed passes ÷ the window's wall seconds. At most ``warmup_steps`` and
    ``timed_steps`` passes, as many as fit in ``budget_s`` (module docstring); the pilot is the first
    warm-up pass, or with ``warmup_steps`` 0 the window's first pass (then synchronised inside the
    window, once); at least one timed pass (``MIN_WINDOW_PASSES``). ``autocast`` is a factory for the
    trial's precision context.
    """
    device = device_of(inputs)
    model.eval()

    def run():
        with autocast():
            forward(model, inputs)

    synchronize(device)
    pilot_start = time.perf_counter()
    pilot_s = timed_ms(run, device) / 1000.0
    warm, timed = iteration_counts(budget_s, pilot_s, warmup_steps, timed_steps, MIN_WINDOW_PASSES)
    if warm == 0:  # no warm-up asked for: the pilot is the window's first pass
        start, left = pilot_start, timed - 1
    else:
        for _ in range(warm - 1):
            run()
        synchronize(device)
        start, left = time.perf_counter(), timed
    for _ in range(left):
        run()
    synchronize(device)
    elapsed = time.perf_counter() - start
    model.train()
    return batch_size(inputs) * timed / elapsed


@torch.inference_mode()
def batch1_latency_ms(
    model: nn.Module, inputs: Inputs, warmup_steps: int, iters: int, autocast, budget_s: float | None = None
) -> float:
    """Median wall milliseconds of one forward pass on a single sample, the first of ``inputs`` (eval mode,
    device synchronised after each pass), over the timed passes after the warm-up ones: at most
    ``warmup_steps`` and ``iters``, as many as fit in ``budget_s`` (module docstring)."""
    model.eval()
    single = head(inputs, 1)

    def run():
        with autocast():
            forward(model, single)

    passes = budgeted_passes(lambda: (timed_ms(run, device_of(single)),), budget_s, warmup_steps, iters)
    model.train()
    return statistics.median(ms for (ms,) in passes)


# Tokens generated per timed run of the per-token latency (fewer when the context window is shorter).
GENERATED_TOKENS = 32


@torch.inference_mode()
def generated_token_latency_ms(
    model: nn.Module, window: torch.Tensor, warmup_steps: int, iters: int, autocast, budget_s: float | None = None
) -> float:
    """Wall milliseconds per generated token of a causal LM at batch 1, decoding greedily with HF's
    ``generate`` and its KV cache.

    The prompt is the first half of ``window`` (one held-out window, (1, N) or (N,) token ids); T =
    min(``GENERATED_TOKENS``, N - prompt) tokens are generated after it, so the context never exceeds
    N. One run generating T tokens and one generating 1 (the prompt's forward pass, the prefill, and
    nothing else) are each timed, device synchronised, in pairs (T then 1): warm-up pairs untimed, then the
    timed pairs, at most ``warmup_steps`` and ``iters``, as many as fit in ``budget_s`` (module
    docstring). The latency is (fastest T-token time − fastest 1-token time) / (T − 1): the cost of one
    decoding step, without the prefill. The fastest run of each, not a median, because a shared machine's
    load only ever adds time, and a small model's decoding steps (tenths of a millisecond) are shorter
    than what it adds: a median over pairs, and a difference of medians, both went negative on a loaded
    2-core machine, where the least disturbed run of each stays close to its cost. Needs the model's
    ``generate(input_ids, new_tokens)`` (``CausalLM``).
    """
    ids = window.reshape(1, -1)
    prompt = ids[:, : max(ids.shape[1] // 2, 1)]
    new_tokens = min(GENERATED_TOKENS, ids.shape[1] - prompt.shape[1])
    if new_tokens < 2:
        raise ValueError(f"a window of {ids.shape[1]} tokens leaves fewer than 2 to generate after the prompt")
    model.eval()

    def generate(tokens: int) -> float:
        def run():
            with autocast():
                model.generate(prompt, tokens)

        return timed_ms(run, prompt.device)

    passes = budgeted_passes(lambda: (generate(new_tokens), generate(1)), budget_s, warmup_steps, iters)
    model.train()
    long_ms, prefill_ms = (min(times) for times in zip(*passes, strict=True))
    return (long_ms - prefill_ms) / (new_tokens - 1)


def kv_cache_bytes_per_token(spec: ModelSpec, model: nn.Module, autocast) -> int:
    """Bytes a causal LM's KV cache holds per token of context, all layers: 2 (K and V) · depth ·
    num_kv_heads · head_dim · bytes per element. The element is what K and V are computed in, the dtype
    ``generated_token_latency_ms`` decodes with: the autocast dtype when ``autocast()`` (the trial's
    precision context) enables autocasting on the model's device (bf16 on CUDA), else the parameters'.

    Grouped-query attention's saving is the factor num_kv_heads / num_heads; every decoding step reads the
    whole cache, so at long contexts this, not FLOPs, is what per-token latency follows. A closed form from
    the spec; tests check it against the bytes of HF's cache after ``generate``, divided by the tokens in it.
    """
    parameter = next(model.parameters())
    dtype = parameter.dtype
    with autocast():
        if torch.is_autocast_enabled(parameter.device.type):
            dtype = torch.get_autocast_dtype(parameter.device.type)
    return 2 * spec.depth * spec.resolved_num_kv_heads * spec.resolved_head_dim * dtype.itemsize
