"""What each model family takes, told without building one: the spec fields it accepts, the input it reads
(``modality``) and the rules between fields it checks (``check``), with the helpers those rules share.

Apart from the family modules (which import torch and timm or HF transformers) so that validating and planning
a space, which ask every shape's family whether it can build it, import neither. Each family module's
``Family`` takes its ``accepts``, ``check`` and ``modality`` from :data:`FAMILY_RULES`, so they are said once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.config import ModelSpec

# The spec fields that only some families accept (the rest apply to every family).
OPTIONAL_FIELDS = (
    "head_dim", "stage_depths", "stage_heads", "stage_dims", "swept_stage", "inner_dim", "inner_heads",
    "seq_len", "vocab_size", "num_landmarks", "conv_kernel_size", "dropout", "tie_embeddings",
    "num_kv_heads", "conditioning", "conditioning_weight",
)  # fmt: skip

# Of those, the ones the data set decides (as it decides img_size and num_classes), never a space's model.
DATA_DERIVED_FIELDS = ("seq_len", "vocab_size")

STAGED_FIELDS = ("head_dim", "stage_depths", "stage_heads", "stage_dims", "swept_stage")

SEQUENCE_FIELDS = ("head_dim", "seq_len", "vocab_size", "dropout")  # head_dim: only embed_dim / num_heads

STEM_STRIDE = 4  # DaViT's stem: a stride-4 convolution

STAGES = 4  # timm's VOLO: outlook attention and downsampling are set per stage for four stages

DEFAULT_LANDMARKS = 64  # the authors' LRA runs: nystrom-64
DEFAULT_CONV_KERNEL = 35  # the authors' LRA runs: conv_kernel_size 35

DEFAULT_INNER_HEADS = 4  # TNT's inner attention heads when inner_heads is left out


@dataclass(frozen=True)
class SpecProblem:
    """One reason a family cannot build a spec: the field, its value, the rule and how to fix it."""

    field: str
    value: object
    rule: str
    fix: str

    def __str__(self) -> str:
        return f"model.{self.field}={self.value!r}: {self.rule}; {self.fix}"


def derived_head_dim_only(spec: ModelSpec, family: str, why: str) -> list[SpecProblem]:
    """Families whose q, k, v projections map embed_dim to embed_dim: head_dim is embed_dim / num_heads."""
    if spec.head_dim is None or spec.head_dim * spec.num_heads == spec.embed_dim:
        return []
    return [
        SpecProblem(
            "head_dim",
            spec.head_dim,
            f"{family}'s head_dim is embed_dim / num_heads ({why})",
            "remove head_dim (or set it to embed_dim / num_heads) and vary embed_dim to widen attention",
        )
    ]


def heads_divide(field_name: str, heads: int, width: int, where: str) -> list[SpecProblem]:
    if width % heads == 0:
        return []
    return [SpecProblem(field_name, heads, f"must divide {where} ({width})", "choose a divisor of the width")]


def stage_heads_divide(spec: ModelSpec) -> list[SpecProblem]:
    """Each stage's heads must divide that stage's width (the swept stage's included)."""
    problems = []
    for index, (_, heads, width) in enumerate(spec.stages(), start=1):
        problems += heads_divide(f"stage_heads[{index - 1}]", heads, width, f"stage {index}'s width")
    return problems


# --- each family's rules (its module builds it) ---


def check_sequence(spec: ModelSpec, family: str, why_head_dim: str) -> list[SpecProblem]:
    """Rules every sequence family shares: a sequence data set, and head_dim = d_model / heads."""
    problems = derived_head_dim_only(spec, family, why_head_dim)
    if spec.seq_len is None or spec.vocab_size is None:
        problems.append(
            SpecProblem(
                "seq_len",
                spec.seq_len,
                f"{family} reads token sequences, so the data set must give seq_len and vocab_size",
                "use a sequence data set (data.name: listops or lra_listops)",
            )
        )
    return problems


def check_davit(spec: ModelSpec) -> list[SpecProblem]:
    problems = derived_head_dim_only(spec, "davit", "its q, k, v project each stage's width to itself")
    if spec.swept_stage is None:
        problems.append(
            SpecProblem(
                "stage_depths",
                None,
                "davit needs its stages",
                "set stage_depths, stage_heads, stage_dims and swept_stage (davit_base: see VARIANTS)",
            )
        )
        return problems
    problems += stage_heads_divide(spec)
    if spec.patch_size != STEM_STRIDE:
        problems.append(
            SpecProblem("patch_size", spec.patch_size, "DaViT's stem is a stride-4 convolution", "set patch_size: 4")
        )
    return problems


def check_gpt2(spec: ModelSpec) -> list[SpecProblem]:
    problems = []
    if spec.seq_len is None or spec.vocab_size is None:
        problems.append(
            SpecProblem(
                "seq_len",
                spec.seq_len,
                "gpt2 is a language model, so the data set must give seq_len and vocab_size",
                "use a language-model data set (data.name: mqar or tinystories)",
            )
        )
    if spec.head_dim is None and spec.embed_dim % spec.num_heads:
        problems.append(SpecProblem("num_heads", spec.num_heads, "must divide embed_dim", "or set head_dim"))
    return problems


def landmarks(spec: ModelSpec) -> int:
    return spec.num_landmarks or min(DEFAULT_LANDMARKS, spec.seq_len)


def check_nystromformer(spec: ModelSpec) -> list[SpecProblem]:
    problems = check_sequence(spec, "nystromformer", "HF's q, k, v project hidden_size to hidden_size")
    if spec.seq_len is None:
        return problems
    m = landmarks(spec)
    if m > spec.seq_len or spec.seq_len % m:
        problems.append(
            SpecProblem(
                "num_landmarks",
                m,
                f"must divide seq_len ({spec.seq_len}): HF averages Q and K over m segments of seq_len / m positions",
                "choose a divisor of seq_len, or pad seq_len up to a multiple (LRA's 2000 → 2048 for 64 landmarks)",
            )
        )
    kernel = spec.conv_kernel_size or DEFAULT_CONV_KERNEL
    if kernel % 2 == 0:
        problems.append(
            SpecProblem("conv_kernel_size", kernel, "must be odd (HF pads kernel // 2 on each side)", "use an odd size")
        )
    return problems


def inner_dim(spec: ModelSpec) -> int:
    return spec.inner_dim if spec.inner_dim is not None else max(1, spec.embed_dim // 16)


def inner_heads(spec: ModelSpec) -> int:
    return spec.inner_heads if spec.inner_heads is not None else DEFAULT_INNER_HEADS


def check_tnt(spec: ModelSpec) -> list[SpecProblem]:
    problems = derived_head_dim_only(spec, "tnt", "timm's TNT attention keeps q, k, v at the block's width")
    problems += heads_divide("inner_heads", inner_heads(spec), inner_dim(spec), "inner_dim")
    return problems


def check_volo(spec: ModelSpec) -> list[SpecProblem]:
    problems = derived_head_dim_only(spec, "volo", "its q, k, v project each stage's width to itself")
    if spec.swept_stage is None or len(spec.stage_depths) != STAGES:
        got = None if spec.stage_depths is None else len(spec.stage_depths)
        fix = "set four stage_depths, stage_heads and stage_dims, and swept_stage"
        return [*problems, SpecProblem("stage_depths", got, "volo needs its four stages", fix)]
    stages = spec.stages()
    problems += stage_heads_divide(spec)
    if len({width for _, _, width in stages[1:]}) != 1:
        problems.append(
            SpecProblem(
                "stage_dims",
                [width for *_, width in stages],
                "stages 2 to 4 must share one width (VOLO downsamples once, after stage 1)",
                "give stages 2 to 4 the same width",
            )
        )
    if spec.patch_size % 2 or spec.img_size % (2 * spec.patch_size):
        problems.append(
            SpecProblem(
                "patch_size",
                spec.patch_size,
                f"must be even and 2 × patch_size must divide img_size ({spec.img_size}): VOLO halves the grid",
                "use 8 at 224 px",
            )
        )
    return problems


def check_xcit(spec: ModelSpec) -> list[SpecProblem]:
    problems = derived_head_dim_only(spec, "xcit", "XCA's q, k, v project embed_dim to embed_dim")
    if spec.patch_size not in (8, 16):
        problems.append(
            SpecProblem("patch_size", spec.patch_size, "XCiT's convolutional patch embedding takes 8 or 16", "use 16")
        )
    return problems


def check_softmax_encoder(spec: ModelSpec) -> list[SpecProblem]:
    return check_sequence(spec, "softmax_encoder", "BERT's q, k, v project hidden_size to hidden_size")


def check_crammed_bert(spec: ModelSpec) -> list[SpecProblem]:
    return check_sequence(spec, "crammed_bert", "ModernBERT's Wqkv maps d_model to 3 · d_model")


def no_check(spec: ModelSpec) -> list[SpecProblem]:
    return []


@dataclass(frozen=True)
class FamilyRules:
    """What a family takes (``workers.families.base.Family`` documents each field): the optional spec fields it
    ``accepts``, its further rules (``check``) and its ``modality``."""

    accepts: tuple[str, ...] = ()
    check: Callable[[ModelSpec], list[SpecProblem]] = no_check
    modality: str = "image"

    def family_fields(self) -> dict:
        """These rules as ``Family`` keyword arguments."""
        return {"accepts": self.accepts, "check": self.check, "modality": self.modality}


def spec_problems(name: str, accepts: tuple[str, ...], check: Callable, spec: ModelSpec) -> list[SpecProblem]:
    """Every reason family ``name`` cannot build ``spec`` (empty when it can): each optional field set that it
    does not accept, then its own rules."""
    found = [
        SpecProblem(field, getattr(spec, field), f"the {name} family does not take {field}", "remove it")
        for field in OPTIONAL_FIELDS
        if getattr(spec, field) is not None and field not in accepts
    ]
    return found + check(spec)


_VIT_RULES = FamilyRules(accepts=("head_dim", "conditioning", "conditioning_weight"))
# Every registered family's rules, by the name workers/families/__init__.py registers it under.
FAMILY_RULES: dict[str, FamilyRules] = {
    "vit": _VIT_RULES,
    "deit": _VIT_RULES,  # the ViT architecture
    "xcit": FamilyRules(accepts=("head_dim",), check=check_xcit),
    "tnt": FamilyRules(accepts=("head_dim", "inner_dim", "inner_heads"), check=check_tnt),
    "davit": FamilyRules(accepts=STAGED_FIELDS, check=check_davit),
    "volo": FamilyRules(accepts=STAGED_FIELDS, check=check_volo),
    "nystromformer": FamilyRules(
        accepts=(*SEQUENCE_FIELDS, "num_landmarks", "conv_kernel_size"), check=check_nystromformer, modality="sequence"
    ),
    "softmax_encoder": FamilyRules(
        accepts=(*SEQUENCE_FIELDS, "conditioning", "conditioning_weight"),
        check=check_softmax_encoder,
        modality="sequence",
    ),
    "gpt2": FamilyRules(
        accepts=(
            "head_dim",
            "seq_len",
            "vocab_size",
            "dropout",
            "tie_embeddings",
            "num_kv_heads",
            "conditioning",
            "conditioning_weight",
        ),
        check=check_gpt2,
        modality="causal_lm",
    ),
    "crammed_bert": FamilyRules(
        accepts=("head_dim", "seq_len", "vocab_size", "dropout", "num_kv_heads"),
        check=check_crammed_bert,
        modality="masked_lm",
    ),
}


def family_problems(name: str, spec: ModelSpec) -> list[SpecProblem]:
    """:func:`spec_problems` of the registered family ``name`` (a ``KeyError`` for an unknown one)."""
    rules = FAMILY_RULES[name]
    return spec_problems(name, rules.accepts, rules.check, spec)
