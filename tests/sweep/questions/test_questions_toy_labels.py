"""The questions registry, for a question that labels configs: a toy question, one class and one registry
line, plugs in whole from its declarations (``Question.labels``), followed through the plan (``make_plan``, its
payloads, ``sweep plan``), the results (the sink's rows, as Parquet), the views (``configs`` through ``sweep
sql``) and the report, with no edit to the schema, the sink, the SQL files, the plan or the CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis.report import write_report
from sweep.analysis.views import views_text
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.questions import QUESTIONS
from sweep.questions.base import Label, Question
from sweep.results.sink import ParquetSink, record_space
from sweep.space.loader import load_space
from tests.helpers import query

SPACE = "local_digits"  # 12 configs: depth 1, 2, 4 × 1, 4, 16, 64 heads


class ToyLabels(Question):
    """Tags each config with 16 heads or more as ``wide`` and ranks it by depth; writes how many are wide."""

    name = "toy_labels"
    report_place = "mechanism"
    labels = (
        Label("toy_tag", "VARCHAR", "wide: 16 heads or more; NULL otherwise", plan_after="num_heads", plan_blank="-"),
        Label("toy_rank", "BIGINT", "the config's depth times 10, for wide configs", in_configs="max", in_plan=False),
    )

    def add_shapes(self, planner):
        planner.shapes = [wide_labelled(s) if s.num_heads >= 16 else s for s in planner.shapes]

    def report_section(self, con, space, headline, data) -> str:
        rows = con.execute(
            "SELECT toy_tag, count(*), sum(toy_rank) FROM configs WHERE space = ? AND toy_tag IS NOT NULL GROUP BY 1",
            [space],
        ).fetchall()
        return "".join(
            f"\n## Toy labels\n\n{n} configs tagged {tag}, ranks summing to {total}.\n" for tag, n, total in rows
        )


def wide_labelled(shape):
    return shape.labelled(toy_tag="wide", toy_rank=10 * shape.depth)


@pytest.fixture
def toy():
    question = ToyLabels()
    QUESTIONS.append(question)  # the one registry line
    try:
        yield question
    finally:
        QUESTIONS.remove(question)


def wide(config) -> bool:
    return config.shape.num_heads >= 16


def test_the_plan_carries_a_declared_label_to_its_configs_payloads_and_table(toy, capsys):
    plan = make_plan(*load_space(SPACE))
    assert {c.label("toy_tag") for c in plan.configs if wide(c)} == {"wide"}
    assert {c.label("toy_tag") for c in plan.configs if not wide(c)} == {None}
    for payload in plan.trials():  # every declared label travels with the trial, None where unset
        config = next(c for c in plan.configs if c.config_id == payload["config_id"])
        expected = ("wide", 10 * config.shape.depth) if wide(config) else (None, None)
        assert (payload["toy_tag"], payload["toy_rank"]) == expected
    assert main(["plan", SPACE, "--format", "json"]) == 0
    trials = json.loads(capsys.readouterr().out)["trials"]
    assert [list(row)[list(row).index("num_heads") + 1] for row in trials] == ["toy_tag"] * len(trials)
    assert {(row["num_heads"] >= 16, row["toy_tag"]) for row in trials} == {(True, "wide"), (False, "-")}
    assert all("toy_rank" not in row for row in trials)  # in_plan=False
    assert main(["plan", SPACE]) == 0
    assert "toy_tag" in capsys.readouterr().out


def sink_trial(payload: dict, score: float) -> SimpleNamespace:
    """What Tune hands the sink for a finished trial, and the record its worker reported."""
    trial = SimpleNamespace(trial_id=f"{payload['config_id']}-s{payload['seed']}", config={"payload": payload},
                            num_failures=0, error_file=None)  # fmt: skip
    record = {"status": "ok", "error": None, payload["metric"]: score, "epochs": [], "kappa": []}
    return trial, record


def test_a_declared_label_reaches_the_results_the_views_and_the_report(toy, tmp_path, capsys):
    plan = make_plan(*load_space(SPACE))
    results = tmp_path / "results"
    sink = ParquetSink(results, "sweep-1")
    for payload in plan.trials():
        trial, record = sink_trial(payload, 50.0 + payload["shape"]["depth"] + payload["seed"])
        sink.on_trial_result(0, [], trial, {"record": record})
        sink.on_trial_complete(0, [], trial)
    record_space(results, SPACE, "sweep-1", None, plan.space.question, "top1", "max", 0.5)

    files = list((results / "trials" / SPACE / "sweep-1").glob("*.parquet"))
    rows = [row for path in files for row in pq.read_table(path).to_pylist()]
    assert len(rows) == len(plan.trials()) and pq.read_schema(files[0]).field("toy_rank").type == pa.int64()
    assert {(r["num_heads"] >= 16, r["toy_tag"], r["toy_rank"] == (10 * r["depth"] if r["num_heads"] >= 16 else None))
            for r in rows} == {(True, "wide", True), (False, None, True)}  # fmt: skip

    configs = query(results, "SELECT depth, num_heads, toy_tag, toy_rank FROM configs")
    assert sorted((c["depth"], c["num_heads"], c["toy_tag"], c["toy_rank"]) for c in configs if c["toy_tag"]) == [
        (d, h, "wide", 10 * d) for d in (1, 2, 4) for h in (16, 64)
    ]
    assert main(["sql", "--results", str(results), "SELECT count(*) AS n FROM configs WHERE toy_tag = 'wide'"]) == 0
    assert "6" in capsys.readouterr().out
    report = write_report(SPACE, results, tmp_path / "report").read_text()
    assert "## Toy labels\n\n6 configs tagged wide, ranks summing to 140." in report  # 2 × 10 · (1 + 2 + 4)


def test_files_written_before_a_label_existed_read_it_as_null(tmp_path, monkeypatch):
    """The label's column comes from its declaration, for rows from before the question as for new ones: through
    the tool, and in a plain DuckDB shell over ``sweep sql --print-views`` (compat.sql's typed NULL)."""
    plan = make_plan(*load_space(SPACE))
    results = tmp_path / "results"
    sink = ParquetSink(results, "old")
    for payload in plan.trials()[:2]:
        trial, record = sink_trial(payload, 60.0)
        sink.on_trial_result(0, [], trial, {"record": record})
        sink.on_trial_complete(0, [], trial)
    record_space(results, SPACE, "old", None, plan.space.question, "top1", "max", 0.5)
    QUESTIONS.append(ToyLabels())  # the question arrives after those files were written
    try:
        counted = "SELECT count(*) AS n, count(toy_tag) AS tagged, count(toy_rank) AS ranked FROM configs"
        assert query(results, counted) == [{"n": 1, "tagged": 0, "ranked": 0}]
        monkeypatch.chdir(tmp_path)  # where a plain shell runs: the views read results/ below it
        con = duckdb.connect()
        con.execute(views_text())
        assert con.execute(counted).fetchall() == [(1, 0, 0)]
    finally:
        QUESTIONS.pop()
