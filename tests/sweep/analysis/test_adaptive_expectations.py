"""Adaptive seeds for the space's claims (`sweep rerun --select expectations --budget N --max-seeds M`, what
`make known-answers` runs after each reproduction; sweep/analysis/adaptive.py): a decided claim gets no seed, an
inconclusive one gets a seed per side per round up to the cap, the budget stops it early, and a dry run prints
the first round. Through the CLI on planted rows whose verdicts are known, with the claims recorded as `sweep run`
records them; each round's trials are planted (imported) instead of trained, so the rounds run as they would."""

import json
import textwrap
from pathlib import Path

import pytest

import sweep.cli.run as cli_run
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.questions.expectations import QUESTION
from sweep.results.sink import record_space
from sweep.space.loader import load_space
from tests.helpers import write_csv

SPACE = """\
question: which claims need seeds?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1, 2], num_heads: [2, 4]}
baseline: {depth: 1, num_heads: 4}
seeds: [0, 1, 2]
data: {name: digits, limit_val: 90}
train: {epochs: 1, max_steps: 1, batch_size: 32, warmup_steps: 0}
probes: {kappa_samples: 2, throughput_warmup_steps: 0, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1, max_concurrent_trials: 1}
expect:
  - {name: deeper_wins_at_4_heads, claim: two blocks beat one at 4 heads, source: planted,
     a: {depth: 2, num_heads: 4}, b: {depth: 1, num_heads: 4}, direction: a_beats_b, tolerance: 1}
  - {name: deeper_wins_at_2_heads, claim: two blocks beat one at 2 heads, source: planted,
     a: {depth: 2, num_heads: 2}, b: {depth: 1, num_heads: 2}, direction: a_beats_b, tolerance: 1}
  - {name: two_heads_at_chance, claim: one block of two heads stays at chance, source: planted,
     a: {depth: 1, num_heads: 2}, direction: a_at_most, level: chance, tolerance: 5}
"""

# (depth, heads): top-1 of seeds 0, 1, 2 (digits: chance 10%). At 4 heads 2 blocks beat 1 by 10 points with a
# tight spread (decided: agrees). At 2 heads both sides average 60 with a wide spread (Δ 0: unclear, open);
# and 1 × 2 is far above chance (its level claim decided: disagrees).
PLANTED = {(1, 4): [80.0, 81.0, 79.0], (2, 4): [90.0, 91.0, 89.0], (1, 2): [55.0, 65.0, 60.0],
           (2, 2): [50.0, 70.0, 60.0]}  # fmt: skip
# What a new seed scores: the wide claim's sides keep their means and spreads, so it stays open at any count.
NEW_SEED = {(1, 4): 80.0, (2, 4): 90.0, (1, 2): lambda seed: 55.0 if seed % 2 else 65.0,
            (2, 2): lambda seed: 50.0 if seed % 2 else 70.0}  # fmt: skip


def row(plan_name: str, config, seed: int, score: float) -> dict:
    shape = config.shape
    return {
        "space": plan_name, "config_id": config.config_id, "seed": seed, "family": "vit", "depth": shape.depth,
        "num_heads": shape.num_heads, "head_dim": shape.head_dim, "embed_dim": shape.embed_dim,
        "mlp_dim": shape.mlp_dim, "status": "ok", "params": 1000, "is_baseline": config.is_baseline,
        "metric": "top1", "metric_mode": "max", "top1": score, "chance_score": 10.0,
    }  # fmt: skip


@pytest.fixture
def planted(tmp_path, capsys, monkeypatch):
    """The space file, its results (planted rows, the claims recorded as a sweep records them), the config ids
    by (depth, heads), and the (config, seed) pairs each patched launch ran."""
    path = tmp_path / "claims.yaml"
    path.write_text(textwrap.dedent(SPACE))
    name, space, profile = load_space(str(path))
    plan = make_plan(name, space, profile)
    key = lambda c: (c.shape.depth, c.shape.num_heads)  # noqa: E731
    rows = [row(name, c, seed, score) for c in plan.configs for seed, score in enumerate(PLANTED[key(c)])]
    results = tmp_path / "results"
    assert main(["import", str(write_csv(tmp_path / "rows.csv", rows)), "--results", str(results)]) == 0
    recorded = json.dumps({"expectations": QUESTION.record(plan)})  # as `sweep run` records the claims
    record_space(results, name, "sweep", None, "q", "top1", "max", 0.5, recorded)
    launched: list[tuple[tuple, int]] = []

    def plant_round(plan, args, **_):  # what `launch` would train, planted instead: the rows it would record
        new = []
        for config, seed in plan.pairs:
            score = NEW_SEED[key(config)]
            new.append(row(plan.space_name, config, seed, score(seed) if callable(score) else score))
            launched.append((key(config), seed))
        csv = write_csv(tmp_path / f"round{len(launched)}.csv", new)
        assert main(["import", str(csv), "--results", str(args.results)]) == 0
        return 0

    monkeypatch.setattr(cli_run, "launch", plant_round)
    monkeypatch.setattr(cli_run, "print_answer", lambda args: None)
    capsys.readouterr()
    return path, results, launched


