"""Search spaces: ``search_spaces/NAME.yaml``, validated by pydantic with unknown keys rejected.

A space states the question it answers, the model family and fixed sizes, the axes to vary, how
head_dim relates to d_model, further constraints, the baseline, seeds, data, training recipe, search
(grid or Optuna), per-trial resources, the headline metric the analysis judges it on (with its direction
and tolerance), and named budget profiles that override any of these.

Loading reports every problem in the file at once (file, key path, rule, value, fix) as a
:class:`~sweep.errors.SpaceError`; nothing runs when a space is invalid.
"""

from __future__ import annotations

import copy
import difflib
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweep.errors import MISSING, ConfigIssue, SpaceError, UnknownSpaceError
from sweep.metrics import DEFAULT_METRIC, METRICS
from workers.config import DataSpec, ProbeSpec, TrainSpec
from workers.models import FAMILIES

SPACES_DIR_ENV = "SWEEP_SPACES_DIR"
AXIS_NAMES = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim")
HEAD_DIM_RULES = ("fixed_d_model", "floor_d_model", "fixed_head_dim")

# Metrics a finished trial reports; Optuna objectives and schedulers may only use these. The headline
# ones (top1, top5, accuracy, val_loss) only where the space's data set reports them (sweep/metrics.py).
REPORTED_METRICS = {
    "top1": "top-1 accuracy on held-out data, percent",
    "top5": "top-5 accuracy, percent",
    "accuracy": "sequence classification or next-token accuracy on held-out data, percent",
    "perplexity": "language models: exp(held-out loss per token)",
    "val_loss": "held-out cross-entropy",
    "params": "parameters",
    "flops_per_sample": "forward FLOPs per image",
    "peak_mem_bytes": "peak memory of a training step",
    "train_samples_per_s": "training throughput",
    "infer_samples_per_s": "inference throughput",
    "latency_b1_ms": "batch-1 latency",
    "kappa_mean": "mean over layers of median κ",
}
# Metrics known after every epoch, so an early-stopping scheduler can compare trials on them.
EPOCH_METRICS = ("top1", "accuracy", "val_loss", "perplexity", "kappa_mean")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(Strict):
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


PositiveInt = Annotated[int, Field(ge=1)]
AxisValues = Annotated[list[PositiveInt], Field(min_length=1)] | Range


class Axes(Strict):
    """Values to vary. ``head_dim`` is used by the ``fixed_head_dim`` rule only. ``family``: model families
    to run side by side on the same shapes (a control, such as softmax attention beside the Nyströmformer);
    each config is judged against its own family's baseline."""

    depth: AxisValues | None = None
    num_heads: AxisValues | None = None
    head_dim: AxisValues | None = None
    embed_dim: AxisValues | None = None
    mlp_dim: AxisValues | None = None
    family: Annotated[list[str], Field(min_length=1)] | None = None

    @field_validator("family")
    @classmethod
    def _unique_families(cls, families: list[str] | None) -> list[str] | None:
        if families is not None and len(set(families)) != len(families):
            raise ValueError(f"families must be unique, but got {families}; remove the repeats")
        return families

    def values(self, name: str) -> list[int] | None:
        axis = getattr(self, name)
        if axis is None:
            return None
        values = axis.values() if isinstance(axis, Range) else list(axis)
        return sorted(set(values))


class ModelFixed(Strict):
    """Values held fixed for every trial (an axis of the same name overrides them)."""

    family: str = "vit"
    depth: PositiveInt | None = None
    num_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    embed_dim: PositiveInt | None = None
    mlp_dim: PositiveInt | None = None
    patch_size: PositiveInt = 16
    qkv_bias: bool = True
    drop_path_rate: float = Field(default=0.0, ge=0.0, lt=1.0)
    # Family-specific (see workers/families/): the stages of DaViT and VOLO, whose swept stage the axes
    # vary, and TNT's inner transformer. A family that does not take one of these reports it.
    stage_depths: list[PositiveInt] | None = None
    stage_heads: list[PositiveInt] | None = None
    stage_dims: list[PositiveInt] | None = None
    swept_stage: PositiveInt | None = None
    inner_dim: PositiveInt | None = None
    inner_heads: PositiveInt | None = None
    # Sequence families: the Nyströmformer's landmarks and convolution, and their dropout.
    num_landmarks: PositiveInt | None = None
    conv_kernel_size: PositiveInt | None = None
    dropout: float | None = Field(default=None, ge=0.0, lt=1.0)
    tie_embeddings: bool | None = None  # language models: output layer = token embedding (GPT-2's default)


