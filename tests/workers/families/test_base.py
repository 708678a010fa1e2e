"""What every family shares (workers/families/base.py): the exact MLP ratio, the float64 call, softmax
attention and the heads' concatenation checked against torch's own, and a family's problems reported at once."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from workers.families import FAMILIES
from workers.families.base import ModelConfigError, call_float64, concat_heads, exact_mlp_ratio, softmax_attention


def test_exact_mlp_ratio_gives_the_hidden_width_timm_computes():
    for width in range(1, 3000, 37):
        for hidden in (1, width // 3 + 1, 3 * width - 1, 4 * width, 1000):
            assert int(width * exact_mlp_ratio(width, hidden)) == hidden, (width, hidden)


def test_a_field_the_family_does_not_take_is_a_problem_and_all_are_reported_at_once():
    vit = FAMILIES["vit"]
    spec = vit.example_spec(inner_dim=8, num_landmarks=4)
    assert [(p.field, p.value) for p in vit.problems(spec)] == [("inner_dim", 8), ("num_landmarks", 4)]
    with pytest.raises(ModelConfigError) as error:
        vit.build_checked(spec)
    message = str(error.value)
    assert message.startswith("vit cannot build this shape: ")
    assert "the vit family does not take inner_dim" in message and "does not take num_landmarks" in message
    assert vit.problems(vit.example_spec()) == []


def test_call_float64_computes_in_float64_and_leaves_the_module_as_it_was():
    torch.manual_seed(0)
    linear = nn.Linear(5, 3)
    x = torch.randn(4, 5)
    out = call_float64(linear, x)
    assert out.dtype == torch.float64 and linear.weight.dtype == torch.float32
    expected = x.double() @ linear.weight.double().T + linear.bias.double()
    assert torch.allclose(out, expected, rtol=0, atol=1e-12)


def test_softmax_attention_and_concat_heads_are_torchs_attention_with_heads_along_channels():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64) for _ in range(3))  # (B, h, N, d)
    heads = softmax_attention(q, k, v, scale=0.5)
    assert torch.allclose(heads, F.scaled_dot_product_attention(q, k, v, scale=0.5), atol=1e-12)
    block = concat_heads(heads)
    assert block.shape == (2, 5, 12)
    for h in range(3):
        assert torch.equal(block[:, :, 4 * h : 4 * (h + 1)], heads[:, h])
