"""Optuna searches that resume instead of repeating (sweep/run/search.py, sweep/run/rerun.py's SearchRecord): the
record read from the rows, the study warm-started from it, suggestions of recorded (config, seed) pairs
answered from the record and never trained, the budget counted in trained trials; then `sweep run` twice on
an NSGA-II profile, as users run it. Grids: adding seeds, axis values or a profile runs only the new cells."""

import pickle
import textwrap

import optuna
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from optuna.trial import TrialState
from ray.tune.search import Searcher

import sweep.cli.run
import sweep.run.tuner
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.results.importer import import_file
from sweep.run.rerun import search_record
from sweep.run.search import DefineByRun, make_searcher
from sweep.space.loader import load_space
from sweep.space.model import SPACES_DIR_ENV
from tests.helpers import TINY_SPACE_BODY, query, trial_row, write_csv

# Six configs (depth 1, 2, 4 × 1 or 4 heads); the search trains seed 0 of each config it suggests.
SPACE = """\
question: which shapes does the search find?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1, 2, 4], num_heads: [1, 4]}
baseline: {depth: 4, num_heads: 4}
seeds: [0, 1]
data: {name: digits}
train: {epochs: 1}
profiles:
  search:
    search: {kind: optuna, sampler: nsga2, num_trials: 4, objectives: [{metric: top1, mode: max},
                                                                      {metric: params, mode: min}]}
  tpe: {search: {kind: optuna, sampler: tpe, num_trials: 4}}
"""


@pytest.fixture
def searched(tmp_path, monkeypatch):
    """The space ``searched`` (found through $SWEEP_SPACES_DIR), its `search` profile's plan, and a function
    that imports rows of it into a results folder: ``plant({(depth, heads): (seed, top1, status, profile)})``."""
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    (spaces / "searched.yaml").write_text(SPACE)
    monkeypatch.setenv(SPACES_DIR_ENV, str(spaces))
    plan = make_plan(*load_space("searched", "search"))
    ids = {(c.shape.depth, c.shape.num_heads): c.config_id for c in plan.configs}
    results = tmp_path / "results"

    def plant(rows: list[tuple]) -> None:
        planted = []
        for index, ((depth, heads), seed, top1, status, profile) in enumerate(rows):
            row = trial_row("searched", depth, heads, seed, top1, width=16, status=status)
            finished = f"2026-01-01T00:00:{index:02d}Z"  # planted in this order
            planted.append({**row, "config_id": ids[(depth, heads)], "mlp_dim": 32, "profile": profile,
                            "finished_at": finished})  # fmt: skip
        import_file(write_csv(tmp_path / f"planted{len(list(tmp_path.glob('planted*')))}.csv", planted), results)

    return plan, results, ids, plant


def test_the_record_is_one_outcome_per_config_at_the_search_seed(searched):
    plan, results, ids, plant = searched
    plant([
        ((2, 4), 0, 80.0, "ok", "search"),
        ((1, 1), 0, None, "oom", "search"),
        ((4, 4), 0, 90.0, "ok", None),  # the grid's row of the same experiment: recorded, not this search's
        ((4, 4), 1, 91.0, "ok", "search"),  # another seed: not the search's
        ((1, 4), 0, None, "error", "search"),  # not recorded: it runs again
    ])  # fmt: skip
    repeat_row(results, ids[(2, 4)], status="oom")  # a repeat, as searches made before: one outcome, ok first
    record = search_record(results, plan)
    assert list(record.outcomes) == [ids[(2, 4)], ids[(1, 1)], ids[(4, 4)]]  # first finished first
    assert record.outcomes[ids[(2, 4)]].values == (80.0, 2004.0)  # top1, params (trial_row: 1000·depth + heads)
    assert record.outcomes[ids[(1, 1)]].values is None  # told FAIL, as a live oom is
    assert record.trained == 2 and record.remaining(4) == 2 and record.remaining(1) == 0