class Constraints(Strict):
    """Further rules a configuration must meet; those that fail are listed by ``sweep plan`` with why."""

    min_head_dim: PositiveInt | None = None
    max_head_dim: PositiveInt | None = None
    max_attn_dim: PositiveInt | None = None
    max_params: PositiveInt | None = None
    max_flops_per_sample: PositiveInt | None = None


class Objective(Strict):
    metric: str
    mode: Literal["max", "min"]


class GridSearch(Strict):
    kind: Literal["grid"] = "grid"


class OptunaSearchSpec(Strict):
    """Optuna through Ray Tune's OptunaSearch, define-by-run so every suggested shape obeys the rules.

    Each Optuna trial trains one seed (the space's first); ``sweep rerun`` adds seeds afterwards.
    """

    kind: Literal["optuna"]
    sampler: Literal["tpe", "random", "nsga2"] = "tpe"
    num_trials: PositiveInt = 20
    objectives: Annotated[list[Objective], Field(min_length=1)] = [Objective(metric="top1", mode="max")]
    seed: int = 0


class Scheduler(Strict):
    """Early stopping. ``asha`` stops the worse trials at rungs of epochs; they are recorded as pruned."""

    kind: Literal["none", "asha"] = "none"
    metric: str = "top1"
    mode: Literal["max", "min"] = "max"
    grace_period_epochs: PositiveInt = 1
    reduction_factor: float = Field(default=3.0, gt=1.0)


class Resources(Strict):
    """Per-trial resources, as Ray reserves them (fractions allowed to pack small trials)."""

    cpus_per_trial: float = Field(default=1.0, gt=0.0)
    gpus_per_trial: float = Field(default=0.0, ge=0.0)
    max_concurrent_trials: PositiveInt | None = None


class Metric(Strict):
    """The headline metric the analysis judges this space on (known metrics: ``sweep/metrics.py``).

    ``name``: a metric the space's data set reports (``top1``, ``accuracy``, ``val_loss`` …). ``mode``:
    ``max`` (higher is better) or ``min``; left out, the metric's own direction. ``tolerance``: how much
    worse than the baseline, in the metric's own units (points of top-1, nats of loss), still counts as
    "holds"; choose it from the data set's seed noise (0.5 points suits ImageNet top-1). Left out, the
    metric's default (0.5 for percentages; metrics in other units have none and must give one).
    """

    name: str = Field(default=DEFAULT_METRIC, min_length=1)
    mode: Literal["max", "min"] | None = None
    tolerance: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="before")
    @classmethod
    def _known_defaults(cls, data: Any) -> Any:
        """Fill ``mode`` and ``tolerance`` from the registry where the file leaves them out."""
        if not isinstance(data, dict):
            return data
        info = METRICS.get(str(data.get("name", DEFAULT_METRIC)))
        if info is None:
            return data
        filled = {"mode": info.mode, "tolerance": info.default_tolerance}
        return {**data, **{k: v for k, v in filled.items() if data.get(k) is None}}


class Published(Strict):
    """A configuration from the paper's tables, to set beside the plan's own count (``sweep plan``).

    ``shape``: the axis values that pick it out of the grid (of ``model.family`` when the space runs
    several). ``params_m``: the published parameter count in millions (ImageNet rows: 224 px, 1000
    classes); None when the paper gives none. ``score``: the published value of the space's headline
    metric (``top1`` is its older name for vision rows). ``mismatch``: when no reading of the published
    row reproduces that count within 1%, or there is no count, why; left empty, the count must match (a
    test holds both to it).
    """

    label: str = Field(min_length=1)
    shape: dict[str, PositiveInt]
    params_m: float | None = Field(default=None, gt=0.0)
    top1: float | None = None
    score: float | None = None
    mismatch: str | None = None


class Profile(Strict):
    """A named budget: overrides merged over the space (nested keys merge; lists replace)."""

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


