"""The shipped known-answer spaces (search_spaces/known_*.yaml, docs/known_answers.md): each loads with
expectations over planned configs in every profile, and each smoke profile runs through the CLI and fills the
``expectations`` view (the claims recorded by the sweep itself). The four sweeps run in this process on one
local Ray (``sweep.cli.main``, as the console script calls it), which keeps its worker processes warm between
them."""

import pytest

from sweep.space.loader import load_space, shipped_spaces
from tests.helpers import query, run_smoke_profile

KNOWN_SPACES = ("known_more_heads_hurt", "known_low_rank_bottleneck", "known_induction_two_layers",
                "known_zoology_attention")  # fmt: skip


@pytest.mark.parametrize("name", KNOWN_SPACES)
def test_each_known_space_states_a_claim_and_expectations_over_planned_configs(name):
    assert name in shipped_spaces()
    for profile in ("cpu", "smoke"):
        _, space, _ = load_space(name, profile)  # validation checks each side picks out one planned config
        assert space.expect and all(e.source and e.claim for e in space.expect)
    _, default, chosen = load_space(name)
    assert chosen == "cpu" and "arXiv" in default.why + str([e.source for e in default.expect])


@pytest.mark.slow
@pytest.mark.parametrize("name", KNOWN_SPACES)
def test_smoke_profile_runs_and_fills_the_expectations_view(name, tmp_path, local_ray, capfd):
    results = tmp_path / "results"
    trials = run_smoke_profile(name, results, capfd)
    assert trials and all(t["status"] == "ok" for t in trials)
    rows = query(results, "FROM expectations")
    _, space, _ = load_space(name, "smoke")
    assert [r["name"] for r in rows] == sorted(e.name for e in space.expect)
    assert all(r["verdict"] in ("agrees", "disagrees", "inconclusive") for r in rows)
    members = query(results, "FROM expectation_members")  # a family's members; a level has no b side
    assert {m["name"] for m in members} == {r["name"] for r in rows}
    assert all(m["n_a"] == 2 and m["n_b"] == (2 if m["b_config"] else 0) for m in members)
    assert all(m["delta_lo"] is not None for m in members)
    configs = {t["config_id"] for t in trials}
    assert all(m["a_config"] in configs and m["b_config"] in (configs | {None}) for m in members)  # recorded
