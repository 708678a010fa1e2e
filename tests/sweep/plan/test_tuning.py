"""A tuned plan's trials (sweep/plan/tuning.py): every config × rate × selection seed, then the verdict seeds at a
chosen rate; the ids: a selection run's is the ordinary id at its rate, a tuned verdict's differs from every
untuned id, and recipe_config_id is the untuned config's id."""

import json
import textwrap

import pytest

from sweep.plan.plan import make_plan
from sweep.plan.tuning import selection_pairs, trials_count, verdict_pairs
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY

BODY = "question: q\n" + TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1]")
TUNE = "tune: {lr: [1.0e-4, 1.0e-2], selection_seeds: [1000]}\n"


def plan_of(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    space_name, space, profile = load_space(str(path))
    return make_plan(space_name, space, profile)


def test_selection_and_verdict_runs_carry_their_rate_phase_and_the_joining_key(tmp_path):
    tuned = plan_of(tmp_path, BODY + TUNE, "t")
    untuned = plan_of(tmp_path, BODY, "t")
    assert [c.config_id for c in tuned.configs] == [c.config_id for c in untuned.configs]  # `tune:` moves no id
    assert trials_count(tuned) == (2 * 2 * 1, 2 * 2)
    selection = selection_pairs(tuned)
    assert [(c.label("tune_lr"), s) for c, s in selection] == [(1e-4, 1000), (1e-2, 1000)] * 2
    # a selection run at 1e-2 is the same experiment as an untuned sweep at 1e-2
    at_high = plan_of(tmp_path, BODY.replace("warmup_steps: 0}", "warmup_steps: 0, lr: 1.0e-2}"), "t")
    assert selection[1][0].config_id == at_high.configs[0].config_id
    assert {c.label("recipe_config_id") for c, _ in selection} == {c.config_id for c in untuned.configs}
    chosen = {tuned.configs[0].config_id: 1e-2}
    verdicts = verdict_pairs(tuned, chosen)
    assert [(c.label("tune_phase"), c.label("tune_lr"), s) for c, s in verdicts] == [
        ("verdict", 1e-2, 0),
        ("verdict", 1e-2, 1),
    ]
    assert verdicts[0][0].config_id not in {at_high.configs[0].config_id, tuned.configs[0].config_id}
    tuned.pairs = verdicts
    payload = tuned.trials()[0]
    assert payload["trial_config"]["train"]["lr"] == 1e-2 and payload["tune_phase"] == "verdict"
    assert payload["recipe_config_id"] == tuned.configs[0].config_id


def test_sweep_plan_gpu_prints_the_tuned_gpu_hours_beside_the_untuned(capsys):
    from sweep.cli import main

    assert main(["plan", "mqar_recall", "--profile", "tuned", "--gpu", "h100", "--format", "json"]) == 0

    totals = json.loads(capsys.readouterr().out)["estimate"]
    # 4 configs, each 4 rates × 1 selection seed + 3 verdict seeds = 7 trials a config, against 3 untuned
    assert totals["tuned_gpu_hours"] == pytest.approx(totals["gpu_hours"] * 7 / 3)
    assert main(["plan", "mqar_recall", "--profile", "tuned", "--gpu", "h100"]) == 0
    assert " tuned (4 rates × 1 selection seed a config first)" in capsys.readouterr().out
