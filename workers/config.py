"""The trial's configuration: the plain data a trial is started from.

The driver (``sweep``) builds these as JSON-able dicts; the worker validates them here, so a trial can be
started from a file without Ray (``trial CONFIG.json``) and nothing but plain data crosses the boundary.
Every model rejects unknown keys.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveInt = Annotated[int, Field(ge=1)]
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

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelSpec:
        if self.head_dim is None and self.embed_dim % self.num_heads != 0:
            raise ValueError(
                f"num_heads must divide embed_dim when head_dim is derived, but got "
                f"(embed_dim={self.embed_dim}, num_heads={self.num_heads}); "
                f"choose num_heads from {divisors(self.embed_dim)} or set head_dim explicitly"
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


LM_DATA_SETS = ("mqar", "tinystories")  # language-model data: a label per token (workers/lm_data.py)
MLM_DATA_SETS = ("mlm_corpus",)  # masked-LM pretraining text, then GLUE (workers/mlm_data.py)
# Token sequences (the model's seq_len and vocab_size come from the data); the other data sets are images.
SEQUENCE_DATA_SETS = ("listops", "lra_listops", *LM_DATA_SETS, *MLM_DATA_SETS)
MQAR_DEFAULT_VOCAB_SIZE = 256  # small, for CPU runs; Zoology's default is 8,192
TEXT_DEFAULT_VOCAB_SIZE = 4096  # a byte-level BPE trained here when no tokenizer.json is given


class ListOpsSpec(StrictModel):
    """ListOps generated with the Long-Range Arena's grammar (``workers/listops.py`` defines every term).
    The defaults are LRA's. Rows are kept when ``min_length < length < max_length`` (strict; the length
    counts tokens, parentheses not included). ``seed`` is the data set's generation seed: the same for every
    trial of a sweep, not the trial seed."""

    max_depth: int = Field(default=10, ge=1, description="operators nest at most max_depth - 1 deep")
    max_args: int = Field(default=10, ge=2, description="arguments per operator: 2 … max_args")
    min_length: int = Field(default=500, ge=0, description="rows kept have length > min_length")
    max_length: int = Field(default=2000, ge=2, description="rows kept have length < max_length")
    train_rows: int = Field(default=96000, ge=1)
    val_rows: int = Field(default=2000, ge=1)
    test_rows: int = Field(default=2000, ge=1)
    seed: int = Field(default=0, description="generation seed of the data set, shared by every trial")

    @model_validator(mode="after")
    def _lengths_possible(self) -> ListOpsSpec:
        self.options()  # ValueError stating the rule and the values when no row can be kept
        return self

    def options(self):
        """The grammar's parameters as :class:`workers.listops.ListOpsOptions`."""
        from workers.listops import ListOpsOptions

        return ListOpsOptions(self.max_depth, self.max_args, self.min_length, self.max_length)


def check_mqar(vocab_size: int, num_kv_pairs: int, seq_len: int) -> None:
    """``ValueError`` stating the rule and the values when MQAR sequences of this shape cannot be built."""
    if seq_len % 2:
        raise ValueError(f"mqar: seq_len must be even (Zoology's rule), but got (seq_len={seq_len})")
    if 4 * num_kv_pairs > seq_len:
        raise ValueError(
            "mqar: 4 * num_kv_pairs <= seq_len must hold (the context of 2k tokens and k query slots, 2 tokens "
            f"apart, must fit), but got (num_kv_pairs={num_kv_pairs}, seq_len={seq_len})"
        )
    if num_kv_pairs > vocab_size // 2 - 1:
        raise ValueError(
            "mqar: num_kv_pairs <= vocab_size // 2 - 1 must hold (distinct keys from 1 … vocab_size//2 - 1), "
            f"but got (num_kv_pairs={num_kv_pairs}, vocab_size={vocab_size})"
        )


