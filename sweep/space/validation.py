"""The rules a space must meet that span several keys, or need the shapes it enumerates, and the check
that its data set is on this machine. Each rule returns every problem it finds as a
:class:`~sweep.errors.ConfigIssue` (none raise), so a file's problems are all reported together.

Rules about one section alone are pydantic validators on the models in ``sweep/space/model.py`` (and in each
question's module, ``sweep/questions/``). The shapes are the ones the plan uses (``shapes.py``'s ``survey``,
made once per space and reused by ``make_plan``); the questions' problems are those the survey recorded.
"""

from __future__ import annotations

import dataclasses

from sweep.errors import MISSING, ConfigIssue, DataUnavailableError
from sweep.headline import direction_words, tolerance_unit
from sweep.questions import QUESTIONS, axis_names
from sweep.space.model import EPOCH_METRICS, REPORTED_METRICS, Space, known_families
from sweep.space.shapes import FAMILY_KEYS, VALUED_AXES, Shape, resolve_baseline, shape_problems, survey
from workers.batch_split import BatchSplitError, per_worker_batch
from workers.data.base import DataNotFoundError
from workers.families.rules import FAMILY_RULES
from workers.metrics import METRICS, MODALITY_METRICS, natural_mode
from workers.vocabulary import did_you_mean


def space_issues(space: Space, file: str) -> list[ConfigIssue]:
    """Every cross-field problem of a space that passed its models' own validation."""
    return [*cross_field_issues(space, file), *batch_split_issues(space, file)]


def batch_split_issues(space: Space, file: str) -> list[ConfigIssue]:
    """``train.batch_size`` is the global batch: with several workers per trial it must split evenly."""
    try:
        per_worker_batch(space.train.batch_size, space.resources.workers_per_trial)
    except BatchSplitError as exc:
        workers = space.resources.workers_per_trial
        rule = f"must be divisible by resources.workers_per_trial={workers} (each worker trains on its share)"
        return [ConfigIssue(file, "train.batch_size", rule, space.train.batch_size, str(exc).rsplit("; ", 1)[1])]
    return []


def cross_field_issues(space: Space, file: str) -> list[ConfigIssue]:
    """Rules that span several keys; every one found is returned (none raise)."""
    issues = [
        *family_list_issues(space, file),
        *axis_value_issues(space, file),
        *key_name_issues(space, file),
        *patch_size_issues(space, file),
        *metric_issues(space, file),
        *search_issues(space, file),
        *resource_and_seed_issues(space, file),
    ]
    if any(issue.path.startswith(("model.family", "axes.family")) for issue in issues):
        return issues  # the shapes below need families that exist
    try:
        shaped = shape_issues(space, file)
    except FileNotFoundError as exc:  # sizing the models reads a file the space names (a tokenizer) that is not there
        shaped = [ConfigIssue(file, "data", str(exc), MISSING, "")]
    if not issues and not any(not issue.note for issue in shaped):
        shaped += question_issues(space, file)
    return issues + shaped


def question_issues(space: Space, file: str) -> list[ConfigIssue]:
    """What each question finds wrong, in registry order: its own checks of its section, else what it recorded
    while the plan added its shapes."""
    recorded, issues = survey(space).issues, []
    for question in QUESTIONS:
        issues += question.space_issues(space, file) or [
            dataclasses.replace(issue, file=file) for issue in recorded[question.name]
        ]
    return issues


def axis_value_issues(space: Space, file: str) -> list[ConfigIssue]:
    """Every valued axis has values, and head_dim values are given exactly when a rule uses them."""
    issues: list[ConfigIssue] = []
    add = lambda path, rule, value, fix: issues.append(ConfigIssue(file, path, rule, value, fix))  # noqa: E731
    for name in VALUED_AXES:
        if not space.axis_values(name):
            add(
                f"axes.{name}",
                f"{name} needs values: an axis or a fixed value under `model`",
                None,
                f"add axes.{name}: [...] or model.{name}: N",
            )
    if "fixed_head_dim" in space.head_dim_rule and not space.axis_values("head_dim"):
        add(
            "head_dim_rule",
            "the fixed_head_dim rule needs head_dim values",
            "fixed_head_dim",
            "add axes.head_dim: [...] or model.head_dim: N",
        )
    if "fixed_head_dim" not in space.head_dim_rule and space.axes.head_dim is not None:
        add(
            "axes.head_dim",
            "head_dim is derived (embed_dim / num_heads) under fixed_d_model; an axis is unused",
            space.axes.values("head_dim"),
            "remove axes.head_dim, or add fixed_head_dim to head_dim_rule",
        )
    return issues


