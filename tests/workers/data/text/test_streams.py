"""Token streams (workers/data/text/streams.py): packing a stream into next-token windows."""

import numpy as np

from workers.data.text.streams import next_token_windows


def test_packing_windows():
    stream = np.arange(23, dtype=np.uint16)
    ids, labels = next_token_windows(stream, 5)
    assert ids.shape == labels.shape == (4, 5) and ids.dtype == np.uint16 and labels.dtype == np.int64
    assert ids[1].tolist() == [5, 6, 7, 8, 9] and labels[1].tolist() == [6, 7, 8, 9, 10]
    assert labels[-1, -1] == 20  # 21 and 22 do not fill a window
    assert next_token_windows(np.arange(5), 5)[0].shape == (0, 5)
