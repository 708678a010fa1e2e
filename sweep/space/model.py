"""Search spaces: ``search_spaces/NAME.yaml``, validated by pydantic with unknown keys rejected.

A space states the question it answers, the model family and fixed sizes, the axes to vary, how
head_dim relates to d_model, further constraints, the baseline, seeds, data, training recipe, search
(grid or Optuna), per-trial resources, the headline metric the analysis judges it on (with its direction
and tolerance), and named budget profiles that override any of these.

Loading reports every problem in the file at once (file, key path, rule, value, fix) as a
:class:`~sweep.errors.SpaceError`; nothing runs when a space is invalid.
"""

from __future__ import annotations

import functools
import operator
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic.fields import FieldInfo

from sweep.choices import Tracker
from sweep.headline import Headline, with_registry_defaults
from sweep.questions import QUESTIONS, declared_axes
from sweep.questions.base import AXIS_NAMES, is_list_form  # noqa: F401 (AXIS_NAMES: read from here)
from sweep.space import SPACES_DIR_ENV  # noqa: F401 (read from here too)
from workers.batch_split import DRIVER_CPUS
from workers.config import Conditioning, ModelSpec, PositiveInt, ProbeSpec, StrictModel, TrainSpec
from workers.data.digits import DigitsData
from workers.data.registry import DataSpec
from workers.families import FAMILIES
from workers.families.rules import DATA_DERIVED_FIELDS
from workers.metrics import METRICS, epoch_metrics
from workers.variants import VARIANTS
from workers.vocabulary import did_you_mean

# Measurements a finished trial reports besides its metrics (workers/metrics.py).
MEASUREMENTS = {
    "params": "parameters",
    "flops_per_sample": "forward FLOPs per image",
    "peak_mem_bytes": "peak memory of a training step",
    "train_samples_per_s": "training throughput",
    "infer_samples_per_s": "inference throughput",
    "latency_b1_ms": "batch-1 latency",
    "kappa_mean": "mean over layers of median κ",
}


def reported_metrics() -> dict[str, str]:
    """What a finished trial reports, name: description; Optuna objectives and schedulers may only use these.
    The headline metrics only where the space's data set reports them (``MODALITY_METRICS``)."""
    return {**{name: metric.description for name, metric in METRICS.items()}, **MEASUREMENTS}


def epoch_reported() -> tuple[str, ...]:
    """What is known after every epoch, so an early-stopping scheduler can compare trials on it."""
    return (*epoch_metrics(), "kappa_mean")


REPORTED_METRICS = reported_metrics()
EPOCH_METRICS = epoch_reported()


class Range(StrictModel):
    """Integers from ``low`` to ``high`` inclusive: by ``step``, or doubling when ``scale: log2``."""

    low: int = Field(ge=1)
    high: int = Field(ge=1)
    step: int = Field(default=1, ge=1)
    scale: Literal["linear", "log2"] = "linear"

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            raise ValueError(f"`low <= high` must hold, but got (low={self.low}, high={self.high}); swap them")
        return self

    def values(self) -> list[int]:
        if self.scale == "linear":
            return list(range(self.low, self.high + 1, self.step))
        values, value = [], self.low
        while value <= self.high:
            values.append(value)
            value *= 2
        return values


AxisValues = Annotated[list[PositiveInt], Field(min_length=1)] | Range


def axis_form(axis) -> Any:
    """What ``axes:`` takes for a declared axis (``Question.axes``): whole numbers (a list or a range) or names."""
    return AxisValues if axis.item_type is int else Annotated[list[axis.item_type], Field(min_length=1)]


class KnownAxes(StrictModel):
    """Values to vary. ``head_dim`` is used by the ``fixed_head_dim`` rule only. ``family``: model families
    to run side by side on the same shapes (a control, such as softmax attention beside the Nyströmformer);
    each config is judged against its own family's baseline. ``num_kv_heads``: grouped-query attention's
    key/value heads (a value that does not divide ``num_heads`` removes that combination, with the reason).
    ``conditioning``: interventions on the attention block's conditioning (``workers/conditioning.py``),
    ``none`` among them for the model as built."""

    depth: AxisValues | None = None
    num_heads: AxisValues | None = None
    head_dim: AxisValues | None = None
    embed_dim: AxisValues | None = None
    mlp_dim: AxisValues | None = None
    num_kv_heads: AxisValues | None = None
    family: Annotated[list[str], Field(min_length=1)] | None = None
    conditioning: Annotated[list[Conditioning], Field(min_length=1)] | None = None

    @field_validator("family", "conditioning")
    @classmethod
    def _unique_names(cls, names: list[str] | None) -> list[str] | None:
        if names is not None and len(set(names)) != len(names):
            raise ValueError(f"values must be unique, but got {names}; remove the repeats")
        return names

    def values(self, name: str) -> list[int] | None:
        """An axis's values, sorted (None: the space does not vary it)."""
        axis = getattr(self, name, None)
        if axis is None:
            return None
        values = axis.values() if isinstance(axis, Range) else list(axis)
        return sorted(set(values))


