"""nearest_neighbor (workers/data/nearest_neighbor.py) is the task it claims to be, checked against an
independent loop."""

import numpy as np

from workers.data.nearest_neighbor import NearestNeighborSpec, codebook, nearest_neighbor_block
from workers.data.splits import IGNORE_INDEX


def test_nearest_neighbor_labels_the_candidate_of_largest_inner_product():
    options = NearestNeighborSpec(vocab_size=30, code_dim=5, num_candidates=6, seed=4)
    points = codebook(options)
    assert np.allclose(np.linalg.norm(points, axis=1), 1.0) and np.array_equal(points, codebook(options))
    ids, labels = nearest_neighbor_block(np.random.default_rng(0), 100, 10, options, points)
    for row, label in zip(ids, labels, strict=True):
        candidates, queries = row[:6].tolist(), row[6:].tolist()
        assert len(set(row.tolist())) == 10  # distinct: no query is a candidate
        assert (label[:6] == IGNORE_INDEX).all()
        for offset, query_token in enumerate(queries):
            best = max(candidates, key=lambda c: float(points[query_token] @ points[c]))
            assert label[6 + offset] == best
