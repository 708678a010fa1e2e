"""TNT (workers/families/tnt.py): with inner_dim and inner_heads left out, a TNT-S shape counts what timm's
registered tnt_s_patch16_224 counts (the defaults are timm's); the inner κ blocks are one per patch, over its
pixel tokens; a shape it cannot take is refused."""

import pytest
import timm
import torch

from workers.config import ModelSpec
from workers.families import FAMILIES
from workers.models import ModelConfigError, build_model, build_on_meta, kappa_layers
from workers.probes.params import count_params


def test_the_inner_defaults_are_timms_tnt_s():
    spec = ModelSpec(family="tnt", depth=12, num_heads=6, embed_dim=384, mlp_dim=1536, qkv_bias=False)
    model = build_on_meta(spec)
    with torch.device("meta"):
        reference = timm.create_model("tnt_s_patch16_224")
    assert count_params(model) == count_params(reference)
    assert model.blocks[0].attn_in.num_heads == 4 and model.blocks[0].attn_in.qk.in_features == 384 // 16


def test_the_inner_blocks_are_one_per_patch_over_its_pixels():
    """The example at 32 px with patches of 8: 16 patches of (8 / 4)² = 4 pixel tokens, inner width 8."""
    spec = FAMILIES["tnt"].example_spec()
    model = build_model(spec).eval()
    inner = next(layer for layer in kappa_layers(spec, model) if layer.kind == "inner")
    seen = {}
    hook = inner.module.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0]))
    with torch.no_grad():
        model(torch.randn(3, 1, 32, 32))
        hook.remove()
        block = inner.block(inner.module, seen["x"], 3)
    assert block.shape == (3, 16, 4, 8) and block.dtype == torch.float64


def test_inner_heads_must_divide_inner_dim():
    with pytest.raises(ModelConfigError, match=r"inner_heads=3: must divide inner_dim \(8\)"):
        build_model(FAMILIES["tnt"].example_spec(inner_heads=3))