def key_name_issues(space: Space, file: str) -> list[ConfigIssue]:
    """The baseline's and each published shape's keys are axis names."""
    issues: list[ConfigIssue] = []
    names = axis_names()  # with the axes the questions declare (Question.axes), read now
    for key in space.baseline:
        if key not in names:
            rule = f"baseline keys must be among {', '.join(names)}"
            issues.append(ConfigIssue(file, f"baseline.{key}", rule, key, "remove it"))
    for index, published in enumerate(space.published):
        for key in published.shape:
            if key not in names:
                path, rule = f"published[{index}].shape.{key}", f"keys must be among {', '.join(names)}"
                issues.append(ConfigIssue(file, path, rule, key, "remove it"))
    return issues


def patch_size_issues(space: Space, file: str) -> list[ConfigIssue]:
    """For image data, ``model.patch_size`` divides the image size."""
    img_size = space.data.model_fields_from_data()["img_size"] if space.data.modality == "image" else None
    if img_size is None or not img_size % space.model.patch_size:
        return []
    return [
        ConfigIssue(
            file,
            "model.patch_size",
            f"must divide the image size {img_size} of data set {space.data.name!r}",
            space.model.patch_size,
            f"choose a divisor of {img_size}, or set data.img_size",
        )
    ]


def resource_and_seed_issues(space: Space, file: str) -> list[ConfigIssue]:
    """GPUs per trial above 1 are whole, and seeds are non-negative."""
    issues: list[ConfigIssue] = []
    if space.resources.gpus_per_trial > 1 and space.resources.gpus_per_trial != int(space.resources.gpus_per_trial):
        issues.append(
            ConfigIssue(
                file,
                "resources.gpus_per_trial",
                "fractions are allowed below 1 GPU only",
                space.resources.gpus_per_trial,
                "use a fraction below 1 or a whole number",
            )
        )
    if any(seed < 0 for seed in space.seeds):
        issues.append(ConfigIssue(file, "seeds", "seeds must be >= 0", space.seeds, "use non-negative integers"))
    return issues


def family_list_issues(space: Space, file: str) -> list[ConfigIssue]:
    """Every family is registered and reads the data set's kind of input (images or token sequences);
    with a family axis, model.family (the baseline's family) is one of it, and each family-specific fixed
    field is taken by some family of it."""
    issues: list[ConfigIssue] = []
    known = known_families()
    path = "axes.family" if space.axes.family else "model.family"
    for name in dict.fromkeys([space.model.family, *space.families()]):
        if name not in known:
            hint = did_you_mean(name, known, n=2) + f"known: {', '.join(known)}"
            issues.append(ConfigIssue(file, path, "must be a registered model family", name, hint))
    if issues:
        return issues
    wanted = space.data.modality
    kind = {
        "sequence": "token sequences to classify",
        "causal_lm": "text for next-token prediction",
        "masked_lm": "text for masked-token prediction",
        "image": "images",
    }
    for name in space.families():
        reads = FAMILY_RULES[name].modality
        if reads != wanted:
            rule = f"family {name} reads {kind[reads]}, but data set {space.data.name!r} gives {kind[wanted]}"
            issues.append(ConfigIssue(file, path, rule, name, f"use a family that reads {kind[wanted]}"))
    if space.axes.family and space.model.family not in space.axes.family:
        issues.append(
            ConfigIssue(
                file,
                "model.family",
                "names the baseline's family, so it must be one of axes.family",
                space.model.family,
                f"choose one of {', '.join(space.axes.family)}",
            )
        )
    if len(space.families()) > 1:
        for key in FAMILY_KEYS:
            value = getattr(space.model, key)
            if value is not None and not any(key in FAMILY_RULES[f].accepts for f in space.families()):
                rule = "no family of axes.family takes it"
                issues.append(ConfigIssue(file, f"model.{key}", rule, value, "remove it"))
    return issues


