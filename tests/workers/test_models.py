"""Model registry: shapes build as asked, and parameter counts equal timm's and an independent formula."""

import pytest
import timm
import torch
from pydantic import ValidationError

from workers.config import ModelSpec
from workers.models import VARIANTS, ModelConfigError, build_model, build_on_meta, get_family, variant_spec
from workers.probes.params import count_params, param_breakdown, vit_params_formula


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_params_equal_timm(name):
    ours = count_params(build_on_meta(variant_spec(name)))
    with torch.device("meta"):
        reference = count_params(timm.create_model(name))
    assert ours == reference


def test_vit_base_is_86_6m():
    params = count_params(build_on_meta(variant_spec("vit_base_patch16_224")))
    assert params == 86_567_656
    assert round(params / 1e6, 1) == 86.6


@pytest.mark.parametrize(
    "overrides",
    [
        dict(num_heads=12),
        dict(num_heads=24, head_dim=64),  # attention widens to 1536 at d_model 768
        dict(num_heads=48, head_dim=16),
        dict(num_heads=6, head_dim=32, depth=3, mlp_dim=1000),
    ],
)
def test_params_equal_formula_with_decoupled_head_dim(overrides):
    spec = variant_spec("vit_base_patch16_224", **overrides)
    model = build_on_meta(spec)
    assert count_params(model) == vit_params_formula(spec)
    attn = model.blocks[0].attn
    assert attn.qkv.out_features == 3 * spec.attn_dim
    assert attn.proj.in_features == spec.attn_dim
    assert model.blocks[0].mlp.fc1.out_features == spec.mlp_dim


def test_param_breakdown_sums_and_matches_components():
    spec = variant_spec("vit_base_patch16_224", num_heads=24, head_dim=32, depth=4)
    parts = param_breakdown(spec, build_on_meta(spec))
    c, a = spec.embed_dim, spec.attn_dim
    tokens, classes, patch = (spec.img_size // spec.patch_size) ** 2 + 1, spec.num_classes, spec.patch_size
    embed = 3 * patch * patch * c + c + c + tokens * c  # patch conv and bias, class token, positions
    norms = spec.depth * 4 * c + 2 * c  # two LayerNorms per block (scale and shift), the final one
    assert parts["params_embed_head"] == embed + norms + c * classes + classes
    assert parts["params_attention"] == spec.depth * (c * 3 * a + 3 * a + a * c + c)
    assert parts["params_mlp"] == spec.depth * (c * spec.mlp_dim + spec.mlp_dim + spec.mlp_dim * c + c)


def test_mlp_width_is_exact_even_when_ratio_is_not_a_round_float():
    spec = ModelSpec(depth=1, num_heads=3, embed_dim=96, mlp_dim=100, img_size=32, patch_size=8)
    assert build_model(spec).blocks[0].mlp.fc1.out_features == 100


def test_heads_not_dividing_width_is_a_clear_error():
    with pytest.raises(ValidationError) as info:
        ModelSpec(depth=2, num_heads=5, embed_dim=64, mlp_dim=128)
    message = str(info.value)
    assert "num_heads must divide embed_dim" in message
    assert "embed_dim=64, num_heads=5" in message
    assert "[1, 2, 4, 8, 16, 32, 64]" in message


def test_decoupled_head_dim_allows_non_dividing_heads():
    spec = ModelSpec(depth=1, num_heads=5, head_dim=8, embed_dim=64, mlp_dim=128, img_size=16, patch_size=4)
    assert build_model(spec).blocks[0].attn.qkv.out_features == 3 * 40


@pytest.mark.parametrize("field,value", [("depth", 0), ("depth", -1), ("num_heads", 0), ("mlp_dim", 0)])
def test_non_positive_sizes_are_rejected_naming_the_field(field, value):
    fields = dict(depth=2, num_heads=2, embed_dim=64, mlp_dim=128)
    fields[field] = value
    with pytest.raises(ValidationError, match=field):
        ModelSpec(**fields)


def test_unknown_family_lists_close_matches():
    with pytest.raises(ModelConfigError, match="did you mean vit"):
        get_family("vitt")


def test_unknown_key_is_rejected():
    with pytest.raises(ValidationError, match="num_head"):
        ModelSpec(depth=2, num_head=2, num_heads=2, embed_dim=64, mlp_dim=128)
