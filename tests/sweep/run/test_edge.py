"""The edge search's searcher (sweep/run/edge.py): the record it resumes from, and, driven by hand, that it never hands
out a recorded or training pair, waits while results are due, says a contradiction once and measures that column
whole; then through ``sweep run`` on Ray Tune as users run it, with each trial's score planted by its shape (the
trainable replaced by :func:`planted_trial`): an interrupted search resumes without repeating a trial and trains
exactly the pairs the bisection traced by hand needs, a "deeper worst" column planted in the scores is found and
said, and the trial cap and ``--max-gpu-hours`` stop it."""

import functools
import io

import pytest
from ray import tune
from ray.tune.search import Searcher

import sweep.cli.run
import sweep.run.tuner
from sweep.analysis.edge import Observation
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.results.importer import import_file
from sweep.run.edge import EdgeRecord, EdgeSearch, edge_record
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY, query, trial_row, write_csv

# Eight configs: depths 1-4 × 2 or 4 heads at d_model 16 (head_dim 8, 4); the baseline 4 × 4; tolerance 2 points.
SPACE = (
    "question: where does the trade break?\n"
    + TINY_SPACE_BODY.replace(
        "axes: {depth: [1], num_heads: [2, 4]}", "axes: {depth: [1, 2, 3, 4], num_heads: [2, 4]}"
    ).replace("baseline: {depth: 1, num_heads: 4}", "baseline: {depth: 4, num_heads: 4}")
    + "metric: {name: top1, mode: max, tolerance: 2.0}\nsearch: SEARCH\n"
)

# Planted means by (depth, heads), per space name. `monotone`: heads 4 breaks at depth 1 only; heads 2 breaks at 1
# and 2. `deeper`: the same, but heads 2 breaks again at depth 4 ("deeper worst"), against the monotone assumption.
MONOTONE = {(1, 2): 80.0, (2, 2): 80.0, (3, 2): 90.0, (4, 2): 90.0, (1, 4): 80.0, (2, 4): 90.0, (3, 4): 90.0,
            (4, 4): 90.0}  # fmt: skip
TRUTH = {"monotone": MONOTONE, "deeper": {**MONOTONE, (4, 2): 80.0}, "capped": MONOTONE}


def planted_score(space: str, depth: int, heads: int, seed: int) -> float:
    """The planted mean and a seed's noise: −0.3, 0 or +0.3 points."""
    return TRUTH[space][(depth, heads)] + 0.3 * (seed % 3 - 1)


def planted_trial(config: dict, arrays=None, workers=None) -> None:
    """``tune_trial`` as the sink sees it, without training: one final report whose record holds the planted score
    and one second of wall time (so each trial's device_s is 1: one CPU for one second)."""
    payload = config["payload"]
    shape = payload["shape"]
    score = planted_score(payload["space"], shape["depth"], shape["num_heads"], payload["seed"])
    record = {"status": "ok", "top1": score, "wall_s": 1.0, "epochs": [], "kappa": []}
    tune.report({"status": "ok", "top1": score, "record": record})


def write_space(tmp_path, name: str, search: str = "{kind: edge}"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPACE.replace("SEARCH", search))
    return path


def ids_of(plan) -> dict[tuple[int, int], str]:
    return {(c.shape.depth, c.shape.num_heads): c.config_id for c in plan.configs}


# --- the record and the searcher, driven by hand -------------------------------------------------------------


def plant(path, results, rows: list[tuple]) -> None:
    """Import rows ``((depth, heads), seed, top1, status)`` of the space at ``path`` into ``results``."""
    name, space, profile = load_space(str(path))
    ids = ids_of(make_plan(name, space, profile))
    planted = []
    for index, ((depth, heads), seed, top1, status) in enumerate(rows):
        row = trial_row(name, depth, heads, seed, top1, width=16, status=status)
        planted.append({**row, "config_id": ids[(depth, heads)], "mlp_dim": 32, "finished_at":
                        f"2026-01-01T00:00:{index:02d}Z", "score": top1 if status == "ok" else None})  # fmt: skip
    import_file(write_csv(path.parent / f"planted{index}.csv", planted), results)


def test_the_record_holds_each_recorded_pair_once_failed_ones_without_a_score(tmp_path):
    path = write_space(tmp_path, "monotone")
    results = tmp_path / "results"
    plant(path, results, [((4, 4), 0, 90.0, "ok"), ((4, 4), 1, None, "oom"), ((2, 2), 0, None, "error"),
                          ((2, 2), 1, 81.0, "ok")])  # fmt: skip
    plan = make_plan(*load_space(str(path)))
    ids = ids_of(plan)
    record = edge_record(results, plan)
    assert record.observations == [  # the error row is not recorded: its pair may run again
        Observation(ids[(4, 4)], 0, 90.0), Observation(ids[(4, 4)], 1, None), Observation(ids[(2, 2)], 1, 81.0)
    ]  # fmt: skip
    assert record.remaining(5) == 2 and record.remaining(2) == 0 and record.remaining(None) is None