class MQARSpec(StrictModel):
    """Multi-query associative recall (Arora et al. 2023, Zoology), generated here (``workers/lm_data.py``
    defines a sequence and its scored positions). The defaults are Zoology's except ``vocab_size`` (Zoology:
    8,192; 256 here keeps CPU models small). ``seed`` is the data set's generation seed, shared by every
    trial; the sequence length is ``data.seq_len``."""

    vocab_size: int = Field(default=MQAR_DEFAULT_VOCAB_SIZE, ge=4, description="keys: 1 … V/2-1, values: V/2 … V-1")
    num_kv_pairs: int = Field(default=8, ge=1, description="key-value pairs at the start of each sequence")
    power_a: float = Field(default=0.01, gt=0.0, description="gap of each query: P(gap g) ∝ (g+1)^(power_a-1)")
    train_rows: int = Field(default=100_000, ge=1)
    val_rows: int = Field(default=3_000, ge=1)
    seed: int = Field(default=0, ge=0, description="generation seed of the data set, shared by every trial")


class TextSpec(StrictModel):
    """A local text corpus (TinyStories) tokenised and packed for next-token prediction (``workers/lm_data.py``).

    ``tokenizer``: a ``tokenizer.json`` (HF ``tokenizers``; absolute, or relative to the data root); left
    out, the data root's ``tokenizer.json`` when there is one, else a byte-level BPE of ``vocab_size``
    (default 4,096) trained here on the training text and cached. ``train_tokens`` / ``val_tokens``: keep
    the first that many token ids of each split's stream (None: the whole split)."""

    tokenizer: str | None = Field(default=None, description="tokenizer.json to read instead of training one")
    vocab_size: int | None = Field(default=None, ge=257, description="trained tokenizer: 256 bytes + merges + 1")
    train_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the training text")
    val_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the validation text")
    expected_vocab_size: int | None = Field(
        default=None,
        ge=2,
        description="the given tokenizer's vocabulary size (GPT-2's: 50,257), to plan without the data; "
        "checked against the tokenizer when it is read",
    )

    @model_validator(mode="after")
    def _one_tokenizer(self) -> TextSpec:
        if self.tokenizer is not None and self.vocab_size is not None:
            raise ValueError(
                "vocab_size is for a tokenizer trained here; a given tokenizer.json has its own, but got "
                f"(tokenizer={self.tokenizer!r}, vocab_size={self.vocab_size})"
            )
        return self