def verdicts(results, capsys) -> dict[str, tuple]:
    query = "SELECT name, verdict, n_a, n_b FROM expectations"
    assert main(["sql", query, "--results", str(results), "--format", "json"]) == 0
    return {r["name"]: (r["verdict"], r["n_a"], r["n_b"]) for r in json.loads(capsys.readouterr().out)}


def test_planted_verdicts_are_one_open_claim_and_two_decided(planted, capsys):
    _, results, _ = planted
    assert verdicts(results, capsys) == {
        "deeper_wins_at_4_heads": ("agrees", 3, 3),
        "deeper_wins_at_2_heads": ("inconclusive", 3, 3),
        "two_heads_at_chance": ("disagrees", 3, 0),
    }


@pytest.mark.slow
def test_only_the_open_claims_sides_get_seeds_up_to_the_cap(planted, capsys):
    path, results, launched = planted
    args = ["rerun", str(path), "--select", "expectations", "--budget", "20", "--max-seeds", "5"]
    assert main([*args, "--results", str(results)]) == 0
    err = capsys.readouterr().err
    # two rounds of one seed a side (seeds 3, 4), b after a; then both sides are at the cap of 5
    assert launched == [((2, 2), 3), ((1, 2), 3), ((2, 2), 4), ((1, 2), 4)]
    assert "1 open claim; this round runs 2 trials (budget left 20)" in err
    assert "(deeper_wins_at_2_heads: unclear)" in err
    assert "4 trials run, 0 of 1 open claim settled; 1 still open at --max-seeds 5" in err
    assert verdicts(results, capsys) == {
        "deeper_wins_at_4_heads": ("agrees", 3, 3),  # decided: no seed
        "deeper_wins_at_2_heads": ("inconclusive", 5, 5),
        "two_heads_at_chance": ("disagrees", 5, 0),  # shares 1 × 2 with the open claim: judged on its seeds
    }
    assert main(["sql", known_table(), "--results", str(results), "--format", "json"]) == 0
    table = {r["name"]: (r["verdict"], r["a_seeds"], r["b_seeds"]) for r in json.loads(capsys.readouterr().out)}
    assert table == {"deeper_wins_at_4_heads": ("agrees", "3", "3"),
                     "deeper_wins_at_2_heads": ("inconclusive", "5", "5"),
                     "two_heads_at_chance": ("disagrees", "5", "")}  # fmt: skip


def known_table() -> str:
    """The Makefile's KNOWN_TABLE: the query `make known-answers` prints its table with."""
    text = (Path(__file__).parents[3] / "Makefile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("KNOWN_TABLE = "))
    return " ".join(line.removeprefix("KNOWN_TABLE = ").split())


@pytest.mark.slow
def test_the_budget_stops_it_before_the_cap_and_a_dry_run_runs_nothing(planted, capsys):
    path, results, launched = planted
    dry = ["rerun", str(path), "--select", "expectations", "--budget", "3", "--dry-run", "--results", str(results)]
    assert main(dry) == 0
    assert "this round runs 2 trials (budget left 3)" in capsys.readouterr().err and launched == []
    assert main([*dry[:-3], "--max-seeds", "8", "--results", str(results)]) == 0
    assert launched == [((2, 2), 3), ((1, 2), 3), ((2, 2), 4)]
    assert "3 trials run, 0 of 1 open claim settled; 1 still open" in capsys.readouterr().err


@pytest.mark.slow
def test_a_claim_settled_by_its_new_seeds_stops_the_rounds(planted, capsys, monkeypatch):
    path, results, launched = planted
    NEW = {**NEW_SEED, (2, 2): 95.0, (1, 2): 55.0}  # the new seeds pull the sides apart
    monkeypatch.setitem(globals(), "NEW_SEED", NEW)
    assert main(["rerun", str(path), "--select", "expectations", "--budget", "40", "--results", str(results)]) == 0
    err = capsys.readouterr().err
    rounds = len(launched) // 2
    assert launched == [(side, seed) for seed in range(3, 3 + rounds) for side in ((2, 2), (1, 2))]
    assert f"{2 * rounds} trials run, 1 of 1 open claim settled; every claim is settled" in err
    assert verdicts(results, capsys)["deeper_wins_at_2_heads"] == ("agrees", 3 + rounds, 3 + rounds)
    assert main(["rerun", str(path), "--select", "expectations", "--budget", "4", "--results", str(results)]) == 0
    assert "selection 'expectations': no open claim, nothing to run" in capsys.readouterr().err
    assert len(launched) == 2 * rounds  # every claim decided: a second run spends nothing


def test_options_are_checked(planted, capsys):
    path, results, _ = planted
    base = ["rerun", str(path), "--results", str(results)]
    assert main([*base, "--select", "expectations"]) != 0
    assert "--select expectations needs --budget N" in capsys.readouterr().err
    assert main([*base, "--select", "expectations", "--budget", "2", "--max-seeds", "0"]) != 0
    assert "--max-seeds must be at least 1" in capsys.readouterr().err
    assert main([*base, "--seeds", "4", "--max-seeds", "5"]) != 0
    assert "inconclusive or expectations, and so does --max-seeds" in capsys.readouterr().err
