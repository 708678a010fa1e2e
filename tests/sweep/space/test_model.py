"""A space's ``model:`` section (``ModelFixed``) is ModelSpec's fields, derived rather than retyped: the same
names, bounds and defaults, optional where ModelSpec requires a value, less what the data set decides."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweep.space.model import DATA_DECIDED_FIELDS, ModelFixed
from workers.config import ModelSpec

VALID_SPEC = {"depth": 2, "num_heads": 2, "embed_dim": 8, "mlp_dim": 16}


def test_the_model_section_takes_model_specs_fields_less_the_data_sets_and_a_variant():
    assert set(ModelFixed.model_fields) == {"variant", *ModelSpec.model_fields} - set(DATA_DECIDED_FIELDS)
    fixed = ModelFixed()
    assert (fixed.depth, fixed.num_heads, fixed.embed_dim, fixed.mlp_dim) == (None, None, None, None)
    assert fixed.conditioning == "none"  # the model as built, named
    spec = ModelSpec(**VALID_SPEC)
    for name in ("family", "patch_size", "qkv_bias", "drop_path_rate", "dropout", "num_kv_heads"):
        assert getattr(fixed, name) == getattr(spec, name), name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("depth", 0),
        ("num_heads", -1),
        ("head_dim", 0),
        ("mlp_dim", "wide"),
        ("patch_size", 0),
        ("drop_path_rate", 1.0),
        ("dropout", -0.1),
        ("swept_stage", 0),
        ("stage_depths", []),
        ("stage_heads", [0, 1]),
        ("num_kv_heads", 0),
        ("conditioning", "bogus"),
        ("conditioning_weight", 0),
    ],
)
def test_a_bad_value_breaks_the_same_bound_in_both(field, value):
    """Each of ModelSpec's bounds holds in a space's model section too, with the same message."""
    with pytest.raises(ValidationError) as fixed:
        ModelFixed(**{field: value})
    with pytest.raises(ValidationError) as spec:
        ModelSpec(**{**VALID_SPEC, field: value})
    assert [(e["loc"], e["type"]) for e in fixed.value.errors()] == [(e["loc"], e["type"]) for e in spec.value.errors()]
    assert [e["msg"].replace("Tuple", "List") for e in spec.value.errors()] == [e["msg"] for e in fixed.value.errors()]


@pytest.mark.parametrize("key", ["img_size", "num_classes", "seq_len", "vocab_size", "in_chans", "depht"])
def test_unknown_keys_and_the_data_sets_fields_are_rejected(key):
    with pytest.raises(ValidationError) as info:
        ModelFixed(**{key: 4})
    assert [e["type"] for e in info.value.errors()] == ["extra_forbidden"]


def test_stage_lists_stay_lists():
    """A space file's YAML lists: ModelSpec's stage tuples are lists here, as before and as errors name them."""
    assert ModelFixed(stage_depths=(1, 2)).stage_depths == [1, 2]
    with pytest.raises(ValidationError, match="Input should be a valid list"):
        ModelFixed(stage_depths=3)