CRAMMING_GLUE_TASKS = ("mnli", "mnli_mm", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte")  # cramming: no WNLI


class CorpusSpec(StrictModel):
    """Masked-LM pretraining text (Crammed BERT; ``workers/mlm_data.py`` defines every step).

    ``source``: ``folder`` reads ``data.root`` (or ``$MLM_CORPUS_ROOT``): ``train.txt`` and ``valid.txt``, one
    document per non-empty line, or a ``datasets`` ``DatasetDict`` saved to disk (``train`` and ``validation``
    splits, a ``text`` column); ``generated`` writes ``generated_sentences`` sentences of a small English-like
    grammar (``workers.glue.generated_corpus``), for runs with no files. ``tokenizer``: a ``tokenizer.json``
    with ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (absolute, or relative to the root); left out, the root's
    ``tokenizer.json`` when there is one, else a WordPiece of ``vocab_size`` ids (cramming's: 32,768,
    lower-cased, accents stripped) trained here on the training text and cached. ``mask_prob``: the share of
    tokens masked (cramming: 0.25), each replaced by ``[MASK]`` with probability 0.8, by a random token with
    0.1, kept with 0.1. ``seed``: generation and the fixed masking of the validation split."""

    source: Literal["folder", "generated"] = "folder"
    generated_sentences: int = Field(default=20_000, ge=10, description="source: generated only")
    tokenizer: str | None = Field(default=None, description="tokenizer.json to read instead of training one")
    vocab_size: int | None = Field(default=None, ge=16, description="WordPiece trained here (default 32,768)")
    train_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the training text")
    val_tokens: int | None = Field(default=None, ge=2, description="token ids kept from the validation text")
    mask_prob: float = Field(default=0.25, gt=0.0, lt=1.0, description="share of tokens masked (cramming: 0.25)")
    seed: int = Field(default=0, ge=0, description="generation and validation masking seed, shared by every trial")

    @model_validator(mode="after")
    def _one_tokenizer(self) -> CorpusSpec:
        if self.tokenizer is not None and self.vocab_size is not None:
            raise ValueError(
                "vocab_size is for a tokenizer trained here; a given tokenizer.json has its own, but got "
                f"(tokenizer={self.tokenizer!r}, vocab_size={self.vocab_size})"
            )
        return self


class GlueSpec(StrictModel):
    """The GLUE tasks a pretrained encoder is fine-tuned and scored on (``workers/glue.py``, ``workers/finetune.py``).

    ``root``: the ``glue_data`` folder (``<TASK>/{train,dev}.tsv``), or ``$GLUE_DIR``. ``tasks``: cramming's
    eight tasks with MNLI's matched and mismatched dev sets counted apart (their GLUE average). ``generated``:
    write the generated ``synthetic`` task (``generated_train_rows`` / ``generated_dev_rows``) under the cache
    instead of reading a root; it only checks that the pipeline runs. ``limit_train`` / ``limit_dev``: keep
    the first rows of each task's split."""

    root: str | None = None
    tasks: Annotated[list[str], Field(min_length=1)] = list(CRAMMING_GLUE_TASKS)
    generated: bool = False
    generated_train_rows: int = Field(default=2000, ge=2)
    generated_dev_rows: int = Field(default=500, ge=2)
    limit_train: int | None = Field(default=None, ge=1)
    limit_dev: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _known_tasks(self) -> GlueSpec:
        from workers.glue import GLUE_TASKS

        unknown = [task for task in self.tasks if task not in GLUE_TASKS]
        if unknown:
            raise ValueError(f"unknown GLUE tasks {unknown}; known: {', '.join(GLUE_TASKS)}")
        if self.generated and self.tasks != ["synthetic"]:
            raise ValueError(
                f"generated GLUE data is the one task 'synthetic', but got (tasks={self.tasks}); "
                "set tasks: [synthetic], or generated: false and a root"
            )
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks must be unique, but got {self.tasks}")
        return self


class DataSpec(StrictModel):
    """Where the trial's images or token sequences come from. Nothing is ever downloaded.

    - ``digits``: scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes), embedded.
    - ``cifar10`` / ``cifar100``: torchvision's on-disk format under ``root`` (or ``$CIFAR_ROOT``).
    - ``imagefolder``: ``root/train/<class>/*`` and ``root/val/<class>/*`` (or ``$IMAGENET_ROOT``).
    - ``listops``: ListOps generated with LRA's grammar (options in ``listops``, LRA's by default), cached
      under ``$SWEEP_CACHE_DIR/listops/``.
    - ``lra_listops``: LRA's own ``basic_{train,val,test}.tsv`` under ``root`` (or ``$LRA_ROOT``).
    - ``mqar``: multi-query associative recall generated here (options in ``mqar``); a label per token.
    - ``tinystories``: TinyStories' text under ``root`` (or ``$TINYSTORIES_ROOT``), tokenised and packed
      for next-token prediction (options in ``text``); cached under ``$SWEEP_CACHE_DIR/tinystories/``.
    - ``mlm_corpus``: masked-LM pretraining text under ``root`` (or ``$MLM_CORPUS_ROOT``), or generated
      (options in ``corpus``), then the GLUE tasks in ``glue`` (Crammed BERT).

    The sequence data sets need ``seq_len`` (tokens per sample after truncation and padding) and score
    the headline metric on ``eval_split``; ``limit_train`` / ``limit_val`` keep the first rows (``limit_val``
    of the eval split). For image data sets ``seq_len``, ``eval_split``, ``listops``, ``mqar`` and ``text``
    are errors, and are left out of the dump so image configs serialise exactly as before these fields
    existed (``mqar`` and ``text`` are left out for every other data set, so ListOps configs do too). The
    language-model data sets (``LM_DATA_SETS``) are scored on ``val`` only.
    """

    name: Literal[
        "digits", "cifar10", "cifar100", "imagefolder", "listops", "lra_listops", "mqar", "tinystories", "mlm_corpus"
    ] = "digits"
    root: str | None = None
    img_size: int | None = Field(default=None, ge=1, description="resize to this; None keeps the native size")
    num_classes: int | None = Field(
        default=None,
        ge=2,
        description="imagefolder: classes expected (ImageNet: 1000), for planning without the data",
    )
    val_fraction: float = Field(default=0.2, gt=0.0, lt=1.0, description="digits only: held-out share")
    split_seed: int = Field(default=0, description="digits only: fixed split, shared by every trial")
    num_workers: int | None = Field(
        default=None,
        ge=0,
        description="DataLoader worker processes for on-disk data sets (imagefolder); None: the trial's CPUs "
        "minus one for the training process (workers.data.loader_settings); sweep/trial --data-workers sets it",
    )
    limit_train: int | None = Field(default=None, ge=1, description="use only the first N training images")
    limit_val: int | None = Field(default=None, ge=1, description="use only the first N validation images")
    seq_len: int | None = Field(
        default=None, ge=1, description="sequence data: tokens per sample after truncation and padding"
    )
    eval_split: Literal["val", "test"] = Field(
        default="val", description="sequence data: the held-out split the headline metric is scored on"
    )
    listops: ListOpsSpec | None = Field(default=None, description="name: listops only; None means LRA's options")
    mqar: MQARSpec | None = Field(default=None, description="name: mqar only; None means MQARSpec()'s defaults")
    text: TextSpec | None = Field(default=None, description="name: tinystories only; None means TextSpec()'s")
    corpus: CorpusSpec | None = Field(default=None, description="name: mlm_corpus only; None means CorpusSpec()'s")
    glue: GlueSpec | None = Field(default=None, description="name: mlm_corpus only; None means GlueSpec()'s")

    @model_validator(mode="after")
    def _fields_fit_the_data_set(self) -> DataSpec:
        if self.name in SEQUENCE_DATA_SETS:
            self._check_sequence_fields()
        else:
            self._check_no_sequence_fields()
        return self

    def _check_sequence_fields(self) -> None:
        """A sequence data set: a length, no image size, and only its own options."""
        if self.seq_len is None:
            raise ValueError(
                f"seq_len is required for the sequence data set {self.name!r} (tokens per sample after "
                "truncation and padding; LRA uses 2000), but got (seq_len=None)"
            )
        if self.img_size is not None:
            raise ValueError(
                f"img_size is for image data sets, but got (name={self.name!r}, img_size={self.img_size}); "
                "sequence data sets take seq_len"
            )
        if self.listops is not None and self.name != "listops":
            raise ValueError(
                f"listops options only go with name: listops (lra_listops reads LRA's files as they are), "
                f"but got (name={self.name!r}, listops={self.listops.model_dump()})"
            )
        owners = {"mqar": "mqar", "text": "tinystories", "corpus": "mlm_corpus", "glue": "mlm_corpus"}
        for field, owner in owners.items():
            if getattr(self, field) is not None and self.name != owner:
                raise ValueError(
                    f"{field} options only go with name: {owner}, but got "
                    f"(name={self.name!r}, {field}={getattr(self, field).model_dump()})"
                )
        if self.name in (*LM_DATA_SETS, *MLM_DATA_SETS) and self.eval_split != "val":
            raise ValueError(
                "the language-model data sets ("
                + ", ".join((*LM_DATA_SETS, *MLM_DATA_SETS))
                + f") have a val split only, but got "
                f"(name={self.name!r}, eval_split={self.eval_split!r})"
            )
        if self.name == "mqar":
            options = self.mqar or MQARSpec()
            check_mqar(options.vocab_size, options.num_kv_pairs, self.seq_len)

    def _check_no_sequence_fields(self) -> None:
        """An image data set takes none of the sequence options."""
        wrong = {
            "seq_len": self.seq_len,
            "eval_split": self.eval_split if self.eval_split != "val" else None,
            "listops": self.listops,
            "mqar": self.mqar,
            "text": self.text,
            "corpus": self.corpus,
            "glue": self.glue,
        }
        given = [name for name, value in wrong.items() if value is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} only for the sequence data sets "
                f"({', '.join(SEQUENCE_DATA_SETS)}), but got "
                f"(name={self.name!r}, " + ", ".join(f"{name}={getattr(self, name)!r}" for name in given) + ")"
            )

    @model_serializer(mode="wrap")
    def _dump_without_sequence_fields_for_images(self, handler):
        """Image data sets dump without seq_len, eval_split and listops (always unset there), and every data
        set without the other data sets' ``mqar`` and ``text``, so configs, and the ids hashed from them,
        stay what they were before those fields existed."""
        dumped = handler(self)
        if not isinstance(dumped, dict):
            return dumped
        if self.name not in SEQUENCE_DATA_SETS:
            for name in ("seq_len", "eval_split", "listops"):
                dumped.pop(name, None)
        for name, owner in (
            ("mqar", "mqar"),
            ("text", "tinystories"),
            ("corpus", "mlm_corpus"),
            ("glue", "mlm_corpus"),
        ):
            if self.name != owner:
                dumped.pop(name, None)
        return dumped


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

    @model_serializer(mode="wrap")
    def _dump_without_unset_options(self, handler):
        """Without ``finetune`` when it is unset, nor ``compile`` / ``channels_last`` when off, nor
        ``eval_every_epochs`` at 1, so recipes (and the config ids hashed from them) stay what they were
        before those fields existed. Set, they are part of the id: compiled kernels and memory formats change
        the floating-point results slightly, and an evaluation cadence changes what a scheduler sees."""
        dumped = handler(self)
        if isinstance(dumped, dict):
            if self.finetune is None:
                dumped.pop("finetune", None)
            for name in ("compile", "channels_last"):
                if not getattr(self, name):
                    dumped.pop(name, None)
            if self.eval_every_epochs == 1:
                dumped.pop("eval_every_epochs", None)
        return dumped


