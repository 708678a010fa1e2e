"""Known answers at chance (issue 38, point 2): an expectation is inconclusive, found 'did not learn', never a
finding, when the side its claim says wins is at chance (or, for 'no difference', both sides are); a side the
claim says loses may stay at chance and the claim is still judged. Through the CLI: planted rows of
``known_more_heads_hurt --profile smoke`` imported with ``sweep import``, its claims recorded as ``sweep run``
records them, then ``sweep sql`` and ``sweep report``."""

import json

import pytest

from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.questions.expectations import QUESTION
from sweep.results.sink import record_space
from sweep.space.loader import load_space
from tests.helpers import write_csv

SPACE = "known_more_heads_hurt"
CHANCE = 12.5  # one of the 8 candidates (the space's why:)


def rows_for(plan, scores: dict[int, list[float]]) -> list[dict]:
    """One imported row per seed of the 1-head and 8-head configs, ``scores`` by num_heads."""
    rows = []
    for config in plan.configs:
        shape = config.shape
        for seed, score in enumerate(scores[shape.num_heads]):
            rows.append({
                "space": SPACE, "config_id": config.config_id, "seed": seed, "family": "gpt2",
                "depth": shape.depth, "num_heads": shape.num_heads, "head_dim": shape.head_dim,
                "embed_dim": shape.embed_dim, "mlp_dim": shape.mlp_dim, "status": "ok",
                "params": 1000 + shape.num_heads, "is_baseline": shape.num_heads == 1, "metric": "accuracy",
                "metric_mode": "max", "accuracy": score, "chance_score": CHANCE,
            })  # fmt: skip
    return rows


def planted(tmp_path, scores: dict[int, list[float]], capsys, direction: str | None = None):
    """The smoke plan's claims recorded as a sweep records them (``direction`` replacing the shipped one), the
    rows imported through ``sweep import``; the results folder."""
    name, space, profile = load_space(SPACE, "smoke")
    plan = make_plan(name, space, profile)
    claims = QUESTION.record(plan)
    if direction:
        claims = [{**c, "expected": direction} for c in claims]
    results = tmp_path / "results"
    csv = write_csv(tmp_path / "rows.csv", rows_for(plan, scores))
    assert main(["import", str(csv), "--results", str(results)]) == 0
    recorded = json.dumps({"expectations": claims})
    record_space(results, SPACE, "smoke-sweep", "smoke", "q", "accuracy", "max", 2.0, recorded)
    capsys.readouterr()
    return results


def judged(results, capsys) -> tuple[str, str]:
    query = "SELECT found || '|' || verdict AS v FROM expectations"
    assert main(["sql", query, "--results", str(results), "--format", "csv"]) == 0
    return tuple(capsys.readouterr().out.strip().splitlines()[-1].split("|"))


def known_answers(results, tmp_path, capsys) -> str:
    out = tmp_path / "report"
    assert main(["report", SPACE, "--results", str(results), "--out", str(out)]) == 0
    capsys.readouterr()
    text = (out / "README.md").read_text() if (out / "README.md").exists() else next(out.glob("*.md")).read_text()
    return text[text.index("## Known answers") :]


@pytest.mark.slow
def test_smoke_run_with_both_sides_at_chance_is_inconclusive_not_a_disagreement(tmp_path, capsys):
    # the smoke profile's numbers: 0.8% and 1.0% against chance 12.5%
    results = planted(tmp_path, {1: [0.8, 0.8], 8: [1.0, 1.2]}, capsys)
    assert judged(results, capsys) == ("did not learn", "inconclusive")
    section = known_answers(results, tmp_path, capsys)
    assert "**one_full_rank_head_beats_eight: inconclusive.**" in section
    assert "disagrees" not in section and "found no difference" not in section and "found did not learn" in section
    assert "a (num_heads=1, 0.80 over 2 seeds) did not get beyond the chance level of 12.50 accuracy" in section


@pytest.mark.parametrize(
    ("scores", "direction", "expected"),
    [
        # the side the claim says wins (a, 1 head) stays at chance, b learned: no finding
        ({1: [1.0, 2.0], 8: [60.0, 61.0]}, None, ("did not learn", "inconclusive")),
        # the side the claim says loses stays at chance: judged (a one-layer-fails claim stays checkable)
        ({1: [78.0, 79.0], 8: [1.0, 2.0]}, None, ("a beats b", "agrees")),
        # 'b beats a' with b at chance: no finding; with a at chance: judged
        ({1: [78.0, 79.0], 8: [1.0, 2.0]}, "b beats a", ("did not learn", "inconclusive")),
        ({1: [1.0, 2.0], 8: [60.0, 61.0]}, "b beats a", ("b beats a", "agrees")),
        # 'no difference': both at chance is no finding, one at chance is a real difference
        ({1: [1.0, 2.0], 8: [1.5, 1.0]}, "no difference", ("did not learn", "inconclusive")),
        ({1: [78.0, 79.0], 8: [1.0, 2.0]}, "no difference", ("a beats b", "disagrees")),
        # both learned: as before
        ({1: [78.0, 79.0], 8: [60.0, 61.0]}, None, ("a beats b", "agrees")),
    ],
)
def test_which_side_at_chance_decides_whether_the_claim_is_judged(tmp_path, capsys, scores, direction, expected):
    results = planted(tmp_path, scores, capsys, direction)
    assert judged(results, capsys) == expected
