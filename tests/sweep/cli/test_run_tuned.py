"""``sweep run`` on a tiny space with ``tune:``, end to end through Ray and real trials (sweep/cli/run.py's
run_tuned): the selection runs at each rate train at that rate, then the verdict seeds at each config's chosen
rate; ``sweep sql`` shows the chosen rates, the curve and the tuned verdicts; the answer names the rates."""

import json
import textwrap

import pytest

from sweep.cli import main
from tests.helpers import TINY_SPACE_BODY, query

SPACE = (
    "question: does the tiny trade survive tuning?\n"
    + TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1]")
    + "tune: {lr: [1.0e-3, 1.0e-2], selection_seeds: [100]}\n"
)


@pytest.mark.slow
def test_sweep_run_tunes_each_config_then_runs_its_verdict_seeds_at_the_chosen_rate(tmp_path, local_ray, capfd):
    path = tmp_path / "tiny_tuned.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0
    err = capfd.readouterr().err
    assert "0 of 4 selection runs recorded, then 4 verdict runs at the chosen rates" in err, err[-3000:]
    assert "[sweep] learning rate: chosen per config on selection seeds no verdict counts (2 configs)" in err
    rows = query(results, "SELECT config_id, seed, tune_phase, tune_lr, trial_config FROM trials ORDER BY ALL")
    assert sorted((r["tune_phase"], r["seed"], r["tune_lr"]) for r in rows if r["tune_phase"] == "selection") == [
        ("selection", 100, 1e-3), ("selection", 100, 1e-3), ("selection", 100, 1e-2), ("selection", 100, 1e-2)
    ]  # fmt: skip
    for r in rows:  # every trial trained at the rate its row names
        assert json.loads(r["trial_config"])["train"]["lr"] == r["tune_lr"]
    chosen = {r["recipe_config_id"]: r["chosen_lr"] for r in query(results, "FROM tune_choice")}
    verdicts = [r for r in rows if r["tune_phase"] == "verdict"]
    assert len(verdicts) == 4 and {r["seed"] for r in verdicts} == {0, 1}
    by_lr = {r["config_id"]: r["tune_lr"] for r in verdicts}
    tuned = query(results, "SELECT config_id, recipe_config_id, chosen_lr, verdict FROM tuned_verdicts")
    assert len(tuned) == 2 and all(chosen[t["recipe_config_id"]] == t["chosen_lr"] == by_lr[t["config_id"]]
                                   for t in tuned)  # fmt: skip
    assert len(query(results, "FROM lr_curve")) == 4
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0  # resumed: nothing to train
    assert "every verdict run at the chosen rates is recorded (4)" in capfd.readouterr().err
