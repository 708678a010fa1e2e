"""Stand-in data (workers/data/stand_in.py), checked against each modality's real data set: the batches a model
reads have the same structure (input keys, shapes, dtypes; label shapes, dtypes and value ranges) and the same
metadata, so a config that runs on the stand-in meets on the cluster the data it was checked with."""

import pytest
import torch

from sweep.space.loader import load_space
from workers.data.registry import load_arrays, open_batches
from workers.data.splits import IGNORE_INDEX
from workers.data.stand_in import StandInData

CPU = torch.device("cpu")
ROWS = 4
# one shipped smoke profile per modality: its data set is generated or embedded, so the real one loads here
SMOKE_DATA = {
    "image": ("vit_b_fixed_mlp", "smoke"),
    "sequence": ("lra_listops", "smoke"),
    "causal_lm": ("mqar_recall", "smoke"),
    "masked_lm": ("crammed_bert", "smoke"),
}


def real_and_stand_in(modality: str):
    _, space, _ = load_space(*SMOKE_DATA[modality])
    spec = space.data.model_copy(update={"limit_train": ROWS, "limit_val": ROWS})
    assert spec.modality == modality
    real = open_batches(spec, CPU, load_arrays(spec))
    return real, StandInData(spec, ROWS).open(CPU)


def structure(batch) -> list:
    """(name, shape without the batch dimension, dtype) of each tensor of an (inputs, labels) batch."""
    inputs, labels = batch
    named = sorted(inputs.items()) if isinstance(inputs, dict) else [("images", inputs)]
    return [(name, tuple(t.shape[1:]), t.dtype) for name, t in [*named, ("labels", labels)]]


def label_range_ok(labels: torch.Tensor, classes: int) -> bool:
    scored = labels[labels != IGNORE_INDEX]
    return bool(((scored >= 0) & (scored < classes)).all()) and scored.numel() > 0


@pytest.mark.parametrize("modality", list(SMOKE_DATA))
def test_stand_in_batches_have_the_real_data_sets_structure(modality):
    real, stand_in = real_and_stand_in(modality)
    for key in ("num_classes", "in_chans", "img_size", "seq_len", "vocab_size"):
        assert getattr(stand_in.meta, key) == getattr(real.meta, key), key
    generator = torch.Generator().manual_seed(0)
    real_train = next(iter(real.train_batches(2, generator)))
    stand_in_train = next(iter(stand_in.train_batches(2, generator)))
    assert structure(stand_in_train) == structure(real_train)
    assert structure(next(iter(stand_in.val_batches(2)))) == structure(next(iter(real.val_batches(2))))
    assert structure((stand_in.probe_images(2), stand_in_train[1])) == structure((real.probe_images(2), real_train[1]))
    assert stand_in.steps_per_epoch(2) == ROWS // 2
    assert label_range_ok(stand_in_train[1], stand_in.meta.num_classes)
    if isinstance(stand_in_train[0], dict):
        assert int(stand_in_train[0]["input_ids"].max()) < stand_in.meta.vocab_size
        mask = stand_in_train[0]["attention_mask"]
        assert set(mask.unique().tolist()) <= {0, 1} and bool((mask[:, 0] == 1).all())


def test_stand_in_glue_tasks_match_the_real_ones():
    real, stand_in = real_and_stand_in("masked_lm")
    assert stand_in.glue_tasks == real.glue_tasks
    for task in real.glue_tasks:
        real_arrays, arrays = real.glue_arrays(task), stand_in.glue_arrays(task)
        assert arrays.num_labels == real_arrays.num_labels and arrays.is_regression == real_arrays.is_regression
        for split in ("train", "dev"):
            real_batch = next(iter(real.glue_batches(task, split, 2)))
            batch = next(iter(stand_in.glue_batches(task, split, 2, torch.Generator().manual_seed(0))))
            assert structure(batch) == structure(real_batch)
            lengths = batch[0]["attention_mask"].sum(dim=1)
            assert bool((lengths >= 2).all()) and int(batch[0]["input_ids"].max()) < stand_in.meta.vocab_size
