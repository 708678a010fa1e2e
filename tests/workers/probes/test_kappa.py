"""κ: the probe's definition, Theorem 3.2 in numbers, and agreement with timm's own attention output."""

import itertools
import math
import statistics

import pytest
import torch

from workers.config import ModelSpec
from workers.models import build_model
from workers.probes.kappa import (
    condition_number,
    gaussian_heads_kappa,
    kappa_per_layer,
    summarise_kappa,
    theorem_kappa,
)


def test_condition_number_of_matrix_with_known_singular_values():
    torch.manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(10, 10, dtype=torch.float64))
    singular = torch.tensor([50.0, 20.0, 7.0, 3.0, 2.0, 0.5], dtype=torch.float64)
    matrix = u @ torch.diag(singular) @ v[:6, :]
    assert condition_number(matrix).item() == pytest.approx(100.0, rel=1e-9)
    assert condition_number(matrix.T).item() == pytest.approx(100.0, rel=1e-9)  # σ_min(rows, cols) either way


def test_rank_deficient_matrix_has_infinite_or_huge_kappa():
    matrix = torch.ones(4, 8, dtype=torch.float64)
    assert condition_number(matrix).item() > 1e12


@pytest.mark.parametrize("n_tokens,head_dim,num_heads", [(16, 64, 16), (32, 64, 32), (197, 64, 48)])
def test_gaussian_heads_match_theorem_3_2_when_width_far_exceeds_tokens(n_tokens, head_dim, num_heads):
    width = head_dim * num_heads
    measured = statistics.median(gaussian_heads_kappa(n_tokens, head_dim, num_heads, samples=16))
    assert measured == pytest.approx(theorem_kappa(n_tokens, width), rel=0.06)


def test_gaussian_heads_kappa_falls_towards_one_as_heads_are_added():
    medians = [statistics.median(gaussian_heads_kappa(32, 8, heads, samples=16)) for heads in (4, 8, 16, 32, 64, 128)]
    assert all(later < earlier for earlier, later in itertools.pairwise(medians))
    assert medians[-1] < 1.4
    assert medians[0] > 10


def test_theorem_value_is_infinite_when_width_does_not_exceed_tokens():
    assert math.isinf(theorem_kappa(197, 197))
    assert theorem_kappa(197, 768) == pytest.approx(
        (math.sqrt(768) + math.sqrt(197)) / (math.sqrt(768) - math.sqrt(197))
    )


def materialised_attention_blocks(model, images):
    """A = [A_1 … A_h] read from timm's own forward with attention weights materialised: the input of
    each layer's output projection, with fused attention off so softmax(QKᵀ/√d) is formed explicitly."""
    blocks = []
    handles = [
        block.attn.proj.register_forward_pre_hook(lambda _m, args: blocks.append(args[0].detach()))
        for block in model.blocks
    ]
    weights = []
    handles += [
        block.attn.attn_drop.register_forward_hook(lambda _m, _a, out: weights.append(out.detach()))
        for block in model.blocks
    ]
    for block in model.blocks:
        block.attn.fused_attn = False
    with torch.no_grad():
        model(images)
    for handle in handles:
        handle.remove()
    return blocks, weights


@pytest.mark.parametrize("head_dim", [None, 4, 24])
def test_probe_equals_direct_computation_from_materialised_attention(head_dim):
    torch.manual_seed(0)
    spec = ModelSpec(
        depth=3,
        num_heads=4,
        head_dim=head_dim,
        embed_dim=32,
        mlp_dim=64,
        img_size=16,
        patch_size=4,
        num_classes=10,
    )
    model = build_model(spec).double().eval()  # float64 throughout: ill-conditioned A must agree exactly
    images = torch.randn(5, 3, 16, 16, dtype=torch.float64)
    for block in model.blocks:
        block.attn.fused_attn = True  # the probe must not depend on attention weights being materialised
    rows = kappa_per_layer(spec, model, images)

    blocks, weights = materialised_attention_blocks(model, images)
    assert len(rows) == len(blocks) == 3
    for row, block, weight in zip(rows, blocks, weights, strict=True):
        assert torch.allclose(weight.sum(-1), torch.ones((), dtype=weight.dtype), atol=1e-9)  # really softmax rows
        direct = condition_number(block)
        assert row["kappa"] == pytest.approx(direct.median().item(), rel=1e-7)
        assert row["kappa_max"] == pytest.approx(direct.max().item(), rel=1e-7)


def test_summary_is_mean_of_medians_and_max_of_maxima():
    rows = [{"kappa": 2.0, "kappa_max": 3.0}, {"kappa": 4.0, "kappa_max": 9.0}]
    assert summarise_kappa(rows) == {"kappa_mean": 3.0, "kappa_max": 9.0}