def repeat_row(results, config_id: str, status: str) -> None:
    """A second row of ``config_id``'s pair, as another sweep's file (the importer refuses repeats)."""
    (source,) = (results / "trials").rglob("*.parquet")
    table = pq.read_table(source)
    row = next(r for r in table.to_pylist() if r["config_id"] == config_id)
    repeat = {**row, "trial_id": "repeat", "sweep_id": "repeat", "status": status, "top1": None}
    (results / "trials" / "searched" / "repeat").mkdir()
    pq.write_table(
        pa.Table.from_pylist([repeat], schema=table.schema), results / "trials" / "searched" / "repeat" / "r.parquet"
    )


def test_the_study_starts_from_the_record_and_its_params_reach_the_same_configs(searched):
    plan, results, ids, plant = searched
    plant([((2, 4), 0, 80.0, "ok", "search"), ((1, 1), 0, None, "oom", "search"), ((4, 1), 0, 85.0, "ok", "search")])
    searcher = make_searcher(plan, search_record(results, plan))
    trials = searcher.summary().study.trials
    assert [t.user_attrs["config_id"] for t in trials] == [ids[(2, 4)], ids[(1, 1)], ids[(4, 1)]]
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert [t.values for t in trials] == [[80.0, 2004.0], None, [85.0, 4001.0]]
    assert {t.user_attrs["source"] for t in trials} == {"record"}
    space = DefineByRun(plan)
    for trial in trials:  # each recorded trial's params are a suggestion of exactly its config
        assert space(optuna.trial.FixedTrial(trial.params))["payload"]["config_id"] == trial.user_attrs["config_id"]
    assert all(t.system_attrs["NSGAIISampler:generation"] == 0 for t in trials)  # NSGA-II's parents to be
    again = pickle.loads(pickle.dumps(searcher))  # Tune pickles the searcher into its experiment state
    assert len(again.summary().study.trials) == 3


@pytest.mark.parametrize("profile", ["search", "tpe"])
def test_recorded_pairs_are_answered_not_trained_and_the_search_stops_when_all_are_taken(searched, profile):
    plan, results, ids, plant = searched
    plan = make_plan(*load_space("searched", profile))
    plant([((2, 4), 0, 80.0, "ok", profile), ((1, 1), 0, None, "oom", profile)])
    searcher = make_searcher(plan, search_record(results, plan))
    metrics = searcher.metrics()
    trained, suggestions = [], 0
    while (config := searcher.suggest(f"trial{suggestions}")) != Searcher.FINISHED:
        config_id = config["payload"]["config_id"]
        trained.append(config_id)
        searcher.on_trial_complete(f"trial{suggestions}", {"status": "ok", "top1": 50.0, "params": 1e4}, False)
        suggestions += 1
    assert sorted(trained) == sorted(set(ids.values()) - {ids[(2, 4)], ids[(1, 1)]})  # each untried config once
    summary = searcher.summary()
    assert summary.exhausted and summary.trained == 4 and summary.from_record == 2
    study = summary.study
    answered = [t for t in study.trials if t.user_attrs["source"] == "answered"]
    assert len(answered) == summary.answered and summary.answered > 0  # six configs: repeats are bound to come
    for trial in answered:  # told the recorded (or earlier trained) values
        first = next(t for t in study.trials if t.user_attrs["config_id"] == trial.user_attrs["config_id"])
        assert (trial.state, trial.values) == (first.state, first.values)
    trained_trials = [t for t in study.trials if t.user_attrs["source"] == "trained"]
    assert [t.values for t in trained_trials] == [[50.0, 1e4][: len(metrics)]] * 4


