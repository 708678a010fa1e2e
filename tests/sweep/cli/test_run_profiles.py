"""`sweep run` as users run it, CLI included: every shipped space × profile gets as far as its Tuner (built
and pickled into Tune's experiment state, where an unpicklable searcher crashed before any trial ran), and
every search kind, sampler and scheduler runs a real trial through the CLI.

(tests/sweep/space/test_loader.py validates and plans every profile and pickles the Optuna searchers directly;
tests/sweep/run/test_tuner.py checks what a grid and a random-sampler sweep record, through ``run_sweep``.)
"""

import textwrap

import pytest
import ray
import ray.cloudpickle
from ray import tune

import sweep.run.rerun
import sweep.run.tuner
import sweep.space.validation
from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.run.rerun import SearchRecord
from sweep.space.loader import load_space, shipped_spaces
from tests.helpers import TINY_SPACE_BODY


def every_profile() -> list[tuple[str, str | None]]:
    pairs = []
    for name in shipped_spaces():
        _, space, _ = load_space(name)
        pairs += [(name, None), *((name, profile) for profile in space.profiles)]
    return pairs


def tuner_state(results) -> dict:
    """What Tune pickled when the Tuner was built (``tuner.pkl``), read back."""
    (path,) = (results / "_tune").glob("*/tuner.pkl")
    return ray.cloudpickle.loads(path.read_bytes())


@pytest.mark.slow
def test_every_shipped_profile_builds_its_tuner_through_sweep_run(tmp_path, local_ray, monkeypatch, capsys):
    """``sweep run SPACE --profile P`` up to the moment trials would start. The data sets themselves are not
    read (most live on a cluster's disks; their absence is a fast exit 2, tested in test_spaces.py), and
    ``Tuner.fit`` is replaced by a no-op: what is checked is everything before it. Each results folder is
    new, so the resume checks are answered directly (they would list each folder and bind the trials view,
    63 times; the trial runs below go through them)."""
    monkeypatch.setattr(sweep.space.validation, "check_data", lambda space, ref: None)
    # cmd_run and run_search import these from sweep.run.rerun when they run: patched there
    monkeypatch.setattr(sweep.run.rerun, "recorded_pairs", lambda results, space: set())
    monkeypatch.setattr(sweep.run.rerun, "search_record", lambda results, plan: SearchRecord(plan.seeds[0]))
    monkeypatch.setattr(sweep.run.tuner, "load_arrays", lambda spec: None)
    monkeypatch.setattr(tune.Tuner, "fit", lambda self: None)
    checked = {}
    for name, profile in every_profile():
        results = tmp_path / f"{name}-{profile}"
        args = ["run", name, "--results", str(results), "--quiet", *(["--profile", profile] if profile else [])]
        assert main(args) == 0, (name, profile, capsys.readouterr().err)
        _, space, _ = load_space(name, profile)
        config = tuner_state(results)["_tune_config"]
        if space.search.kind == "grid":
            assert config.search_alg is None and config.num_samples == 1
        elif space.search.kind == "edge":  # its searcher came back whole, its lattice and rules with it
            assert type(config.search_alg).__name__ == "EdgeSearch" and config.search_alg.lattices
            assert config.num_samples >= len(config.search_alg.plan.configs)  # at most every config to max_seeds
        else:  # the searcher, its sampler included, went through pickle and came back whole
            sampler = type(config.search_alg._sampler).__name__
            expected = {"tpe": "TPESampler", "random": "RandomSampler", "nsga2": "NSGAIISampler"}
            assert sampler == expected[space.search.sampler]
            assert config.num_samples == space.search.num_trials
        scheduler = type(config.scheduler).__name__ if config.scheduler is not None else "none"
        assert scheduler == {"none": "none", "asha": "AsyncHyperBandScheduler"}[space.scheduler.kind]
        checked[(name, profile)] = (space.search.kind, scheduler)
    capsys.readouterr()
    kinds = set(checked.values())
    assert ("optuna", "none") in kinds and ("grid", "AsyncHyperBandScheduler") in kinds  # both exercised
    assert len(checked) == len(every_profile()) and len(checked) > len(shipped_spaces())


# A space small enough that a trial takes about a second: d_model 16, one training step, a quarter of the
# held-out digits, the cheapest probes. A profile for each search the shipped spaces use (a grid, under ASHA
# as vit_b_fixed_mlp's `short`; Optuna's NSGA-II as local_digits' `optuna`) and for TPE, the default
# sampler of a space's own `kind: optuna`. (The random sampler runs trials in tests/sweep/run/test_tuner.py.)
TINY = (
    "question: every search kind through the CLI\n"
    + TINY_SPACE_BODY
    + """\
profiles:
  asha: {scheduler: {kind: asha, metric: top1, mode: max, grace_period_epochs: 1}}
  asha_sparse:  # three one-step epochs, evaluated after epochs 2 and 3 only: ASHA sees no score at epoch 1
    scheduler: {kind: asha, metric: top1, mode: max, grace_period_epochs: 1}
    data: {limit_train: 32}
    train: {epochs: 3, max_steps: null, eval_every_epochs: 2}
  nsga2: {search: {kind: optuna, sampler: nsga2, num_trials: 1, objectives: [{metric: top1, mode: max},
                                                                            {metric: params, mode: min}]}}
  tpe: {search: {kind: optuna, sampler: tpe, num_trials: 1}}
"""
)
# What each profile must leave in the results: trials and the statuses they may have (ASHA may stop the
# second grid trial after its first epoch: pruned).
TINY_EXPECTED = {
    "asha": (2, {"ok", "pruned"}),
    "asha_sparse": (2, {"ok", "pruned"}),
    "nsga2": (1, {"ok"}),
    "tpe": (1, {"ok"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("profile", list(TINY_EXPECTED))
def test_each_search_kind_runs_a_trial_through_sweep_run(profile, tmp_path, local_ray):
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(TINY))
    results = tmp_path / "results"
    assert main(["run", str(path), "--profile", profile, "--results", str(results), "--quiet"]) == 0
    columns, rows = run_query(results, "SELECT status, error, depth, num_heads, top1 FROM trials")
    trials = [dict(zip(columns, row, strict=True)) for row in rows]
    count, statuses = TINY_EXPECTED[profile]
    assert len(trials) == count and {t["status"] for t in trials} <= statuses, trials
    assert all((t["depth"], t["num_heads"]) in {(1, 2), (1, 4)} for t in trials)
    assert all(0.0 <= t["top1"] <= 100.0 for t in trials if t["status"] == "ok")
    if profile == "asha_sparse":  # the epochs table: a score where an evaluation ran, NULL where none did
        _, epochs = run_query(
            results,
            "SELECT epoch, val_score FROM epochs e JOIN trials t USING (trial_id) "
            "WHERE t.status = 'ok' ORDER BY trial_id, epoch",
        )
        assert epochs and all((score is None) == (epoch == 1) for epoch, score in epochs), epochs
        assert {epoch for epoch, _ in epochs} == {1, 2, 3}
