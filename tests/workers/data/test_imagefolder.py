"""Class folders (workers/data/imagefolder.py): train/ and val/ trees of PNGs made here, read with timm's
transforms; a missing split names its path and the variable to set."""

import numpy as np
import pytest
import torch
from PIL import Image

from workers.data.base import DataNotFoundError
from workers.data.imagefolder import FolderBatches
from workers.data.registry import data_spec

CPU = torch.device("cpu")


def write_class_folders(root, classes=("cat", "dog"), per_class=4):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for name in classes:
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / name / f"{i}.png")
    return root


def test_imagefolder_reads_train_and_val_with_timm_transforms(tmp_path):
    spec = data_spec(name="imagefolder", root=str(write_class_folders(tmp_path)), img_size=32, num_workers=0)
    batches = FolderBatches(spec, CPU)
    assert batches.meta.num_classes == 2 and batches.meta.train_size == 8 and batches.meta.val_size == 8
    images, labels = next(batches.train_batches(4, torch.Generator().manual_seed(0)))
    assert images.shape == (4, 3, 32, 32) and set(labels.tolist()) <= {0, 1}
    val = list(batches.val_batches(5))
    assert [len(y) for _, y in val] == [5, 3]
    assert batches.probe_images(3).shape == (3, 3, 32, 32)


def test_imagefolder_missing_split_names_path_and_variable(tmp_path, monkeypatch):
    (tmp_path / "train").mkdir()
    with pytest.raises(DataNotFoundError, match=r"val.*IMAGENET_ROOT"):
        FolderBatches(data_spec(name="imagefolder", root=str(tmp_path)), CPU)
    monkeypatch.delenv("IMAGENET_ROOT", raising=False)
    with pytest.raises(DataNotFoundError, match="IMAGENET_ROOT"):
        FolderBatches(data_spec(name="imagefolder"), CPU)
