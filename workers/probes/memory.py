"""Peak memory of one training step."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

CUDA_METHOD = "cuda_max_memory_allocated"
CPU_METHOD = "cpu_live_tensors_plus_profiler_alloc_peak"


def peak_train_step_memory(
    step: Callable[[], object], device: torch.device, live_tensors: Iterable[torch.Tensor]
) -> tuple[int | None, str]:
    """Peak bytes held in tensors during one call of ``step`` (a full training step), and the method.

    - CUDA: ``torch.cuda.max_memory_allocated`` after resetting the peak: every tensor allocated on the
      device at the worst moment of the step (weights, gradients, optimiser state, activations), not
      the allocator's cached-but-free blocks.
    - CPU (no allocator statistics exist): the bytes of ``live_tensors`` at the start of the step
      (weights, gradients, optimiser state, batch; each storage counted once) plus the peak of the
      running sum of allocations minus frees that ``torch.profiler`` records from the CPU allocator
      during the step. Same quantity as on CUDA, measured from allocator events instead of a counter.
    Returns ``(None, "unavailable: …")`` if the profiler exposes no allocator events.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device)), CUDA_METHOD
    baseline = live_storage_bytes(live_tensors)
    peak_delta = profiler_allocation_peak(step)
    if peak_delta is None:
        return None, "unavailable: torch.profiler exposed no CPU allocator events"
    return baseline + peak_delta, CPU_METHOD


def live_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage counted once)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        if tensor is None or not torch.is_tensor(tensor) or tensor.device.type != "cpu":
            continue
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def profiler_allocation_peak(fn: Callable[[], object]) -> int | None:
    """Peak of (bytes allocated − bytes freed) on the CPU allocator while ``fn`` runs, from the
    profiler's ``[memory]`` events in time order. Frees of blocks allocated before are not reported
    by the profiler, so they cannot push the sum below zero."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = getattr(getattr(prof.profiler, "kineto_results", None), "events", None)
    if events is None:
        return None
    allocations = sorted(
        ((event.start_ns(), event.nbytes()) for event in events() if event.name() == "[memory]"),
    )
    if not allocations:
        return None
    running = peak = 0
    for _, nbytes in allocations:
        running += nbytes
        peak = max(peak, running)
    return peak
