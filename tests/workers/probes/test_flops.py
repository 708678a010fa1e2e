"""Forward FLOPs per sample (workers/probes/flops.py) against a hand count."""

import pytest

from workers.config import ModelSpec
from workers.models import variant_spec
from workers.probes.flops import forward_flops_per_sample


def vit_forward_flops(spec: ModelSpec) -> int:
    """Matmul FLOPs of a ViT forward on one image, written out by hand (2 FLOPs per multiply-add)."""
    n, c, a, m = spec.num_tokens, spec.embed_dim, spec.attn_dim, spec.mlp_dim
    patches = n - 1
    embed = 2 * patches * c * spec.in_chans * spec.patch_size**2
    block = 2 * n * c * 3 * a + 2 * 2 * n * n * a + 2 * n * a * c + 2 * 2 * n * c * m
    head = 2 * c * spec.num_classes
    return embed + spec.depth * block + head


@pytest.mark.parametrize("overrides", [{}, {"num_heads": 24, "head_dim": 16, "depth": 6}])
def test_flops_equal_hand_count(overrides):
    spec = variant_spec("vit_base_patch16_224", **overrides)
    assert forward_flops_per_sample(spec) == vit_forward_flops(spec)


def test_vit_base_flops_are_35_1_gflops():
    flops = forward_flops_per_sample(variant_spec("vit_base_patch16_224"))
    assert flops / 1e9 == pytest.approx(35.13, abs=0.01)  # timm quotes 17.6 GMACs
