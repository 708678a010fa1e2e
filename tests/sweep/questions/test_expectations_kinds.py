"""Claims as papers state them (issue 41): non-inferiority, levels against chance, solve rates (Newcombe's
interval and Boschloo's exact test), a side that is a config of its own, any recorded number (a loss, exact
parameters), relative tolerances, families (at every X: intersection–union; at some X: Holm) and profiles
that leave a side out. Through the CLI (``sweep validate``, ``sweep plan``, ``sweep sql``) on a tiny space
whose plan is made as ``sweep run`` makes it, with planted rows imported; every number checked against scipy
or a float64 formula written here."""

import json
import math
import textwrap

import numpy as np
import pytest
from scipy import stats

from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.questions.expectations import QUESTION, boschloo_p, newcombe, seeds_needed, wilson
from sweep.results.sink import record_space
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY, write_csv

CLAIMS = """\
expect:
  - {name: deep_matches_wide, claim: two blocks of one head are as good as one block of four, source: planted,
     a: {config: {depth: 2, num_heads: 1, embed_dim: 16, mlp_dim: 32}}, b: {num_heads: 4},
     direction: a_at_least_b, tolerance: 3}
  - {name: two_heads_at_chance, claim: two heads stay at chance, source: planted, a: {num_heads: 2},
     direction: a_at_most, level: chance, tolerance: 5}
  - {name: four_heads_reach_75, claim: four heads reach 75, source: planted, a: {num_heads: 4},
     direction: a_at_least, level: 75}
  - {name: loss_lower, claim: four heads have lower loss, source: planted, a: {num_heads: 4}, b: {num_heads: 2},
     direction: a_beats_b, metric: val_loss, tolerance: 0.01}
  - {name: fewer_params, claim: two heads at 30% fewer parameters, source: planted, a: {num_heads: 2},
     b: {num_heads: 4}, direction: a_beats_b, metric: params, relative: true, tolerance: 0.3}
  - {name: solves_more, claim: four heads solve more often, source: planted, a: {num_heads: 4}, b: {num_heads: 2},
     direction: a_beats_b, solved_at: 50}
  - {name: deeper_at_every_width, claim: two blocks beat one at every head count, source: planted,
     a: {config: {depth: 2, num_heads: 2, embed_dim: 16, mlp_dim: 32}}, b: {depth: 1},
     direction: a_beats_b, tolerance: 1, at_every: {num_heads: [2, 4]}}
  - {name: deeper_at_some_width, claim: two blocks beat one at some head count, source: planted,
     a: {config: {depth: 2, num_heads: 2, embed_dim: 16, mlp_dim: 32}}, b: {depth: 1},
     direction: a_beats_b, tolerance: 1, at_some: {num_heads: [2, 4]}}
profiles:
  small:
    axes: {num_heads: [4]}
"""
SPACE_BODY = TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1, 2]")

# (depth, heads): (top1 of each seed, val_loss of each seed, params). Digits: chance 10%.
PLANTED = {
    (1, 2): ([11.0, 12.0, 10.0], [2.2, 2.25, 2.3], 1000),  # at chance
    (1, 4): ([80.0, 81.0, 79.0], [0.5, 0.52, 0.51], 2000),  # the baseline
    (2, 1): ([80.5, 80.0, 79.5], [0.5, 0.5, 0.5], 3000),  # a config of its own: as good as 1 × 4
    (2, 2): ([50.0, 51.0, 49.0], [1.0, 1.0, 1.0], 3000),  # beats 1 × 2
    (2, 4): ([90.0, 91.0, 89.0], [0.3, 0.3, 0.3], 4000),  # beats 1 × 4
}
EXPECTED = {  # name: (found, verdict)
    "deep_matches_wide": ("a at least as good as b", "agrees"),
    "two_heads_at_chance": ("a at most the level", "agrees"),
    "four_heads_reach_75": ("a at least the level", "agrees"),
    "loss_lower": ("a beats b", "agrees"),
    "fewer_params": ("a beats b", "agrees"),
    "solves_more": ("a beats b", "agrees"),
    "deeper_at_every_width": ("2 of 2 members agree", "agrees"),
    "deeper_at_some_width": ("2 of 2 members agree", "agrees"),
}


