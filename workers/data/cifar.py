"""CIFAR-10 and CIFAR-100 in torchvision's on-disk layout: the extracted ``cifar-10-batches-py`` or
``cifar-100-python`` folder under ``data.root`` (or ``$CIFAR_ROOT``). Nothing is downloaded.

The batches are Python pickles. Unpickling can run any code a file names, so they are read by
:class:`CifarUnpickler`, which builds only what CIFAR's files hold (dicts, lists, bytes, strings, numbers and
numpy arrays of plain dtypes) and refuses every other global with :class:`UnsafePickleError`.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from workers.data.base import BatchSource, DataNotFoundError, ImageDataSpec
from workers.data.hub import HubSourced
from workers.data.splits import ArraySplits

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

CIFAR_ROOT_ENV = "CIFAR_ROOT"
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
HUB = {  # name: (default repository, image column, label column); splits train and test, as CIFAR's
    "cifar10": ("uoft-cs/cifar10", "img", "label"),
    "cifar100": ("uoft-cs/cifar100", "img", "fine_label"),
}
LAYOUT = {
    # name: (folder, training batch files, test batch file, label key, classes)
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], "test_batch", b"labels", 10),
    "cifar100": ("cifar-100-python", ["train"], "test", b"fine_labels", 100),
}
# The globals a CIFAR batch needs: numpy's array reconstruction (module names of numpy 1 and 2), and
# ``_codecs.encode``, with which Python 3 pickles bytes at protocol 2. Nothing here can run other code.
ALLOWED_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }
)


class UnsafePickleError(pickle.UnpicklingError):
    """A data file asked the unpickler for something a CIFAR batch never holds."""


class CifarUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED_GLOBALS`; any other class or function a file names
    (``os.system``, ``builtins.eval``, …) is an :class:`UnsafePickleError` naming it and the file."""

    def __init__(self, handle, path: Path):
        super().__init__(handle, encoding="bytes")
        self.path = path

    def find_class(self, module: str, name: str):
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UnsafePickleError(
            f"{self.path} is not a CIFAR batch: it asks to load {module}.{name}, and CIFAR's files hold only "
            "arrays, lists, bytes, strings and numbers; refusing to run code from a data file. Extract the "
            "official archive (python version) again."
        )


def read_batches(paths: list[Path], label_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels from CIFAR's pickled batches (the python version), read with
    :class:`CifarUnpickler`. Read directly rather than through torchvision's class, which checks MD5 sums of
    the official archive files and so cannot read a subset or a locally produced copy."""
    images, labels = [], []
    for path in paths:
        with path.open("rb") as handle:
            batch = CifarUnpickler(handle, path).load()
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[label_key], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


class CifarData(HubSourced, ImageDataSpec):
    """``data: {name: cifar10}`` or ``{name: cifar100}``: 32×32 RGB images; training batches get a random crop
    (4 px zero padding) and a horizontal flip."""

    name: Literal["cifar10", "cifar100"]
    root_env: ClassVar[str] = CIFAR_ROOT_ENV
    native: ClassVar[tuple[int, int, int]] = (32, 3, 10)

    hub_split_names: ClassVar[tuple[tuple[str, str], ...]] = (("val", "test"),)

    def default_hub_repo(self) -> str:
        return HUB[self.name][0]

    def hub_arrays(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """Images (N, 3, 32, 32) uint8 and labels of one split from the Hub (its image and label columns)."""
        _, image_column, label_column = HUB[self.name]
        rows = self.hub_splits().load(split).with_format("numpy")
        images = np.stack([np.asarray(image, dtype=np.uint8) for image in rows[image_column]])
        return images.transpose(0, 3, 1, 2).copy(), np.asarray(rows[label_column], dtype=np.int64)

    def classes(self) -> int:
        return LAYOUT[self.name][4]

    def require_local(self) -> Path | None:
        if self.source == "hub":  # read through the datasets cache: a missing split is a one-line error at load
            return None
        root = self.resolve_root()
        folder, train_files, test_file, _, _ = LAYOUT[self.name]
        missing = [name for name in [*train_files, test_file] if not (root / folder / name).is_file()]
        if missing:
            raise DataNotFoundError(
                f"{self.name}: expected torchvision's extracted folder {root / folder} "
                f"with {', '.join(missing)}, which is missing. Put the extracted archive under {root}, "
                f"or point `data.root` / ${CIFAR_ROOT_ENV} at the folder that holds {folder}/. "
                "Nothing is downloaded."
            )
        return root

    def known_train_size(self) -> int:
        """CIFAR-10 and CIFAR-100 both train on 50,000 images."""
        return 50_000

    def load_arrays(self) -> ArraySplits:
        root = self.require_local()
        folder, train_files, test_file, label_key, classes = LAYOUT[self.name]
        if self.source == "hub":
            (x_train, y_train), (x_val, y_val) = self.hub_arrays("train"), self.hub_arrays("val")
        else:
            x_train, y_train = read_batches([root / folder / name for name in train_files], label_key)
            x_val, y_val = read_batches([root / folder / test_file], label_key)
        splits = ArraySplits(self.name, x_train, y_train, x_val, y_val, classes, CIFAR_MEAN, CIFAR_STD, augment=True)
        return splits.first_rows(self.limit_train, self.limit_val)

    def open_batches(self, device: torch.device, arrays: ArraySplits | None = None) -> BatchSource:
        from workers.data.batches import TensorBatches  # imports torch

        return TensorBatches(arrays if arrays is not None else self.load_arrays(), self, device)
