"""Named model shapes (``vit_base_patch16_224``), each timm's model of that name, as plain ModelSpec fields:
spaces start from them (``model.variant``) and tests compare them with timm's own models
(``workers.models.variant_spec`` builds one). Apart from ``workers/models.py`` (torch) so that reading a space
imports no torch."""

from __future__ import annotations

_DAVIT_B = dict(stage_depths=(1, 1, 9, 1), stage_heads=(4, 8, 16, 32), stage_dims=(128, 256, 512, 1024))
_DAVIT_L = dict(stage_depths=(1, 1, 9, 1), stage_heads=(6, 12, 24, 48), stage_dims=(192, 384, 768, 1536))
_VOLO_D3 = dict(
    stage_depths=(8, 8, 16, 4), stage_heads=(8, 16, 16, 16), stage_dims=(256, 512, 512, 512), qkv_bias=False
)

# Named shapes, each timm's model of that name (a test checks the parameter counts are equal). Values are
# ModelSpec fields; hierarchical variants sweep their third stage, the one the paper's rows change.
VARIANTS: dict[str, dict] = {
    "vit_tiny_patch16_224": dict(family="vit", depth=12, num_heads=3, embed_dim=192, mlp_dim=768),
    "vit_small_patch16_224": dict(family="vit", depth=12, num_heads=6, embed_dim=384, mlp_dim=1536),
    "vit_base_patch16_224": dict(family="vit", depth=12, num_heads=12, embed_dim=768, mlp_dim=3072),
    "vit_large_patch16_224": dict(family="vit", depth=24, num_heads=16, embed_dim=1024, mlp_dim=4096),
    "deit_tiny_patch16_224": dict(family="deit", depth=12, num_heads=3, embed_dim=192, mlp_dim=768),
    "deit_small_patch16_224": dict(family="deit", depth=12, num_heads=6, embed_dim=384, mlp_dim=1536),
    "deit_base_patch16_224": dict(family="deit", depth=12, num_heads=12, embed_dim=768, mlp_dim=3072),
    "xcit_medium_24_p16_224": dict(family="xcit", depth=24, num_heads=8, embed_dim=512, mlp_dim=2048),
    "xcit_large_24_p16_224": dict(family="xcit", depth=24, num_heads=16, embed_dim=768, mlp_dim=3072),
    "tnt_b_patch16_224": dict(
        family="tnt", depth=12, num_heads=10, embed_dim=640, mlp_dim=2560, inner_dim=40, inner_heads=4, qkv_bias=False
    ),
    "davit_base": dict(
        family="davit", depth=9, num_heads=16, embed_dim=512, mlp_dim=2048, patch_size=4, swept_stage=3, **_DAVIT_B
    ),
    "davit_large": dict(
        family="davit", depth=9, num_heads=24, embed_dim=768, mlp_dim=3072, patch_size=4, swept_stage=3, **_DAVIT_L
    ),
    "volo_d3_224": dict(
        family="volo", depth=16, num_heads=16, embed_dim=512, mlp_dim=1536, patch_size=8, swept_stage=3, **_VOLO_D3
    ),
}
