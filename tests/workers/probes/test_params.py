"""Parameter counts (workers/probes/params.py) against timm's published count and a closed form."""

import pytest
import torch

from workers.models import build_model, variant_spec
from workers.probes.params import count_params, param_breakdown, vit_params_formula


def test_vit_base_has_timms_86_6_million_parameters():
    spec = variant_spec("vit_base_patch16_224")
    assert vit_params_formula(spec) == 86_567_656  # timm's vit_base_patch16_224, counted by timm itself
    assert round(vit_params_formula(spec) / 1e6, 1) == 86.6


@pytest.mark.parametrize("overrides", [{"num_heads": 4}, {"num_heads": 8, "head_dim": 8}])
def test_the_breakdown_sums_to_the_total_and_matches_hand_counts(overrides):
    spec = variant_spec("vit_base_patch16_224", depth=2, embed_dim=32, mlp_dim=64, **overrides)
    model = build_model(spec)
    counts = param_breakdown(spec, model)
    c, a, m = spec.embed_dim, spec.attn_dim, spec.mlp_dim
    assert counts["params_attention"] == spec.depth * (c * 3 * a + 3 * a + a * c + c)  # qkv and proj, biases
    assert counts["params_mlp"] == spec.depth * (c * m + m + m * c + c)
    assert counts["params"] == sum(p.numel() for p in model.parameters()) == vit_params_formula(spec)
    assert counts["params_embed_head"] == counts["params"] - counts["params_attention"] - counts["params_mlp"]


def test_a_shared_tensor_counts_once():
    layer = torch.nn.Linear(3, 3)
    shared = torch.nn.Sequential(layer, layer)
    assert count_params(shared) == 12
