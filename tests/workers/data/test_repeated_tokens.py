"""repeated_tokens (workers/data/repeated_tokens.py) is the task it claims to be, checked against an
independent loop."""

import numpy as np

from workers.data.repeated_tokens import RepeatedTokensSpec, repeated_tokens_block
from workers.data.splits import IGNORE_INDEX


def test_repeated_tokens_second_half_repeats_the_first_and_labels_the_next_token():
    options = RepeatedTokensSpec(vocab_size=20, min_period=3, max_period=7)
    ids, labels = repeated_tokens_block(np.random.default_rng(5), 400, 16, options)
    periods = set()
    for row, label in zip(ids, labels, strict=True):
        scored = np.flatnonzero(label != IGNORE_INDEX)
        period = len(scored) + 1  # T - 1 answers
        periods.add(period)
        start = 16 - 2 * period
        x = row[start : start + period]
        assert np.array_equal(row[start + period :], x)  # the second copy repeats the first
        assert len(set(x.tolist())) == period and not set(row[:start].tolist()) & set(x.tolist())
        assert np.array_equal(scored, np.arange(16 - period, 15))
        for position in scored:  # the next token, read off the first copy
            j = position - (16 - period)
            assert label[position] == x[j + 1]
    assert periods == set(range(3, 8))
