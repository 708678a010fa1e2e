"""MQAR (workers/data/mqar.py), checked by an evaluator written here, independent of the module: Zoology's
rules row by row, determinism, the gap distribution written out, the options' rules, and the data set's
splits and batches."""

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from workers.data.batches import LMBatches
from workers.data.mqar import generate_mqar
from workers.data.registry import data_spec, load_arrays, open_batches
from workers.data.splits import IGNORE_INDEX, LMSplits

CPU = torch.device("cpu")


def check_mqar_row(ids, labels, vocab_size, k):
    """Zoology's rules for one row: the context is k (key, value) pairs with distinct keys from the lower
    half (never 0) and distinct values from the upper half; exactly k positions are scored, all in the query
    region at even offsets from it, each holding a context key and labelled with the value that followed
    that key in the context; every context key is queried exactly once."""
    ids, labels = [int(t) for t in ids], [int(t) for t in labels]
    half = vocab_size // 2
    keys, values = ids[0 : 2 * k : 2], ids[1 : 2 * k : 2]
    assert all(1 <= key < half for key in keys) and len(set(keys)) == k
    assert all(half <= value < vocab_size for value in values) and len(set(values)) == k
    assert all(0 <= token < vocab_size for token in ids)
    answer = dict(zip(keys, values, strict=True))
    scored = [t for t, label in enumerate(labels) if label != -100]
    assert len(scored) == k
    for t in scored:
        assert t >= 2 * k and (t - 2 * k) % 2 == 0
        assert ids[t] in answer and labels[t] == answer[ids[t]]
    assert sorted(ids[t] for t in scored) == sorted(keys)
    return [(t - 2 * k) // 2 for t in scored]  # the gaps


@pytest.mark.parametrize(
    ("vocab_size", "k", "seq_len", "power_a"),
    [(256, 8, 64, 0.01), (32, 3, 16, 1.0), (8192, 16, 128, 0.01), (10, 4, 16, 0.5), (300, 5, 20, 2.0)],
)
def test_every_mqar_row_obeys_zoologys_rules(vocab_size, k, seq_len, power_a):
    ids, labels = generate_mqar(300, seq_len, vocab_size=vocab_size, num_kv_pairs=k, power_a=power_a, seed=3)
    assert ids.shape == labels.shape == (300, seq_len)
    assert ids.dtype == (np.uint8 if vocab_size <= 256 else np.uint16) and labels.dtype == np.int64
    for row_ids, row_labels in zip(ids, labels, strict=True):
        check_mqar_row(row_ids, row_labels, vocab_size, k)


def test_mqar_is_deterministic_per_seed_and_split_and_a_prefix_across_sizes():
    first = generate_mqar(500, 32, num_kv_pairs=4, seed=7)
    again = generate_mqar(500, 32, num_kv_pairs=4, seed=7)
    other_seed = generate_mqar(500, 32, num_kv_pairs=4, seed=8)
    val = generate_mqar(500, 32, num_kv_pairs=4, seed=7, stream=1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other_seed[0]) and not np.array_equal(first[1], other_seed[1])
    assert not np.array_equal(first[0], val[0])
    longer = generate_mqar(5000, 32, num_kv_pairs=4, seed=7)  # spans two generator blocks
    assert np.array_equal(longer[0][:500], first[0]) and np.array_equal(longer[1][:500], first[1])
    assert len({row.tobytes() for row in longer[0]}) == 5000  # no repeated sequence


def test_mqar_gaps_follow_the_power_law():
    """With one pair the gap g of the only query has P(g) ∝ (g + 1)^(power_a - 1), written out here; with
    more pairs a small power_a puts queries nearer the context than power_a = 1 (uniform) does."""
    seq_len, rows = 20, 40_000
    space = (seq_len - 2) // 2
    for power_a in (0.01, 1.0, 3.0):
        _, labels = generate_mqar(rows, seq_len, vocab_size=64, num_kv_pairs=1, power_a=power_a, seed=0)
        gaps = ((labels != -100).argmax(axis=1) - 2) // 2
        expected = np.array([(g + 1) ** (power_a - 1) for g in range(space)])
        expected /= expected.sum()
        observed = np.bincount(gaps, minlength=space) / rows
        assert np.abs(observed - expected).max() < 0.015, (power_a, observed, expected)
    near = generate_mqar(2000, 64, num_kv_pairs=8, power_a=0.01, seed=1)[1]
    uniform = generate_mqar(2000, 64, num_kv_pairs=8, power_a=1.0, seed=1)[1]
    mean_position = [np.nonzero(labels != -100)[1].mean() for labels in (near, uniform)]
    assert mean_position[0] < mean_position[1] - 3


def test_mqar_gaps_are_drawn_in_order_one_after_another():
    """Zoology pairs the i-th key with the i-th gap drawn (one at a time, without replacement). For two pairs,
    written out here: P(first gap g) = p(g), P(second gap h) = Σ_{g≠h} p(g) p(h) / (1 - p(g)); with
    power_a = 1 either pair is queried first equally often."""
    seq_len, rows, power_a = 16, 40_000, 0.3
    space = (seq_len - 4) // 2
    ids, labels = generate_mqar(rows, seq_len, vocab_size=64, num_kv_pairs=2, power_a=power_a, seed=4)
    gap = {}
    for pair in (0, 1):
        key = ids[:, 2 * pair][:, None]
        at = ((ids == key) & (labels != -100)).argmax(axis=1)
        gap[pair] = (at - 4) // 2
    p = np.array([(g + 1) ** (power_a - 1) for g in range(space)])
    p /= p.sum()
    second = np.array([sum(p[g] * p[h] / (1 - p[g]) for g in range(space) if g != h) for h in range(space)])
    for pair, expected in ((0, p), (1, second)):
        assert np.abs(np.bincount(gap[pair], minlength=space) / rows - expected).max() < 0.015
    ids, labels = generate_mqar(20_000, 32, vocab_size=64, num_kv_pairs=4, power_a=1.0, seed=2)
    first = (labels != -100).argmax(axis=1)
    slot = (ids[:, 0:8:2] == ids[np.arange(len(ids)), first][:, None]).argmax(axis=1)  # pair queried first
    assert np.abs(np.bincount(slot, minlength=4) / len(ids) - 0.25).max() < 0.02


@pytest.mark.parametrize(
    ("mqar", "seq_len", "message"),
    [
        ({}, 63, r"seq_len must be even.*seq_len=63"),
        ({"num_kv_pairs": 17}, 64, r"4 \* num_kv_pairs <= seq_len.*num_kv_pairs=17, seq_len=64"),
        ({"vocab_size": 16, "num_kv_pairs": 8}, 64, r"num_kv_pairs <= vocab_size // 2 - 1.*vocab_size=16"),
        ({"power_a": 0}, 64, "power_a"),
        ({"rows": 3}, 64, "rows"),
    ],
)
def test_mqar_options_state_the_rule_and_the_values(mqar, seq_len, message):
    with pytest.raises(ValidationError, match=message):
        data_spec(name="mqar", seq_len=seq_len, mqar=mqar)


def test_mqar_data_set_and_batches():
    spec = data_spec(name="mqar", seq_len=32, mqar={"num_kv_pairs": 4, "train_rows": 100, "val_rows": 30, "seed": 5})
    assert spec.require_local() is None
    splits = load_arrays(spec)
    assert isinstance(splits, LMSplits)
    assert (splits.vocab_size, splits.num_classes, splits.seq_len, splits.tokenizer) == (256, 256, 32, None)
    assert splits.ids_train.dtype == np.uint8 and splits.labels_train.dtype == np.int64
    assert splits.ids_train.shape == (100, 32) and splits.ids_eval.shape == (30, 32)
    assert np.array_equal(splits.ids_train, generate_mqar(100, 32, num_kv_pairs=4, seed=5)[0])
    assert np.array_equal(splits.ids_eval, generate_mqar(30, 32, num_kv_pairs=4, seed=5, stream=1)[0])
    batches = open_batches(spec, CPU, splits)
    assert isinstance(batches, LMBatches)
    meta = batches.meta
    assert (meta.num_classes, meta.vocab_size, meta.seq_len, meta.train_size, meta.val_size) == (256, 256, 32, 100, 30)
    assert meta.tokenizer is None
    assert batches.steps_per_epoch(16) == 6
    epoch = list(batches.train_batches(16, torch.Generator().manual_seed(0)))
    assert len(epoch) == 6
    for inputs, labels in epoch:
        assert inputs["input_ids"].shape == inputs["attention_mask"].shape == labels.shape == (16, 32)
        assert inputs["input_ids"].dtype == inputs["attention_mask"].dtype == labels.dtype == torch.int64
        assert bool((inputs["attention_mask"] == 1).all())
        assert int((labels != IGNORE_INDEX).sum()) == 16 * 4
    limited = load_arrays(spec.model_copy(update={"limit_train": 10, "limit_val": 3}))
    assert limited.ids_train.shape == (10, 32) and limited.labels_eval.shape == (3, 32)
    assert spec.vocab_size() == 256
    assert (data_spec(name="mqar", seq_len=64, mqar={"vocab_size": 8192})).vocab_size() == 8192
