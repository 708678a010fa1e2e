"""Running a tuned plan (sweep/run/tuning.py, through ``sweep run``): the selection runs first, then each config's
verdict seeds at the rate its recorded selection runs chose; a sweep stopped mid-selection resumes with nothing
trained twice and makes the choice it would have made; ``--max-gpu-hours`` sees both phases' rows. Training is
replaced by a stand-in that records each trial's row with a score planted by its learning rate (the rows are the
sink's: its payload's identity and labels), so what is tested is the driver's bookkeeping."""

import textwrap

import pytest

import sweep.cli.run
import sweep.run.tuner
from sweep.cli import main
from sweep.errors import SweepInterrupted
from sweep.results.schema import table_from_rows
from sweep.results.storage import write_atomic
from sweep.run.tuner import SweepOutcome
from tests.helpers import TINY_SPACE_BODY, query

RATES = (1e-4, 1e-3, 1e-2)
SPACE = (
    "question: does the trade survive tuning?\n"
    + TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1, 2]")
    + ("tune: {lr: [1.0e-4, 1.0e-3, 1.0e-2], selection_seeds: [1000, 1001]}\n")
)
# The planted landscape: the 2-head config is best at 1e-2, the baseline (4 heads) at 1e-3; the seed adds a little.
BEST = {2: 1e-2, 4: 1e-3}


def planted_score(heads: int, lr: float, seed: int) -> float:
    return 90.0 - 10.0 * abs(RATES.index(lr) - RATES.index(BEST[heads])) + 0.1 * (seed % 7)


class StandIn:
    """``run_sweep`` as the driver calls it: records each trial's row; ``stop_after``: raise as Ctrl-C does
    (SweepInterrupted, after recording that many trials of the call)."""

    def __init__(self):
        self.trained: list[tuple[str, int, str, float]] = []
        self.stop_after: int | None = None
        self.device_s = 10.0
        self.score = planted_score  # (heads, lr, seed) → the trial's score

    def __call__(self, plan, results_dir, space_ref, **options):
        for index, payload in enumerate(plan.trials()):
            if self.stop_after is not None and index == self.stop_after:
                self.stop_after = None
                raise SweepInterrupted(index)
            self.record(payload, results_dir)
        return SweepOutcome("s", len(plan.trials()), {"ok": len(plan.trials())}, 0.0, results_dir)

    def record(self, payload: dict, results_dir) -> None:
        lr = payload["trial_config"]["train"]["lr"]  # what the worker would train at
        assert lr == payload["tune_lr"]
        shape = payload["shape"]
        row = {**shape, **{k: payload[k] for k in ("space", "config_id", "seed", "is_baseline", "metric",
               "metric_mode", "tune_phase", "tune_lr", "recipe_config_id", "profile")},
               "trial_id": f"{payload['config_id']}-{payload['seed']}", "status": "ok", "device_s": self.device_s,
               "score": self.score(shape["num_heads"], lr, payload["seed"])}  # fmt: skip
        self.trained.append((payload["config_id"], payload["seed"], payload["tune_phase"], lr))
        path = results_dir / "trials" / payload["space"] / "s" / f"{row['trial_id']}.parquet"
        write_atomic(table_from_rows("trials", [row]), path)


@pytest.fixture
def stand_in(monkeypatch):
    fake = StandIn()
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", fake)
    monkeypatch.setattr(sweep.cli.run, "compact_after_sweep", lambda results, space: None)
    monkeypatch.setattr(sweep.cli.run, "print_answer", lambda args: None)
    return fake


@pytest.mark.slow
def test_a_sweep_stopped_mid_selection_resumes_with_nothing_trained_twice(tmp_path, stand_in, capsys):
    path = tmp_path / "tuned.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    command = ["run", str(path), "--results", str(results), "--quiet"]
    stand_in.stop_after = 5  # of 2 configs × 3 rates × 2 selection seeds = 12
    assert main(command) == 130
    assert len(stand_in.trained) == 5 and {phase for *_, phase, _ in stand_in.trained} == {"selection"}
    assert main(command) == 0
    err = capsys.readouterr().err
    assert "5 of 12 selection runs recorded, then 6 verdict runs at the chosen rates" in err, err
    pairs = [(config_id, seed) for config_id, seed, *_ in stand_in.trained]
    assert len(pairs) == len(set(pairs)) == 12 + 6  # every run once: 12 selection, 2 configs × 3 verdict seeds
    verdicts = {(seed, lr) for _, seed, phase, lr in stand_in.trained if phase == "verdict"}
    assert verdicts == {(s, lr) for s in (0, 1, 2) for lr in BEST.values()}  # each config at its planted best
    assert main(command) == 0  # a third run trains nothing
    assert len(stand_in.trained) == 18
    assert "every verdict run at the chosen rates is recorded" in capsys.readouterr().err
    chosen = query(results, "SELECT num_heads, chosen_lr, tuned_verdict FROM tune_choice ORDER BY num_heads")
    assert [(r["num_heads"], r["chosen_lr"]) for r in chosen] == [(2, 1e-2), (4, 1e-3)]
    configs = query(results, "SELECT num_heads, tune_lr, n_seeds, lr_arm FROM configs ORDER BY num_heads")
    assert [tuple(r.values()) for r in configs] == [(2, 1e-2, 3, "tuned"), (4, 1e-3, 3, "tuned")]


