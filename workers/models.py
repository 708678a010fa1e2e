"""The model-family registry, and named variants as data.

A *family* (``workers/families/<name>.py``) knows how to turn a :class:`~workers.config.ModelSpec` into a
``torch.nn.Module``, which spec fields it accepts, and where its attention layers are (for parameter
counts and the κ probe). A *variant* is a named shape (``vit_base_patch16_224``) stored as a plain dict,
so search spaces can start from it and tests can compare it with timm's own model of that name.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from workers.conditioning import install as install_conditioning
from workers.config import ModelSpec
from workers.families import FAMILIES
from workers.families.base import Family, KappaLayer, ModelConfigError
from workers.variants import VARIANTS
from workers.vocabulary import did_you_mean

__all__ = ["FAMILIES", "VARIANTS", "Family", "KappaLayer", "ModelConfigError", "build_model", "get_family"]


def get_family(name: str) -> Family:
    """The registered family called ``name``; an unknown name lists the close matches."""
    try:
        return FAMILIES[name]
    except KeyError:
        hint = did_you_mean(name, FAMILIES)
        raise ModelConfigError(
            f"unknown model family {name!r}; {hint}known families: {', '.join(sorted(FAMILIES))}"
        ) from None


def variant_spec(name: str, **overrides) -> ModelSpec:
    """A ModelSpec for the named variant, with ``overrides`` applied (e.g. ``depth=6``)."""
    if name not in VARIANTS:
        hint = did_you_mean(name, VARIANTS)
        raise ModelConfigError(f"unknown variant {name!r}; {hint}known: {', '.join(sorted(VARIANTS))}")
    return ModelSpec(**{**VARIANTS[name], **overrides})


def build_model(spec: ModelSpec) -> nn.Module:
    """Build the model for ``spec`` with its family's builder (weights randomly initialised).

    Every field the family cannot take is reported at once, as a ModelConfigError. A ``conditioning``
    intervention is hooked in here (``workers/conditioning.py``), so every build of the spec carries it.
    """
    family = get_family(spec.family)
    return install_conditioning(spec, family.build_checked(spec), family)


def attention_layers(spec: ModelSpec, model: nn.Module) -> list[tuple[str, nn.Module]]:
    return get_family(spec.family).attention_layers(model)


def mlp_layers(spec: ModelSpec, model: nn.Module) -> list[tuple[str, nn.Module]]:
    return get_family(spec.family).mlp_layers(model)


def kappa_layers(spec: ModelSpec, model: nn.Module) -> list[KappaLayer]:
    return get_family(spec.family).kappa_layers(model)


def num_tokens(spec: ModelSpec) -> int:
    """Tokens per image that the swept attention sees (family-specific; see each family's module)."""
    return get_family(spec.family).num_tokens(spec)


def iter_modules_with_fused_attn(model: nn.Module) -> Iterator[nn.Module]:
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            yield module


def set_fused_attention(model: nn.Module, enabled: bool) -> None:
    """Switch fused SDPA on or off in every attention module (FLOP counting needs it off): timm's
    ``fused_attn`` flags, and the attention implementation of HF models (``sdpa`` or ``eager``)."""
    for module in iter_modules_with_fused_attn(model):
        module.fused_attn = enabled
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "_attn_implementation", None) in ("sdpa", "eager"):
            config._attn_implementation = "sdpa" if enabled else "eager"


def example_input(spec: ModelSpec, device: torch.device | str):
    """One sample of the input the spec's family takes (an image, or a dict of token tensors)."""
    return get_family(spec.family).example_input(spec, device)


def build_on_meta(spec: ModelSpec) -> nn.Module:
    """Build on the meta device: shapes only, no memory, no initialisation cost (for counting)."""
    with torch.device("meta"):
        return build_model(spec)