def reported_headline_metrics(space: Space) -> tuple[str, ...]:
    """The headline metrics the space's data set reports, by what it gives a model."""
    return MODALITY_METRICS[space.data.modality]


def metric_issues(space: Space, file: str) -> list[ConfigIssue]:
    """The headline metric is one the data set reports, judged in its own direction, with a tolerance."""
    metric, reported = space.metric, reported_headline_metrics(space)
    if metric.name not in reported:
        hint = did_you_mean(metric.name, reported, n=2)
        return [
            ConfigIssue(
                file,
                "metric.name",
                f"must be a metric that data set {space.data.name!r} reports",
                metric.name,
                hint + f"{space.data.name} reports: {', '.join(reported)}",
            )
        ]
    issues, natural = [], natural_mode(metric.name)
    if metric.mode != natural:
        rule = f"must be {natural} for {metric.name} ({direction_words(natural)})"
        issues.append(ConfigIssue(file, "metric.mode", rule, metric.mode, f"write mode: {natural}, or leave it out"))
    if metric.tolerance is None:
        unit = tolerance_unit(metric.name)
        issues.append(
            ConfigIssue(
                file,
                "metric.tolerance",
                f"{metric.name} has no default tolerance: say how much worse than the baseline, in {unit}, "
                "still counts as holding",
                MISSING,
                f"add metric.tolerance (in {unit}), chosen from the seed noise of {metric.name} on this data set",
            )
        )
    return issues


def unreported_issue(space: Space, file: str, path: str, name: str) -> list[ConfigIssue]:
    """An objective or scheduler metric that is a headline metric the space's data set does not report."""
    reported = reported_headline_metrics(space)
    if name not in METRICS or name in reported:
        return []
    rule = f"data set {space.data.name!r} does not report this metric"
    return [ConfigIssue(file, path, rule, name, f"use one it reports: {', '.join(reported)}")]


def search_issues(space: Space, file: str) -> list[ConfigIssue]:
    issues = []
    objectives = getattr(space.search, "objectives", [])
    for index, objective in enumerate(objectives):
        issues += unreported_issue(space, file, f"search.objectives[{index}].metric", objective.metric)
        if objective.metric not in REPORTED_METRICS:
            issues.append(
                ConfigIssue(
                    file,
                    f"search.objectives[{index}].metric",
                    "no trial reports this metric",
                    objective.metric,
                    did_you_mean(objective.metric, REPORTED_METRICS, n=2) + f"reported: {', '.join(REPORTED_METRICS)}",
                )
            )
    if space.scheduler.kind == "asha":
        issues += unreported_issue(space, file, "scheduler.metric", space.scheduler.metric)
    if space.scheduler.kind == "asha" and space.scheduler.metric not in EPOCH_METRICS:
        issues.append(
            ConfigIssue(
                file,
                "scheduler.metric",
                "an early-stopping metric must be reported every epoch",
                space.scheduler.metric,
                f"use one of {', '.join(EPOCH_METRICS)}",
            )
        )
    return issues


def family_issues(space: Space, shapes: list[Shape], file: str) -> list[ConfigIssue]:
    """What the model families cannot build, over every shape, each (key path, rule) reported once."""
    found: dict[tuple, ConfigIssue] = {}
    for shape in shapes:
        for path, rule, value, fix in shape_problems(space, shape):
            found.setdefault((path, rule), ConfigIssue(file, path, rule, value, fix))
    return list(found.values())


