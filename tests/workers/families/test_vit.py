"""ViT and DeiT (workers/families/vit.py): timm's ViT with head_dim decoupled from the width and an exact MLP
width; the counts against timm's ViT-B and a closed form."""

import pytest

from workers.config import ModelSpec
from workers.models import build_model, build_on_meta, variant_spec
from workers.probes.params import count_params, vit_params_formula


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


def test_mlp_width_is_exact_even_when_ratio_is_not_a_round_float():
    spec = ModelSpec(depth=1, num_heads=3, embed_dim=96, mlp_dim=100, img_size=32, patch_size=8)
    assert build_model(spec).blocks[0].mlp.fc1.out_features == 100


def test_decoupled_head_dim_allows_non_dividing_heads():
    spec = ModelSpec(depth=1, num_heads=5, head_dim=8, embed_dim=64, mlp_dim=128, img_size=16, patch_size=4)
    assert build_model(spec).blocks[0].attn.qkv.out_features == 3 * 40
