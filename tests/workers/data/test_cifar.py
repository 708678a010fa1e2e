"""CIFAR (workers/data/cifar.py): the real loader on tiny pickles in torchvision's layout made here, the root
from the setting or the environment, nothing downloaded, and a restricted unpickler that refuses a file that
would run code."""

import os
import pickle

import numpy as np
import pytest
import torch

from sweep.cli import main
from workers.data.base import DataNotFoundError
from workers.data.cifar import CifarUnpickler, UnsafePickleError
from workers.data.registry import data_spec, load_arrays, open_batches

CPU = torch.device("cpu")


def write_fake_cifar10(root, train_per_batch=6, test=10):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    files = {f"data_batch_{i}": train_per_batch for i in range(1, 6)} | {"test_batch": test}
    for name, count in files.items():
        batch = {
            b"data": rng.integers(0, 256, (count, 3072), dtype=np.uint8),
            b"labels": rng.integers(0, 10, count).tolist(),
        }
        with (folder / name).open("wb") as handle:
            pickle.dump(batch, handle)
    return root


def test_cifar10_reads_torchvision_layout_from_local_root(tmp_path):
    spec = data_spec(name="cifar10", root=str(write_fake_cifar10(tmp_path)))
    arrays = load_arrays(spec)
    assert arrays.x_train.shape == (30, 3, 32, 32) and arrays.x_val.shape == (10, 3, 32, 32)
    assert arrays.num_classes == 10 and arrays.augment
    batches = open_batches(spec, CPU, arrays)
    images, labels = next(batches.train_batches(8, torch.Generator().manual_seed(0)))
    assert images.shape == (8, 3, 32, 32) and labels.dtype == torch.int64


def test_cifar100_uses_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    for name, count in (("train", 12), ("test", 4)):
        batch = {
            b"data": np.zeros((count, 3072), np.uint8),
            b"fine_labels": [99] * count,
            b"coarse_labels": [0] * count,
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    arrays = load_arrays(data_spec(name="cifar100", root=str(tmp_path)))
    assert arrays.num_classes == 100 and set(arrays.y_train) == {99}


def test_cifar_missing_is_a_clear_error_and_no_download(tmp_path, monkeypatch):
    monkeypatch.delenv("CIFAR_ROOT", raising=False)
    with pytest.raises(DataNotFoundError, match="CIFAR_ROOT"):
        load_arrays(data_spec(name="cifar10"))
    with pytest.raises(DataNotFoundError, match=r"cifar-10-batches-py.*Nothing is downloaded"):
        load_arrays(data_spec(name="cifar10", root=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []  # nothing was fetched or created


def test_cifar_root_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CIFAR_ROOT", str(write_fake_cifar10(tmp_path)))
    assert load_arrays(data_spec(name="cifar10")).x_val.shape[0] == 10


class RunsCode:
    """What a crafted data file would carry: unpickling it calls ``os.system``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def write_cifar10_with(root, payload):
    """CIFAR-10's layout whose first training batch is ``payload`` pickled (the rest real batches)."""
    write_fake_cifar10(root)
    (root / "cifar-10-batches-py" / "data_batch_1").write_bytes(pickle.dumps(payload))
    return root


def test_a_cifar_batch_that_names_any_other_global_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    root = write_cifar10_with(tmp_path / "data", {b"data": RunsCode(marker), b"labels": [0]})
    with pytest.raises(UnsafePickleError) as refused:
        load_arrays(data_spec(name="cifar10", root=str(root)))
    message = str(refused.value)
    assert "\n" not in message and "data_batch_1 is not a CIFAR batch" in message
    assert f"asks to load {os.system.__module__}.system" in message
    assert not marker.exists()  # the command was never run


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_the_restricted_unpickler_reads_what_cifar_files_hold(tmp_path, protocol):
    """numpy arrays, lists, bytes, str and ints round-trip at the old protocol CIFAR's files use and the newest."""
    batch = {
        b"batch_label": b"training batch 1 of 5",
        b"labels": [3, 1, 4],
        b"data": np.arange(3 * 3072, dtype=np.uint8).reshape(3, 3072),
        b"filenames": [b"a.png", "b.png", b"c.png"],
    }
    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps(batch, protocol=protocol))
    with path.open("rb") as handle:
        read = CifarUnpickler(handle, path).load()
    assert read[b"labels"] == [3, 1, 4] and read[b"filenames"] == batch[b"filenames"]
    assert np.array_equal(read[b"data"], batch[b"data"]) and read[b"batch_label"] == batch[b"batch_label"]


def test_sweep_run_on_an_unsafe_cifar_file_is_one_line_and_exit_2(tmp_path, capsys):
    marker = tmp_path / "ran"
    root = write_cifar10_with(tmp_path / "data", {b"data": RunsCode(marker), b"labels": [0]})
    space = tmp_path / "space.yaml"
    space.write_text(
        "question: q\nmodel: {embed_dim: 16, mlp_dim: 32, patch_size: 4}\naxes: {depth: [1], num_heads: [2]}\n"
        f"baseline: {{depth: 1, num_heads: 2}}\ndata: {{name: cifar10, root: {root}}}\n"
    )
    assert main(["run", str(space), "--results", str(tmp_path / "results"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.splitlines()[-1].startswith("error: data set 'cifar10' cannot be loaded:")
    assert "refusing to run code from a data file" in err.splitlines()[-1] and not marker.exists()
