"""`sweep kappa-theory` (sweep/cli/theory.py): Theorem 3.2's κ beside a sampled one, for given shapes and for a
space's."""

import json

import pytest

from sweep.cli import main


def test_kappa_theory_command(capsys):
    assert main(["kappa-theory", "--tokens", "16", "--head-dim", "64", "--heads", "1,16", "--format", "json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out)
    small, large = rows
    assert small["regime"].startswith("D > N") and large["regime"] == "D >> N"
    assert large["sampled_over_theorem"] == pytest.approx(1.0, abs=0.05)
    assert main(["kappa-theory", "--tokens", "197", "--width", "64", "--heads", "1"]) == 0
    assert "does not apply" in capsys.readouterr().out


@pytest.mark.slow
def test_kappa_theory_of_a_space_says_its_parametrisation_and_where_the_bound_applies(capsys):
    """mqar_recall's cpu profile: d_model 64 fixed, N = 16 tokens, so D = 64 for every head count and the
    bound is (√64 + √16)/(√64 − √16) = 3 for each; gpt2_tinystories: D = 512 = N tokens, where the theorem's
    formula is infinite: no theorem value is printed there, and the regime says why."""
    assert (
        main(["kappa-theory", "--space", "mqar_recall", "--profile", "cpu", "--samples", "4", "--format", "json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    shapes = {(r["heads"], r["head_dim"], r["width_D"], r["tokens_N"]) for r in rows}
    assert shapes == {(1, 64, 64, 16), (4, 16, 64, 16), (16, 4, 64, 16)}
    assert all(r["kappa_theorem"] == pytest.approx(3.0) and r["parametrisation"] == "fixed d_model" for r in rows)
    assert main(["kappa-theory", "--space", "gpt2_tinystories", "--samples", "2"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the paragraph is wrapped
    assert "fixed d_model, N = 512 tokens" in text and "it predicts no effect of heads on κ" in text
    assert "Where D ≤ N = 512 the theorem does not apply" in text
    assert main(["kappa-theory", "--space", "gpt2_tinystories", "--samples", "2", "--format", "json"]) == 0
    at_n = [r for r in json.loads(capsys.readouterr().out) if r["width_D"] == 512]
    assert at_n and all(r["kappa_theorem"] is None and r["regime"] == "D = N (κ unbounded)" for r in at_n)
