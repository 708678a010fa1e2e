"""The shipped `lra_listops` space the way users run it: `sweep plan` and `sweep run` through the CLI, then the
analysis judges each family against its own baseline on accuracy, and the report renders."""

import json

import pytest

from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.space.loader import load_space
from tests.helpers import query, run_smoke_profile


def test_plan_shows_the_authors_baseline_in_the_papers_parameter_range(capsys):
    assert main(["plan", "lra_listops"]) == 0
    out = capsys.readouterr().out
    assert "baseline: depth 2 × 2 heads of 32, 209.2K params (209,238)" in out
    assert "judged on: accuracy" in out
    assert "published Nyströmformer, 2 heads (depth 2, num_heads 2): no parameter count, accuracy 36.4" in out
    plan = make_plan(*load_space("lra_listops"))
    assert 160_000 <= plan.baseline.params <= 470_000
    assert {c.shape.family for c in plan.configs if c.is_baseline} == {"nystromformer", "softmax_encoder"}


@pytest.mark.parametrize("profile", ["paper", "paper_generated", "cpu", "smoke"])
def test_every_profile_runs_both_families_on_the_same_shapes(profile):
    plan = make_plan(*load_space("lra_listops", profile))
    shapes = {family: {c.shape.key()[:5] for c in plan.configs if c.shape.family == family}
              for family in ("nystromformer", "softmax_encoder")}  # fmt: skip
    assert shapes["nystromformer"] == shapes["softmax_encoder"] and shapes["nystromformer"]
    assert plan.space.metric.name == "accuracy" and plan.space.data.name in ("listops", "lra_listops")
    assert all(c.params < 470_000 for c in plan.configs)


@pytest.mark.slow
def test_smoke_profile_runs_end_to_end_through_the_cli(tmp_path, local_ray, capfd):
    results = tmp_path / "results"
    trials = run_smoke_profile("lra_listops", results, capfd)
    assert len(trials) == 8 and {t["status"] for t in trials} == {"ok"}
    for trial in trials:
        assert trial["metric"] == "accuracy" and trial["metric_mode"] == "max"
        assert trial["score"] == trial["accuracy"] and 0 <= trial["accuracy"] <= 100
        assert trial["top1"] is None and trial["seq_len"] == 32
        assert trial["train_tokens_per_s"] == pytest.approx(trial["train_samples_per_s"] * 32)
        assert trial["infer_tokens_per_s"] == pytest.approx(trial["infer_samples_per_s"] * 32)
        assert json.loads(trial["trial_config"])["model"]["family"] == trial["family"]
    assert {(t["family"], t["depth"], t["num_heads"]) for t in trials if t["is_baseline"]} == {
        ("nystromformer", 2, 2),
        ("softmax_encoder", 2, 2),
    }
    verdicts = query(results, "FROM vs_baseline ORDER BY family, depth, num_heads")
    assert len(verdicts) == 8 and {v["metric"] for v in verdicts} == {"accuracy"}
    for verdict in verdicts:  # each family against its own baseline
        base = next(t for t in trials if t["is_baseline"] and t["family"] == verdict["family"])
        assert verdict["baseline_score"] == pytest.approx(base["accuracy"])
        if verdict["is_baseline"]:
            assert verdict["evidence"] == verdict["verdict"] == "baseline"
        else:  # one seed each, and a smoke baseline may stay at chance (10 classes): never a verdict either way
            wanted = "baseline at chance" if verdict["baseline_at_chance"] else "single seed"
            assert verdict["verdict"] == "inconclusive" and verdict["evidence"] == wanted
    kappa = query(results, "SELECT DISTINCT family, attention FROM kappa_vs_heads WHERE attention IS NOT NULL")
    assert {(k["family"], k["attention"]) for k in kappa} == {("nystromformer", "nystrom"), ("softmax_encoder", "self")}
    out = tmp_path / "report"
    assert main(["report", "lra_listops", "--results", str(results), "--out", str(out)]) == 0
    text = (out / "index.md").read_text()
    assert "accuracy" in text and "softmax_encoder" in text
    assert (out / "delta_heatmap.png").stat().st_size > 0
