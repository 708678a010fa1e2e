"""DaViT (workers/families/davit.py): padded windows' rows are dropped from κ's blocks, and the shapes it
refuses, every problem at once."""

import pytest
import torch

from workers.families import FAMILIES
from workers.models import ModelConfigError, build_model, kappa_layers
from workers.probes.kappa import kappa_per_layer


def small_spec(**overrides):
    return FAMILIES["davit"].example_spec(**overrides)


def test_davit_drops_padding_rows_so_small_maps_have_finite_kappa():
    """At 32 px DaViT's maps are 8, 4, 2 and 1 tokens a side: every window is padded, and the padded rows
    (bias only, identical) would make A rank-deficient if they were kept."""
    torch.manual_seed(0)
    spec = small_spec()
    model = build_model(spec).eval()
    rows = kappa_per_layer(spec, model, torch.randn(4, 1, 32, 32))
    window = [row for row in rows if row["attention"] == "window"]
    assert len(window) == 1 + 1 + 2 + 1
    assert all(torch.isfinite(torch.tensor(row["kappa_max"])) for row in window)
    layer = next(layer for layer in kappa_layers(spec, model) if layer.kind == "window")
    groups = layer.block(layer.module, torch.randn(4, 8, 8, 8), 4)  # an 8×8 map: windows of 7×7, 7×1, 1×7, 1×1
    assert sorted(group.shape[-2] for group in groups) == [1, 7, 7, 49]


def test_every_problem_is_reported_at_once():
    spec = small_spec(patch_size=8, stage_heads=(3, 2, 4, 8), inner_dim=4)
    with pytest.raises(ModelConfigError) as error:
        build_model(spec)
    assert str(error.value).count("model.") == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(patch_size=8), r"stride-4 convolution; set patch_size: 4"),
        (dict(stage_heads=(3, 2, 4, 8)), r"stage_heads\[0\]=3: must divide stage 1's width \(8\)"),
    ],
)
def test_a_shape_davit_cannot_take_is_a_clear_error(overrides, message):
    with pytest.raises(ModelConfigError, match=message):
        build_model(small_spec(**overrides))
