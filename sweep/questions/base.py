"""What a question is: the small interface every module of ``sweep/questions/`` implements.

A question is something a researcher asks of a sweep beyond "where does the trade break?": spend a parameter
budget three ways (``budget``), set the trade beside control arms (``controls``), intervene on the attention
block's conditioning (``conditioning``), share key/value heads (``gqa``), check published results
(``expectations``). Each one reads a section or an axis of the space file, may add shapes or configs to the
plan (and the issues that stop it), may record what it needs in the sweep's ``spaces`` row, brings its SQL
views, prints its lines in ``sweep plan`` and writes its section of the report. The plan, the validation, the SQL
loader, the report and the CLI loop over :data:`sweep.questions.QUESTIONS`; none imports a question's module.
A question that labels configs declares its columns (:class:`Label`), and one that adds an axis declares it
(:class:`Axis`); the space's ``axes:``, the shapes, the worker's model config, the schema, the sink, the compat,
configs and vs_baseline views, the plan's payloads and ``sweep plan``'s table derive theirs from the declarations.

Every hook has a default that does nothing, so a question implements only what it adds: one that only
compares configs the grid already has (``expectations``: an ``expect:`` block judged against the results) has a
section, resolves its sides in the plan, records its claims with the sweep, and brings an SQL file and a report
section. ``docs/questions.md`` walks through adding one.

This module imports nothing heavy: the report (which must not load torch) reads the registry too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol, get_args, get_origin

from pydantic import BaseModel

# The axes every shape has, in the order a space file lists them (``axes:``, ``baseline:``, a control's
# ``shape:``); the questions' declared axes (:class:`Axis`) follow them (``sweep.questions.axis_names``).
SHAPE_AXES = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim")
# The shipped questions' axes after them, for the modules that need the names as they import (a control's and an
# expectation's keys); tests/sweep/questions/test_questions.py holds it equal to ``axis_names()``.
AXIS_NAMES = (*SHAPE_AXES, "num_kv_heads", "conditioning")


# The column types a question may declare, as DuckDB spells them (``sweep/results/schema.py`` maps each to Arrow's).
COLUMN_TYPES = ("VARCHAR", "BIGINT", "DOUBLE")


@dataclass(frozen=True)
class Label:
    """A trials column that a question fills per config while it plans: a config's label (``budget_way``,
    ``control``), not a model field, so it changes no config id.

    ``name``: the trials column, the configs view's column and the key of ``Shape.labels`` (and so of
    ``PlannedConfig.labels``). ``sql_type``: one of :data:`COLUMN_TYPES`. ``doc``: what it holds, stated exactly
    (``--print-views`` prints it above the compat view). ``in_configs``: the aggregate the configs view takes over
    a config's rows (``any_value``, or ``max`` where a later row may carry it and an earlier not). ``in_plan``:
    whether ``sweep plan``'s table (and ``--format json``'s ``trials``) shows it, when some config has it;
    ``plan_after``: the column it follows there (None: at the end); ``plan_blank``: what it shows for a config
    without it. ``words``: how ``sweep plan`` names a published row whose config has it (``{}``: the value; '':
    nothing).

    From the declaration alone: the trials schema's column (``sweep/results/schema.py``), the sink's value
    (from the trial's payload), NULL for rows from before it (``sweep/results/compat.sql``), the configs view's
    column (``sweep/analysis/views/core.sql``), the plan's payload and ``sweep plan``'s column."""

    name: str
    sql_type: str
    doc: str
    in_configs: str = "any_value"
    in_plan: bool = True
    plan_after: str | None = None
    plan_blank: Any = None
    words: str = ""


@dataclass(frozen=True)
class Axis:
    """An axis a question adds to the shapes (``num_kv_heads``, ``conditioning``): a value every config has,
    that reaches the worker's model config, so (unlike a :class:`Label`) it is part of the config's identity.

    ``name``: its key under ``axes:``, ``baseline:`` and a published row's ``shape:``, the trials and configs
    column, and the key of ``sweep plan``'s column. ``sql_type``: one of :data:`COLUMN_TYPES`. ``doc``: what it
    holds, stated exactly (``--print-views`` prints it). ``default``: the value of the model as built, which a
    space that leaves the axis out has: a shape at it passes the worker nothing, so every config id from before
    the axis existed is unchanged (None: the model as built has no single value, ``default_sql`` says which).
    ``default_sql``: the SQL expression a row from before the axis reads as (None: ``default`` as a literal).
    ``model_field``: the worker's :class:`workers.config.ModelSpec` field it sets (None: its own name); a space's
    fixed ``model:`` value of that field is the axis's one value when it has none under ``axes:``.
    ``item_type``: what each value under ``axes:`` is (``int``: whole numbers >= 1, as a list or a range;
    ``str``: names). ``in_plan``: whether ``sweep plan``'s table shows it, when some config is off the default;
    ``plan_after``: the column it follows there. ``order_sql``: how the views sort by it (None: its name,
    ascending). ``across_heads``: (SQL expression, column name) the views partition by where the heads vary at a
    fixed width, as head_dim_edge does (None: the axis itself; grouped-query attention's is the query heads per
    key/value head, which such a line keeps fixed).

    The views name every declared axis where they group, partition, match, or sort by a config's shape: at the
    ``/*@axes…*/`` tokens of their SQL (``sweep/analysis/views/__init__.py`` ``expand_axis_tokens``).

    A declared axis whose name is a field of :class:`sweep.space.shapes.Shape` (the shipped ones) is held there
    and under ``axes:`` by its own key of :class:`sweep.space.model.Axes`; any other is held in ``Shape.axes``
    and accepted under ``axes:`` from the declaration alone. From the declaration: the shapes' product, the
    trials schema's column, the sink's value, the compat view's reading of older rows, the configs view's
    column, the worker's model field (and so the config id), and ``sweep plan``'s column."""

    name: str
    sql_type: str
    doc: str
    default: Any = None
    default_sql: str | None = None
    model_field: str | None = None
    item_type: type = int
    in_plan: bool = True
    plan_after: str | None = "num_heads"
    order_sql: str | None = None
    across_heads: tuple[str, str] | None = None

    @property
    def field(self) -> str:
        """The worker's model field the axis sets."""
        return self.model_field or self.name

    def as_built_sql(self) -> str:
        """The SQL value of a row from before the axis: ``default_sql``, else ``default`` as a literal."""
        if self.default_sql is not None:
            return self.default_sql
        return f"'{self.default}'" if isinstance(self.default, str) else f"{self.default}::{self.sql_type}"


class Unbuildable(ValueError):
    """The family cannot build a shape a question needs (its message says why): what
    :meth:`Planner.params_of` raises."""


class Planner(Protocol):
    """What the plan lends a question while it plans (``sweep/plan/plan.py``'s :class:`~sweep.plan.plan.Planner`).

    ``space``: the validated space; ``shapes`` and ``removed``: the plan's shapes and removed combinations so
    far (a question may replace either list); ``configs``: the measured configs (in ``add_configs`` only);
    ``baseline``: the space's baseline config (in ``add_configs`` only)."""

    space: Any
    shapes: list
    removed: list
    configs: list
    baseline: Any

    def issue(self, path: str, rule: str, value: object, fix: str) -> None:
        """Record a problem of the space (``sweep validate`` reports it; a plan with one does not run)."""

    def removal(self, combination: dict, reason: str) -> Any:
        """A removed combination, with the reason, as ``sweep plan`` lists it."""

    def constraint_violation(self, shape) -> str | None:
        """The first of the space's constraints ``shape`` breaks, as a sentence, or None."""

    def family_problems(self, shape) -> list[tuple[str, str, object, str]]:
        """What the family cannot build of ``shape``: (key path, rule, value, fix) each."""

    def params_of(self, shape) -> int:
        """``shape``'s exact parameter count (raises :class:`Unbuildable` when the family cannot build it)."""

    def baseline_shape(self, family: str | None = None):
        """The baseline's shape in ``family`` (default: ``model.family``) among the shapes, or None."""

    def planned_config(self, shape, **labels):
        """``shape`` measured and identified: a :class:`~sweep.plan.plan.PlannedConfig` (``labels``: values of
        declared :class:`Label` columns, e.g. ``control``, added to the shape's)."""


def innermost_model(form: Any) -> type[BaseModel] | None:
    """The pydantic model inside a typing form: ``Budget | None`` and ``Annotated[list[Control], …]`` give
    ``Budget`` and ``Control``; None when there is none."""
    if isinstance(form, type) and issubclass(form, BaseModel):
        return form
    return next((m for m in map(innermost_model, get_args(form)) if m is not None), None)


def is_list_form(form: Any) -> bool:
    """Whether a typing form is a list (``list[Control]``, possibly ``Annotated``)."""
    if get_origin(form) is Annotated:
        return is_list_form(get_args(form)[0])
    return get_origin(form) is list


class Question:
    """One question of the sweep. Subclasses set the class attributes they use and override the hooks.

    ``name``: the key of its answer in ``Plan.answers`` and its name in the docs. ``section``: the top-level
    key of the space file it reads (None: it reads an axis or nothing), ``section_model`` its pydantic model
    (unknown keys rejected) and ``section_default`` the value when the file leaves it out; a profile may
    override the section as a dict (or a list, for a list section). ``axes``: the :class:`Axis` values it adds to
    every shape (the shapes, the worker's model config, the schema, the views and ``sweep plan``'s table derive
    theirs from these). ``rules_read``: whether the cross-field rules must be skipped when its section is malformed.
    ``sql``: its views, a file beside this module (loaded after the core views, in registry order).
    ``report_place``: where its report section goes: ``costs`` (after "at equal cost") or ``mechanism``
    (after the κ theory). ``verdict_columns``: trials measurements the report's verdict table adds at its end
    for a space with grouped configs. ``plan_place``: where ``sweep plan`` prints its lines: ``before
    published`` (beside the baseline) or ``after published`` (after the paper's rows). ``labels``: the
    :class:`Label` columns it gives configs (the schema, the sink, the compat and configs views, the plan's
    payload and ``sweep plan``'s table derive theirs from these)."""

    name: ClassVar[str]
    section: ClassVar[str | None] = None
    section_model: ClassVar[Any] = None  # a pydantic model, or a typing form such as list[Model]
    section_default: ClassVar[Any] = None
    section_doc: ClassVar[str] = ""
    axes: ClassVar[tuple[Axis, ...]] = ()
    sql: ClassVar[str | None] = None
    report_place: ClassVar[str] = "costs"
    verdict_columns: ClassVar[tuple[str, ...]] = ()
    plan_place: ClassVar[str] = "after published"
    labels: ClassVar[tuple[Label, ...]] = ()

    # --- the space file -----------------------------------------------------------------------------------

    def section_models(self) -> dict[str, type[BaseModel]]:
        """Models by section name, for the loader's messages on a key of this section (``SECTION_MODELS``)."""
        inner = innermost_model(self.section_model)
        return {self.section: inner} if self.section and inner is not None else {}

    def space_issues(self, space, file: str) -> list:
        """Problems of the section that need the whole space but no plan (keys naming axes, …)."""
        return []

    # --- the plan -----------------------------------------------------------------------------------------

    def combination_rule(self, combination: dict) -> str | None:
        """Why the grid cannot have ``combination`` (a dict of axis values), or None: it is removed."""
        return None

    def add_shapes(self, planner: Planner) -> Any:
        """Before the configs are measured: label or add shapes (``planner.shapes``), record removed
        combinations and issues; returns this question's answer (kept in ``Plan.answers[name]``)."""
        return None

    def add_configs(self, planner: Planner, answer: Any) -> Any:
        """After the configs are measured: label or add configs (``planner.configs``); returns the answer."""
        return answer

    # --- sweep plan ---------------------------------------------------------------------------------------

    def plan_columns(self, plan, config) -> dict:
        """Columns of ``sweep plan``'s table for ``config`` (none when the question is not asked)."""
        return {}

    def plan_lines(self, plan) -> list[str]:
        """Lines ``sweep plan`` prints after the baseline (its answer in words)."""
        return []

    def grid_words(self, plan) -> str:
        """What it adds to the grid's configs, in words for ``sweep plan``'s count (``2 control arms``), or ''."""
        return ""

    def plan_json(self, plan) -> dict:
        """Keys ``sweep plan --format json`` adds (its answer as plain data)."""
        return {}

    # --- the results --------------------------------------------------------------------------------------

    def record(self, plan) -> Any:
        """What a sweep records of this question in its ``spaces`` row (JSON-able; None: nothing), for its
        views to read: ``spaces.questions`` is ``{name: record}`` over the questions that record one, and
        ``space_settings.questions`` the latest sweep's."""
        return None

    def sql_text(self) -> str:
        """Its SQL file's text ('' without one)."""
        if self.sql is None:
            return ""
        return (Path(__file__).resolve().parent / self.sql).read_text()

    def python_functions(self) -> dict[str, tuple]:
        """Statistics its SQL calls that DuckDB's SQL cannot compute (an exact test, a quantile at any level):
        ``{name: (function, argument types, return type)}``, types as DuckDB spells them. ``sweep sql`` and the
        report register each on their connection; its SQL file defines a stand-in macro of the same name (NULL,
        or the nearest SQL can do) for ``sweep sql --print-views`` in a plain duckdb shell, which they skip."""
        return {}

    def report_section(self, con, space: str, headline, data) -> str:
        """Its section of ``index.md`` (Markdown; '' when the results do not ask it)."""
        return ""