class ProbeSpec(StrictModel):
    """Measurement settings. κ is probed on a fixed batch of validation images.

    ``throughput_warmup_steps`` is also the training throughput's warm-up (steps left out of the timed
    window at the start of each attempt). For the end-of-trial probes (inference throughput, batch-1 and
    per-token latency) it, ``throughput_steps`` and ``latency_iters`` are maxima: with
    ``probe_time_fraction`` set, those probes together may spend that fraction of the trial's ``train_s``,
    and each runs as many of its iterations as fit in its share, timed from its first pass, never fewer than
    two timed ones for a latency (a median) and one for inference throughput (a window)
    (``workers/probes/throughput.py``: ``iteration_counts``). None: always the maxima.
    ``probe_time_fraction`` is left out of the dump at its default, so config ids hashed before it existed
    stay what they were (it changes how many passes a probe averages over, not what it measures)."""

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

    @model_serializer(mode="wrap")
    def _dump_without_default_time_fraction(self, handler):
        dumped = handler(self)
        if isinstance(dumped, dict) and self.probe_time_fraction == DEFAULT_PROBE_TIME_FRACTION:
            dumped.pop("probe_time_fraction", None)
        return dumped


DEFAULT_PROBE_TIME_FRACTION = ProbeSpec.model_fields["probe_time_fraction"].default


class TrialConfig(StrictModel):
    """Everything one trial needs. ``seed`` seeds weights, data order and augmentation."""

    model: ModelSpec
    data: DataSpec = DataSpec()
    train: TrainSpec = TrainSpec()
    probes: ProbeSpec = ProbeSpec()
    seed: int = 0
    device: str = Field(default="auto", description="auto (cuda if available), cpu, cuda, cuda:N")
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads; None leaves torch's choice")


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]