class Axes(KnownAxes):
    """:class:`KnownAxes`, and the axes the questions declare (``Question.axes``) that are not among them, each
    key checked against the declarations when the space is read (so a question registered since is seen) and
    its values as its declaration says: whole numbers >= 1 (a list or a range) or names."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _declared_axes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        declared = {axis.name: axis for axis in declared_axes() if axis.name not in KnownAxes.model_fields}
        rest = {key: value for key, value in data.items() if key not in declared}
        if any(key not in KnownAxes.model_fields for key in rest):
            KnownAxes.model_validate(rest)  # raises the usual error for each unknown key, at its path
        fields = {name: (axis_form(axis) | None, None) for name, axis in declared.items()}
        given = create_model("DeclaredAxes", __base__=StrictModel, **fields).model_validate(
            {key: value for key, value in data.items() if key in declared}
        )
        return {**rest, **{key: value for key, value in given if value is not None}}


class FixedVariant(StrictModel):
    """What a space's ``model:`` section takes besides ModelSpec's fields (:data:`ModelFixed` adds those).

    ``variant``: a named shape from the family registry (``workers.variants.VARIANTS``, each timm's model of
    that name, e.g. ``deit_base_patch16_224``): its family and sizes fill every field the space leaves out,
    so a space does not retype them. Fields the space (or a profile) gives win.
    """

    variant: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _variant_fills_the_rest(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("variant") is None:
            return data
        name = data["variant"]
        if name not in VARIANTS:
            raise ValueError(
                f"variant must name a registered shape, but got {name!r}; {did_you_mean(name, VARIANTS)}"
                f"known: {', '.join(sorted(VARIANTS))}"
            )
        return {**VARIANTS[name], **data}


# ModelSpec's fields the data set decides (image size, channels, classes; sequence length, vocabulary), never
# a space's model section.
DATA_DECIDED_FIELDS = ("img_size", "in_chans", "num_classes", *DATA_DERIVED_FIELDS)
# Where a space's model section differs from ModelSpec: it names the model as built ``none`` (ModelSpec's
# None means the same; workers/conditioning.py).
FIXED_OVERRIDES: dict[str, tuple[Any, Any]] = {"conditioning": (Conditioning, "none")}


def as_yaml_lists(annotation: Any) -> Any:
    """``annotation`` with every ``tuple[X, ...]`` written ``list[X]``: a space file's lists stay lists (as
    YAML writes them, and as a type error names them)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is tuple:
        return list[as_yaml_lists(args[0])]
    if origin is Annotated:
        return Annotated[(as_yaml_lists(args[0]), *annotation.__metadata__)]
    if origin in (Union, UnionType):
        return functools.reduce(operator.or_, [as_yaml_lists(arg) for arg in args])
    return annotation


def fixed_field(field: FieldInfo) -> tuple[Any, FieldInfo]:
    """A ModelSpec field as ``model:`` takes it: the same type, bounds and default, optional (None) where
    ModelSpec requires a value, since an axis or the variant may give it instead."""
    annotation = as_yaml_lists(field.annotation)
    if not field.is_required():
        return annotation, field
    return annotation | None, FieldInfo.merge_field_infos(field, default=None)


# Values held fixed for every trial (an axis of the same name overrides them): ``variant``, then ModelSpec's
# fields (workers/config.py) with their types and bounds, less those the data set decides.
ModelFixed = create_model(
    "ModelFixed",
    __base__=FixedVariant,
    __doc__="Values held fixed for every trial (an axis of the same name overrides them): ModelSpec's "
    "fields, less those the data set decides, each optional where ModelSpec requires it; and "
    + FixedVariant.__doc__.split("\n\n", 1)[1],
    **{
        name: FIXED_OVERRIDES.get(name) or fixed_field(field)
        for name, field in ModelSpec.model_fields.items()
        if name not in DATA_DECIDED_FIELDS
    },
)


class Constraints(StrictModel):
    """Further rules a configuration must meet; those that fail are listed by ``sweep plan`` with why."""

    min_head_dim: PositiveInt | None = None
    max_head_dim: PositiveInt | None = None
    max_attn_dim: PositiveInt | None = None
    max_params: PositiveInt | None = None
    max_flops_per_sample: PositiveInt | None = None