def drive(searcher: EdgeSearch, space: str, plan) -> list[tuple[str, int]]:
    """Suggest and complete one trial at a time, as Tune does with one slot, until the searcher finishes."""
    shapes = {c.config_id: (c.shape.depth, c.shape.num_heads) for c in plan.configs}
    handed = []
    for index in range(200):
        suggestion = searcher.suggest(f"t{index}")
        if suggestion == Searcher.FINISHED:
            return handed
        payload = suggestion["payload"]
        handed.append((payload["config_id"], payload["seed"]))
        score = planted_score(space, *shapes[payload["config_id"]], payload["seed"])
        searcher.on_trial_complete(f"t{index}", {"status": "ok", "top1": score, "record": {"top1": score}})
    raise AssertionError("the search did not finish in 200 trials")


def test_a_recorded_contradiction_is_said_once_and_its_column_measured_whole(tmp_path):
    """Rows of an earlier run: at heads 2, depth 1 holds and depth 3 breaks. The searcher says so once, implies
    nothing in that column, and measures its other depths; it hands out no recorded pair."""
    path = write_space(tmp_path, "monotone")
    results = tmp_path / "results"
    recorded = [((4, 4), seed, 90.0 + 0.1 * seed, "ok") for seed in range(5)]
    recorded += [((1, 2), seed, 90.0 + 0.1 * seed, "ok") for seed in range(2)]
    recorded += [((3, 2), seed, 80.0 + 0.1 * seed, "ok") for seed in range(2)]
    plant(path, results, recorded)
    plan = make_plan(*load_space(str(path)))
    ids = ids_of(plan)
    said = io.StringIO()
    searcher = EdgeSearch(plan, edge_record(results, plan), stream=said)
    handed = drive(searcher, "monotone", plan)
    lines = said.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("[sweep] edge search: column num_heads=2, head_dim=8: depth 3 breaks (gain -10")
    assert "but depth 1 holds" in lines[0] and lines[0].endswith("measuring the whole column")
    recorded_pairs = {(ids[shape], seed) for shape, seed, *_ in recorded}
    assert len(handed) == len(set(handed)) and not set(handed) & recorded_pairs
    trained = {config_id for config_id, _ in handed}
    assert {ids[(2, 2)], ids[(4, 2)]} <= trained  # the contradicted column: every depth measured
    summary = searcher.summary()
    cells = summary.states[0].cells
    assert all(cells[ids[(depth, 2)]].implied is None for depth in (1, 2, 3, 4))
    assert cells[ids[(3, 4)]].implied == "holds" and ids[(3, 4)] not in trained  # heads 4 still bisected
    assert summary.finished and "1 contradiction of the monotone assumption" in "\n".join(summary.lines())


def test_it_waits_while_results_are_due_and_stops_at_its_cap(tmp_path):
    path = write_space(tmp_path, "monotone")
    plan = make_plan(*load_space(str(path)))
    ids = ids_of(plan)
    searcher = EdgeSearch(plan, EdgeRecord(), stream=io.StringIO())
    first = [searcher.suggest(f"t{i}")["payload"] for i in range(9)]  # the baseline's 5 seeds, each column's middle
    assert [(p["config_id"], p["seed"]) for p in first] == [(ids[(4, 4)], s) for s in range(5)] + [
        (ids[(2, 2)], 0), (ids[(2, 2)], 1), (ids[(2, 4)], 0), (ids[(2, 4)], 1)
    ]  # fmt: skip
    assert searcher.suggest("t9") is None  # nothing more until a result decides it
    capped = EdgeSearch(plan, EdgeRecord(), trials=3, stream=io.StringIO())
    assert [capped.suggest(f"t{i}") != Searcher.FINISHED for i in range(4)] == [True, True, True, False]
    assert capped.summary().capped


# --- through `sweep run`, on Ray Tune -------------------------------------------------------------------------


@pytest.fixture
def planted(local_ray, monkeypatch):
    """``sweep run`` with :func:`planted_trial` as the trainable (the answer's lines left out: the views' tests)."""
    monkeypatch.setattr(sweep.run.tuner, "tune_trial", planted_trial)
    monkeypatch.setattr(sweep.cli.run, "print_answer", lambda args: None)


