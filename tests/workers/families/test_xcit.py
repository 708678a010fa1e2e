"""XCiT (workers/families/xcit.py): its κ block written head by head from the layer's own weights, and the
shapes it refuses."""

import pytest
import torch

from workers.families import FAMILIES
from workers.models import ModelConfigError, build_model, kappa_layers


def small_spec(**overrides):
    return FAMILIES["xcit"].example_spec(**overrides)


def test_xcit_block_is_values_times_channel_attention():
    """XCiT's A_i = V_i · softmax(τ Q̂_iᵀ K̂_i)ᵀ, written head by head with columns normalised over tokens."""
    torch.manual_seed(1)
    spec = small_spec()
    model = build_model(spec).double().eval()
    layer = kappa_layers(spec, model)[0]
    tokens = torch.randn(2, 16, 32, dtype=torch.float64)
    with torch.no_grad():
        block = layer.block(layer.module, tokens, 2)[:, 0]
        q, k, v = layer.module.qkv(tokens).chunk(3, dim=-1)
    d = 32 // spec.num_heads
    for head in range(spec.num_heads):
        cols = slice(head * d, (head + 1) * d)
        q_hat = q[..., cols] / q[..., cols].norm(dim=1, keepdim=True)
        k_hat = k[..., cols] / k[..., cols].norm(dim=1, keepdim=True)
        weights = torch.softmax(layer.module.temperature[head] * q_hat.transpose(1, 2) @ k_hat, dim=-1)
        assert torch.allclose(block[..., cols], v[..., cols] @ weights.transpose(1, 2), atol=1e-12)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(head_dim=16), r"xcit's head_dim is embed_dim / num_heads"),
        (dict(patch_size=4), r"patch_size=4.*8 or 16"),
    ],
)
def test_a_shape_xcit_cannot_take_is_a_clear_error(overrides, message):
    with pytest.raises(ModelConfigError, match=message):
        build_model(small_spec(**overrides))