class Objective(StrictModel):
    metric: str
    mode: Literal["max", "min"]


class GridSearch(StrictModel):
    kind: Literal["grid"] = "grid"


class OptunaSearchSpec(StrictModel):
    """Optuna through Ray Tune's OptunaSearch, define-by-run so every suggested shape obeys the rules.

    Each Optuna trial trains one seed (the space's first); ``sweep rerun`` adds seeds afterwards.
    """

    kind: Literal["optuna"]
    sampler: Literal["tpe", "random", "nsga2"] = "tpe"
    num_trials: PositiveInt = 20
    objectives: list[Objective] = Field(default=[Objective(metric="top1", mode="max")], min_length=1)
    seed: int = 0


class EdgeSearchSpec(StrictModel):
    """The edge search (docs/analysis.md): trials placed where a config's verdict against the baseline is still
    open, along each column of the lattice (every config sharing all shape axes but depth), by noisy bisection
    over depth, until every config has a verdict, measured or implied, or the budget is spent.

    The baseline gets ``baseline_seeds`` seeds first; a config starts with ``min_seeds`` and gets one more at a
    time while its verdict is open, up to ``max_seeds`` trials (failed ones included). ``alpha``: each verdict's
    error rate, Bonferroni-split over the max_seeds − min_seeds + 1 looks a config can have, so an interval stays
    valid however many seeds it got before it stopped. ``max_trials``: the most trials the search's record may
    hold (its configs' recorded rows, any run's, plus this run's); None: no cap but the verdicts' own.
    ``check_ends``: once bisection has bracketed a column's edge, also measure the column's shallowest and deepest
    configs where their verdicts are only implied, so that a column that breaks again at its deepest ("deeper
    worst" at a short budget) contradicts the assumption instead of being implied to hold. ``futility``: stop
    adding seeds to a config once even max_seeds could not give it a verdict at its current gain and the pooled
    spread (it is then inconclusive, with about the seeds it would need); it only stops without a verdict, so the
    error bound holds.
    Tolerance and direction come from the space's ``metric:``; seeds are the smallest a config has not recorded
    (the space's ``seeds:`` is not used)."""

    kind: Literal["edge"]
    min_seeds: int = Field(default=2, ge=1)  # 1: a config starts with one seed, judged on the pooled s_p
    max_seeds: int = Field(default=5, ge=2)
    baseline_seeds: int = Field(default=5, ge=2)
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    max_trials: PositiveInt | None = None
    check_ends: bool = True  # the replay bench: without it an unmeasured "deeper worst" is implied to hold
    futility: bool = True

    @model_validator(mode="after")
    def _seeds_ordered(self) -> EdgeSearchSpec:
        if self.max_seeds < self.min_seeds:
            raise ValueError(
                f"`min_seeds <= max_seeds` must hold, but got (min_seeds={self.min_seeds}, "
                f"max_seeds={self.max_seeds}); raise max_seeds"
            )
        return self


class Scheduler(StrictModel):
    """Early stopping. ``asha`` stops the worse trials at rungs of epochs; they are recorded as pruned."""

    kind: Literal["none", "asha"] = "none"
    metric: str = "top1"
    mode: Literal["max", "min"] = "max"
    grace_period_epochs: PositiveInt = 1
    reduction_factor: float = Field(default=3.0, gt=1.0)


class Resources(StrictModel):
    """Per-trial resources, as Ray reserves them (fractions allowed to pack small trials).

    ``workers_per_trial`` N > 1 trains each trial data-parallel on N workers: Ray Train's TorchTrainer,
    PyTorch DDP over gloo on CPU and NCCL on CUDA (``workers/distributed.py`` defines every number such a
    trial records). ``cpus_per_trial`` and ``gpus_per_trial`` stay the whole trial's: its Tune process,
    which only drives the workers, takes ``DRIVER_CPUS`` (0.01) of them, and each worker an equal share of
    the rest. Each worker needs whole GPUs: NCCL cannot run two ranks on one GPU. ``train.batch_size`` is
    the global batch and must be divisible by N. ``max_concurrent_trials`` left out with N > 1: as many
    trials as the cluster's CPUs and GPUs hold.
    """

    cpus_per_trial: float = Field(default=1.0, gt=0.0)
    gpus_per_trial: float = Field(default=0.0, ge=0.0)
    max_concurrent_trials: PositiveInt | None = None
    workers_per_trial: PositiveInt = 1

    @model_validator(mode="after")
    def _workers_fit(self) -> Resources:
        workers, gpus = self.workers_per_trial, self.gpus_per_trial
        if workers > 1 and self.cpus_per_trial <= DRIVER_CPUS:
            raise ValueError(
                f"`cpus_per_trial > {DRIVER_CPUS}` must hold with workers_per_trial={workers} (the trial's "
                f"driver takes {DRIVER_CPUS} CPUs and its workers the rest), but got "
                f"cpus_per_trial={self.cpus_per_trial}; give the trial more CPUs"
            )
        if workers > 1 and gpus > 0 and gpus % workers:
            raise ValueError(
                f"`gpus_per_trial` must be a whole multiple of `workers_per_trial` (each worker takes whole "
                f"GPUs: NCCL cannot run two ranks on one GPU), but got (gpus_per_trial={gpus}, "
                f"workers_per_trial={workers}); set gpus_per_trial to {workers * max(1, int(gpus // workers))}"
            )
        return self


