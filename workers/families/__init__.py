"""One module per architecture family: its timm or HF builder, the fields it accepts, and its κ definition; and
the registry of them, :data:`FAMILIES`, by name."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the base imports torch; the registry and the descriptions do not need it
    from workers.families.base import Family

# Each family by name: its module here and the Family there (adding a family: its module and a line here). A
# module is imported when its family is first asked for, so a process that plans or trains vision models never
# loads HF transformers (about 2.5 s a process on 2 cores), nor one that trains language models timm's.
FAMILY_MODULES: dict[str, tuple[str, str]] = {
    "vit": ("vit", "VIT"),
    "deit": ("vit", "DEIT"),
    "xcit": ("xcit", "XCIT"),
    "tnt": ("tnt", "TNT_FAMILY"),
    "davit": ("davit", "DAVIT"),
    "volo": ("volo", "VOLO_FAMILY"),
    "nystromformer": ("nystromformer", "NYSTROMFORMER"),
    "softmax_encoder": ("softmax_encoder", "SOFTMAX_ENCODER"),
    "gpt2": ("gpt2", "GPT2"),
    "crammed_bert": ("crammed_bert", "CRAMMED_BERT"),
}

# Each family's one-line description, here so that `sweep spaces` lists the families without importing their
# modules (timm, transformers); each module's Family reads its own.
FAMILY_DESCRIPTIONS: dict[str, str] = {
    "vit": "ViT (timm VisionTransformer), Dosovitskiy et al. 2021",
    "deit": "DeiT (Touvron et al. 2021): the ViT architecture (timm builds deit_* as VisionTransformer); "
    "differs from vit in its training recipe only",
    "xcit": "XCiT (timm Xcit), El-Nouby et al. 2021: cross-covariance attention over channels",
    "tnt": "TNT (timm TNT), Han et al. 2021: inner attention over pixels, outer attention over patches",
    "davit": "DaViT (timm DaVit), Ding et al. 2022: window and channel attention, four stages",
    "volo": "VOLO (timm VOLO), Yuan et al. 2022: outlook attention in stage 1, self-attention after",
    "nystromformer": "Nyströmformer (HF transformers), Xiong et al. 2021: Nyström-approximated self-attention",
    "softmax_encoder": "BERT-style encoder with exact softmax attention (HF transformers): the Nyströmformer's control",
    "gpt2": "GPT-2 causal language model (HF transformers), Radford et al. 2019; head_dim, num_kv_heads settable",
    "crammed_bert": "Crammed BERT masked LM (HF ModernBERT layers: pre-norm, no bias, gated MLP), Geiping & "
    "Goldstein 2023",
}


class FamilyRegistry(Mapping[str, "Family"]):
    """The registered families by name (:data:`FAMILY_MODULES`), each module imported on first use."""

    def __getitem__(self, name: str) -> Family:
        module, attribute = FAMILY_MODULES[name]
        return getattr(importlib.import_module(f"workers.families.{module}"), attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(FAMILY_MODULES)

    def __len__(self) -> int:
        return len(FAMILY_MODULES)


FAMILIES = FamilyRegistry()
