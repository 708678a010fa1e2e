"""The questions registry, for a question that labels configs and adds an axis: a toy question, one class and
one registry line, plugs in whole from its declarations (``Question.labels``, ``Question.axes``), followed through
the plan (``make_plan``, its payloads, the worker's model config, ``sweep plan``), the results (the sink's rows,
as Parquet), the views (``configs`` through ``sweep sql``) and the report, with no edit to the space model, the
shapes, the schema, the sink, the SQL files, the plan or the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.analysis.report import write_report
from sweep.analysis.views import views_text
from sweep.cli import main
from sweep.errors import SpaceError
from sweep.plan.plan import make_plan
from sweep.questions import QUESTIONS
from sweep.questions.base import Axis, Label, Question
from sweep.results.sink import ParquetSink, record_space
from sweep.space.loader import load_space
from tests.helpers import query
from workers.config import ModelSpec
from workers.models import build_on_meta

SPACE = "local_digits"  # 12 configs: depth 1, 2, 4 × 1, 4, 16, 64 heads
SPACES = Path(__file__).resolve().parents[3] / "search_spaces"


class ToyLabels(Question):
    """Tags each config with 16 heads or more as ``wide`` and ranks it by its heads (a label names a treatment: one
    that varied with depth would split the edge search's columns, ``Shape.depth_column``); adds the axis
    ``toy_patch``, the ViT's patch size (2, the digits ViT's own, unless the space varies it); writes how many are
    wide, and how many configs each patch size has."""

    name = "toy_labels"
    report_place = "mechanism"
    labels = (
        Label("toy_tag", "VARCHAR", "wide: 16 heads or more; NULL otherwise", plan_after="num_heads", plan_blank="-"),
        Label("toy_rank", "BIGINT", "the config's heads times 10, for wide configs", in_configs="max", in_plan=False),
    )
    axes = (Axis("toy_patch", "BIGINT", "the ViT's patch size in pixels", default=2, model_field="patch_size"),)

    def add_shapes(self, planner):
        planner.shapes = [wide_labelled(s) if s.num_heads >= 16 else s for s in planner.shapes]

    def report_section(self, con, space, headline, data) -> str:
        rows = con.execute(
            "SELECT toy_tag, count(*), sum(toy_rank) FROM configs WHERE space = ? AND toy_tag IS NOT NULL GROUP BY 1",
            [space],
        ).fetchall()
        patches = con.execute(
            "SELECT toy_patch, count(*) FROM configs WHERE space = ? GROUP BY 1 ORDER BY 1", [space]
        ).fetchall()
        return "".join(
            f"\n## Toy labels\n\n{n} configs tagged {tag}, ranks summing to {total}.\n" for tag, n, total in rows
        ) + "".join(f"\nPatch {patch}: {n} configs.\n" for patch, n in patches)


def wide_labelled(shape):
    return shape.labelled(toy_tag="wide", toy_rank=10 * shape.num_heads)


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
        expected = ("wide", 10 * config.shape.num_heads) if wide(config) else (None, None)
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


@pytest.mark.slow
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
    ranked = lambda r: 10 * r["num_heads"] if r["num_heads"] >= 16 else None  # noqa: E731
    labelled = {(r["num_heads"] >= 16, r["toy_tag"], r["toy_rank"] == ranked(r)) for r in rows}
    assert labelled == {(True, "wide", True), (False, None, True)}

    configs = query(results, "SELECT depth, num_heads, toy_tag, toy_rank FROM configs")
    assert sorted((c["depth"], c["num_heads"], c["toy_tag"], c["toy_rank"]) for c in configs if c["toy_tag"]) == [
        (d, h, "wide", 10 * h) for d in (1, 2, 4) for h in (16, 64)
    ]
    assert main(["sql", "--results", str(results), "SELECT count(*) AS n FROM configs WHERE toy_tag = 'wide'"]) == 0
    assert "6" in capsys.readouterr().out
    report = write_report(SPACE, results, tmp_path / "report").read_text()
    assert "## Toy labels\n\n6 configs tagged wide, ranks summing to 2400." in report  # 3 depths × 10 · (16 + 64)


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
        assert query(results, "SELECT DISTINCT toy_patch FROM trials") == [{"toy_patch": 2}]  # as built (Axis.default)
        monkeypatch.chdir(tmp_path)  # where a plain shell runs: the views read results/ below it
        con = duckdb.connect()
        con.execute(views_text())
        assert con.execute(counted).fetchall() == [(1, 0, 0)]
    finally:
        QUESTIONS.pop()


# --- the axis -------------------------------------------------------------------------------------------------


def toy_space(tmp_path) -> str:
    """local_digits with the toy axis varied: patch 2 (the space's own) and 4, so 8×8 digits give 16 or 4 patches."""
    text = (SPACES / f"{SPACE}.yaml").read_text()
    assert "num_heads: [1, 4, 16, 64]" in text
    path = tmp_path / "toy_axis.yaml"
    text = text.replace("num_heads: [1, 4, 16, 64]", "num_heads: [1, 4, 16, 64]\n  toy_patch: [4, 2]")
    path.write_text(
        text.replace("baseline: {depth: 4, num_heads: 4}", "baseline: {depth: 4, num_heads: 4, toy_patch: 2}")
    )
    return str(path)


def test_an_axis_needs_its_question(tmp_path):
    with pytest.raises(SpaceError, match="toy_patch"):
        load_space(toy_space(tmp_path))


def test_the_plan_crosses_a_declared_axis_and_the_worker_builds_it(toy, tmp_path, capsys):
    plan, plain = make_plan(*load_space(toy_space(tmp_path))), make_plan(*load_space(SPACE))
    by_patch = {p: [c for c in plan.configs if c.shape.axis("toy_patch") == p] for p in (2, 4)}
    assert [len(by_patch[2]), len(by_patch[4])] == [len(plain.configs)] * 2
    # at the axis's default the worker gets nothing new: the same configs, ids, params and FLOPs as without it
    same = lambda c: (c.config_id, c.params, c.flops_per_sample, c.model)  # noqa: E731
    assert sorted(map(same, by_patch[2])) == sorted(map(same, plain.configs))
    assert {c.model["patch_size"] for c in by_patch[4]} == {4} and plan.baseline.shape.axis("toy_patch") == 2
    for config in by_patch[4]:  # the worker's model reads it: 4×4 patches, 4 + 1 tokens against 16 + 1
        built = build_on_meta(ModelSpec(**config.model))
        assert built.patch_embed.proj.kernel_size == (4, 4) and built.patch_embed.num_patches == 4
        twin = next(c for c in by_patch[2] if c.shape.key() == config.shape.key()[:-1])  # ("toy_patch", 4) last
        assert config.config_id != twin.config_id and config.flops_per_sample < twin.flops_per_sample
    for payload in plan.trials():
        assert payload["shape"]["toy_patch"] == payload["trial_config"]["model"]["patch_size"]
    assert main(["plan", toy_space(tmp_path), "--format", "json"]) == 0
    trials = json.loads(capsys.readouterr().out)["trials"]
    assert sorted({row["toy_patch"] for row in trials}) == [2, 4] and len(trials) == len(plan.configs)


@pytest.mark.slow
def test_a_declared_axis_reaches_the_results_the_views_and_the_report(toy, tmp_path):
    name, space, profile = load_space(toy_space(tmp_path))
    plan = make_plan(name, space, profile)
    results = tmp_path / "results"
    sink = ParquetSink(results, "sweep-1")
    for payload in plan.trials():  # patch 4 scores 10 points below patch 2
        score = 80.0 - 5 * payload["shape"]["toy_patch"] + payload["seed"]
        trial, record = sink_trial(payload, score)
        sink.on_trial_result(0, [], trial, {"record": record})
        sink.on_trial_complete(0, [], trial)
    record_space(results, name, "sweep-1", None, space.question, "top1", "max", 0.5)
    files = list((results / "trials" / name / "sweep-1").glob("*.parquet"))
    assert pq.read_schema(files[0]).field("toy_patch").type == pa.int64()
    rows = [row for path in files for row in pq.read_table(path).to_pylist()]
    assert sorted({row["toy_patch"] for row in rows}) == [2, 4]
    configs = query(
        results, "SELECT toy_patch, count(*) AS n, avg(score_mean) AS score FROM configs GROUP BY 1 ORDER BY 1"
    )
    assert configs == [{"toy_patch": 2, "n": 12, "score": 70.5}, {"toy_patch": 4, "n": 12, "score": 60.5}]
    judged = query(
        results, "SELECT toy_patch, count(*) AS n, avg(delta) AS delta FROM vs_baseline GROUP BY 1 ORDER BY 1"
    )
    assert [(r["toy_patch"], r["n"], round(r["delta"], 9)) for r in judged] == [(2, 12, 0.0), (4, 12, -10.0)]
    # the edges and the matched budgets name the axis and keep its values apart (the views' /*@axes*/ tokens):
    # one edge row per (heads, patch), 3 depths each; patch 4 breaks at every depth, patch 2 nowhere
    edges = query(results, "SELECT num_heads, toy_patch, verdicts, breaks_at_depth FROM depth_edge")
    assert sorted((e["num_heads"], e["toy_patch"], e["breaks_at_depth"]) for e in edges) == [
        (h, p, None if p == 2 else 4) for h in (1, 4, 16, 64) for p in (2, 4)
    ]
    assert {tuple(e["verdicts"]) for e in edges if e["toy_patch"] == 4} == {("breaks",) * 3}
    assert all("breaks" not in e["verdicts"] and len(e["verdicts"]) == 3 for e in edges if e["toy_patch"] == 2)
    matched = query(
        results, "SELECT DISTINCT toy_patch, matched_toy_patch FROM matched_budget WHERE cost_kind = 'params'"
    )
    assert matched and all(m["matched_toy_patch"] in (2, 4) for m in matched)
    report = write_report(name, results, tmp_path / "report").read_text()
    assert "Patch 2: 12 configs.\n\nPatch 4: 12 configs." in report