class Published(StrictModel):
    """A configuration from the paper's tables, to set beside the plan's own count (``sweep plan``).

    ``shape``: the axis values that pick it out of the grid (of ``model.family`` when the space runs
    several). ``params_m``: the published parameter count in millions (ImageNet rows: 224 px, 1000
    classes); None when the paper gives none. ``score``: the published value of the space's headline
    metric (``top1`` is its older name for vision rows). ``mismatch``: when no reading of the published
    row reproduces that count within 1%, or there is no count, why; left empty, the count must match (a
    test holds both to it). ``source``: where the row comes from when it is not the paper the space's
    question is about (2505.20802), and under which recipe it was trained, so that a score from another
    paper's recipe is read as such (``sweep plan`` prints it).
    """

    label: str = Field(min_length=1)
    shape: dict[str, PositiveInt]
    params_m: float | None = Field(default=None, gt=0.0)
    top1: float | None = None
    score: float | None = None
    mismatch: str | None = None
    source: str | None = None


class MLflowSettings(StrictModel):
    """Where MLflow runs go. ``tracking_uri``: a database (``sqlite:///mlflow.db``) or a server
    (``http://host:5000``); left out, ``$MLFLOW_TRACKING_URI``, else MLflow's own default (``mlflow.db`` in the
    working folder). ``experiment_name``: left out, ``$MLFLOW_EXPERIMENT_NAME``, else the space's name."""

    tracking_uri: str | None = Field(default=None, min_length=1)
    experiment_name: str | None = Field(default=None, min_length=1)


class WandbSettings(StrictModel):
    """Weights & Biases. ``project``: left out, ``$WANDB_PROJECT``, else the space's name. ``mode``: ``offline``
    (the default: runs are written beside Tune's trial state, nothing leaves the machine; ``wandb sync``
    uploads them later) or ``online`` (needs ``wandb login`` or ``$WANDB_API_KEY``). ``entity``: the team or
    user that owns the project (left out: your default)."""

    project: str | None = Field(default=None, min_length=1)
    entity: str | None = Field(default=None, min_length=1)
    mode: Literal["offline", "online"] = "offline"


class TensorBoardSettings(StrictModel):
    """TensorBoard event files, a folder per trial (``<run>-<trial_id>``). ``dir``: a folder to write them
    under (``<dir>/<space>-<sweep_id>/…``); left out, ``<results>/_tune/<space>-<sweep_id>/tensorboard/…``,
    beside Tune's own trial state."""

    dir: str | None = Field(default=None, min_length=1)


class Log(StrictModel):
    """Experiment trackers every trial is also logged to, through Ray Tune's own logger callbacks; the
    Parquet results stay the record. ``trackers``: which (``--log`` adds more); the other keys are each
    tracker's settings, used when it is on. ``log: [mlflow, tensorboard]`` is short for
    ``log: {trackers: [mlflow, tensorboard]}``. Not part of a config's identity."""

    trackers: list[Tracker] = Field(default=[])
    mlflow: MLflowSettings = MLflowSettings()
    wandb: WandbSettings = WandbSettings()
    tensorboard: TensorBoardSettings = TensorBoardSettings()

    @model_validator(mode="before")
    @classmethod
    def _list_is_trackers(cls, data: Any) -> Any:
        return {"trackers": data} if isinstance(data, list) else data

    @field_validator("trackers")
    @classmethod
    def _unique_trackers(cls, trackers: list[str]) -> list[str]:
        return list(dict.fromkeys(trackers))

    def adding(self, trackers: list[str] | None) -> Log:
        """These settings with more trackers on (``--log``), each once, in order."""
        return self.model_copy(update={"trackers": list(dict.fromkeys([*self.trackers, *(trackers or [])]))})