def write_space(tmp_path, claims: str = CLAIMS, body: str = SPACE_BODY):
    path = tmp_path / "claims.yaml"
    path.write_text("question: claims\n" + body + textwrap.dedent(claims))
    return path


def planted_results(tmp_path, capsys, planted=PLANTED, claims: str = CLAIMS):
    """The plan's claims recorded as ``sweep run`` records them, and one imported row per config and seed."""
    name, space, profile = load_space(str(write_space(tmp_path, claims)))
    plan = make_plan(name, space, profile)
    rows = []
    for config in plan.configs:
        shape = config.shape
        scores, losses, params = planted[(shape.depth, shape.num_heads)]
        for seed, (score, loss) in enumerate(zip(scores, losses, strict=True)):
            rows.append({
                "space": name, "config_id": config.config_id, "seed": seed, "family": "vit", "depth": shape.depth,
                "num_heads": shape.num_heads, "head_dim": shape.head_dim, "embed_dim": shape.embed_dim,
                "mlp_dim": shape.mlp_dim, "status": "ok", "params": params, "is_baseline": config.is_baseline,
                "metric": "top1", "metric_mode": "max", "top1": score, "val_loss": loss, "chance_score": 10.0,
            })  # fmt: skip
    results = tmp_path / "results"
    assert main(["import", str(write_csv(tmp_path / "rows.csv", rows)), "--results", str(results)]) == 0
    recorded = json.dumps({"expectations": QUESTION.record(plan)})
    record_space(results, name, "sweep", None, "q", "top1", "max", 0.5, recorded)
    capsys.readouterr()
    return results


