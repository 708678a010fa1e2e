"""Batch sources over data in memory (workers/data/batches.py): image tensors shuffled by the trial's generator
and normalised, and token windows for language models."""

import numpy as np
import pytest
import torch

from workers.data.batches import LMBatches, TensorBatches
from workers.data.registry import data_spec, load_arrays
from workers.data.splits import LMSplits

CPU = torch.device("cpu")


def test_tensor_batches_shuffle_by_seed_and_cover_the_epoch():
    batches = TensorBatches(load_arrays(data_spec(name="digits")), data_spec(name="digits"), CPU)
    epoch_a = list(batches.train_batches(100, torch.Generator().manual_seed(3)))
    epoch_b = list(batches.train_batches(100, torch.Generator().manual_seed(3)))
    assert len(epoch_a) == 14 and all(x.shape == (100, 1, 8, 8) for x, _ in epoch_a)
    assert all(torch.equal(ya, yb) for (_, ya), (_, yb) in zip(epoch_a, epoch_b, strict=True))
    assert abs(batches.x_train.mean().item()) < 1e-4  # normalised with the training split's statistics


def test_lm_batches_with_wide_ids(tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50_000, size=(12, 6))
    splits = LMSplits("tinystories", ids, ids + 1, ids[:5], ids[:5] + 1, 50_257, 6, "file:/x/tokenizer.json")
    assert splits.ids_train.dtype == np.uint16 and splits.labels_train.dtype == np.int64
    spec = data_spec(name="tinystories", root=str(tmp_path), seq_len=6)
    batches = LMBatches(splits, spec, CPU)
    assert batches.meta.tokenizer == "file:/x/tokenizer.json" and batches.meta.num_classes == 50_257
    val = list(batches.val_batches(2))
    assert [len(labels) for _, labels in val] == [2, 2, 1]
    assert torch.equal(torch.cat([inputs["input_ids"] for inputs, _ in val]), torch.as_tensor(ids[:5]))
    assert torch.equal(torch.cat([labels for _, labels in val]), torch.as_tensor(ids[:5] + 1))
    probe = batches.probe_images(3)
    assert probe["input_ids"].dtype == torch.int64 and torch.equal(probe["input_ids"], torch.as_tensor(ids[:3]))
    assert probe["attention_mask"].shape == (3, 6) and bool((probe["attention_mask"] == 1).all())
    first = list(batches.train_batches(4, torch.Generator().manual_seed(1)))
    again = list(batches.train_batches(4, torch.Generator().manual_seed(1)))
    assert len(first) == 3 and all(torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    assert sorted(torch.cat([labels[:, 0] for _, labels in first]).tolist()) == sorted((ids[:, 0] + 1).tolist())
    with pytest.raises(ValueError, match=r"seq_len=6.*seq_len=8"):
        LMBatches(splits, spec.model_copy(update={"seq_len": 8}), CPU)