def test_the_device_hours_budget_counts_the_selection_runs(tmp_path, stand_in, capsys):
    path = tmp_path / "tuned.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    stand_in.device_s = 3600.0 / 12  # the 12 selection runs cost one device-hour
    assert main(["run", str(path), "--results", str(results), "--quiet", "--max-gpu-hours", "1.01"]) == 0
    assert [phase for *_, phase, _ in stand_in.trained] == ["selection"] * 12  # no verdict run fits after them
    assert "already recorded for tuned" in capsys.readouterr().err


def test_sweep_rerun_adds_verdict_seeds_at_the_chosen_rate_without_selecting_again(tmp_path, stand_in, capsys):
    path = tmp_path / "tuned.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0
    before = len(stand_in.trained)
    assert main(["rerun", str(path), "--seeds", "5", "--results", str(results), "--quiet"]) == 0
    added = stand_in.trained[before:]
    assert sorted((seed, phase, lr) for _, seed, phase, lr in added) == sorted(
        (seed, "verdict", lr) for seed in (3, 4) for lr in BEST.values()
    )
    configs = query(results, "SELECT num_heads, tune_lr, n_seeds FROM configs ORDER BY num_heads")
    assert [tuple(r.values()) for r in configs] == [(2, 1e-2, 5), (4, 1e-3, 5)]


@pytest.mark.slow  # a sweep and an adaptive round, each reading the analysis views (about 40 s on 2 loaded cores)
def test_sweep_rerun_select_inconclusive_adds_verdict_seeds_at_the_chosen_rate(tmp_path, stand_in, capsys):
    """The 2-head config's verdict seeds swing ±15 points (95 on average against the baseline's 90): inconclusive at
    3 seeds. ``--select inconclusive`` adds verdict seeds to it (and the baseline) at each one's recorded rate."""

    def swinging(heads: int, lr: float, seed: int) -> float:
        swing = 15.0 * (1 if seed % 2 == 0 else -1) if heads == 2 and seed < 1000 else 0.0
        return planted_score(heads, lr, seed) + swing

    stand_in.score = swinging
    path = tmp_path / "tuned.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0
    verdicts = query(results, "SELECT num_heads, verdict FROM tuned_verdicts WHERE NOT is_baseline")
    assert [(r["num_heads"], r["verdict"]) for r in verdicts] == [(2, "inconclusive")], verdicts
    before = len(stand_in.trained)
    command = ["rerun", str(path), "--select", "inconclusive", "--budget", "2", "--results", str(results), "--quiet"]
    assert main(command) == 0
    err = capsys.readouterr().err
    added = stand_in.trained[before:]
    assert 1 <= len(added) <= 2 and "1 open verdict" in err, err
    assert {phase for _, _, phase, _ in added} == {"verdict"}  # never selecting again
    heads_of = {
        r["config_id"]: r["num_heads"] for r in query(results, "SELECT DISTINCT config_id, num_heads FROM trials")
    }
    assert all(lr == BEST[heads_of[config_id]] and seed >= 3 for config_id, seed, _, lr in added), added
    assert any(heads_of[config_id] == 2 for config_id, *_ in added)


CLAIMS_SPACE = (
    SPACE.replace("num_heads: [2, 4]", "num_heads: [1, 2, 4]")
    + "expect:\n"
    + "  - {name: two_heads_beat_one, claim: two heads beat one, source: planted, a: {depth: 1, num_heads: 2},\n"
    + "     b: {depth: 1, num_heads: 1}, direction: a_beats_b, tolerance: 1}\n"
    + "  - {name: four_heads_learn, claim: four heads reach 50, source: planted, a: {depth: 1, num_heads: 4},\n"
    + "     direction: a_at_least, level: 50}\n"
)
BEST_OF_CLAIMS = {1: 1e-4, 2: 1e-2, 4: 1e-3}


