"""The known-answer tasks' shared generator (workers/data/generated.py): each generated task (repeated_tokens,
index_lookup, nearest_neighbor) is deterministic and seeded, fewer rows are a prefix, its chance level is the
in-context guess, and an impossible shape is refused with its rule."""

import numpy as np
import pytest

from workers.data.generated import BLOCK_ROWS, generate_rows
from workers.data.registry import data_spec
from workers.data.repeated_tokens import RepeatedTokensSpec, repeated_tokens_block


def splits(**fields):
    return data_spec(**fields).load_arrays()


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "repeated_tokens", "seq_len": 32, "repeated_tokens": {"train_rows": 300, "val_rows": 50}},
        {"name": "index_lookup", "seq_len": 16, "index_lookup": {"train_rows": 300, "val_rows": 50}},
        {"name": "nearest_neighbor", "seq_len": 12, "nearest_neighbor": {"train_rows": 300, "val_rows": 50}},
    ],
)
def test_generated_tasks_are_deterministic_and_seeded(fields):
    spec = data_spec(**fields)
    assert data_spec(**spec.model_dump()) == spec and spec.modality == "causal_lm"
    first, again = splits(**fields), splits(**fields)
    assert np.array_equal(first.ids_train, again.ids_train) and np.array_equal(first.labels_eval, again.labels_eval)
    assert first.ids_train.shape == (300, fields["seq_len"]) and first.ids_eval.shape == (50, fields["seq_len"])
    assert not np.array_equal(first.ids_train[:50], first.ids_eval)  # train and val are separate streams
    options = {**fields[fields["name"]], "seed": 1}
    other = splits(**{**fields, fields["name"]: options})
    assert not np.array_equal(first.ids_train, other.ids_train)
    fewer = splits(**{**fields, "limit_train": 100})
    assert np.array_equal(fewer.ids_train, first.ids_train[:100])
    assert first.ids_train.max() < data_spec(**fields).vocab_size()


def test_generate_rows_takes_whole_blocks_so_fewer_rows_are_a_prefix():
    options = RepeatedTokensSpec(vocab_size=16, min_period=2, max_period=4)
    make = lambda rng, rows: repeated_tokens_block(rng, rows, 8, options)  # noqa: E731
    many, _ = generate_rows(make, BLOCK_ROWS + 10, seed=3, stream=0)
    few, _ = generate_rows(make, 7, seed=3, stream=0)
    assert many.shape == (BLOCK_ROWS + 10, 8) and np.array_equal(few, many[:7])


def test_chance_levels_are_the_in_context_guess():
    repeated = data_spec(name="repeated_tokens", seq_len=32, repeated_tokens={"min_period": 6, "max_period": 16})
    assert repeated.chance_score("accuracy") == pytest.approx(100 / 11)
    assert data_spec(name="index_lookup", seq_len=64).chance_score("accuracy") == pytest.approx(100 / 32)
    assert data_spec(name="nearest_neighbor", seq_len=16).chance_score("accuracy") == pytest.approx(12.5)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "repeated_tokens", "seq_len": 20}, "2 \\* max_period <= seq_len"),
        ({"name": "index_lookup", "seq_len": 15}, "seq_len must be even"),
        ({"name": "nearest_neighbor", "seq_len": 8}, "num_candidates < seq_len <= vocab_size"),
    ],
)
def test_impossible_shapes_are_refused_with_the_rule(fields, message):
    with pytest.raises(ValueError, match=message):
        data_spec(**fields)
