"""workers/batch_split.py: a global batch splits over the workers only when they divide it."""

import pytest

from workers.batch_split import BatchSplitError, per_worker_batch


def test_each_worker_takes_an_equal_share_of_the_global_batch():
    assert per_worker_batch(64, 1) == 64
    assert per_worker_batch(64, 4) == 16


def test_a_batch_the_workers_do_not_divide_names_the_two_nearest_that_work():
    with pytest.raises(BatchSplitError, match=r"batch_size=10 must be divisible by workers_per_trial=4.*use 8 or 12"):
        per_worker_batch(10, 4)
    with pytest.raises(BatchSplitError, match="use 4 or 8"):
        per_worker_batch(6, 4)