class BaseProfile(StrictModel):
    """A named budget: overrides merged over the space (nested keys merge; lists replace). The questions'
    sections are added from the registry (:data:`Profile`): a list section replaces the space's list (scale a
    control to the profile's sizes)."""

    description: str = ""
    model: dict[str, Any] | None = None
    axes: dict[str, Any] | None = None
    head_dim_rule: list[Any] | str | None = None
    constraints: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    seeds: list[Any] | None = None
    data: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    probes: dict[str, Any] | None = None
    search: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    metric: dict[str, Any] | None = None
    published: list[Any] | None = None
    log: list[Any] | dict[str, Any] | None = None


def profile_override(question) -> Any:
    """How a profile overrides a question's section: a list section by a list, any other by a dict."""
    return (list[Any] if is_list_form(question.section_model) else dict[str, Any]) | None


# Each question's section (sweep/questions/): a profile overrides it with plain data, merged over the space's.
Profile = create_model(
    "Profile",
    __base__=BaseProfile,
    __doc__=BaseProfile.__doc__,
    **{q.section: (profile_override(q), None) for q in QUESTIONS if q.section},
)


class BaseSpace(StrictModel):
    """A whole search space, one profile applied (or none), without the questions' sections (:data:`Space`
    adds them from the registry, ``sweep/questions/``)."""

    question: str = Field(min_length=1)
    why: str = ""
    model: ModelFixed = ModelFixed()
    axes: Axes
    # fixed_d_model: head_dim = embed_dim / num_heads (must divide); floor_d_model: embed_dim // num_heads, the
    # attention just under d_model when heads do not divide it (GPT-2 at 512 with 12 heads: 12 × 42 = 504);
    # fixed_head_dim: the axes' head_dim, so heads widen attention.
    head_dim_rule: list[Literal["fixed_d_model", "floor_d_model", "fixed_head_dim"]] = Field(
        default=["fixed_d_model"], min_length=1
    )
    constraints: Constraints = Constraints()
    baseline: dict[str, PositiveInt | Conditioning]
    seeds: list[int] = Field(default=[0], min_length=1)
    data: DataSpec = DigitsData()
    train: TrainSpec = TrainSpec()
    probes: ProbeSpec = ProbeSpec()
    search: GridSearch | OptunaSearchSpec | EdgeSearchSpec = Field(default=GridSearch(), discriminator="kind")
    scheduler: Scheduler = Scheduler()
    resources: Resources = Resources()
    metric: Annotated[Headline, BeforeValidator(with_registry_defaults)] = Headline(**with_registry_defaults({}))
    published: list[Published] = Field(default=[])
    log: Log = Log()
    profiles: dict[str, Profile] = Field(default={})
    default_profile: str | None = None

    @field_validator("head_dim_rule", mode="before")
    @classmethod
    def _rule_as_list(cls, value):
        return [value] if isinstance(value, str) else value

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be unique, but got {seeds}; remove the repeats")
        return seeds

    def families(self) -> list[str]:
        """The model families the space runs: ``axes.family`` in its order, else ``model.family``."""
        return list(self.axes.family) if self.axes.family else [self.model.family]

    def axis_values(self, name: str) -> list:
        """The values of one axis: the axis if given, else the fixed value, else empty. ``conditioning`` keeps
        the space's order (its first value is the one a baseline that names none takes)."""
        if name == "conditioning":
            return list(self.axes.conditioning or [self.model.conditioning])
        values = self.axes.values(name)
        if values is not None:
            return values
        fixed = getattr(self.model, name)
        return [fixed] if fixed is not None else []


Space = create_model(
    "Space",
    __base__=BaseSpace,
    __doc__=BaseSpace.__doc__,
    **{
        q.section: (q.section_model, Field(default=q.section_default, description=q.section_doc))
        for q in QUESTIONS
        if q.section
    },
)

# The search kinds by their ``kind:`` (pydantic names the kind in an error's key path: ``search.edge.alpha``).
SEARCH_MODELS = {"grid": GridSearch, "optuna": OptunaSearchSpec, "edge": EdgeSearchSpec}

SECTION_MODELS = {
    "model": ModelFixed,
    "axes": Axes,
    "constraints": Constraints,
    "train": TrainSpec,
    "probes": ProbeSpec,
    "scheduler": Scheduler,
    "resources": Resources,
    "search": OptunaSearchSpec,
    "metric": Headline,
    "log": Log,
    **{name: model for q in QUESTIONS for name, model in q.section_models().items()},
}


def known_families() -> list[str]:
    return sorted(FAMILIES)
