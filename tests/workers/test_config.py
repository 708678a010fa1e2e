"""The model, recipe and probe settings (workers/config.py): what ModelSpec refuses, each with the field, the
values and the fix; its derived sizes; the stages of a hierarchical family."""

import pytest
from pydantic import ValidationError

from workers.config import FinetuneSpec, ModelSpec, TrainSpec, divisors


def test_heads_not_dividing_width_is_a_clear_error():
    with pytest.raises(ValidationError) as info:
        ModelSpec(depth=2, num_heads=5, embed_dim=64, mlp_dim=128)
    message = str(info.value)
    assert "num_heads must divide embed_dim" in message
    assert "embed_dim=64, num_heads=5" in message
    assert "[1, 2, 4, 8, 16, 32, 64]" in message


@pytest.mark.parametrize("field,value", [("depth", 0), ("depth", -1), ("num_heads", 0), ("mlp_dim", 0)])
def test_non_positive_sizes_are_rejected_naming_the_field(field, value):
    fields = dict(depth=2, num_heads=2, embed_dim=64, mlp_dim=128)
    fields[field] = value
    with pytest.raises(ValidationError, match=field):
        ModelSpec(**fields)


def test_unknown_key_is_rejected():
    with pytest.raises(ValidationError, match="num_head"):
        ModelSpec(depth=2, num_head=2, num_heads=2, embed_dim=64, mlp_dim=128)


def test_derived_sizes_follow_the_fields():
    derived = ModelSpec(depth=2, num_heads=4, embed_dim=64, mlp_dim=128, img_size=32, patch_size=8)
    assert (derived.resolved_head_dim, derived.attn_dim, derived.resolved_num_kv_heads) == (16, 64, 4)
    assert derived.num_tokens == 4 * 4 + 1  # patches and the class token
    assert derived.resolved_conditioning == "none"
    decoupled = derived.model_copy(update={"head_dim": 24, "num_heads": 6, "num_kv_heads": 2})
    assert (decoupled.resolved_head_dim, decoupled.attn_dim, decoupled.resolved_num_kv_heads) == (24, 144, 2)
    assert divisors(12) == [1, 2, 3, 4, 6, 12] and divisors(1) == [1]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(num_heads=4, num_kv_heads=3), r"num_kv_heads must divide num_heads.*num_kv_heads=3.*\[1, 2, 4\]"),
        (dict(num_heads=2, num_kv_heads=4), r"num_kv_heads must divide num_heads"),
        (dict(img_size=30, patch_size=8), r"patch_size must divide img_size.*img_size=30, patch_size=8"),
        (dict(stage_depths=(1, 1), stage_heads=(2, 2)), r"missing \['stage_dims', 'swept_stage'\]"),
        (
            dict(stage_depths=(1, 1), stage_heads=(2, 2), stage_dims=(8, 16, 32), swept_stage=1),
            r"one entry per stage.*'stage_dims': 3",
        ),
        (
            dict(stage_depths=(1, 1), stage_heads=(2, 2), stage_dims=(8, 16), swept_stage=3),
            r"swept_stage=3, stages=2",
        ),
    ],
)
def test_rules_between_fields_name_the_values(fields, message):
    with pytest.raises(ValidationError, match=message):
        ModelSpec(**{"depth": 1, "num_heads": 2, "embed_dim": 64, "mlp_dim": 128, **fields})


def test_the_swept_stage_takes_depth_heads_and_width_and_the_others_keep_their_lists():
    spec = ModelSpec(
        depth=5, num_heads=8, embed_dim=256, mlp_dim=512,
        stage_depths=(1, 1, 3, 1), stage_heads=(2, 4, 6, 8), stage_dims=(32, 64, 96, 128), swept_stage=3,
    )  # fmt: skip
    assert spec.stages() == [(1, 2, 32), (1, 4, 64), (5, 8, 256), (1, 8, 128)]
    assert ModelSpec(depth=2, num_heads=2, embed_dim=8, mlp_dim=16).stages() == [(2, 2, 8)]


def test_the_recipes_defaults_are_the_documented_ones():
    """Cramming's GLUE recipe and the training loop's defaults, as the classes' docstrings state them."""
    finetune = FinetuneSpec()
    assert (finetune.epochs, finetune.batch_size, finetune.lr, finetune.warmup_fraction) == (5, 16, 4e-5, 0.1)
    assert finetune.weight_decay == 0.01
    train = TrainSpec()
    assert (train.epochs, train.eval_every_epochs, train.compile, train.finetune) == (30, 1, False, None)
    with pytest.raises(ValidationError, match="warmup_fraction"):
        FinetuneSpec(warmup_fraction=1.0)
    with pytest.raises(ValidationError, match="label_smoothing"):
        TrainSpec(label_smoothing=1.0)
