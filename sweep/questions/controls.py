"""The question "is the trade better than the obvious other way of saving the same parameters?": a space's
``controls:`` list of control arms (:class:`Control`), each one more config beside the grid (``half_mlp``: the
baseline with its MLP halved). Planned here (a control whose shape the grid holds labels that config; any
other is added after the grid's, so no config id moves), validated, printed, and reported against the configs
with fewer blocks and more heads at matched parameters. Views: ``controls.sql`` (mlp_control).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from sweep.headline import Headline, format_score
from sweep.markdown import interval_words, query
from sweep.questions.base import AXIS_NAMES, Label, Planner, Question
from sweep.text import human, plural, shape_words
from workers.config import Conditioning, PositiveInt, StrictModel
from workers.vocabulary import SHAPE_KEYS, did_you_mean

# --- the space's `controls:` section ------------------------------------------------------------------------

CONTROL_LABEL = r"^[a-z][a-z0-9_]*$"


class Control(StrictModel):
    """A control arm: one more configuration, not crossed with the axes, that answers "is the trade better
    than the obvious other way of saving the same parameters?".

    ``label``: its name in the plan and in the results (the trials' ``control`` column), lower case, e.g.
    ``half_mlp``. ``shape``: axis values that override the baseline's (``{mlp_dim: 1536}``); every axis it
    leaves out is the baseline's, and head_dim follows the baseline's head_dim rule unless given. ``why``:
    what it controls for. The label is not part of the config id: a control whose shape the grid already
    holds is that config, labelled. Built for the baseline's family (``model.family``).
    """

    label: str = Field(pattern=CONTROL_LABEL, max_length=40)
    shape: Annotated[dict[str, PositiveInt | Conditioning], Field(min_length=1)]
    why: str = ""


def unique_labels(controls: list[Control]) -> list[Control]:
    labels = [c.label for c in controls]
    if len(set(labels)) != len(labels):
        raise ValueError(f"control labels must be unique, but got {labels}; rename the repeats")
    return controls


Controls = Annotated[list[Control], AfterValidator(unique_labels)]


# --- the plan -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedControl:
    """A control arm of the plan: its label and reason, the config that runs it, and whether the grid held
    that config already (then it is labelled, not added)."""

    label: str
    why: str
    shape: dict  # the axis values the space gives it (the rest are the baseline's)
    config: Any  # sweep.plan.plan.PlannedConfig
    in_grid: bool


def control_shape(planner: Planner, baseline, control: Control):
    """The shape of ``control``: the baseline's, with the axis values the control gives. head_dim follows
    the baseline's head_dim rule (embed_dim / num_heads under fixed_d_model) unless the control gives it.
    Returns (shape, None), or (None, why it cannot be built)."""
    given = dict(control.shape)
    pick = lambda name, default: given.get(name, default)  # noqa: E731
    heads, width = pick("num_heads", baseline.num_heads), pick("embed_dim", baseline.embed_dim)
    kv = pick("num_kv_heads", baseline.num_kv_heads)
    rule = baseline.rule.split("+")[0]
    if "head_dim" in given or rule == "fixed_head_dim":
        head_dim = pick("head_dim", baseline.head_dim)
    elif rule == "floor_d_model":
        if heads > width:
            return None, f"num_heads={heads} > embed_dim={width}: head_dim would be 0"
        head_dim = width // heads
    elif width % heads:
        return None, f"num_heads={heads} does not divide embed_dim={width} (head_dim rule {rule})"
    else:
        head_dim = width // heads
    if kv is not None and (kv > heads or heads % kv):
        return None, f"num_kv_heads={kv} does not divide num_heads={heads}"
    shape = dataclasses.replace(
        baseline, depth=pick("depth", baseline.depth), num_heads=heads, head_dim=head_dim, embed_dim=width,
        mlp_dim=pick("mlp_dim", baseline.mlp_dim), rule=rule, num_kv_heads=kv,
        conditioning=pick("conditioning", baseline.conditioning), labels=(),  # not the baseline's labels
    )  # fmt: skip
    reason = planner.constraint_violation(shape)
    return (None, reason) if reason else (shape, None)


def control_key_issues(space, file: str) -> list:
    """Each control's shape names axes, with whole numbers (a name for ``conditioning``)."""
    from sweep.errors import ConfigIssue

    issues = []
    for index, control in enumerate(space.controls):
        for key, value in control.shape.items():
            path = f"controls[{index}].shape"
            if key not in AXIS_NAMES:
                rule = f"keys must be among {', '.join(AXIS_NAMES)}"
                fix = did_you_mean(key, AXIS_NAMES) + "remove it"
                issues.append(ConfigIssue(file, f"{path}.{key}", rule, key, fix))
            elif (key == "conditioning") != isinstance(value, str):
                kind = "a conditioning name" if key == "conditioning" else "a whole number"
                issues.append(ConfigIssue(file, f"{path}.{key}", f"must be {kind}", value, f"write {kind}"))
    return issues


def control_shapes(planner: Planner) -> list[tuple[Control, Any]]:
    """Each control arm with its shape; every arm that cannot be built, that is the baseline, or that repeats
    another arm's shape is an issue (and left out)."""
    baseline, shapes, seen = planner.baseline_shape(), [], {}
    for index, control in enumerate(planner.space.controls):
        path = f"controls[{index}].shape"
        shape, reason = control_shape(planner, baseline, control)
        if shape is None:
            rule = "a control is the baseline with these values; that shape must be buildable"
            planner.issue(path, rule, dict(control.shape), f"change it: {reason}")
            continue
        if shape.key() == baseline.key():
            rule = "a control must differ from the baseline"
            planner.issue(path, rule, dict(control.shape), "change a value, or remove the control")
        elif shape.key() in seen:
            rule = f"two controls have the same shape (controls {seen[shape.key()]!r} and {control.label!r})"
            planner.issue(path, rule, dict(control.shape), "remove one of them")
        seen.setdefault(shape.key(), control.label)
        problems = planner.family_problems(shape)
        for _, rule, value, fix in problems:
            planner.issue(f"controls[{index}]", f"control {control.label!r}: {rule}", value, fix)
        if not problems:
            shapes.append((control, shape))
    return shapes


def with_controls(planner: Planner, arms: list[tuple[Control, Any]]) -> list[PlannedControl]:
    """The planner's configs with each control arm: a control whose shape the grid holds labels that config;
    any other is added after the grid's (so no config of the grid moves, nor its id)."""
    configs, controls = planner.configs, []
    for control, shape in arms:
        index = next((i for i, c in enumerate(configs) if c.shape.key() == shape.key()), None)
        if index is not None:
            labelled = configs[index].shape.labelled(control=control.label)
            configs[index] = dataclasses.replace(configs[index], shape=labelled)
        else:
            configs.append(planner.planned_config(shape, control=control.label))
        config = configs[index if index is not None else -1]
        controls.append(PlannedControl(control.label, control.why, dict(control.shape), config, index is not None))
    return controls


def control_rows(plan) -> list[dict]:
    """Each control arm beside the baseline: its shape, params and FLOPs, and the change in params."""
    base = plan.baseline
    return [
        {
            "label": c.label,
            "config_id": c.config.config_id,
            "shape": c.shape,
            **{k: getattr(c.config.shape, k) for k in SHAPE_KEYS},
            "params": c.config.params,
            "flops_per_sample": c.config.flops_per_sample,
            "params_change": c.config.params / base.params - 1,
            "flops_change": c.config.flops_per_sample / base.flops_per_sample - 1,
            "in_grid": c.in_grid,
            "why": " ".join(c.why.split()),
        }
        for c in plan.answers["controls"]
    ]


# --- sweep plan ---------------------------------------------------------------------------------------------


def control_lines(plan) -> list[str]:
    """The control arms: each one's shape, params and FLOPs, and its change against the baseline."""
    lines = []
    for row in control_rows(plan):
        given = ", ".join(f"{k} {v}" for k, v in row["shape"].items())
        where = "a config of the grid, labelled" if row["in_grid"] else "one config added to the grid"
        lines.append(
            f"control {row['label']} ({given}; depth {row['depth']} × {plural(row['num_heads'], 'head')} of "
            f"{row['head_dim']}, "
            f"MLP {row['mlp_dim']}): {human(row['params'])} params ({row['params']:,}), "
            f"{row['params_change']:+.1%} vs the baseline; {human(row['flops_per_sample'])} FLOPs per sample "
            f"({row['flops_change']:+.1%}); {where}"
        )
        if row["why"]:
            lines.append(f"  why: {row['why']}")
    return lines


# --- the report ---------------------------------------------------------------------------------------------


def delta_words(row: dict, name: str) -> str:
    """``+0.4 (95% CI -0.1…+0.9)``, or ``+0.4 (single seed: no interval)``."""
    return interval_words(row, "delta", name, single="single seed: no interval")


def control_words(row: dict, name: str) -> str:
    """``the half_mlp control (12 blocks × 12 heads of 64, MLP 1536; 58,237,672 params; 81.2% over 3 seeds)``."""
    return (
        f"the {row['control']} control ({row['control_depth']} blocks × {row['control_num_heads']} heads of "
        f"{row['control_head_dim']}, MLP {row['control_mlp_dim']}; {row['control_params']:,} params; "
        f"{format_score(row['control_score'], name)} over {plural(row['control_n_seeds'], 'seed')})"
    )


def control_reading(row: dict) -> str:
    """What a best-at-or-under verdict says about the trade, honest about one seed and open intervals."""
    if row["evidence"] == "single seed":
        return (
            f"On a single seed this is '{row['verdict']}' on the point estimate alone, never significant: run more "
            "seeds before crediting either side."
        )
    return {
        "wins": "Extra heads beat the control at no more parameters, with 95% confidence.",
        "loses": "The control wins: halving the MLP is the better way to save these parameters here.",
        "tie (within tolerance)": "A tie within the tolerance: extra heads do no better than the control.",
    }.get(row["verdict"], "Inconclusive: the interval reaches past the tolerance; more seeds would settle it.")


def control_section(configs: list[dict], rows: list[dict], headline: Headline) -> str:
    """Do fewer blocks with more heads beat the space's control arms (``mlp_control``) at matched parameters?"""
    labels = sorted({c["control"] for c in configs if c.get("control")})
    if not labels:
        return ""
    lines = ["\n## Fewer layers, more heads, against the control arms\n"]
    for label in labels:
        mine = [r for r in rows if r["control"] == label]
        if not mine:
            lines.append(f"- **{label}**: no finished comparison yet (the control, or every config with fewer "
                         "blocks than the baseline, has no finished seed).")  # fmt: skip
            continue
        more = [r for r in mine if r["more_heads"]]
        matched = [r for r in more if r["matched"]]
        judged = [r for r in matched if r["evidence"] != "single seed"]  # a single seed's verdict is a lean only
        single = len(matched) - len(judged)
        tally = ", ".join(
            f"{sum(r['verdict'] == v for r in judged) + (single if v == 'inconclusive' else 0)} {v}"
            for v in ("wins", "loses", "tie (within tolerance)", "inconclusive")
        )
        text = f"- **{label}**: against {control_words(mine[0], headline.name)}. "
        best = next((r for r in mine if r["best_at_or_under"]), None)
        if best is None:
            text += (
                "No config with fewer blocks and more heads than the baseline has at most the control's parameters, "
                "so none can be credited against it at matched parameters."
            )
        else:
            match = "within ±5%: matched" if best["matched"] else "not within ±5%: not matched"
            text += (
                f"The best config with fewer blocks and more heads at or under its parameters is {shape_words(best)} "
                f"({best['params']:,} params, {best['params_ratio']:.3f}× the control's, {match}): "
                f"{best['verdict']}, Δ {delta_words(best, headline.name)}. {control_reading(best)}"
            )
        top = max(matched, key=lambda r: (r["gain"], -r["params"]), default=None)
        if top is not None and (best is None or not best["matched"]):
            text += (
                f" At matched parameters the best is {shape_words(top)} ({top['params_ratio']:.3f}× the control's): "
                f"{top['verdict']}, Δ {delta_words(top, headline.name)}."
            )
        if matched:
            text += (
                f" Of {len(matched)} fewer-blocks, more-heads configs within ±5% of its parameters: {tally}"
                + (f" ({single} of the inconclusive on a single seed: a lean only)" if single else "")
                + "."
            )
        else:
            text += " No fewer-blocks, more-heads config is within ±5% of its parameters: none is a matched comparison."
        lines.append(text)
    lines.append(f'\nEvery pairing: `sweep sql "FROM mlp_control"` (tolerance {headline.tolerance} {headline.unit}).\n')
    return "\n".join(lines)


class ControlsQuestion(Question):
    """``controls:``: control arms beside the grid (see the module's docstring)."""

    name = "controls"
    section = "controls"
    section_model = Controls
    section_default: ClassVar[list] = []
    section_doc = "control arms beside the grid, each one config at most (sweep/questions/controls.py)"
    sql = "controls.sql"
    report_place = "costs"
    plan_place = "before published"
    labels = (
        Label("control", "VARCHAR", "the control arm this config is (the space's `controls:`, e.g. half_mlp); NULL "
              "for the grid's configs. Not part of the config id", in_configs="max", plan_blank="",
              words="the {} control"),
    )  # fmt: skip

    def space_issues(self, space, file: str) -> list:
        return control_key_issues(space, file)

    def add_shapes(self, planner: Planner) -> list[tuple[Control, Any]]:
        if not planner.space.controls or control_key_issues(planner.space, ""):  # those are reported instead
            return []
        return control_shapes(planner)

    def add_configs(self, planner: Planner, answer: list[tuple[Control, Any]] | None) -> list[PlannedControl]:
        return with_controls(planner, answer or [])

    def plan_lines(self, plan) -> list[str]:
        return control_lines(plan)

    def grid_words(self, plan) -> str:
        added = sum(not c.in_grid for c in plan.answers["controls"])
        return f"{added} control arm{'s' if added > 1 else ''}" if added else ""

    def plan_json(self, plan) -> dict:
        return {"controls": control_rows(plan)}

    def report_section(self, con, space: str, headline: Headline, data) -> str:
        rows = query(con, "FROM mlp_control WHERE space = ? AND metric = ?", space, headline.name)
        return control_section(data.configs, rows, headline)


QUESTION = ControlsQuestion()
