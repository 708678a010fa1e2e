"""VOLO (workers/families/volo.py): VOLO-D1's stages, whichever one is swept, count what timm's registered
volo_d1_224 counts; the swept stage's tokens are the map its layers see; the stage rules."""

import pytest
import timm
import torch

from workers.config import ModelSpec
from workers.families import FAMILIES
from workers.models import ModelConfigError, build_model, build_on_meta, kappa_layers
from workers.probes.params import count_params

D1 = dict(stage_depths=(4, 4, 8, 2), stage_heads=(6, 12, 12, 12), stage_dims=(192, 384, 384, 384))


@pytest.mark.parametrize("swept_stage", [1, 3])
def test_volo_d1_counts_what_timm_counts_whichever_stage_is_swept(swept_stage):
    depth, heads, width = (D1[name][swept_stage - 1] for name in ("stage_depths", "stage_heads", "stage_dims"))
    spec = ModelSpec(
        family="volo", depth=depth, num_heads=heads, embed_dim=width, mlp_dim=3 * width, patch_size=8,
        qkv_bias=False, swept_stage=swept_stage, **D1,
    )  # fmt: skip
    with torch.device("meta"):
        reference = timm.create_model("volo_d1_224")
    assert count_params(build_on_meta(spec)) == count_params(reference)


@pytest.mark.parametrize(("swept_stage", "tokens"), [(1, 16), (3, 4)])
def test_the_swept_stages_tokens_are_the_map_its_layers_see(swept_stage, tokens):
    """The example at 32 px, patches of 8: a 4×4 map in stage 1, 2×2 after the one downsampling."""
    heads, width = (2, 4, 4, 4)[swept_stage - 1], (16, 32, 32, 32)[swept_stage - 1]
    example = FAMILIES["volo"].example_spec
    spec = example(swept_stage=swept_stage, depth=1, num_heads=heads, embed_dim=width, mlp_dim=3 * width)
    assert FAMILIES["volo"].num_tokens(spec) == tokens
    model = build_model(spec).eval()
    kind = "outlook" if swept_stage == 1 else "self"
    layer = next(layer for layer in kappa_layers(spec, model) if layer.kind == kind)
    seen = {}
    hook = layer.module.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0]))
    with torch.no_grad():
        model(torch.randn(2, 1, 32, 32))
    hook.remove()
    assert seen["x"].shape[1] * seen["x"].shape[2] == tokens  # (B, H, W, C)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(stage_dims=(16, 32, 32, 64)), r"stages 2 to 4 must share one width"),
        (dict(patch_size=1), r"patch_size=1: must be even and 2 × patch_size must divide img_size \(32\)"),
        (dict(stage_depths=(1, 1, 2), stage_heads=(2, 4, 4), stage_dims=(16, 32, 32)), "volo needs its four stages"),
    ],
)
def test_a_shape_volo_cannot_take_is_a_clear_error(overrides, message):
    with pytest.raises(ModelConfigError, match=message):
        build_model(FAMILIES["volo"].example_spec(**overrides))
