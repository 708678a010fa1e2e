"""The trial's device (workers/devices.py): which one, and its name in a row."""

import pytest
import torch

from workers.devices import describe_device, resolve_device, synchronize


def test_auto_is_cuda_when_there_is_one_and_named_devices_are_taken_as_named():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu") and resolve_device("cuda:1") == torch.device("cuda", 1)


def test_a_cpu_is_named_by_its_threads(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert describe_device(torch.device("cpu")) == "cpu:3threads"
    synchronize(torch.device("cpu"))  # nothing to wait for, and no CUDA call


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_gpu_is_named_by_its_model():
    assert describe_device(torch.device("cuda:0")) == f"cuda:{torch.cuda.get_device_name(0)}"
