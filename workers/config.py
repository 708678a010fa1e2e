"""The model, training recipe and probe settings of a trial: plain data, validated here.

The driver (``sweep``) builds these as JSON-able dicts; the worker validates them, so a trial can be started
from a file without Ray (``trial CONFIG.json``) and nothing but plain data crosses the boundary. Every model
rejects unknown keys. The data set's settings live with each data set (``workers/data/``), and
``workers/trial_config.py`` puts the four together. This module imports no data module.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveInt = Annotated[int, Field(ge=1)]
# Interventions on the conditioning of the attention block A (workers/conditioning.py defines each); "none"
# is the model as built.
Conditioning = Literal["none", "preconditioned", "orthogonality", "kappa_penalty"]
CONDITIONINGS: tuple[str, ...] = get_args(Conditioning)
StageList = Annotated[tuple[PositiveInt, ...], Field(min_length=1)]


class ModelSpec(StrictModel):
    """Shape of one transformer. ``head_dim`` None means ``embed_dim / num_heads`` (must divide).

    ``mlp_dim`` is the absolute hidden width of each block's MLP (ViT-B: 3072), not a ratio.

    Hierarchical families (DaViT, VOLO) have stages: ``stage_depths``, ``stage_heads`` and ``stage_dims``
    give every stage, and ``swept_stage`` (1-based) names the one that ``depth``, ``num_heads``,
    ``embed_dim`` and ``mlp_dim`` describe: those four replace the swept stage's entries, so a space's axes
    vary that stage while the lists hold the others. timm takes one MLP ratio for all stages, so every
    stage's MLP is ``mlp_dim / embed_dim`` times its width.

    TNT's inner (pixel-level) transformer: ``inner_dim`` (default ``embed_dim // 16``) and ``inner_heads``
    (default 4), as timm's tnt_s/tnt_b. Sequence families read ``seq_len``, ``vocab_size`` (from the data),
    ``num_landmarks``, ``conv_kernel_size`` and ``dropout``; their image fields keep their defaults unused.
    Which fields a family accepts is checked by the family
    (``workers.families``); a field it cannot take is an error, never ignored.
    """

    family: str = "vit"
    depth: int = Field(ge=1)
    num_heads: int = Field(ge=1)
    embed_dim: int = Field(ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    mlp_dim: int = Field(ge=1)
    patch_size: int = Field(default=16, ge=1)
    img_size: int = Field(default=224, ge=1)
    in_chans: int = Field(default=3, ge=1)
    num_classes: int = Field(default=1000, ge=1)
    qkv_bias: bool = True
    drop_path_rate: float = Field(default=0.0, ge=0.0, lt=1.0)
    stage_depths: StageList | None = None
    stage_heads: StageList | None = None
    stage_dims: StageList | None = None
    swept_stage: int | None = Field(default=None, ge=1)
    inner_dim: int | None = Field(default=None, ge=1)
    inner_heads: int | None = Field(default=None, ge=1)
    # Sequence families (workers/families/nystromformer.py, softmax_encoder.py). seq_len and vocab_size come
    # from the data set, as img_size and num_classes do; the rest from the space.
    seq_len: int | None = Field(default=None, ge=1, description="tokens per sample, padding included")
    vocab_size: int | None = Field(default=None, ge=2, description="token ids 0 … vocab_size-1; 0 pads")
    num_landmarks: int | None = Field(default=None, ge=1, description="Nyströmformer: segment means per head")
    conv_kernel_size: int | None = Field(default=None, ge=1, description="Nyströmformer: depthwise conv on V")
    dropout: float | None = Field(default=None, ge=0.0, lt=1.0, description="sequence families' dropout")
    tie_embeddings: bool | None = Field(
        default=None, description="language models: the output layer is the token embedding (None: family default)"
    )
    num_kv_heads: int | None = Field(
        default=None,
        ge=1,
        description="grouped-query attention: key/value heads, each shared by num_heads / num_kv_heads query "
        "heads (None: num_heads, multi-head attention)",
    )
    conditioning: Conditioning | None = Field(
        default=None, description="an intervention on the attention block's conditioning (None: none)"
    )
    conditioning_weight: float | None = Field(
        default=None, gt=0.0, description="the penalty's weight λ (None: the intervention's default)"
    )

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelSpec:
        if self.head_dim is None and self.embed_dim % self.num_heads != 0:
            raise ValueError(
                f"num_heads must divide embed_dim when head_dim is derived, but got "
                f"(embed_dim={self.embed_dim}, num_heads={self.num_heads}); "
                f"choose num_heads from {divisors(self.embed_dim)} or set head_dim explicitly"
            )
        if self.num_kv_heads is not None and (self.num_kv_heads > self.num_heads or self.num_heads % self.num_kv_heads):
            raise ValueError(
                f"num_kv_heads must divide num_heads (each key/value head serves an equal group of query heads), "
                f"but got (num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}); "
                f"choose num_kv_heads from {divisors(self.num_heads)}"
            )
        if self.img_size % self.patch_size != 0:
            raise ValueError(
                f"patch_size must divide img_size, but got (img_size={self.img_size}, patch_size={self.patch_size})"
            )
        return self

    @model_validator(mode="after")
    def _stages_agree(self) -> ModelSpec:
        lists = {name: getattr(self, name) for name in ("stage_depths", "stage_heads", "stage_dims")}
        given = {name: len(value) for name, value in lists.items() if value is not None}
        if not given and self.swept_stage is None:
            return self
        if len(given) < 3 or self.swept_stage is None:
            missing = [name for name in (*lists, "swept_stage") if getattr(self, name) is None]
            raise ValueError(f"stages need stage_depths, stage_heads, stage_dims and swept_stage; missing {missing}")
        if len(set(given.values())) != 1:
            raise ValueError(f"stage_depths, stage_heads and stage_dims must have one entry per stage, got {given}")
        if self.swept_stage > len(self.stage_depths):
            raise ValueError(
                f"`swept_stage <= number of stages` must hold, but got "
                f"(swept_stage={self.swept_stage}, stages={len(self.stage_depths)})"
            )
        return self

    @property
    def resolved_num_kv_heads(self) -> int:
        """Key/value heads: ``num_kv_heads``, or ``num_heads`` (multi-head attention) when unset."""
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    @property
    def resolved_conditioning(self) -> str:
        return self.conditioning or "none"

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.embed_dim // self.num_heads

    @property
    def attn_dim(self) -> int:
        """Width of the concatenated attention block A = [A_1 … A_h]: num_heads · head_dim."""
        return self.num_heads * self.resolved_head_dim

    @property
    def num_tokens(self) -> int:
        """Tokens per image seen by a ViT's attention: patches plus the class token."""
        return (self.img_size // self.patch_size) ** 2 + 1

    def stages(self) -> list[tuple[int, int, int]]:
        """(depth, num_heads, width) of every stage, the swept stage's taken from depth/num_heads/embed_dim."""
        if self.swept_stage is None:
            return [(self.depth, self.num_heads, self.embed_dim)]
        stages = list(zip(self.stage_depths, self.stage_heads, self.stage_dims, strict=True))
        stages[self.swept_stage - 1] = (self.depth, self.num_heads, self.embed_dim)
        return stages


class FinetuneSpec(StrictModel):
    """Fine-tuning a pretrained encoder on each GLUE task (``workers/finetune.py``): AdamW, linear warm-up over
    ``warmup_fraction`` of the steps then cosine decay to ``min_lr``, cross-entropy (mean squared error for
    STS-B), no label smoothing. Defaults are cramming's GLUE recipe (5 epochs, batch 16, learning rate 4e-5,
    10% warm-up, weight decay 0.01). ``max_steps`` caps each task's steps."""

    epochs: int = Field(default=5, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=16, ge=1)
    eval_batch_size: int = Field(default=128, ge=1)
    lr: float = Field(default=4e-5, gt=0.0)
    min_lr: float = Field(default=0.0, ge=0.0)
    weight_decay: float = Field(default=0.01, ge=0.0)
    warmup_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    grad_clip_norm: float | None = Field(default=None, gt=0.0)


class TrainSpec(StrictModel):
    """Recipe: AdamW, linear warm-up then cosine decay (per step), label smoothing, gradient clipping.

    The budget is ``epochs``, or ``max_steps`` when set (then epochs is an upper bound).

    Speed options (``workers/train.py`` applies them): ``compile`` runs the training step's forward and
    backward through ``torch.compile`` (evaluation and probes stay eager); ``channels_last`` stores 4-D
    weights and image batches channels-last (sequence models have none, so it changes nothing there).
    AdamW is fused on CUDA whenever every parameter is there; that needs no option.

    Evaluation: the whole held-out split after every ``eval_every_epochs``-th epoch and after the last
    one. Every epoch (1, the default) is what the paper's recipes do; on a data set whose held-out split
    is large beside its training split (CIFAR's is a fifth of it) that costs about a third of that share
    of the training time again, and a larger k buys it back at the price of sparser learning curves.
    """

    epochs: int = Field(default=30, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=64, ge=1)
    eval_batch_size: int = Field(default=256, ge=1)
    eval_every_epochs: int = Field(
        default=1,
        ge=1,
        description="held-out evaluation after every k-th epoch and after the last; the epochs between have "
        "no val_* values and report no metric to the scheduler",
    )
    lr: float = Field(default=1e-3, gt=0.0)
    min_lr: float = Field(default=1e-5, ge=0.0)
    weight_decay: float = Field(default=0.05, ge=0.0)
    warmup_steps: int = Field(default=50, ge=0)
    label_smoothing: float = Field(default=0.1, ge=0.0, lt=1.0)
    grad_clip_norm: float | None = Field(default=1.0, gt=0.0)
    amp_bf16: bool = Field(default=True, description="bf16 autocast; applies on CUDA only")
    deterministic: bool = True
    compile: bool = Field(
        default=False,
        description="torch.compile the model for training steps; the first compiled step's wall time is compile_s",
    )
    channels_last: bool = Field(
        default=False, description="image models: channels-last memory format for 4-D weights and image batches"
    )
    finetune: FinetuneSpec | None = Field(
        default=None, description="masked LMs: the GLUE fine-tuning recipe after pretraining (None: cramming's)"
    )


class ProbeSpec(StrictModel):
    """Measurement settings. κ is probed on a fixed batch of validation images.

    ``throughput_warmup_steps`` is also the training throughput's warm-up (steps left out of the timed
    window at the start of each attempt). For the end-of-trial probes (inference throughput, batch-1 and
    per-token latency) it, ``throughput_steps`` and ``latency_iters`` are maxima: with
    ``probe_time_fraction`` set, those probes together may spend that fraction of the trial's ``train_s``,
    and each runs as many of its iterations as fit in its share, timed from its first pass, never fewer than
    two timed ones for a latency (a median) and one for inference throughput (a window)
    (``workers/probes/throughput.py``: ``iteration_counts``). None: always the maxima."""

    kappa_samples: int = Field(default=16, ge=1)
    kappa_every_epochs: int = Field(default=1, ge=0, description="0: only after training")
    throughput_warmup_steps: int = Field(default=3, ge=0)
    throughput_steps: int = Field(default=10, ge=1)
    latency_iters: int = Field(default=20, ge=1)
    memory: bool = True
    probe_time_fraction: float | None = Field(
        default=0.02,
        gt=0.0,
        le=1.0,
        description="end-of-trial probes' time, all together, as a share of train_s; None: no bound",
    )


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]
