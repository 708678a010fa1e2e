"""Data sets in memory (workers/data/splits.py): the smallest id type, and cutting to the first rows."""

import numpy as np
import pytest

from workers.data.splits import ArraySplits, smallest_uint


@pytest.mark.parametrize(("vocab", "dtype"), [(256, np.uint8), (257, np.uint16), (65536, np.uint16),
                                               (65537, np.uint32), (2**32 + 1, np.uint64)])  # fmt: skip
def test_the_smallest_unsigned_type_holds_every_id(vocab, dtype):
    assert smallest_uint(vocab) == np.dtype(dtype)


def test_first_rows_keeps_the_first_images_of_each_split():
    x = np.arange(5 * 3 * 4 * 4, dtype=np.uint8).reshape(5, 3, 4, 4)
    splits = ArraySplits("t", x, np.arange(5), x[:3], np.arange(3), 10, (0.5,) * 3, (0.25,) * 3, False)
    assert (splits.in_chans, splits.native_size) == (3, 4)
    cut = splits.first_rows(2, None)
    assert np.array_equal(cut.x_train, x[:2]) and cut.y_train.tolist() == [0, 1] and len(cut.x_val) == 3