def shape_issues(space: Space, file: str) -> list[ConfigIssue]:
    """The family can build every shape, at least one shape is left, and the baseline is one of them."""
    planner = survey(space).planner
    shapes, removed = planner.grid_shapes, planner.grid_removed
    problems = family_issues(space, shapes, file)
    if problems:
        return problems
    if not shapes:
        reasons = sorted({r.reason.split(" ")[0] for r in removed})
        return [
            ConfigIssue(
                file,
                "axes",
                "no configuration survives the rules and constraints",
                f"{len(removed)} removed",
                f"relax them (removed for: {', '.join(reasons)})",
            )
        ]
    issues = removed_value_issues(space, shapes, removed, file) + edge_column_issues(space, planner.shapes, file)
    for family in space.families():
        if resolve_baseline(space, shapes, family) is None:
            why = next(
                (r.reason for r in removed if all(r.combination.get(k) == v for k, v in space.baseline.items())),
                "no axis value gives it",
            )
            where = f" of family {family}" if len(space.families()) > 1 else ""
            return [
                *issues,
                ConfigIssue(
                    file,
                    "baseline",
                    f"the baseline is not among the space's configurations{where} ({why})",
                    dict(space.baseline),
                    "change the baseline or widen the axes to include it",
                ),
            ]
    return issues


def edge_column_issues(space: Space, shapes: list[Shape], file: str) -> list[ConfigIssue]:
    """The edge search bisects along depth: every column of its lattice (``Shape.depth_column``) needs at least
    two depths; the first column short of them is reported."""
    if space.search.kind != "edge":
        return []
    depths: dict[tuple, set[int]] = {}
    for shape in shapes:
        depths.setdefault(shape.depth_column(), set()).add(shape.depth)
    short = [(column, found) for column, found in depths.items() if len(found) < 2]
    if not short:
        return []
    column, found = short[0]
    words = ", ".join(f"{name}={value}" for name, value in column)
    return [
        ConfigIssue(
            file,
            "search.kind",
            f"the edge search needs at least 2 depths in every column (configs sharing all axes but depth); "
            f"{len(short)} of {len(depths)} columns have fewer, e.g. {words}: depth {sorted(found)}",
            "edge",
            "give axes.depth two or more values that every shape keeps, or use `search: {kind: grid}`",
        )
    ]


# Axes whose values a shape carries, by the Shape attribute that holds them.
SHAPE_AXES = {"depth": "depth", "num_heads": "num_heads", "embed_dim": "embed_dim", "mlp_dim": "mlp_dim",
              "num_kv_heads": "kv_heads", "head_dim": "head_dim"}  # fmt: skip


def removed_value_issues(space: Space, shapes: list, removed: list, file: str) -> list[ConfigIssue]:
    """Notes: an axis value asked for that no configuration keeps, every combination with it removed by the
    rules or constraints (``num_heads: 3`` at d_model 64), named with the first reason, so the value is not
    dropped in silence. A note, not a problem: the other values still make a space that runs."""
    issues = []
    for axis, attribute in SHAPE_AXES.items():
        given = getattr(space.axes, axis)
        if given is None or (axis == "head_dim" and "fixed_head_dim" not in space.head_dim_rule):
            continue
        kept = {getattr(shape, attribute) for shape in shapes}
        for value in space.axes.values(axis):
            if value in kept:
                continue
            why = next((r.reason for r in removed if r.combination.get(axis) == value), "no rule keeps it")
            path = f"axes.{axis}[{given.index(value)}]" if isinstance(given, list) else f"axes.{axis}"
            issues.append(
                ConfigIssue(
                    file,
                    path,
                    f"every configuration with {axis}={value} is removed by the rules ({why})",
                    value,
                    f"remove {value} from axes.{axis}, or change what removes it",
                    note=True,
                )
            )
    return issues


def check_data(space: Space, space_ref: str) -> None:
    """Fail in seconds, before planning or starting Ray, when the data set is not on this machine."""
    try:
        space.data.require_local()
    except DataNotFoundError as exc:
        offline = next((name for name in ("cpu", "smoke") if name in space.profiles), None)
        hint = (
            (
                f" To try the space without it, run its `{offline}` profile on embedded or generated data: "
                f"`make sweep SPACE={space_ref} PROFILE={offline}`."
            )
            if offline
            else ""
        )
        raise DataUnavailableError(f"{exc}{hint}") from exc
