"""The question "do the results agree with what was published?": a space states published results as data
(``expect:``, a list of :class:`Expect`), and the analysis says whether its results agree, disagree, or cannot
tell (docs/known_answers.md; the shipped reproductions are ``search_spaces/known_*.yaml``).

An expectation compares two of the space's configurations, ``a`` and ``b``, each named by shape values (any of
the axes, and ``family``; together they must pick out exactly one planned configuration), on the space's
headline metric::

    expect:
      - name: one_full_rank_head_beats_eight
        claim: at fixed width one full-rank head beats eight heads of rank d/8 on nearest-neighbour retrieval
        source: Amsel, Yehudai & Bruna 2025 (ICLR, arXiv 2407.16153), Section 7
        a: {num_heads: 1}
        b: {num_heads: 8}
        direction: a_beats_b      # or b_beats_a, no_difference
        tolerance: 2.0            # the metric's units: a must beat b by more than this

The plan resolves each side to its config (a side that picks out none of the planned shapes, or several, is an
issue ``sweep validate`` reports) and ``sweep plan`` prints one line per expectation. A sweep records the
expectations with their two config ids in its ``spaces`` row (:meth:`ExpectationsQuestion.record`), so the
``expectations`` view (``expectations.sql``) judges the results against what the sweep that made them
expected, with no space file at query time. ``sweep report`` adds a Known answers section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator

from sweep.headline import Headline
from sweep.markdown import query
from sweep.questions.base import AXIS_NAMES, Planner, Question
from sweep.text import plural
from workers.config import StrictModel

SIDE_KEYS = (*AXIS_NAMES, "family")  # what a side may name
DIRECTIONS = {"a_beats_b": "a beats b", "b_beats_a": "b beats a", "no_difference": "no difference"}
NAME_PATTERN = r"^[a-z][a-z0-9_]*$"


# --- the space's `expect:` section --------------------------------------------------------------------------


class Expect(StrictModel):
    """One published result as data: configuration ``a`` against ``b`` on the space's headline metric.

    ``name``: lower case, unique in the space (the view's key). ``claim``: the published statement, in words.
    ``source``: the paper and its table or figure. ``a``, ``b``: shape values that each pick out exactly one of
    the plan's configurations. ``direction``: ``a_beats_b``, ``b_beats_a`` or ``no_difference``. ``tolerance``:
    in the metric's units (points of accuracy, nats): "beats" means by more than it, "no difference" means
    within it either way, both with the 95% interval taken into account.
    """

    name: str = Field(pattern=NAME_PATTERN, max_length=60)
    claim: str = Field(min_length=1)
    source: str = Field(min_length=1)
    a: Annotated[dict[str, int | str], Field(min_length=1)]
    b: Annotated[dict[str, int | str], Field(min_length=1)]
    direction: Literal["a_beats_b", "b_beats_a", "no_difference"]
    tolerance: float = Field(gt=0.0)

    @field_validator("a", "b")
    @classmethod
    def _known_keys(cls, shape: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(shape) - set(SIDE_KEYS))
        if unknown:
            keys = ", ".join(SIDE_KEYS)
            raise ValueError(f"shape keys must be among {keys}, but got {unknown}; rename or remove them")
        return shape

    @property
    def expected(self) -> str:
        """The sign the view reports for this direction: ``a beats b``, ``b beats a`` or ``no difference``."""
        return DIRECTIONS[self.direction]


def unique_names(expect: list[Expect]) -> list[Expect]:
    """``ValueError`` naming the repeats when two expectations of a space share a name."""
    names = [e.name for e in expect]
    repeats = sorted({n for n in names if names.count(n) > 1})
    if repeats:
        raise ValueError(f"expectation names must be unique in a space, but got {repeats} twice; rename one")
    return expect


Expectations = Annotated[list[Expect], AfterValidator(unique_names)]


def side_words(side: dict[str, Any]) -> str:
    """``depth=1 num_heads=8``: a side's shape values, in SIDE_KEYS order."""
    return " ".join(f"{key}={side[key]}" for key in SIDE_KEYS if key in side)


# --- the plan -----------------------------------------------------------------------------------------------


def shape_value(shape, key: str):
    return shape.kv_heads if key == "num_kv_heads" else getattr(shape, key)


def matching_shapes(shapes: list, side: dict[str, Any]) -> list:
    """The shapes (``sweep.space.shapes.Shape``) whose values equal every value ``side`` names."""
    return [s for s in shapes if all(shape_value(s, key) == value for key, value in side.items())]


def resolve_sides(planner: Planner) -> list[tuple[Expect, Any, Any]]:
    """Each expectation with the one planned shape of each side; a side that picks out none of the plan's
    shapes, or several (with the candidates, so the fix is the key that tells them apart), is an issue (and
    the expectation is left out)."""
    resolved = []
    for index, expect in enumerate(planner.space.expect):
        found = {side: matching_shapes(planner.shapes, getattr(expect, side)) for side in ("a", "b")}
        for side, shapes in found.items():
            if len(shapes) == 1:
                continue
            if not shapes:
                rule = "must pick out one of the plan's configurations, but picks out none"
                fix = "use values the axes give (`sweep plan` lists the configurations)"
            else:
                listed = "; ".join(side_words({k: shape_value(s, k) for k in SIDE_KEYS}) for s in shapes[:4])
                rule = f"must pick out exactly one of the plan's configurations, but picks out {len(shapes)}"
                fix = f"add the key that tells them apart (candidates: {listed})"
            planner.issue(f"expect[{index}].{side}", rule, dict(getattr(expect, side)), fix)
        if all(len(shapes) == 1 for shapes in found.values()):
            resolved.append((expect, found["a"][0], found["b"][0]))
    return resolved


def same_sides(space, file: str) -> list:
    """An expectation whose two sides are the same values compares a config with itself."""
    from sweep.errors import ConfigIssue

    return [
        ConfigIssue(file, f"expect[{index}]", "a and b must differ", dict(e.a), "change one")
        for index, e in enumerate(space.expect)
        if e.a == e.b
    ]


@dataclass(frozen=True)
class PlannedExpectation:
    """An expectation of the plan with the config each side picks out."""

    expect: Expect
    a: Any  # sweep.plan.plan.PlannedConfig
    b: Any


def with_configs(planner: Planner, resolved: list[tuple[Expect, Any, Any]]) -> list[PlannedExpectation]:
    by_key = {c.shape.key(): c for c in planner.configs}
    return [PlannedExpectation(e, by_key[a.key()], by_key[b.key()]) for e, a, b in resolved]


def claim_rows(plan) -> list[dict]:
    """Each expectation as plain data, with its two config ids: what a sweep records (``spaces.questions``),
    what ``sweep plan --format json`` prints, and what ``expectations.sql`` reads."""
    return [
        {
            "name": p.expect.name,
            "claim": " ".join(p.expect.claim.split()),
            "source": " ".join(p.expect.source.split()),
            "expected": p.expect.expected,
            "tolerance": p.expect.tolerance,
            "a_shape": side_words(p.expect.a),
            "b_shape": side_words(p.expect.b),
            "a_config": p.a.config_id,
            "b_config": p.b.config_id,
        }
        for p in plan.answers["expectations"]
    ]


# --- sweep plan ---------------------------------------------------------------------------------------------


def expectation_lines(plan) -> list[str]:
    """One line per expectation: name, the two shapes and their configs, the expected sign and tolerance."""
    return [
        f"expect {row['name']}: {row['a_shape']} ({row['a_config']}) vs {row['b_shape']} ({row['b_config']}): "
        f"{row['expected']} (tolerance {row['tolerance']:g} {plan.space.metric.name}); {row['source']}"
        for row in claim_rows(plan)
    ]


# --- the report ---------------------------------------------------------------------------------------------


def fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def expectation_section(rows: list[dict]) -> str:
    """``## Known answers``: each expectation with its claim and source, the sign expected and found, Δ with
    its interval and the verdict. Nothing when the space's sweeps recorded none."""
    if not rows:
        return ""
    parts = ["\n## Known answers\n"]
    for row in rows:
        if row["found"] == "did not learn":
            parts.append(unlearned_line(row))
            continue
        if row["delta_lo"] is not None:
            interval = f"Δ {row['delta']:+.2f} (95% CI {row['delta_lo']:+.2f} … {row['delta_hi']:+.2f})"
        else:
            interval = "Δ " + (f"{row['delta']:+.2f}" if row["delta"] is not None else "unknown") + ", no interval"
        parts.append(
            f"- **{row['name']}: {row['verdict']}.** {row['claim']} ({row['source']}). Expected: "
            f"{row['a_shape']} vs {row['b_shape']}, {row['expected']} by more than {row['tolerance']:g} "
            f"{row['metric']}"
            + (" either way" if row["expected"] == "no difference" else "")
            + f"; found {row['found']}: {interval}, a {fmt(row['a_mean'])} over {plural(row['n_a'] or 0, 'seed')}, "
            f"b {fmt(row['b_mean'])} over {plural(row['n_b'] or 0, 'seed')}."
        )
    parts.append(
        "\nΔ is a's mean minus b's, signed so that positive means a is better, with its 95% Welch interval; "
        '`sweep sql "FROM expectations"` gives the table.\n'
    )
    return "\n".join(parts)


def unlearned_line(row: dict) -> str:
    """An expectation the results cannot judge because the side(s) it rests on stayed at chance
    (``found = 'did not learn'``): which side, its mean against the chance level, and that it is no finding."""
    sides = [side for side in ("a", "b") if row[f"{side}_at_chance"]]
    if row["must_learn"] in ("a", "b"):
        sides = [row["must_learn"]]
    who = " and ".join(f"{side} ({row[f'{side}_shape']}, {fmt(row[f'{side}_mean'])} over "
                       f"{plural(row[f'n_{side}'], 'seed')})" for side in sides)  # fmt: skip
    return (
        f"- **{row['name']}: {row['verdict']}.** {row['claim']} ({row['source']}). Expected: {row['a_shape']} vs "
        f"{row['b_shape']}, {row['expected']}; found did not learn: {who} did not get beyond the chance level "
        f"of {fmt(row['chance_score'])} {row['metric']}, so these results say nothing about the claim (train "
        "longer, or with the full profile, before judging it)."
    )


class ExpectationsQuestion(Question):
    """``expect:``: published results judged against the results (see the module's docstring)."""

    name = "expectations"
    section = "expect"
    section_model = Expectations
    section_default: ClassVar[list] = []
    section_doc = "published results the space reproduces, judged on its results (sweep/questions/expectations.py)"
    sql = "expectations.sql"
    report_place = "costs"

    def space_issues(self, space, file: str) -> list:
        return same_sides(space, file)

    def add_shapes(self, planner: Planner) -> list[tuple[Expect, Any, Any]]:
        if not planner.space.expect or same_sides(planner.space, ""):  # those are reported instead
            return []
        return resolve_sides(planner)

    def add_configs(self, planner: Planner, answer: list | None) -> list[PlannedExpectation]:
        return with_configs(planner, answer or [])

    def plan_lines(self, plan) -> list[str]:
        return expectation_lines(plan)

    def plan_json(self, plan) -> dict:
        return {"expectations": claim_rows(plan)} if plan.answers["expectations"] else {}

    def record(self, plan) -> list[dict] | None:
        return claim_rows(plan)

    def report_section(self, con, space: str, headline: Headline, data) -> str:
        return expectation_section(query(con, "FROM expectations WHERE space = ?", space))


QUESTION = ExpectationsQuestion()