class Space(Strict):
    """A whole search space, one profile applied (or none)."""

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
    baseline: dict[str, PositiveInt]
    seeds: Annotated[list[int], Field(min_length=1)] = [0]
    data: DataSpec = DataSpec()
    train: TrainSpec = TrainSpec()
    probes: ProbeSpec = ProbeSpec()
    search: GridSearch | OptunaSearchSpec = Field(default=GridSearch(), discriminator="kind")
    scheduler: Scheduler = Scheduler()
    resources: Resources = Resources()
    metric: Metric = Metric()
    published: list[Published] = []
    profiles: dict[str, Profile] = {}
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

    def axis_values(self, name: str) -> list[int]:
        """The values of one axis: the axis if given, else the fixed value, else empty."""
        values = self.axes.values(name)
        if values is not None:
            return values
        fixed = getattr(self.model, name)
        return [fixed] if fixed is not None else []


# --- locating and loading ---------------------------------------------------------------------------------


def spaces_dir() -> Path:
    """Where shipped spaces live: ``$SWEEP_SPACES_DIR``, else ``search_spaces/`` beside the packages."""
    override = os.environ.get(SPACES_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parent.parent / "search_spaces"


def shipped_spaces() -> dict[str, Path]:
    return {path.stem: path for path in sorted(spaces_dir().glob("*.yaml"))}


def find_space(name_or_path: str) -> Path:
    """A space by name (``vit_b_fixed_mlp``) or by path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UnknownSpaceError(f"no space file at {path}")
        return path
    shipped = shipped_spaces()
    if name_or_path in shipped:
        return shipped[name_or_path]
    close = difflib.get_close_matches(name_or_path, shipped, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise UnknownSpaceError(
        f"unknown space {name_or_path!r}; {hint}shipped spaces: {', '.join(shipped)} "
        f"(list them with `sweep spaces`, or pass a path to a YAML file)"
    )


def read_yaml(path: Path) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        issue = ConfigIssue(str(path), f"byte {exc.start}", "not UTF-8 text", MISSING, "save the file as UTF-8")
        raise SpaceError([issue]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpaceError([ConfigIssue(str(path), where, f"not valid YAML: {exc}", MISSING, "fix the syntax")]) from exc
    if not isinstance(raw, dict):
        raise SpaceError(
            [ConfigIssue(str(path), "", "a space must be a mapping of keys", raw, "see search_spaces/*.yaml")]
        )
    return raw


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` merged into a copy of ``base``: nested dicts merge, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_space(name_or_path: str, profile: str | None = None) -> tuple[str, Space, str | None]:
    """Load, validate (base and every profile, all problems together) and return
    ``(space_name, space with the chosen profile applied, profile name)``.

    ``profile`` None picks the file's ``default_profile`` (or none).
    """
    path = find_space(name_or_path)
    raw = read_yaml(path)
    file = display_path(path)
    issues, base = validate_variant(raw, file, prefix="")
    profiles = raw.get("profiles") if isinstance(raw.get("profiles"), dict) else {}
    variants: dict[str, Space | None] = {}
    for name, override in profiles.items():
        if isinstance(override, dict):
            merged = deep_merge({k: v for k, v in raw.items() if k != "profiles"}, strip_description(override))
            merged["profiles"] = profiles
            profile_issues, variants[name] = validate_variant(
                merged, file, prefix=f"profiles.{name}.", override=override
            )
            issues += [issue for issue in profile_issues if issue not in issues]
    if base is not None and base.default_profile is not None and base.default_profile not in profiles:
        issues.append(unknown_profile_issue(file, "default_profile", base.default_profile, profiles))
    chosen = profile if profile is not None else (base.default_profile if base else None)
    if chosen is not None and chosen not in profiles:
        issues.append(unknown_profile_issue(file, "--profile", chosen, profiles))
    if issues:
        raise SpaceError(issues)
    return path.stem, (variants[chosen] if chosen else base), chosen


def strip_description(override: dict) -> dict:
    return {k: v for k, v in override.items() if k != "description"}


def unknown_profile_issue(file: str, where: str, name: str, profiles: dict) -> ConfigIssue:
    close = difflib.get_close_matches(name, profiles, n=2, cutoff=0.5)
    known = ", ".join(profiles) or "none defined"
    fix = (f"did you mean {', '.join(close)}? " if close else "") + f"profiles in this space: {known}"
    return ConfigIssue(file, where, "must name a profile defined under `profiles`", name, fix)


def validate_variant(
    raw: dict, file: str, prefix: str, override: dict | None = None
) -> tuple[list[ConfigIssue], Space | None]:
    """Validate one merged variant: pydantic's structural rules, then the cross-field rules."""
    try:
        space = Space.model_validate(raw)
    except ValidationError as exc:
        return [pydantic_issue(error, file, prefix, override) for error in exc.errors()], None
    from sweep.plan import cross_field_issues  # the planner owns the rules that need shapes

    return [
        ConfigIssue(file, profile_path(issue.path, prefix, override), issue.rule, issue.value, issue.fix)
        for issue in cross_field_issues(space, file)
    ], space


def profile_path(path: str, prefix: str, override: dict | None) -> str:
    """Attribute an issue to the profile when the offending key came from the profile's overrides."""
    if override is None:
        return path
    node: Any = override
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return path
    return prefix + path


# Keys a space file may still have from an older version: the rule and the fix it gets instead of "unknown".
MOVED_KEYS = {
    "analysis": (
        "`analysis` was replaced by `metric`, the headline metric with its direction and tolerance",
        "analysis.tolerance_top1 moved to metric.tolerance: write `metric: {name: top1, mode: max, "
        "tolerance: X}` with the old value as X, and remove `analysis`",
    ),
}


def pydantic_issue(error: dict, file: str, prefix: str, override: dict | None) -> ConfigIssue:
    """Turn one pydantic error into file, key path, rule, value and fix."""
    path = format_loc(error["loc"])
    value = error.get("input", MISSING) if error["type"] != "missing" else MISSING
    rule, fix = error["msg"].removeprefix("Value error, "), fix_hint(error)
    if error["type"] == "extra_forbidden" and error["loc"][-1] in MOVED_KEYS:
        rule, fix = MOVED_KEYS[error["loc"][-1]]
    return ConfigIssue(file, profile_path(path, prefix, override), rule, value, fix)


def format_loc(loc: tuple) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in (
            "list[constrained-int]",
            "Range",
            "list[int]",
            "grid",
            "optuna",
            "function-after[_ordered(), Range]",
        ):
            continue  # union-branch labels pydantic adds; they are not keys in the file
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def fix_hint(error: dict) -> str:
    kind, ctx, loc = error["type"], error.get("ctx", {}), error["loc"]
    if kind == "extra_forbidden":
        return f"remove `{loc[-1]}` or correct its spelling{close_key_hint(loc)}"
    if kind == "missing":
        return f"add `{loc[-1]}`"
    if kind in ("greater_than_equal", "greater_than", "less_than", "less_than_equal"):
        return "use a value within the stated bound"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "write a whole number"
    if kind in ("float_type", "float_parsing"):
        return "write a number"
    if kind in ("bool_type", "bool_parsing"):
        return "write true or false"
    if kind in ("literal_error", "union_tag_invalid"):
        return f"use one of {ctx.get('expected', ctx.get('expected_tags', ''))}"
    if kind == "too_short":
        return "give at least one value"
    if kind in ("list_type", "dict_type", "model_type", "model_attributes_type"):
        return "see search_spaces/README.md for the expected shape"
    return ""


def close_key_hint(loc: tuple) -> str:
    fields = allowed_keys(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), fields, n=2, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


SECTION_MODELS = {
    "model": ModelFixed,
    "axes": Axes,
    "constraints": Constraints,
    "data": DataSpec,
    "train": TrainSpec,
    "probes": ProbeSpec,
    "scheduler": Scheduler,
    "resources": Resources,
    "search": OptunaSearchSpec,
    "metric": Metric,
}


def allowed_keys(parent: tuple) -> list[str]:
    if not parent:
        return list(Space.model_fields)
    model = SECTION_MODELS.get(str(parent[0]))
    return list(model.model_fields) if model else []


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def known_families() -> list[str]:
    return sorted(FAMILIES)
