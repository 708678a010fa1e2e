"""The embedded digits (workers/data/digits.py): a fixed stratified split, independent of the trial seed, and
resizing."""

import numpy as np
import torch

from workers.data.registry import data_spec, load_arrays, open_batches

CPU = torch.device("cpu")


def test_digits_split_is_fixed_stratified_and_independent_of_trial_seed():
    first = load_arrays(data_spec(name="digits"))
    second = load_arrays(data_spec(name="digits"))
    assert first.x_train.shape == (1437, 1, 8, 8) and first.x_val.shape == (360, 1, 8, 8)
    assert np.array_equal(first.y_val, second.y_val)
    assert np.bincount(first.y_val).min() >= 35  # every class held out in proportion
    other = load_arrays(data_spec(name="digits", split_seed=1))
    assert not np.array_equal(first.y_val, other.y_val)


def test_digits_can_be_resized():
    spec = data_spec(name="digits", img_size=16)
    batches = open_batches(spec, CPU)
    assert batches.meta.img_size == 16 and batches.probe_images(3).shape == (3, 1, 16, 16)
