"""Model families built on timm, and named variants as data.

A *family* knows how to turn a :class:`~workers.config.ModelSpec` into a ``torch.nn.Module`` and where
its attention layers are (for the κ probe). A *variant* is a named shape (``vit_base_patch16_224``) stored
as a plain dict, so search spaces can start from it and tests can compare it with timm's own model.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from timm.layers import Attention, Mlp
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from workers.config import ModelSpec


class ModelConfigError(ValueError):
    """A shape the family cannot build; the message names the field and value."""


@dataclass(frozen=True)
class Family:
    """How to build one architecture family and find its attention layers."""

    name: str
    build: Callable[[ModelSpec], nn.Module]
    attention_layers: Callable[[nn.Module], list[tuple[str, nn.Module]]]
    mlp_layers: Callable[[nn.Module], list[tuple[str, nn.Module]]]
    description: str


FAMILIES: dict[str, Family] = {}

# Named shapes, timm's names where timm has the model. Values are ModelSpec fields.
VARIANTS: dict[str, dict] = {
    "vit_tiny_patch16_224": dict(family="vit", depth=12, num_heads=3, embed_dim=192, mlp_dim=768),
    "vit_small_patch16_224": dict(family="vit", depth=12, num_heads=6, embed_dim=384, mlp_dim=1536),
    "vit_base_patch16_224": dict(family="vit", depth=12, num_heads=12, embed_dim=768, mlp_dim=3072),
    "vit_large_patch16_224": dict(family="vit", depth=24, num_heads=16, embed_dim=1024, mlp_dim=4096),
    "deit_tiny_patch16_224": dict(family="deit", depth=12, num_heads=3, embed_dim=192, mlp_dim=768),
    "deit_small_patch16_224": dict(family="deit", depth=12, num_heads=6, embed_dim=384, mlp_dim=1536),
    "deit_base_patch16_224": dict(family="deit", depth=12, num_heads=12, embed_dim=768, mlp_dim=3072),
}


def register_family(family: Family) -> Family:
    FAMILIES[family.name] = family
    return family


def get_family(name: str) -> Family:
    """The registered family called ``name``; an unknown name lists the close matches."""
    try:
        return FAMILIES[name]
    except KeyError:
        close = difflib.get_close_matches(name, FAMILIES, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ModelConfigError(
            f"unknown model family {name!r}; {hint}known families: {', '.join(sorted(FAMILIES))}"
        ) from None


def variant_spec(name: str, **overrides) -> ModelSpec:
    """A ModelSpec for the named variant, with ``overrides`` applied (e.g. ``depth=6``)."""
    if name not in VARIANTS:
        close = difflib.get_close_matches(name, VARIANTS, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ModelConfigError(f"unknown variant {name!r}; {hint}known: {', '.join(sorted(VARIANTS))}")
    return ModelSpec(**{**VARIANTS[name], **overrides})


def build_model(spec: ModelSpec) -> nn.Module:
    """Build the model for ``spec`` with its family's builder (weights randomly initialised)."""
    return get_family(spec.family).build(spec)


def attention_layers(spec: ModelSpec, model: nn.Module) -> list[tuple[str, nn.Module]]:
    return get_family(spec.family).attention_layers(model)


def mlp_layers(spec: ModelSpec, model: nn.Module) -> list[tuple[str, nn.Module]]:
    return get_family(spec.family).mlp_layers(model)


# --- ViT / DeiT (timm VisionTransformer) -----------------------------------------------------------------


def _fixed_head_dim_attention(head_dim: int) -> type[Attention]:
    """An Attention subclass whose heads have ``head_dim`` channels whatever embed_dim is.

    timm's Block builds ``attn_layer(dim, num_heads=…, …)`` and checks ``issubclass``; a subclass (not a
    functools.partial) passes that check and sets timm's own ``attn_head_dim``.
    """

    class FixedHeadDimAttention(Attention):
        def __init__(self, dim: int, num_heads: int = 8, **kwargs):
            kwargs["attn_head_dim"] = head_dim
            super().__init__(dim, num_heads=num_heads, **kwargs)

    FixedHeadDimAttention.__name__ = f"Attention_hd{head_dim}"
    return FixedHeadDimAttention


def _fixed_width_mlp(hidden_dim: int) -> type[Mlp]:
    """An Mlp subclass with exactly ``hidden_dim`` hidden units (mlp_ratio floats can round down)."""

    class FixedWidthMlp(Mlp):
        def __init__(self, in_features: int, hidden_features: int | None = None, **kwargs):
            super().__init__(in_features, hidden_features=hidden_dim, **kwargs)

    FixedWidthMlp.__name__ = f"Mlp_h{hidden_dim}"
    return FixedWidthMlp


def build_vit(spec: ModelSpec) -> nn.Module:
    """timm VisionTransformer with class token, learned positions, pre-norm blocks, token pooling."""
    attn_layer = Attention if spec.head_dim is None else _fixed_head_dim_attention(spec.head_dim)
    try:
        return VisionTransformer(
            img_size=spec.img_size,
            patch_size=spec.patch_size,
            in_chans=spec.in_chans,
            num_classes=spec.num_classes,
            embed_dim=spec.embed_dim,
            depth=spec.depth,
            num_heads=spec.num_heads,
            mlp_ratio=spec.mlp_dim / spec.embed_dim,
            qkv_bias=spec.qkv_bias,
            drop_path_rate=spec.drop_path_rate,
            attn_layer=attn_layer,
            mlp_layer=_fixed_width_mlp(spec.mlp_dim),
        )
    except (AssertionError, ValueError, TypeError) as exc:
        raise ModelConfigError(f"timm cannot build {spec.family} with {spec.model_dump()}: {exc}") from exc


def vit_attention_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``attn`` (a timm ``Attention``), in depth order."""
    return [(f"blocks.{i}.attn", block.attn) for i, block in enumerate(model.blocks)]


def vit_mlp_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each block's ``mlp`` (fc1, activation, fc2), in depth order."""
    return [(f"blocks.{i}.mlp", block.mlp) for i, block in enumerate(model.blocks)]


register_family(
    Family(
        "vit",
        build_vit,
        vit_attention_layers,
        vit_mlp_layers,
        "ViT (timm VisionTransformer), Dosovitskiy et al. 2021",
    )
)
register_family(
    Family(
        "deit",
        build_vit,
        vit_attention_layers,
        vit_mlp_layers,
        "DeiT (Touvron et al. 2021): the ViT architecture (timm builds deit_* as VisionTransformer); "
        "differs from vit in its training recipe only",
    )
)


def iter_modules_with_fused_attn(model: nn.Module) -> Iterator[nn.Module]:
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            yield module


def set_fused_attention(model: nn.Module, enabled: bool) -> None:
    """Switch timm's fused SDPA on or off in every attention module (FLOP counting needs it off)."""
    for module in iter_modules_with_fused_attn(model):
        module.fused_attn = enabled


def build_on_meta(spec: ModelSpec) -> nn.Module:
    """Build on the meta device: shapes only, no memory, no initialisation cost (for counting)."""
    with torch.device("meta"):
        return build_model(spec)