def test_a_suggestion_of_a_pair_still_training_waits_for_its_values(searched):
    plan, _, _, _ = searched
    searcher = make_searcher(plan)
    first = searcher.suggest("a")["payload"]["config_id"]
    config = next(c for c in plan.configs if c.config_id == first)
    searcher.summary().study.enqueue_trial(DefineByRun(plan).params_of(config)[0])  # proposed again, in training
    assert searcher.suggest("b")["payload"]["config_id"] != first
    waiting = [t for t in searcher.summary().study.trials if t.user_attrs["source"] == "answered"]
    assert waiting and all(t.state == TrialState.RUNNING for t in waiting)  # told nothing yet
    assert {t.user_attrs["config_id"] for t in waiting} == {first}
    searcher.on_trial_complete("a", {"status": "ok", "top1": 70.0, "params": 1234}, False)
    told = [t for t in searcher.summary().study.trials if t.user_attrs["source"] == "answered"]
    assert len(told) == len(waiting) and all(
        t.state == TrialState.COMPLETE and t.values == [70.0, 1234.0] for t in told
    )


@pytest.mark.slow
def test_run_and_rerun_resume_the_search_for_its_remaining_budget(searched, monkeypatch, capsys):
    """What `sweep run` and `sweep rerun` hand to Ray Tune for an Optuna profile (launch replaced)."""
    _, results, ids, plant = searched
    plant([((2, 4), 0, 80.0, "ok", "search"), ((1, 1), 0, None, "oom", None)])  # one trained by this profile
    launched = []

    def launch(plan, args, record=None, trials=None):
        launched.append((sorted(record.outcomes), trials))
        return 0

    monkeypatch.setattr(sweep.cli.run, "launch", launch)
    options = ["--profile", "search", "--results", str(results)]
    for command in (["run", "searched"], ["rerun", "searched"]):
        assert main([*command, *options]) == 0
        assert launched.pop() == (sorted([ids[(2, 4)], ids[(1, 1)]]), 3)  # num_trials 4, one trained
        assert main([*command, *options, "--trials", "5"]) == 0
        assert launched.pop()[1] == 5
    err = capsys.readouterr().err
    assert "optuna nsga2, resuming its study: 2 recorded trials (seed 0) start it, 1 of them trained" in err
    assert main(["run", "searched", *options, "--fresh"]) == 0
    assert launched.pop() == ([], 4)  # a new study: nothing recorded, the whole budget
    assert main(["rerun", "searched", *options, "--trials", "2", "--seeds", "2"]) == 2
    assert main(["rerun", "searched", *options, "--select", "pareto"]) == 2
    assert "--select pareto needs --seeds N" in capsys.readouterr().err
    plant([(shape, 0, 70.0, "ok", "search") for shape in [(4, 4), (2, 1), (4, 1)]])  # 4 of num_trials 4 trained
    assert main(["run", "searched", *options]) == 0 and launched == []
    printed = "its budget is spent (4 of num_trials 4 trained); `sweep run searched --profile search --trials N"
    assert f"{printed} --results {results.resolve()}`" in capsys.readouterr().err  # the hint carries --results
    plant([((1, 4), 0, 70.0, "ok", "search")])  # every config: nothing left to suggest, whatever the budget
    assert main(["run", "searched", *options, "--trials", "3"]) == 0 and launched == []
    assert "all 6 configs it can suggest are recorded at seed 0; nothing left to train" in capsys.readouterr().err


# --- through `sweep run`, as users run it -------------------------------------------------------------------

# TINY_SPACE_BODY's one-second trials over six configs (depth 1, 2, 3 × 2 or 4 heads), searched by NSGA-II for
# top-1 up and parameters down with a budget of three trials.
TINY_SEARCH = (
    "question: does a search resume?\n"
    + TINY_SPACE_BODY.replace("axes: {depth: [1], num_heads: [2, 4]}", "axes: {depth: [1, 2, 3], num_heads: [2, 4]}")
    + textwrap.dedent("""\
        profiles:
          nsga2:
            search: {kind: optuna, sampler: nsga2, num_trials: 3, objectives: [{metric: top1, mode: max},
                                                                              {metric: params, mode: min}]}
        """)
)


