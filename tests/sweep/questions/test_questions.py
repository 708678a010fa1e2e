"""The questions registry (sweep/questions/): what the space model, the plan, sweep plan, the SQL loader and
the report loop over. A toy question registered here must reach every one of them without another edit."""

from __future__ import annotations

import json

import pytest

from sweep.analysis.report import write_report
from sweep.analysis.views import analysis_views
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.questions import QUESTIONS, sections
from sweep.questions.base import Question, innermost_model
from sweep.results.importer import import_file
from sweep.space.loader import load_space
from sweep.space.model import Profile, Space
from sweep.space.shapes import enumerate_shapes
from tests.helpers import PLANTED_MEANS, planted_rows, query, write_csv


class ToyQuestion(Question):
    """Counts each space's configs with more than 8 heads; removes 3 heads (a rule of its own)."""

    name = "toy"
    report_place = "mechanism"

    def sql_text(self) -> str:
        return (
            "CREATE OR REPLACE VIEW toy_wide AS\n"
            "SELECT space, count(*) AS wide FROM configs WHERE num_heads > 8 GROUP BY space;\n"
        )

    def combination_rule(self, combination: dict) -> str | None:
        return "the toy question forbids 3 heads" if combination["num_heads"] == 3 else None

    def plan_lines(self, plan) -> list[str]:
        return [f"toy: {sum(c.shape.num_heads > 8 for c in plan.configs)} wide configs"]

    def plan_json(self, plan) -> dict:
        return {"toy": len(plan.configs)}

    def report_section(self, con, space, headline, data) -> str:
        (wide,) = con.execute("SELECT wide FROM toy_wide WHERE space = ?", [space]).fetchone()
        return f"\n## Toy\n\n{wide} wide configs.\n"


@pytest.fixture
def toy():
    question = ToyQuestion()
    QUESTIONS.append(question)
    try:
        yield question
    finally:
        QUESTIONS.remove(question)


def test_every_section_of_a_question_is_a_section_of_the_space_and_of_its_profiles():
    assert set(sections()) == {"budget", "controls", "expect", "tune"}
    for name, question in sections().items():
        field = Space.model_fields[name]
        assert innermost_model(field.annotation) is innermost_model(question.section_model) is not None
        assert field.default == question.section_default and name in Profile.model_fields


@pytest.mark.slow
def test_a_registered_question_adds_its_view_and_its_report_section(toy, tmp_path):
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "plant.csv", planted_rows("plant", PLANTED_MEANS, noise=0.05)), results)
    assert "toy_wide" in analysis_views()
    wide = sum(heads > 8 for _, heads in PLANTED_MEANS)  # 16 and 64 heads at three depths
    assert query(results, "FROM toy_wide") == [{"space": "plant", "wide": wide}]
    report = write_report("plant", results, tmp_path / "report").read_text()
    assert f"## Toy\n\n{wide} wide configs." in report
    assert report.index("## Toy") > report.index("## Along depth")


def test_a_registered_question_removes_combinations_and_prints_its_plan_lines(toy, capsys):
    name, space, profile = load_space("local_digits")
    three = space.model_copy(update={"axes": space.axes.model_copy(update={"num_heads": [3, 4, 16]})})
    shapes, removed = enumerate_shapes(three)
    assert {s.num_heads for s in shapes} == {4, 16}
    assert {r.reason for r in removed if r.combination["num_heads"] == 3} == {"the toy question forbids 3 heads"}
    assert main(["plan", "local_digits"]) == 0
    plan = make_plan(name, space, profile)
    wide = sum(c.shape.num_heads > 8 for c in plan.configs)
    assert f"toy: {wide} wide configs" in capsys.readouterr().out.splitlines()
    assert main(["plan", "local_digits", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["toy"] == len(found["trials"]) == len(plan.configs)


def test_the_shipped_axis_names_are_the_declared_ones():
    """``AXIS_NAMES`` (read as modules import) names the shape's axes and then every shipped question's declared
    axis, as ``axis_names()`` reads them from the registry."""
    from sweep.questions import axis_names, declared_axes
    from sweep.questions.base import AXIS_NAMES, SHAPE_AXES

    assert AXIS_NAMES == axis_names() == (*SHAPE_AXES, "num_kv_heads", "conditioning")
    assert [(a.name, a.sql_type, a.as_built_sql()) for a in declared_axes()] == [
        ("num_kv_heads", "BIGINT", "num_heads"),
        ("conditioning", "VARCHAR", "'none'"),
    ]
