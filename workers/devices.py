"""The trial's device: which one, how it is named in a row, and waiting for its queued work. A leaf module:
the training loop, the probes and the GPU check all time work through :func:`synchronize`."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when there is one, else the CPU; otherwise the device named (``cpu``, ``cuda:1``)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def describe_device(device: torch.device) -> str:
    """The device as a trials row names it: ``cuda:<GPU model>`` or ``cpu:<N>threads``."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{torch.get_num_threads()}threads"


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock timings measure work done and not work queued."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
