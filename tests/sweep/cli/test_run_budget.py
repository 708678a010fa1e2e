"""``sweep rerun --max-gpu-hours H`` (sweep/cli/run.py) when recorded rows leave no room for one more trial
(recorded + the mean recorded cost > H): one line, exit 0, and nothing starts (no Ray, no trial); at the margin
(= H) the run starts."""

import textwrap

import sweep.cli.run
import sweep.run.tuner
from sweep.cli import main
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from sweep.run.tuner import SweepOutcome
from tests.helpers import TINY_SPACE_BODY


def test_a_spent_budget_starts_nothing(tmp_path, monkeypatch, capsys):
    path = tmp_path / "spent.yaml"
    path.write_text(textwrap.dedent("question: is the budget spent?\n" + TINY_SPACE_BODY))
    results = tmp_path / "results"
    for index, device_s in enumerate([1800.0, 1800.0]):  # one device-hour recorded, by trials of other configs
        row = {"space": "spent", "trial_id": f"t{index}", "config_id": f"old{index}", "seed": 0, "status": "ok",
               "device_s": device_s}  # fmt: skip
        write_atomic(table_from_rows("trials", [row]), results / "trials" / "spent" / "s0" / f"t{index}.parquet")
    started = []

    def run_sweep(plan, results_dir, space_ref, **options):  # what launch hands the tuner, kept; nothing runs
        started.append((len(plan.trials()), options["max_gpu_hours"]))
        return SweepOutcome("s1", 0, {}, 0.0, results_dir)

    monkeypatch.setattr(sweep.run.tuner, "run_sweep", run_sweep)
    monkeypatch.setattr(sweep.cli.run, "compact_after_sweep", lambda results, space: None)
    command = ["rerun", str(path), "--seeds", "2", "--results", str(results), "--quiet", "--max-gpu-hours"]
    assert main([*command, "1"]) == 0
    err = capsys.readouterr().err
    assert (
        "budget: 1 of --max-gpu-hours 1 device-hours already recorded for spent, and a trial is expected to cost 0.5 "
        "(the mean of 2 recorded); nothing started" in err
    ), err
    assert started == []
    # the margin: 1 h recorded + 0.5 h expected for the next trial; just over 1.5 h nothing starts …
    assert main([*command, "1.4999"]) == 0
    assert "nothing started" in capsys.readouterr().err and started == []
    # … and at exactly 1.5 h it starts: the four missing pairs (2 configs × 2 seeds), launched with the budget
    assert main([*command, "1.5"]) == 0
    assert started == [(4, 1.5)]
