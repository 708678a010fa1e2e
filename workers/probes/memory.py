"""Peak memory of one training step, one definition on every device.

``peak_mem_bytes`` is what the training step itself needs at its worst moment: the model's parameters,
their gradients, the optimiser state, activations, temporaries and the batch. Data the trial keeps resident
on the device (a whole data set held there, a cached probe batch) is not part of it; its bytes are reported
apart, as ``resident_data_bytes``.

    peak_mem_bytes = S + P
    S  bytes of the distinct storages, on the device, of the step's inputs that exist before it starts:
       parameters, optimiser state and batch (storages that belong to resident data left out)
    P  the peak, during the step, of (bytes allocated − bytes freed) on the device since the step started

Gradients must be None when the step starts (``optimizer.zero_grad(set_to_none=True)``): the step's own
backward pass then allocates them, and they are counted once, in P, at the moment they exist. (Left in
place from the step before, they would be counted in S and again in P: the step's ``zero_grad`` frees
them, but a free of a block allocated before the measurement is invisible to the profiler.)

P is read from the allocator:
- CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus
  ``torch.cuda.memory_allocated`` at the start (device synchronised at both ends): so everything allocated
  before the step (resident data, other tensors the trial holds) drops out, and S adds back the step's own.
- CPU: the peak of the running sum of the CPU allocator's events that ``torch.profiler`` records during the
  step (allocations positive, frees negative, in time order).
Both count tensor bytes as the allocator hands them out, not the allocator's cached-but-free blocks nor the
process's other memory (libraries, the interpreter).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch

CUDA_METHOD = "cuda_step_tensors_plus_allocated_peak_growth"
CPU_METHOD = "cpu_step_tensors_plus_profiler_alloc_peak"


def peak_train_step_memory(
    step: Callable[[], object],
    device: torch.device,
    step_tensors: Iterable[torch.Tensor],
    resident: Iterable[torch.Tensor] = (),
) -> tuple[int | None, str]:
    """Peak bytes of one call of ``step`` (a full training step) by the module docstring's definition, and
    the method. ``step_tensors``: the step's inputs that exist before it (see :func:`training_step_tensors`);
    ``resident``: tensors of resident data, whose storages are left out of S even where the batch shares
    them. Returns ``(None, "unavailable: …")`` if the CPU profiler exposes no allocator events.
    """
    resident_storages = set(storage_sizes(resident, device))
    held = sum(size for key, size in storage_sizes(step_tensors, device).items() if key not in resident_storages)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        return held + int(torch.cuda.max_memory_allocated(device)) - start, CUDA_METHOD
    peak_delta = profiler_allocation_peak(step)
    if peak_delta is None:
        return None, "unavailable: torch.profiler exposed no CPU allocator events"
    return held + peak_delta, CPU_METHOD


def training_step_tensors(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Iterable[torch.Tensor]):
    """The tensors a training step reads that exist before it: parameters, optimiser state, the batch.

    Raises ValueError if a parameter still holds a gradient: set them to None first (module docstring).
    """
    parameters = list(model.parameters())
    if any(parameter.grad is not None for parameter in parameters):
        raise ValueError(
            "peak memory is measured from a step that allocates its own gradients: "
            "call optimizer.zero_grad(set_to_none=True) before measuring"
        )
    state = [t for per_param in optimizer.state.values() for t in per_param.values() if torch.is_tensor(t)]
    return [*parameters, *state, *batch]


def storage_sizes(tensors: Iterable[torch.Tensor], device: torch.device | str = "cpu") -> dict[tuple, int]:
    """Bytes of each distinct storage behind ``tensors`` on ``device``'s type (views of one storage counted
    once), keyed by (device, address)."""
    kind = torch.device(device).type
    seen: dict[tuple, int] = {}
    for tensor in tensors:
        if tensor is None or not torch.is_tensor(tensor) or tensor.device.type != kind:
            continue
        storage = tensor.untyped_storage()
        seen[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return seen


def live_storage_bytes(tensors: Iterable[torch.Tensor], device: torch.device | str = "cpu") -> int:
    """Bytes of the distinct storages behind ``tensors`` on ``device``'s type (views counted once)."""
    return sum(storage_sizes(tensors, device).values())


def resident_tensors(source: object) -> list[torch.Tensor]:
    """The tensors a batch source holds as attributes, directly or in a dict, list or tuple attribute: the
    data it keeps in memory between batches (whole splits, cached masks or probe batches); none for an
    on-the-fly loader until it caches something."""
    found = []
    for value in vars(source).values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
        found += [item for item in items if torch.is_tensor(item)]
    return found


@contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 pointed at /dev/null: kineto (torch 2.14) writes ``USDT: … profiler_start`` and
    ``profiler_stop`` there from C++ at every profiler start and stop, at no level ``KINETO_LOG_LEVEL``
    reaches. Only the start and stop are wrapped, so the measured code's own errors still show."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def profiler_allocation_peak(fn: Callable[[], object]) -> int | None:
    """Peak of (bytes allocated − bytes freed) on the CPU allocator while ``fn`` runs, from the
    profiler's ``[memory]`` events in time order. Frees of blocks allocated before are not reported
    by the profiler, so they cannot push the sum below zero."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with native_stderr_silenced():
        prof.start()
    try:
        fn()
    finally:
        with native_stderr_silenced():
            prof.stop()
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
