"""The written report (sweep/analysis/report/write.py): it states the answer, the recorded question, and the
theorem beside the measured κ."""

import pytest

from sweep.analysis.report import write_report
from sweep.cli import main
from sweep.results.importer import import_file
from tests.helpers import PLANTED_MEANS, planted_rows, write_csv


@pytest.mark.slow
def test_report_renders_and_states_the_answer(planted, tmp_path):
    index = write_report("plant", planted, tmp_path / "report", question="Where does it break?")
    text = index.read_text()
    assert "**4 heads of 16**: holds down to depth 2; breaks at depth 1" in text
    assert "**16 heads of 4**: holds down to depth 1, the smallest tried: nothing broke in this range" in text
    assert "depth 1: breaks (Δ -10.0, 95% CI" in text and "depth 4: 90.0% (the baseline)" in text
    answer = text.split("## The answer\n", 1)[1].strip().split("\n")[0]  # the first paragraph
    assert answer.startswith("Of 11 configs judged against the baseline on top-1")
    assert "The leanest that holds is 1 block × 16 heads of 4: holds (Δ +0.0, 95% CI" in answer
    assert "## At equal cost, which shape wins?" in text and "## Does κ track the metric?" in text
    for picture in ("pareto.png", "delta_heatmap.png", "throughput_vs_params.png"):
        assert (tmp_path / "report" / picture).stat().st_size > 10_000
        assert f"]({picture})" in text


@pytest.mark.slow
def test_report_without_a_question_states_the_one_its_latest_sweep_recorded(planted, tmp_path):
    """`sweep report` reads the question from the results (the sweeps' `spaces` rows), not from the space file,
    whose loading would import torch."""
    from sweep.results.sink import record_space

    record_space(planted, "plant", "later-sweep", None, "Where, recorded, does it break?")
    assert main(["report", "plant", "--results", str(planted), "--out", str(tmp_path / "report")]) == 0
    assert "> Where, recorded, does it break?" in (tmp_path / "report" / "index.md").read_text()


@pytest.mark.slow
def test_report_puts_the_theorem_beside_the_measured_kappa(tmp_path):
    """Planted fixed-d_model rows (D = 64) seen at N = 128 tokens: D < N, so the report says the theorem does
    not apply, gives no theorem value, and the Gaussian edges' κ, (√128 + √64)/(√128 − √64) = 5.83."""
    rows = [{**row, "num_tokens": 128, "head_dim_rule": "fixed_d_model"}
            for row in planted_rows("theory", PLANTED_MEANS, noise=0.05)]  # fmt: skip
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "theory.csv", rows), results)
    text = write_report("theory", results, tmp_path / "report").read_text()
    section = text.split("## Theory beside practice (Theorem 3.2)", 1)[1]
    assert "**Fixed d_model.** With d_model fixed, D = heads × head_dim is 64 whatever the heads" in section
    assert "Where D ≤ N = 128 the theorem does not apply" in section and "D = 64: 5.83" in section
    assert pytest.approx(5.828, abs=1e-3) == (128**0.5 + 8) / (128**0.5 - 8)
    table = [line for line in section.splitlines() if line.startswith("| 16 ")]
    assert table and "D < N (theorem does not apply)" in table[0]
