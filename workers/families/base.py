"""What every model family provides, and helpers the families share.

A family turns a :class:`~workers.config.ModelSpec` into a timm model, says which spec fields it accepts,
and locates its attention and MLP modules: all of them for parameter counts, and the ones κ is probed on,
each with the function that computes that layer's attention block A (its definition is in the function's
docstring).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from workers.config import ModelSpec
from workers.families.rules import (  # noqa: F401 (re-exported)
    DATA_DERIVED_FIELDS,
    OPTIONAL_FIELDS,
    STAGED_FIELDS,
    SpecProblem,
    derived_head_dim_only,
    heads_divide,
    spec_problems,
    stage_heads_divide,
)


class ModelConfigError(ValueError):
    """A shape the family cannot build; the message names the field and value."""


class PerImageBlocks(list):
    """A layer's blocks when images differ in N (sequences of different real lengths): one entry per
    image, each (sub-blocks, N_i, D)."""


# A layer's attention block: (module, the input it received, number of images) -> (images, sub-blocks, N, D),
# or a list of such tensors when sub-blocks differ in N (DaViT's windows at a padded edge), or
# PerImageBlocks when images do. Sub-blocks are the windows (DaViT) or patches (TNT inner) one image splits
# into; 1 elsewhere. Layers with ``needs_mask`` also get the probe batch's padding mask (images, N), bool,
# True for real tokens, as a fourth argument.
BlockFn = Callable[..., torch.Tensor | list[torch.Tensor]]


@dataclass(frozen=True)
class KappaLayer:
    """An attention layer the κ probe measures: where it is, what kind it is, how to form its block A."""

    name: str
    kind: str  # "self", "xca", "inner", "outer", "window", "channel", "outlook", "nystrom"
    module: nn.Module  # hooked for its input; the attention module, or the block that holds it
    block: BlockFn
    needs_mask: bool = False  # sequences: the block also takes the padding mask


@dataclass(frozen=True)
class Family:
    """How to build one architecture family, check what it accepts, and find its attention layers.

    ``accepts``: the optional spec fields (``OPTIONAL_FIELDS``) the family reads; any other that is set
    is an error. ``check`` returns further problems (rules between fields) without raising.
    ``modality``: what its input is and what it predicts: ``image`` (a float tensor (B, C, H, W), a class
    per image), ``sequence`` (a dict of ``input_ids`` and ``attention_mask``, (B, seq_len) each; a class per
    sequence), ``causal_lm`` (the same dict; the next token at every position) or ``masked_lm`` (the same
    dict; the masked tokens, then GLUE fine-tuning); ``example_input`` builds one such input of batch 1 on
    a device (FLOPs are counted on it).

    ``output_projections``: each attention layer's output projection in depth order, the module whose input
    is exactly the attention block A (B, N, h·d), where ``workers/conditioning.py`` hooks its interventions;
    None when the family has none wired (then it must not accept ``conditioning``). ``example``: a small
    shape it builds in seconds on a CPU, as spec fields (:meth:`example_spec`), for tests and docs.

    ``reference_params``: the parameter count of a spec computed without ``build``, so tests can check the
    built model against it: the upstream library's own stock model of that shape (timm's registered model
    with the same arguments, or HF's model class from the same config, none of this family's subclasses or
    replaced modules), plus or minus a closed form written out for what the family adds around it or drops
    (a classifier head; ModernBERT's prediction head). It must hold for the family's ``example``; planning
    never uses it.
    """

    name: str
    description: str
    build: Callable[[ModelSpec], nn.Module]
    attention_layers: Callable[[nn.Module], list[tuple[str, nn.Module]]]
    mlp_layers: Callable[[nn.Module], list[tuple[str, nn.Module]]]
    kappa_layers: Callable[[nn.Module], list[KappaLayer]]
    num_tokens: Callable[[ModelSpec], int]
    reference_params: Callable[[ModelSpec], int]
    accepts: tuple[str, ...] = ()
    check: Callable[[ModelSpec], list[SpecProblem]] = field(default=lambda spec: [])
    modality: str = "image"
    example_input: Callable[[ModelSpec, torch.device | str], object] = field(
        default=lambda spec, device: image_input(spec, device)
    )
    output_projections: Callable[[nn.Module], list[nn.Module]] | None = None
    example: dict = field(default_factory=dict)

    @property
    def causal(self) -> bool:
        """A position sees only itself and earlier ones (a causal LM): statistics over tokens must not look ahead."""
        return self.modality == "causal_lm"

    @property
    def padded(self) -> bool:
        """Its batches carry a padding mask (``attention_mask``, False on padding): statistics over tokens take
        each sample's real tokens only."""
        return self.modality == "sequence"

    def example_spec(self, **overrides) -> ModelSpec:
        """:attr:`example` as a ModelSpec of this family, with ``overrides``."""
        return ModelSpec(**{"family": self.name, **self.example, **overrides})

    def problems(self, spec: ModelSpec) -> list[SpecProblem]:
        """Every reason this family cannot build ``spec`` (empty when it can; ``rules.spec_problems``)."""
        return spec_problems(self.name, self.accepts, self.check, spec)

    def build_checked(self, spec: ModelSpec) -> nn.Module:
        """``build``, after ``problems``: every problem is reported at once, as a ModelConfigError."""
        problems = self.problems(spec)
        if problems:
            raise ModelConfigError(f"{self.name} cannot build this shape: " + "; ".join(map(str, problems)))
        try:
            return self.build(spec)
        except (AssertionError, ValueError, TypeError) as exc:  # not RuntimeError: out-of-memory stays oom
            raise ModelConfigError(f"timm cannot build {self.name} with {spec.model_dump()}: {exc}") from exc


def stock_params(model: nn.Module) -> int:
    """Scalar parameters of an upstream library's model (each shared tensor once), for ``reference_params``."""
    return sum(p.numel() for p in model.parameters())


def stock_timm_params(architecture: str, **kwargs) -> int:
    """Parameters of timm's registered model ``architecture`` with ``kwargs`` overriding its defaults, built
    on the meta device (random weights; nothing is downloaded)."""
    import timm

    with torch.device("meta"):
        return stock_params(timm.create_model(architecture, pretrained=False, **kwargs))


def image_input(spec: ModelSpec, device: torch.device | str):
    """One image of the spec's size, channels first: (1, C, H, W)."""
    return torch.empty(1, spec.in_chans, spec.img_size, spec.img_size, device=device)


def common_timm_kwargs(spec: ModelSpec) -> dict:
    """The constructor arguments that ViT, XCiT, TNT and VOLO name alike."""
    return dict(
        img_size=spec.img_size,
        patch_size=spec.patch_size,
        in_chans=spec.in_chans,
        num_classes=spec.num_classes,
        qkv_bias=spec.qkv_bias,
        drop_path_rate=spec.drop_path_rate,
    )


def exact_mlp_ratio(width: int, hidden: int) -> float:
    """The ratio r for which timm's ``int(width * r)`` is exactly ``hidden`` (``hidden / width`` can land
    one ulp low, and int() then rounds down to hidden - 1)."""
    ratio = hidden / width
    while int(width * ratio) < hidden:
        ratio = math.nextafter(ratio, math.inf)
    return ratio


def call_float64(module: nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
    """``module(*inputs)`` computed in float64: the inputs and the module's floating-point parameters and
    buffers are cast to float64 for this call only (the module itself keeps its dtype and weights). The κ
    blocks form A with it from a layer's captured input, so A carries float64 rounding, not float32's."""
    state = {
        name: tensor.double() if tensor.is_floating_point() else tensor
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]
    }
    cast = [x.double() if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs]
    return torch.func.functional_call(module, state, tuple(cast))


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(scale · Q Kᵀ) V over the last two dimensions: (…, N, d) inputs, (…, N, d_v) output."""
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def concat_heads(heads: torch.Tensor) -> torch.Tensor:
    """(…, h, N, d) per-head outputs to the block A = [A_1 … A_h]: (…, N, h·d), heads along channels."""
    *lead, num_heads, tokens, dim = heads.shape
    return heads.movedim(-3, -2).reshape(*lead, tokens, num_heads * dim)
