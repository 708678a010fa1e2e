"""index_lookup (workers/data/index_lookup.py) is the task it claims to be, checked against an independent loop."""

import numpy as np

from workers.data.index_lookup import IndexLookupSpec, index_lookup_block
from workers.data.splits import IGNORE_INDEX


def test_index_lookup_answers_each_pointer_with_the_content_it_points_at():
    options = IndexLookupSpec(content_vocab=10)
    ids, labels = index_lookup_block(np.random.default_rng(2), 200, 12, options)
    for row, label in zip(ids, labels, strict=True):
        content, pointers = row[:6], row[6:] - 10
        assert sorted(pointers.tolist()) == list(range(6))  # a permutation: every position asked once
        assert content.max() < 10 and (label[:6] == IGNORE_INDEX).all()
        assert [label[6 + j] for j in range(6)] == [content[p] for p in pointers]
