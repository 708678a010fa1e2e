"""One module per architecture family: its timm or HF builder, the fields it accepts, and its κ definition; and
the registry of them, :data:`FAMILIES`, by name."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

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


class FamilyRegistry(Mapping[str, Family]):
    """The registered families by name (:data:`FAMILY_MODULES`), each module imported on first use."""

    def __getitem__(self, name: str) -> Family:
        module, attribute = FAMILY_MODULES[name]
        return getattr(importlib.import_module(f"workers.families.{module}"), attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(FAMILY_MODULES)

    def __len__(self) -> int:
        return len(FAMILY_MODULES)


FAMILIES = FamilyRegistry()