@pytest.mark.slow
def test_sweep_run_twice_resumes_the_study_and_trains_no_pair_twice(tmp_path, local_ray, monkeypatch, capsys):
    path = tmp_path / "tiny_search.yaml"
    path.write_text(TINY_SEARCH)
    results = tmp_path / "results"
    outcomes = []
    real_run_sweep = sweep.run.tuner.run_sweep

    def keep(*args, **kwargs):  # the CLI's run_sweep, its outcome (and so its study) kept
        outcomes.append(real_run_sweep(*args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(sweep.run.tuner, "run_sweep", keep)
    run = ["run", str(path), "--profile", "nsga2", "--results", str(results), "--quiet"]

    assert main(run) == 0  # the budget: three trials
    first = query(results, "SELECT config_id, seed, status FROM trials")
    assert len(first) == 3 and all(row["status"] == "ok" for row in first)
    capsys.readouterr()

    assert main([*run, "--trials", "2"]) == 0  # a finished search, extended by two
    assert "resuming its study: 3 recorded trials (seed 0) start it, 3 of them trained" in capsys.readouterr().err
    rows = query(results, "SELECT config_id, seed FROM trials")
    assert len(rows) == 5 and len({(r["config_id"], r["seed"]) for r in rows}) == 5  # no pair trained twice
    study = outcomes[-1].study.study
    from_record = [t for t in study.trials if t.user_attrs["source"] == "record"]
    assert sorted(t.user_attrs["config_id"] for t in from_record) == sorted(r["config_id"] for r in first)
    recorded = {r["config_id"]: r for r in query(results, "SELECT config_id, top1, params FROM trials")}
    for trial in from_record:  # told the values the rows hold
        row = recorded[trial.user_attrs["config_id"]]
        assert trial.values == [row["top1"], float(row["params"])]
    trained = [t for t in study.trials if t.user_attrs["source"] == "trained"]
    assert len(trained) == 2 and {t.user_attrs["config_id"] for t in trained}.isdisjoint(r["config_id"] for r in first)
    # The same sampler seed proposes the first run's configs again: answered from the record, never trained.
    assert outcomes[-1].study.answered >= 1

    assert main(run) == 0  # without --trials: the budget (3) is spent, nothing runs
    assert "its budget is spent (5 of num_trials 3 trained)" in capsys.readouterr().err
    assert len(outcomes) == 2 and len(query(results, "SELECT * FROM trials")) == 5


# --- grids: only the new cells -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_grid_run_again_runs_only_new_seeds_axis_values_and_profiles(searched, monkeypatch, capsys):
    _, results, ids, plant = searched
    plant([(shape, seed, 90.0, "ok", None) for shape in ids for seed in (0, 1)])  # the whole grid, seeds 0 and 1
    launched = []

    def launch(plan, args, **search):  # what `sweep run` would hand to Ray Tune, by (depth, heads) and seed
        launched.append(sorted((c.shape.depth, c.shape.num_heads, seed) for c, seed in plan.pairs))
        return 0

    monkeypatch.setattr(sweep.cli.run, "launch", launch)
    run = ["run", "searched", "--results", str(results)]
    assert main(run) == 0 and launched == []
    assert "nothing missing: all 12 (config, seed) pairs are recorded" in capsys.readouterr().err
    assert main([*run, "--seeds", "3"]) == 0
    assert launched.pop() == [(depth, heads, 2) for depth in (1, 2, 4) for heads in (1, 4)]
    spaces = results.parent / "spaces"
    wider = SPACE.replace("depth: [1, 2, 4]", "depth: [1, 2, 4, 8]")
    (spaces / "searched.yaml").write_text(wider + "  heads16: {axes: {num_heads: [1, 4, 16]}}\n")
    assert main(run) == 0
    assert launched.pop() == [(8, heads, seed) for heads in (1, 4) for seed in (0, 1)]
    assert main([*run, "--profile", "heads16"]) == 0  # a profile: only its cells no other run recorded
    assert launched.pop() == [(depth, heads, seed) for depth in (1, 2, 4, 8) for heads in (1, 4, 16) for seed in (0, 1)
                              if heads == 16 or depth == 8]  # fmt: skip
    assert main([*run, "--trials", "2"]) == 2
    assert "--trials N extends an Optuna search, but searched (profile none) is a grid" in capsys.readouterr().err
