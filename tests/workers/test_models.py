"""Model registry (workers/models.py): every named variant counts what timm's model of that name counts, the
parameters split into parts that sum, an unknown family named with the close ones."""

import pytest
import timm
import torch

from workers.models import VARIANTS, ModelConfigError, build_on_meta, get_family, variant_spec
from workers.probes.params import count_params, param_breakdown


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_params_equal_timm(name):
    ours = count_params(build_on_meta(variant_spec(name)))
    with torch.device("meta"):
        reference = count_params(timm.create_model(name))
    assert ours == reference


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


def test_unknown_family_lists_close_matches():
    with pytest.raises(ModelConfigError, match="did you mean vit"):
        get_family("vitt")