class StopAfter(tune.Callback):
    """Ctrl-C as the sweep's own handler acts on it (sweep.run.tuner.Interruption), once ``trials`` have ended."""

    def __init__(self, trials: int):
        self.trials, self.ended = trials, 0

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.ended += 1

    def on_step_end(self, iteration, trials, **info):
        if self.ended >= self.trials:
            raise KeyboardInterrupt


def pairs(results) -> list[tuple[str, int]]:
    return [(r["config_id"], r["seed"]) for r in query(results, "SELECT config_id, seed FROM trials")]


@pytest.mark.slow
def test_an_interrupted_search_resumes_without_repeating_a_trial(tmp_path, planted, monkeypatch, capsys):
    path = write_space(tmp_path, "monotone")
    ids = ids_of(make_plan(*load_space(str(path))))
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet"]
    real = sweep.run.tuner.run_sweep
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", functools.partial(real, extra_callbacks=[StopAfter(6)]))
    assert main(run) == 130
    first = pairs(results)
    assert 6 <= len(first) < 17, first
    monkeypatch.setattr(sweep.run.tuner, "run_sweep", real)
    capsys.readouterr()
    assert main(run) == 0
    err = capsys.readouterr().err
    assert f"edge search, resuming: {len(first)} recorded trials of its 8 configs start it" in err, err
    after = pairs(results)
    assert len(after) == len(set(after)) and set(first) <= set(after)
    # Traced by hand: the baseline's 5 seeds; heads 4: depth 2 (the middle of 1-3) holds, so 3 is implied, then
    # depth 1 breaks; heads 2: depth 2 (the middle of 1-4) breaks, so 1 is implied, then depth 3 holds, so 4 is;
    # then check_ends (on by default) measures heads 2's implied ends, depths 1 and 4.
    pairs_wanted = [(2, 4), (1, 4), (2, 2), (3, 2), (1, 2), (4, 2)]
    wanted = [(4, 4, s) for s in range(5)] + [(d, h, s) for d, h in pairs_wanted for s in (0, 1)]
    assert sorted(after) == sorted((ids[(d, h)], s) for d, h, s in wanted)
    assert "edge search: 8 configs: 7 measured (4 hold, the baseline included; 3 break), 1 implied" in err, err
    assert "num_heads=2, head_dim=8: breaks at depth 2, holds from depth 3" in err, err
    assert main(run) == 0  # a third run: every config settled, nothing trains
    assert "every config is settled" in capsys.readouterr().err and len(pairs(results)) == 17


@pytest.mark.slow
def test_a_planted_deeper_worst_column_is_found_said_and_measured_whole(tmp_path, planted, capsys):
    path = write_space(tmp_path, "deeper", "{kind: edge, check_ends: true}")
    ids = ids_of(make_plan(*load_space(str(path))))
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "depth is not monotone here" in line]
    assert len(said) == 1, err
    assert said[0].startswith("[sweep] edge search: column num_heads=2, head_dim=8: depth 4 breaks (gain -10")
    assert "but depth 3 holds" in said[0] and said[0].endswith("measuring the whole column")
    trained = pairs(results)
    assert len(trained) == len(set(trained))
    for depth in (1, 2, 3, 4):  # the contradicted column measured whole, each depth to its verdict
        assert sum(config_id == ids[(depth, 2)] for config_id, _ in trained) >= 2, depth
    assert "1 contradiction of the monotone assumption" in err and "not found: depth is not monotone" in err, err


@pytest.mark.slow
def test_the_trial_cap_and_the_device_hours_budget_stop_it(tmp_path, planted, capsys):
    path = write_space(tmp_path, "capped")
    results = tmp_path / "results"
    run = ["run", str(path), "--results", str(results), "--quiet"]
    assert main([*run, "--trials", "3"]) == 0
    err = capsys.readouterr().err
    assert len(pairs(results)) == 3 and "stopped at the trial cap" in err, err
    # 3 device-seconds recorded, 1 expected a trial: the 4th and 5th fit 5.5 device-seconds, a 6th would not
    assert main([*run, "--max-gpu-hours", str(5.5 / 3600)]) == 0
    err = capsys.readouterr().err
    trained = pairs(results)
    assert len(trained) == len(set(trained)) == 5 and "stopped scheduling at the budget" in err, err
    path.write_text(path.read_text().replace("{kind: edge}", "{kind: edge, max_trials: 5}"))
    assert main(run) == 0  # max_trials: the record holds 5 already
    assert "its trial cap is spent (5 of max_trials 5 recorded)" in capsys.readouterr().err
    assert len(pairs(results)) == 5