def sql(results, capsys, query: str) -> list[dict]:
    assert main(["sql", query, "--results", str(results), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def judged(tmp_path, capsys):
    results = planted_results(tmp_path, capsys)
    claims = {r["name"]: r for r in sql(results, capsys, "SELECT * FROM expectations")}
    members = sql(results, capsys, "SELECT * FROM expectation_members")
    return claims, members


def welch_interval(a, b, c=1.0, confidence=0.95):
    """scipy: the interval of mean(a) − c·mean(b) by Welch's t (exact quantile)."""
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / len(a), c * c * b.var(ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    centre, half = a.mean() - c * b.mean(), stats.t.ppf(1 - (1 - confidence) / 2, dof) * math.sqrt(va + vb)
    return centre - half, centre + half


def test_each_kind_gets_its_verdict_through_sweep_sql(judged):
    claims, _ = judged
    assert {name: (r["found"], r["verdict"]) for name, r in claims.items()} == EXPECTED


def test_non_inferiority_is_decided_on_the_welch_lower_bound(judged):
    row = judged[0]["deep_matches_wide"]
    a, b = PLANTED[(2, 1)][0], PLANTED[(1, 4)][0]
    low, _ = welch_interval(a, b)
    assert row["delta"] == pytest.approx(np.mean(a) - np.mean(b), abs=1e-9)
    # macros.sql's t95 interpolates a fractional dof: never narrower than scipy's, at most 2.9% wider
    assert row["delta"] - row["delta_lo"] == pytest.approx(row["delta"] - low, rel=0.03)
    assert row["delta"] - row["delta_lo"] >= (row["delta"] - low) * (1 - 1e-9)
    assert low >= -3 and row["delta_lo"] >= -3  # decided as vs_baseline's holds: lower bound ≥ −margin
    assert row["a_added"] and not row["b_added"] and row["statistic"] == "welch t"


def test_levels_are_one_sample_t_intervals_against_the_level(judged):
    at_chance, reached = judged[0]["two_heads_at_chance"], judged[0]["four_heads_reach_75"]
    scores = PLANTED[(1, 2)][0]
    low, high = stats.t.interval(0.95, len(scores) - 1, np.mean(scores), stats.sem(scores))
    assert at_chance["level"] == 10.0 and at_chance["must_learn"] == "none"  # the data set's chance, judgeable
    assert at_chance["delta_hi"] == pytest.approx(high - 10.0, rel=1e-3) and high <= 10.0 + 5
    scores = PLANTED[(1, 4)][0]
    low, _ = stats.t.interval(0.95, len(scores) - 1, np.mean(scores), stats.sem(scores))
    assert reached["delta_lo"] == pytest.approx(low - 75, rel=1e-3) and low >= 75


def test_solve_rates_match_scipy_boschloo_and_a_float64_newcombe(judged):
    row = judged[0]["solves_more"]
    assert (row["a_solved"], row["n_a"], row["b_solved"], row["n_b"]) == (3, 3, 0, 3)
    scipy_p = stats.boschloo_exact([[3, 0], [0, 3]], alternative="two-sided").pvalue
    assert row["p_value"] == pytest.approx(scipy_p, rel=1e-9) and row["p_value"] < 0.05
    z = stats.norm.ppf(0.975)

    def wilson_here(k, n):  # the score interval, solved from |p̂ − p| = z √(p(1 − p)/n) as a quadratic in p
        phat, a = k / n, 1 + z * z / n
        b, c = -(2 * phat + z * z / n), phat * phat
        return ((-b - math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))

    (la, _), (lb, ub) = wilson_here(3, 3), wilson_here(0, 3)
    assert row["delta_lo"] == pytest.approx(1 - math.sqrt((1 - la) ** 2 + ub**2), rel=1e-9)
    assert row["delta_hi"] == pytest.approx(1 + math.sqrt(lb**2), rel=1e-9)
    assert wilson(2, 7, z) == pytest.approx(wilson_here(2, 7), rel=1e-12)
    assert newcombe(2, 7, 5, 6, z)[0] == pytest.approx(
        2 / 7 - 5 / 6 - math.hypot(2 / 7 - wilson_here(2, 7)[0], wilson_here(5, 6)[1] - 5 / 6), rel=1e-12
    )
    for table in [(2, 5, 0, 4), (4, 4, 1, 4), (1, 3, 3, 3)]:
        k_a, n_a, k_b, n_b = table
        expected = stats.boschloo_exact([[k_a, k_b], [n_a - k_a, n_b - k_b]], alternative="two-sided").pvalue
        assert boschloo_p(*table) == pytest.approx(expected, rel=1e-9)


def test_any_recorded_number_takes_its_direction_and_a_relative_tolerance(judged):
    loss, params = judged[0]["loss_lower"], judged[0]["fewer_params"]
    # val_loss: lower is better, so Δ (positive: a better) is mean(b) − mean(a)
    assert loss["metric"] == "val_loss" and loss["delta"] == pytest.approx(2.25 - 0.51, abs=1e-9)
    assert loss["must_learn"] == "a"
    # params: counted, compared exactly: a = 1,000 ≤ (1 − 0.3) · 2,000
    assert params["statistic"] == "exact" and params["ratio"] == pytest.approx(0.5)
    assert params["delta_lo"] == params["delta"] == params["delta_hi"] == pytest.approx(1000.0)


def test_families_one_verdict_every_is_intersection_union_and_some_is_holm(judged):
    claims, members = judged
    every = [m for m in members if m["name"] == "deeper_at_every_width"]
    some = [m for m in members if m["name"] == "deeper_at_some_width"]
    assert [m["member"] for m in every] == ["num_heads=2", "num_heads=4"]
    assert {m["confidence"] for m in every} == {0.95}  # all must hold: no correction
    assert [m["confidence"] for m in some] == pytest.approx([1 - 0.05 / 2] * 2)  # Holm's first step, α / 2
    for member in some:
        a, b = {"num_heads=2": ((2, 2), (1, 2)), "num_heads=4": ((2, 4), (1, 4))}[member["member"]]
        low, _ = welch_interval(PLANTED[a][0], PLANTED[b][0], confidence=1 - 0.05 / 2)
        assert member["delta_lo"] == pytest.approx(low, rel=1e-9)  # t_quantile: scipy's exact quantile
    assert claims["deeper_at_every_width"]["members"] == 2 and claims["deeper_at_every_width"]["a_shape"] is None


def test_a_family_disagrees_or_stays_open_by_its_rule(tmp_path, capsys):
    """(2, 4) worse than (1, 4): at every width one member disagrees, so the family does; at some width the
    other member is enough."""
    planted = {**PLANTED, (2, 4): ([60.0, 61.0, 59.0], [0.5, 0.5, 0.5], 4000)}
    results = planted_results(tmp_path, capsys, planted)
    claims = {r["name"]: r for r in sql(results, capsys, "SELECT * FROM expectations")}
    assert claims["deeper_at_every_width"]["verdict"] == "disagrees"  # a member found b beats a
    assert claims["deeper_at_some_width"]["verdict"] == "agrees"
    from sweep.analysis.sql import connect

    section = QUESTION.report_section(connect(results), "claims", None, None)
    assert "**deeper_at_every_width: disagrees.**" in section and "found 1 of 2 members agree (every" in section
    assert "**two_heads_at_chance: agrees.**" in section and "against 10" in section
    assert "**solves_more: agrees.**" in section


def test_throughput_is_compared_only_within_one_device(tmp_path, capsys):
    claims = """\
    expect:
      - {name: faster, claim: two heads infer faster, source: planted, a: {num_heads: 2}, b: {num_heads: 4},
         direction: a_beats_b, metric: infer_samples_per_s}
    """
    name, space, profile = load_space(str(write_space(tmp_path, claims)))
    plan = make_plan(name, space, profile)
    rows = []
    for config in plan.configs:
        for seed in range(3):
            device = "cpu" if config.shape.num_heads == 2 or seed < 2 else "cuda:NVIDIA H100"
            rows.append({"space": name, "config_id": config.config_id, "seed": seed, "family": "vit", "depth": 1,
                         "num_heads": config.shape.num_heads, "head_dim": config.shape.head_dim, "embed_dim": 16,
                         "mlp_dim": 32, "status": "ok", "params": 1000, "metric": "top1", "metric_mode": "max",
                         "top1": 80.0 + seed,
                         "infer_samples_per_s": 200.0 * (3 - config.shape.num_heads // 2) + seed, "device": device,
                         "chance_score": 10.0, "is_baseline": config.is_baseline})  # fmt: skip
    results = tmp_path / "results"
    code = main(["import", str(write_csv(tmp_path / "rows.csv", rows)), "--results", str(results)])
    assert code == 0, capsys.readouterr().err
    recorded = json.dumps({"expectations": QUESTION.record(plan)})
    record_space(results, name, "sweep", None, "q", "top1", "max", 0.5, recorded)
    capsys.readouterr()
    [row] = sql(results, capsys, "SELECT found, verdict, device FROM expectations")
    assert (row["found"], row["verdict"], row["device"]) == ("different devices", "inconclusive", None)


def test_plan_adds_only_the_configs_claims_need_and_prints_each(tmp_path, capsys):
    path = write_space(tmp_path)
    assert main(["plan", str(path), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    shapes = sorted((t["depth"], t["num_heads"]) for t in printed["configs"]) if "configs" in printed else None
    name, space, profile = load_space(str(path))
    plan = make_plan(name, space, profile)
    assert sorted((c.shape.depth, c.shape.num_heads) for c in plan.configs) == [(1, 2), (1, 4), (2, 1), (2, 2), (2, 4)]
    assert shapes in (None, sorted((c.shape.depth, c.shape.num_heads) for c in plan.configs))
    assert [c.shape.depth for c in plan.configs[:2]] == [1, 1]  # the grid's first: their ids do not move
    assert len(printed["expectations"]) == 10  # 6 claims and 2 families of 2
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "expect two_heads_at_chance: num_heads=2" in out and "a at most chance = 10" in out
    assert "expect deeper_at_every_width [num_heads=4, every of 2]: config depth=2 num_heads=4" in out
    assert ", added)" in out
    assert "3 configs of claims" in out


def test_a_profile_that_leaves_a_side_out_does_not_judge_the_claim(tmp_path, capsys):
    path = write_space(tmp_path)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "expect[1].a: not judged under profile 'small'" in out
    assert main(["plan", str(path), "--profile", "small"]) == 0
    out = capsys.readouterr().out
    assert "expect two_heads_at_chance: not judged under this profile" in out
    name, space, profile = load_space(str(path), "small")
    plan = make_plan(name, space, profile)
    assert {row["name"] for row in QUESTION.record(plan)} == {"deep_matches_wide", "four_heads_reach_75"}
    # the space's own grid must hold every side: there it stays a problem
    body = SPACE_BODY.replace("num_heads: [2, 4]", "num_heads: [4]")
    bad = write_space(tmp_path, "expect:\n" + CLAIMS.split("expect:\n")[1].split("profiles:")[0], body)
    assert main(["validate", str(bad)]) == 2
    assert "expect[1].a: must pick out one of the plan's configurations, but picks out none" in capsys.readouterr().err


def test_validation_reports_every_problem_at_once(tmp_path, capsys):
    claims = """\
    expect:
      - {name: level_with_b, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: a_at_least,
         level: 50}
      - {name: perplexity, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: a_beats_b,
         metric: perplexity}
      - {name: half_config, claim: c, source: s, a: {config: {depth: 2, num_heads: 2}}, b: {num_heads: 4},
         direction: a_beats_b}
      - {name: no_tolerance, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: no_difference}
    """
    assert main(["validate", str(write_space(tmp_path, claims))]) == 2
    err = capsys.readouterr().err
    assert "expect.0" in err or "expect[0]" in err
    assert "a_at_least judges a against a level: give `level` and no `b`" in err
    assert "['embed_dim', 'mlp_dim'] are missing" in err
    assert "no_difference needs a tolerance > 0" in err
    claims = """\
    expect:
      - {name: perplexity, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: a_beats_b,
         metric: perplexity}
      - {name: own, claim: c, source: s, a: {config: {depth: 2, num_heads: 3, embed_dim: 16, mlp_dim: 32}},
         b: {num_heads: 4}, direction: a_beats_b}
    """
    assert main(["validate", str(write_space(tmp_path, claims))]) == 2
    err = capsys.readouterr().err
    assert "expect[0].metric: must be recorded for data set 'digits'" in err
    assert "expect[1].a.config: a config of its own must be buildable" in err


def test_validate_says_how_many_seeds_a_solve_rate_claim_needs(tmp_path, capsys):
    claims = """\
    expect:
      - {name: solves, claim: c, source: s, a: {num_heads: 4}, b: {num_heads: 2}, direction: a_beats_b,
         solved_at: 50}
    """
    body = SPACE_BODY.replace("seeds: [0, 1, 2]", "seeds: [0, 1]")
    assert main(["validate", str(write_space(tmp_path, claims, body))]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "cannot be decided at 2 seeds per side" in out and "plan at least 3 seeds" in out
    assert main(["validate", str(write_space(tmp_path, claims))]) == 0
    assert "cannot be decided" not in capsys.readouterr().out  # 3 of 3 against 0 of 3 can be (p = 1/32)


@pytest.mark.parametrize(
    ("claim", "needed", "why"),
    [
        # 3/3 vs 0/3: Boschloo's two-sided p = 2 · (1/2)⁶ = 1/32 < 0.05; 2/2 vs 0/2: 1/8
        ({"direction": "a_beats_b", "b": {"num_heads": 2}}, 3, "boschloo"),
        # n/n: Wilson's lower bound n / (n + z²) ≥ 0.9 from n = 35 (past the search): none
        ({"direction": "a_at_least", "level": 0.9}, None, "wilson"),
        ({"direction": "a_at_least", "level": 0.5}, 4, "wilson"),
    ],
)
def test_seeds_needed_matches_the_formulas(claim, needed, why):
    from sweep.questions.expectations import Expect

    expect = Expect(name="x", claim="c", source="s", a={"num_heads": 4}, solved_at=50, **claim)
    assert seeds_needed(expect) == needed
    z = stats.norm.ppf(0.975)
    if why == "wilson":  # the lower Wilson bound of n/n is n / (n + z²)
        first = next(n for n in range(1, 200) if n / (n + z * z) >= claim["level"])
        assert needed == (first if first <= 30 else None)
    else:
        p = [stats.boschloo_exact([[n, 0], [0, n]], alternative="two-sided").pvalue for n in (2, 3)]
        assert p[0] > 0.05 > p[1]


RUN_CLAIMS = """\
expect:
  - {name: off_grid_matches, claim: two blocks of one head match one block of two, source: planted,
     a: {config: {depth: 2, num_heads: 1, embed_dim: 16, mlp_dim: 32}}, b: {num_heads: 2},
     direction: a_at_least_b, tolerance: 50}
  - {name: two_heads_at_chance, claim: two heads do not beat chance, source: planted, a: {num_heads: 2},
     direction: a_at_most, level: chance, tolerance: 90}
  - {name: loss, claim: four heads have no higher loss, source: planted, a: {num_heads: 4}, b: {num_heads: 2},
     direction: a_at_least_b, metric: val_loss, tolerance: 10}
  - {name: same_params, claim: the off-grid model has more parameters, source: planted,
     a: {num_heads: 2}, b: {config: {depth: 2, num_heads: 1, embed_dim: 16, mlp_dim: 32}},
     direction: a_beats_b, metric: params}
"""


@pytest.mark.slow
def test_a_space_of_new_claims_plans_only_its_configs_and_runs_to_a_verdict_each(tmp_path, capsys, local_ray):
    """Through ``sweep run``: a config off the grid, non-inferiority, a level on chance, a loss and a cost."""
    path = write_space(tmp_path, RUN_CLAIMS, SPACE_BODY.replace("seeds: [0, 1, 2]", "seeds: [0, 1]"))
    assert main(["validate", str(path)]) == 0
    name, space, profile = load_space(str(path))
    assert len(make_plan(name, space, profile).configs) == 3  # 2 of the grid and 1 of its own, not a product
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results), "--quiet"]) == 0
    capsys.readouterr()
    rows = {r["name"]: r for r in sql(results, capsys, "SELECT * FROM expectations")}
    assert set(rows) == {"off_grid_matches", "two_heads_at_chance", "loss", "same_params"}
    for row in rows.values():
        assert row["n_a"] == 2 and row["verdict"] in ("agrees", "disagrees", "inconclusive")
        assert row["found"] != "not run"
    # a 1-step digits model is near chance (10%): its upper bound is under 10 + 90
    assert rows["two_heads_at_chance"]["found"] == "a at most the level"
    # the reference must have learned (its headline past chance) for a non-inferiority claim to say anything
    assert rows["loss"]["metric"] == "val_loss"
    assert rows["loss"]["found"] == ("did not learn" if rows["loss"]["b_at_chance"] else "a at least as good as b")
    assert rows["same_params"]["statistic"] == "exact" and rows["same_params"]["found"] == "a beats b"
    assert rows["off_grid_matches"]["a_added"] and rows["off_grid_matches"]["n_b"] == 2
    assert rows["off_grid_matches"]["must_learn"] == "b"