class RecordingStandIn(StandIn):
    """The stand-in that also records the space's settings (its claims, its tuning) as ``run_sweep`` does."""

    def __call__(self, plan, results_dir, space_ref, **options):
        sweep.run.tuner.record_plan_space(plan, results_dir, "s")
        return super().__call__(plan, results_dir, space_ref, **options)


@pytest.mark.slow  # a stopped sweep, two reruns, the sweep resumed: each reads the views (about 60 s, 2 loaded cores)
def test_sweep_rerun_select_expectations_adds_verdict_seeds_to_open_claims_at_their_chosen_rates(
    tmp_path, monkeypatch, capsys
):
    """Two claims of a tuned space: 4 heads reach 50 (90: agrees) and 2 heads beat 1 (2 heads' verdict seeds
    swing ±15 around 90, against 1 head's 90: inconclusive at 3 seeds). ``--select expectations`` adds verdict
    seeds only to the open claim's sides (2 heads, 1 head), each at its recorded chosen rate, never selecting
    again, and the expectations view reads them. Stopped before the baseline's selection is complete, the same
    rerun leaves it out (said in one line) and gives the other sides, not run yet, their first verdict seed."""
    fake = RecordingStandIn()
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", fake)
    monkeypatch.setattr(sweep.cli.run, "compact_after_sweep", lambda results, space: None)
    monkeypatch.setattr(sweep.cli.run, "print_answer", lambda args: None)

    def swinging(heads: int, lr: float, seed: int) -> float:
        best = 90.0 - 10.0 * abs(RATES.index(lr) - RATES.index(BEST_OF_CLAIMS[heads])) + 0.1 * (seed % 7)
        return best + (15.0 * (1 if seed % 2 == 0 else -1) if heads == 2 and seed < 1000 else 0.0)

    fake.score = swinging
    path = tmp_path / "tuned.yaml"
    path.write_text(textwrap.dedent(CLAIMS_SPACE))
    results = tmp_path / "results"
    fake.stop_after = 12  # of 3 configs × 3 rates × 2 selection seeds: 1 head's and 2 heads' (plan order) are in
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 130
    command = ["rerun", str(path), "--select", "expectations", "--budget", "2", "--results", str(results)]
    assert main([*command, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("1 config without every selection run recorded") == 1, err
    assert "2 open claims; this round runs 2 trials" in err, err
    first = [(seed, phase, lr) for _, seed, phase, lr in fake.trained[12:]]
    assert first == [(0, "verdict", 1e-2), (0, "verdict", 1e-4)]  # side a (2 heads), then b, at their chosen rates
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0  # the rest: seeds 0-2 of each
    claims = "SELECT name, verdict, found, n_a, n_b FROM expectations ORDER BY name"
    assert [tuple(r.values()) for r in query(results, claims)] == [
        ("four_heads_learn", "agrees", "a at least the level", 3, 0),
        ("two_heads_beat_one", "inconclusive", "unclear", 3, 3),
    ]
    assert len(fake.trained) == 18 + 3 * 3  # nothing trained twice
    before = len(fake.trained)
    capsys.readouterr()
    capped = ["rerun", str(path), "--select", "expectations", "--budget", "10", "--max-seeds", "4"]
    assert main([*capped, "--results", str(results), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "1 open claim; this round runs 2 trials (budget left 10)" in err, err
    assert "seed 3 at lr 0.01  (two_heads_beat_one: unclear)" in err, err
    assert "2 trials run, 0 of 1 open claim settled; 1 still open at --max-seeds 4" in err, err  # verdict seeds
    heads_of = {
        r["config_id"]: r["num_heads"] for r in query(results, "SELECT DISTINCT config_id, num_heads FROM trials")
    }
    added = [(heads_of[config_id], seed, phase, lr) for config_id, seed, phase, lr in fake.trained[before:]]
    assert sorted(added) == [(1, 3, "verdict", 1e-4), (2, 3, "verdict", 1e-2)]  # the open claim's sides only
    assert [tuple(r.values()) for r in query(results, claims)] == [
        ("four_heads_learn", "agrees", "a at least the level", 3, 0),
        ("two_heads_beat_one", "inconclusive", "unclear", 4, 4),  # the new seeds read at the chosen rates
    ]
    sides = """SELECT DISTINCT t.tune_phase, t.tune_lr, t.num_heads FROM expectations e, trials t
               WHERE e.name = 'two_heads_beat_one' AND t.config_id IN (e.a_config, e.b_config)"""
    phases = query(results, sides)
    assert sorted(tuple(r.values()) for r in phases) == [("verdict", 1e-4, 1), ("verdict", 1e-2, 2)]
