"""Statistics of the verdicts, checked against independent computations (numpy, scipy), never against the
views' own output: the t quantiles, Welch's and the pooled-variance intervals, Bartlett's equal-variance
check and the fallback it triggers, how often the 95% intervals cover a known true difference in simulated
sweeps (2, 3 and 5 seeds), the matched-budget comparison, and Spearman's ρ of κ against the score with its
deterministic bootstrap interval."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from sweep.analysis.sql import connect
from sweep.results.schema import SCHEMAS, table_from_rows
from tests.helpers import VIEWS, query

DUCKDB_SHELL = Path(sys.executable).parent / "duckdb"

# --- writing trials rows ------------------------------------------------------------------------------------


def write_columns(results: Path, name: str, columns: dict[str, np.ndarray | list]) -> None:
    """Trials rows given column-wise (fast for the simulations): the schema's other columns are null."""
    schema = SCHEMAS["trials"]
    length = len(next(iter(columns.values())))
    arrays = [
        pa.array(columns[field.name], type=field.type) if field.name in columns else pa.nulls(length, field.type)
        for field in schema
    ]
    path = results / "trials" / name / "sim" / "rows.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)
    write_empty_tables(results)


def write_empty_tables(results: Path) -> None:
    """An empty file for each other table, as a sweep leaves them: the plain duckdb shell's globs need one."""
    for table in ("epochs", "kappa", "spaces"):
        path = results / table / "empty.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(SCHEMAS[table].empty_table(), path)


def write_rows(results: Path, name: str, rows: list[dict]) -> None:
    path = results / "trials" / name / "planted" / "rows.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows("trials", rows), path)
    write_empty_tables(results)


def row(space, config, seed, score, *, baseline=False, family="vit", metric="top1", mode="max", **extra) -> dict:
    shape = {"depth": 2, "num_heads": 4, "head_dim": 16, "embed_dim": 64, "mlp_dim": 128, "attn_dim": 64}
    return {
        "schema_version": 2, "space": space, "sweep_id": "planted", "trial_id": f"{space}-{config}-{seed}",
        "config_id": config, "seed": seed, "is_baseline": baseline, "family": family, "status": "ok",
        "metric": metric, "metric_mode": mode, "score": score, **shape, **extra,
    }  # fmt: skip


# --- t quantiles --------------------------------------------------------------------------------------------


def test_t95_against_scipy(tmp_path):
    con = connect(tmp_path)
    whole = [*range(1, 31), 31, 40, 48, 60, 99, 120, 500, 10_000]
    fractional = [1.05, 1.3, 1.5, 1.9, 2.2, 2.5, 3.7, 7.5, 12.25, 29.5, 30.5, 57.3]
    got = dict(con.execute(f"SELECT x, t95(x) FROM unnest({whole + fractional}::DOUBLE[]) AS v(x)").fetchall())
    for dof in whole:  # the 4-decimal table, then the Cornish-Fisher expansion from 30 on
        assert got[dof] == pytest.approx(stats.t.ppf(0.975, dof), abs=5e-5 if dof <= 30 else 1e-6)
    for dof in fractional:  # interpolated: never below the exact quantile, at most 3% above it
        exact = stats.t.ppf(0.975, dof)
        assert exact - 5e-5 <= got[dof] <= exact * (1.03 if dof < 2 else 1.005)
    assert con.execute("SELECT t95(0.5), t95(NULL)").fetchone() == (None, None)


def test_f95_against_scipy(tmp_path):
    con = connect(tmp_path)
    for d1 in (1, 2, 3, 5, 12):
        for d2 in (1, 2, 3, 4, 5, 11, 24, 47, 200):
            got, exact = con.execute("SELECT f95(?, ?)", [d1, d2]).fetchone()[0], stats.f.ppf(0.95, d1, d2)
            if d1 == 1:  # exact: t95(d2)²
                assert got == pytest.approx(exact, rel=1e-4)
            elif d2 < 3:
                assert got is None
            elif d2 < 5:  # Paulson, a little high
                assert exact <= got <= exact * 1.08
            else:
                assert got == pytest.approx(exact, rel=0.025)


# --- coverage of the 95% intervals in simulated sweeps ------------------------------------------------------

SEEDS = (2, 3, 5)
DRAWS = 2000  # simulated sweeps per setting: a coverage of 95% is measured to ±1 point (2 s.e. = 0.97)
# Equal variances, as the pooled method assumes: 12 configs per space (a real grid's size), noise sd 1 point,
# config j's true mean = the baseline's + TRUE_DELTA[j]; the designated comparison is config c01 (−0.4).
TRUE_DELTA = np.array([0.0, -0.4, -3.0, -2.0, -1.0, -0.5, 0.3, 0.8, 1.5, 2.0, 2.5, -1.5])
# Unequal variances, Welch's own setting and where verdicts fall back to it: baseline sd 1, config sd 4,
# true difference −0.4, 2 configs per space. More draws: it costs 2 rows per seed, not 12.
WELCH_DRAWS, WELCH_SD = 5000, 4.0
# One config noisier than the rest: as TRUE_DELTA's spaces, but c01's noise sd is 3 (the others' 1); 2 seeds.
NOISY_SD = np.array([1.0, 3.0] + [1.0] * 10)


def simulated_columns(rng, prefix: str, draws: int, seeds: int, deltas, sds) -> dict[str, np.ndarray]:
    configs = len(deltas)
    scores = (
        80.0
        + np.asarray(deltas)[None, :, None]
        + np.asarray(sds)[None, :, None] * rng.standard_normal((draws, configs, seeds))
    )
    space, config, seed = np.meshgrid(np.arange(draws), np.arange(configs), np.arange(seeds), indexing="ij")
    space, config, seed = space.ravel(), config.ravel(), seed.ravel()
    space_names = np.char.add(f"{prefix}{seeds}_", np.char.zfill(space.astype(str), 4))
    config_names = np.char.add("c", np.char.zfill(config.astype(str), 2))
    count = space.size
    return {
        "schema_version": np.full(count, 2, dtype=np.int32),
        "space": space_names.astype(object),
        "sweep_id": np.full(count, "sim", dtype=object),
        "trial_id": np.char.add(np.char.add(space_names, config_names), seed.astype(str)).astype(object),
        "config_id": config_names.astype(object),
        "seed": seed.astype(np.int64),
        "is_baseline": config == 0,
        "family": np.full(count, "vit", dtype=object),
        "depth": (config + 1).astype(np.int64),
        "num_heads": np.full(count, 4, dtype=np.int64),
        "status": np.full(count, "ok", dtype=object),
        "metric": np.full(count, "top1", dtype=object),
        "metric_mode": np.full(count, "max", dtype=object),
        "score": scores.ravel(),
    }


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """Every setting in one results folder; returns per setting the designated comparison's rows."""
    results = tmp_path_factory.mktemp("simulated") / "results"
    rng = np.random.default_rng(20260)
    for seeds in SEEDS:
        write_columns(results, f"eq{seeds}", simulated_columns(rng, "eq", DRAWS, seeds, TRUE_DELTA, np.ones(12)))
        write_columns(
            results, f"uneq{seeds}", simulated_columns(rng, "uneq", WELCH_DRAWS, seeds, [0.0, -0.4], [1.0, WELCH_SD])
        )
    write_columns(results, "noisy2", simulated_columns(rng, "noisy", DRAWS, 2, TRUE_DELTA, NOISY_SD))
    con = connect(results)
    verdicts = con.execute(
        """SELECT split_part(space, '_', 1) AS setting, space, delta, welch_lo, welch_hi, pooled_lo, pooled_hi,
                  delta_lo, delta_hi, method, evidence, equal_variance_p, welch_df, pooled_df, pooled_sd
           FROM vs_baseline WHERE config_id = 'c01' ORDER BY space"""
    ).fetchnumpy()
    checks = con.execute(
        "SELECT split_part(space, '_', 1) AS setting, space, equal_variance, bartlett_stat, bartlett_df, bartlett_p "
        "FROM variance_check ORDER BY space"
    ).fetchnumpy()
    return results, verdicts, checks


def coverage(verdicts, setting: str, lo: str, hi: str, truth: float = -0.4) -> float:
    chosen = verdicts["setting"] == setting
    lows, highs = np.asarray(verdicts[lo][chosen], float), np.asarray(verdicts[hi][chosen], float)
    assert not np.isnan(lows).any() and not np.isnan(highs).any()
    return float(np.mean((lows <= truth) & (truth <= highs)))


@pytest.mark.slow
@pytest.mark.parametrize("seeds", SEEDS)
def test_pooled_intervals_cover_95_percent(simulated, seeds):
    _, verdicts, _ = simulated
    assert (verdicts["setting"] == f"eq{seeds}").sum() == DRAWS
    assert 0.93 <= coverage(verdicts, f"eq{seeds}", "pooled_lo", "pooled_hi") <= 0.97


@pytest.mark.parametrize("seeds", SEEDS)
def test_welch_intervals_cover_95_percent_where_variances_differ(simulated, seeds):
    _, verdicts, _ = simulated
    assert (verdicts["setting"] == f"uneq{seeds}").sum() == WELCH_DRAWS
    assert 0.93 <= coverage(verdicts, f"uneq{seeds}", "welch_lo", "welch_hi") <= 0.97


def test_welch_over_covers_with_few_seeds_and_equal_variances(simulated):
    """With equal variances and seeds, Welch's statistic is exactly t on 2(n − 1) df, but its df estimate
    is lower (1–2 with 2 seeds), so its interval is too wide: 97.7% coverage at 2 seeds, 96.5% at 3, 95.6%
    at 5 (400,000 draws in numpy). That is why a verdict with 2 seeds pools when it may."""
    _, verdicts, _ = simulated
    assert 0.95 <= coverage(verdicts, "eq2", "welch_lo", "welch_hi") <= 0.99
    assert 0.94 <= coverage(verdicts, "eq3", "welch_lo", "welch_hi") <= 0.98
    assert 0.93 <= coverage(verdicts, "eq5", "welch_lo", "welch_hi") <= 0.97


def test_the_verdicts_interval_covers_95_percent_with_two_seeds(simulated):
    """With 2 seeds the verdict pools unless Bartlett rejects equal variances (at these equal variances about
    3% of the time: it is conservative with 1 df per config) or either compared config's own spread is
    above the 5% F bound against the others' (about 5% per side); then it uses Welch."""
    _, verdicts, checks = simulated
    eq2 = verdicts["setting"] == "eq2"
    methods = verdicts["method"][eq2]
    assert set(methods) == {"pooled", "welch"} and 0.80 <= np.mean(methods == "pooled") <= 0.95
    pooled_p = np.asarray(verdicts["equal_variance_p"][eq2], float)[methods == "pooled"]
    assert (pooled_p >= 0.05).all()  # pooled only where Bartlett did not reject
    rejected = np.mean(~np.asarray(checks["equal_variance"][checks["setting"] == "eq2"], bool))
    assert 0.005 <= rejected <= 0.06
    assert 0.93 <= coverage(verdicts, "eq2", "delta_lo", "delta_hi") <= 0.97
    for seeds in (3, 5):  # 3+ seeds on both sides: Welch
        assert set(verdicts["method"][verdicts["setting"] == f"eq{seeds}"]) == {"welch"}
    for seeds in (3, 5):  # Bartlett's false alarms at 5%: near 5% with 2+ df per config
        share = np.mean(~np.asarray(checks["equal_variance"][checks["setting"] == f"eq{seeds}"], bool))
        assert 0.025 <= share <= 0.075


def test_one_noisier_config_is_what_two_seeds_cannot_see(simulated):
    """12 configs of 2 seeds, the compared config's noise 3 times the others': pooling its comparison covers
    only ~74%. Bartlett alone rarely notices (1 df per config); the per-side F check falls back to Welch
    in about half the draws, which lifts the verdict's coverage to ~84%, still short of 95%. Welch alone
    covers ~96%, at an interval several times as wide. Pooling with 2 seeds is only as good as the
    assumption that no config is much noisier than the rest."""
    _, verdicts, _ = simulated
    pooled = coverage(verdicts, "noisy2", "pooled_lo", "pooled_hi")
    chosen = coverage(verdicts, "noisy2", "delta_lo", "delta_hi")
    assert pooled < 0.80 and chosen >= pooled + 0.05 and chosen < 0.93
    assert coverage(verdicts, "noisy2", "welch_lo", "welch_hi") >= 0.93
    assert 0.3 <= np.mean(verdicts["method"][verdicts["setting"] == "noisy2"] == "welch") <= 0.8


def test_intervals_and_bartlett_equal_scipy_on_simulated_spaces(simulated):
    results, verdicts, checks = simulated
    spaces = ["eq2_0000", "eq3_0007", "eq5_0011", "uneq2_0003", "uneq3_0004", "noisy2_0005"]
    scores = {}
    for space, config, score in (
        connect(results)
        .execute("SELECT space, config_id, score FROM trials WHERE list_contains(?, space) ORDER BY seed", [spaces])
        .fetchall()
    ):
        scores.setdefault(space, {}).setdefault(config, []).append(score)
    for space in spaces:
        groups = scores[space]
        base, config = np.array(groups["c00"]), np.array(groups["c01"])
        got = {name: values[list(verdicts["space"]).index(space)] for name, values in verdicts.items()}
        welch = stats.ttest_ind(config, base, equal_var=False)
        ci = welch.confidence_interval(0.95)
        delta = config.mean() - base.mean()
        half, exact_half = got["welch_hi"] - delta, ci.high - delta  # t95: at most 3% above the exact quantile
        assert (got["welch_lo"] + got["welch_hi"]) / 2 == pytest.approx(delta)
        assert got["welch_df"] == pytest.approx(welch.df) and exact_half * (1 - 1e-4) <= half <= exact_half * 1.03
        dof = sum(len(v) - 1 for v in groups.values())
        sp = np.sqrt(sum((len(v) - 1) * np.var(v, ddof=1) for v in groups.values()) / dof)
        pooled_half = stats.t.ppf(0.975, dof) * sp * np.sqrt(1 / len(config) + 1 / len(base))
        assert got["pooled_df"] == dof and got["pooled_sd"] == pytest.approx(sp)
        assert (got["pooled_lo"] + got["pooled_hi"]) / 2 == pytest.approx(delta)
        assert (got["pooled_hi"] - got["pooled_lo"]) / 2 == pytest.approx(pooled_half, rel=2e-5)  # 4-decimal table
        statistic, p = stats.bartlett(*groups.values())
        check = {name: values[list(checks["space"]).index(space)] for name, values in checks.items()}
        assert check["bartlett_stat"] == pytest.approx(statistic, rel=1e-9) and check["bartlett_df"] == len(groups) - 1
        assert check["bartlett_p"] == pytest.approx(p, abs=1e-6)


def test_bartlett_equals_scipy_for_even_and_odd_df(tmp_path):
    """k = 2 … 9 configs (χ² df 1 … 8: both closed forms), 2–5 seeds, spreads that differ more and more."""
    rng = np.random.default_rng(3)
    rows, groups = [], {}
    for k in range(2, 10):
        space = f"k{k}"
        for config in range(k):
            seeds = int(rng.integers(2, 6))
            scores = 80 + (1 + config * k / 4) * rng.standard_normal(seeds)
            groups.setdefault(space, []).append(scores)
            rows += [row(space, f"c{config}", seed, float(v), baseline=config == 0) for seed, v in enumerate(scores)]
    results = tmp_path / "results"
    write_rows(results, "bartlett", rows)
    got = {c["space"]: c for c in query(results, "FROM variance_check")}
    for space, samples in groups.items():
        statistic, p = stats.bartlett(*samples)
        assert got[space]["bartlett_stat"] == pytest.approx(statistic, rel=1e-9)
        assert got[space]["bartlett_p"] == pytest.approx(p, abs=1e-6)
        assert got[space]["equal_variance"] == (p >= 0.05)
        dof = sum(len(v) - 1 for v in samples)
        assert got[space]["pooled_df"] == dof
        assert got[space]["pooled_sd"] == pytest.approx(
            np.sqrt(sum((len(v) - 1) * np.var(v, ddof=1) for v in samples) / dof)
        )


# --- the method each verdict uses, and the fallback ---------------------------------------------------------


def spread_rows(space: str, sds: list[float], seeds: int, mean_shift=0.0) -> list[dict]:
    """Config k (c00 the baseline) has its seeds spread evenly over 80 + shift ± sds[k]."""
    rows = []
    for k, sd in enumerate(sds):
        offsets = np.linspace(-1, 1, seeds) * sd
        for seed, offset in enumerate(offsets):
            rows.append(row(space, f"c{k:02d}", seed, 80.0 + (mean_shift if k else 0.0) + offset, baseline=k == 0))
    return rows


def test_each_verdict_names_its_method_and_falls_back_to_welch_when_variances_differ(tmp_path):
    results = tmp_path / "results"
    rows = spread_rows("even", [0.5] * 6, 2)  # equal spreads, 2 seeds: pooled
    rows += spread_rows("uneven", [0.05, 0.05, 0.05, 0.05, 0.05, 5.0], 2)  # one config 100x the spread
    rows += spread_rows("three", [0.5] * 6, 3)  # 3 seeds on both sides: Welch
    rows += spread_rows("outlier", [0.5, 2.0] + [0.5] * 10, 2)  # Bartlett passes, c01's own spread does not
    rows += [row("single", "c00", 0, 80.0, baseline=True), row("single", "c00", 1, 80.2, baseline=True),
             row("single", "c01", 0, 79.9), row("single", "c02", 0, 80.0), row("single", "c02", 1, 80.4)]  # fmt: skip
    write_rows(results, "methods", rows)
    got = {(v["space"], v["config_id"]): v for v in query(results, "FROM vs_baseline")}
    checks = {c["space"]: c for c in query(results, "FROM variance_check")}

    even = got[("even", "c01")]
    assert even["method"] == "pooled" and even["evidence"] == "pooled variance t, 95% (df=6)"
    assert (even["delta_lo"], even["delta_hi"]) == (even["pooled_lo"], even["pooled_hi"])
    assert "equal variances not rejected (Bartlett p=" in even["method_reason"] and checks["even"]["equal_variance"]

    uneven = got[("uneven", "c01")]
    groups = [[r["score"] for r in rows if r["space"] == "uneven" and r["config_id"] == f"c{k:02d}"] for k in range(6)]
    assert stats.bartlett(*groups).pvalue < 0.05 and checks["uneven"]["equal_variance"] is False
    assert uneven["method"] == "welch" and uneven["evidence"] == "welch t, 95%"
    assert (uneven["delta_lo"], uneven["delta_hi"]) == (uneven["welch_lo"], uneven["welch_hi"])
    assert "variances differ across configs (Bartlett p=" in uneven["method_reason"]
    assert "Welch, not pooled" in checks["uneven"]["note"]

    outlier = got[("outlier", "c01")]
    samples = [
        [r["score"] for r in rows if r["space"] == "outlier" and r["config_id"] == f"c{k:02d}"] for k in range(12)
    ]
    assert stats.bartlett(*samples).pvalue >= 0.05 and checks["outlier"]["equal_variance"]
    ratio = np.var(samples[1], ddof=1) / np.mean([np.var(v, ddof=1) for i, v in enumerate(samples) if i != 1])
    assert ratio > stats.f.ppf(0.95, 1, 11)  # 16 > 4.84: out of line with the 11 others
    spread = query(results, "FROM spread_check WHERE space = 'outlier' AND config_id = 'c01'")[0]
    assert spread["spread_ratio"] == pytest.approx(ratio) and spread["others_df"] == 11
    assert spread["spread_limit"] == pytest.approx(stats.f.ppf(0.95, 1, 11), rel=1e-4) and not spread["spread_in_line"]
    assert outlier["method"] == "welch" and "the config's spread is out of line" in outlier["method_reason"]
    assert got[("outlier", "c02")]["method"] == "pooled"

    three = got[("three", "c01")]
    assert three["method"] == "welch" and three["method_reason"] == "3+ seeds on both sides"
    assert checks["three"]["equal_variance"] and three["pooled_lo"] is not None  # shown, not used

    assert got[("single", "c01")]["method"] == "single seed" and got[("single", "c01")]["evidence"] == "single seed"
    assert not got[("single", "c01")]["significant"]
    assert got[("single", "c02")]["method"] == "pooled"  # c00 and c02 have 2 seeds: a pool of 2 configs
    assert got[("single", "c00")]["evidence"] == "baseline"


def test_zero_spread_or_a_lone_config_cannot_be_checked(tmp_path):
    results = tmp_path / "results"
    rows = spread_rows("flat", [0.0, 0.5, 0.5], 2) + spread_rows("lone", [0.5], 2)
    rows += [row("lone", "c01", 0, 80.1)]
    write_rows(results, "edge", rows)
    checks = {c["space"]: c for c in query(results, "FROM variance_check")}
    assert checks["flat"]["equal_variance"] is False and "seeds all scored the same" in checks["flat"]["note"]
    assert checks["lone"]["equal_variance"] is None and "fewer than 2 configs" in checks["lone"]["note"]
    flat = query(results, "SELECT method FROM vs_baseline WHERE space = 'flat' AND config_id = 'c01'")
    assert flat == [{"method": "welch"}]


# --- matched budget -----------------------------------------------------------------------------------------

# (config, family, params, flops, train samples/s per seed, scores per seed); higher score is better.
MATCHED = [
    ("base", "vit", 1000, 5000, [100.0, 100.0], [80.0, 80.2]),
    ("lean", "vit", 520, 2600, [180.0, 220.0], [81.5, 81.7]),
    ("also", "vit", 1000, 5200, [90.0, 110.0], [79.0, 79.4]),  # as many params as base, worse
    ("twin", "vit", 1050, 4000, [95.0, 95.0], [80.2, 80.4]),
    ("huge", "vit", 4000, 20000, [25.0, 25.0], [83.0, 83.4]),
    ("solo", "vit", 2100, 9000, [48.0], [81.0]),
    ("other", "mixer", 1010, 5000, [100.0, 100.0], [70.0, 70.2]),  # another family: never a match for vit
    ("alone", "mixer", 300, 1000, [400.0, 400.0], [65.0, 66.0]),
]


@pytest.fixture
def matched(tmp_path):
    results = tmp_path / "results"
    rows = []
    for config, family, params, flops, speeds, scores in MATCHED:
        for seed, (speed, score) in enumerate(zip(speeds, scores, strict=True)):
            rows.append(row("budget", config, seed, score, baseline=config in ("base", "other"), family=family,
                            params=params, flops_per_sample=flops, train_samples_per_s=speed))  # fmt: skip
    write_rows(results, "budget", rows)
    return results


def judge(lo: float, hi: float, tolerance: float) -> str:
    """The matched-budget verdict on an interval of the gain (positive = better)."""
    if lo > tolerance:
        return "wins"
    if hi < -tolerance:
        return "loses"
    return "tie (within tolerance)" if -tolerance <= lo and hi <= tolerance else "inconclusive"


def expected_matches(tolerance=0.5):
    """Brute force from the table above: nearest in |ln ratio|, ties to the better score, then config_id."""
    table = {c: dict(family=f, scores=np.array(s), params=p, flops=fl, train_time=np.mean(1 / np.array(sp)))
             for c, f, p, fl, sp, s in MATCHED}  # fmt: skip
    out = {}
    for config, me in table.items():
        if config in ("base", "other"):
            continue
        for kind in ("params", "flops", "train_time"):
            rivals = [(round(abs(np.log(me[kind] / r[kind])), 9), -r["scores"].mean(), name)
                      for name, r in table.items() if name != config and r["family"] == me["family"]]  # fmt: skip
            if not rivals:
                continue
            name = min(rivals)[2]
            rival = table[name]
            delta = me["scores"].mean() - rival["scores"].mean()
            if len(me["scores"]) >= 2 and len(rival["scores"]) >= 2:
                ci = stats.ttest_ind(me["scores"], rival["scores"], equal_var=False).confidence_interval(0.95)
                lo, hi = ci.low, ci.high
                verdict = judge(lo, hi, tolerance)
            else:
                lo = hi = None
                verdict = judge(delta, delta, tolerance)  # one seed: the point difference alone
            out[(config, kind)] = dict(
                name=name, ratio=me[kind] / rival[kind], delta=delta, lo=lo, hi=hi, verdict=verdict
            )
    return out


def test_matched_budget_finds_the_nearest_rival_and_judges_against_it(matched):
    got = {(r["config_id"], r["cost_kind"]): r for r in query(matched, "FROM matched_budget")}
    expected = expected_matches()
    assert set(got) == set(expected)
    assert ("alone", "params") in got and got[("alone", "params")]["matched_config_id"] == "other"
    assert all(r["matched_config_id"] != r["config_id"] for r in got.values())
    assert got[("also", "params")]["matched_config_id"] == "base" and got[("also", "params")]["cost_ratio"] == 1
    for key, want in expected.items():
        have = got[key]
        assert have["matched_config_id"] == want["name"], key
        assert have["cost_ratio"] == pytest.approx(want["ratio"]) and have["delta"] == pytest.approx(want["delta"])
        assert have["verdict"] == want["verdict"], key
        if want["lo"] is None:
            assert have["delta_lo"] is None and have["evidence"] == "single seed" and not have["significant"]
        else:  # t95 interpolates fractional df: at most 3% wider than scipy's exact interval
            exact_half, half = want["hi"] - want["delta"], have["delta_hi"] - have["delta"]
            assert exact_half * (1 - 1e-4) <= half <= exact_half * 1.03, key
            assert have["evidence"] == "welch t, 95%"
    lean = got[("lean", "params")]  # base and also tie on params: the better score (base) is the rival
    assert lean["matched_config_id"] == "base" and lean["verdict"] == "wins" and lean["matched_is_baseline"]
    assert lean["cost"] == 520 and lean["matched_cost"] == 1000
    assert got[("lean", "train_time")]["cost"] == pytest.approx(np.mean([1 / 180, 1 / 220]))


def test_matched_budget_gain_follows_the_metric_direction(tmp_path):
    results = tmp_path / "results"
    rows = []
    for config, params, losses in (("base", 1000, [0.50, 0.52]), ("lean", 600, [0.30, 0.31])):
        for seed, loss in enumerate(losses):
            rows.append(row("loss", config, seed, loss, baseline=config == "base", metric="val_loss", mode="min",
                            params=params, flops_per_sample=params * 5, train_samples_per_s=1e5 / params))  # fmt: skip
    write_rows(results, "loss", rows)
    lean = query(results, "FROM matched_budget_at(0.05) WHERE config_id = 'lean' AND cost_kind = 'params'")[0]
    assert lean["delta"] == pytest.approx(-0.205) and lean["gain"] == pytest.approx(0.205)  # lower loss: better
    assert lean["gain_lo"] == pytest.approx(-lean["delta_hi"]) and lean["verdict"] == "wins"
    assert lean["tolerance"] == 0.05


# --- κ against the metric -----------------------------------------------------------------------------------


def mix32(x: int) -> int:
    """Wellons' lowbias32, as sweep/analysis/views/macros.sql's mix32."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def bootstrap_interval(kappa: np.ndarray, score: np.ndarray, resamples: int = 1000) -> tuple[float, float, int]:
    """The view's resampling, in numpy: resample b takes config mix32(mix32(b) ^ j) % n for j < n."""
    n, rhos = len(kappa), []
    for b in range(resamples):
        index = np.array([mix32(mix32(b) ^ j) % n for j in range(n)])
        k, s = kappa[index], score[index]
        if np.ptp(k) > 0 and np.ptp(s) > 0:
            rhos.append(stats.spearmanr(k, s).statistic)
    low, high = np.quantile(rhos, [0.025, 0.975])
    return float(low), float(high), len(rhos)


@pytest.fixture
def kappa_rows(tmp_path):
    """Two attention widths (attn_dim 64: 7 configs, 128: 5), two seeds each with different κ; a tie in κ."""
    rng = np.random.default_rng(5)
    rows, configs = [], []
    for width, count in ((64, 7), (128, 5)):
        for k in range(count):
            config = f"w{width}-{k}"
            kappa = [10.0 ** rng.uniform(1, 4) for _ in range(2)] if k != 3 else [50.0, 150.0]
            if k == 4:
                kappa = [40.0, 160.0]  # mean 100: ties with k = 3's
            scores = [70 + 5 * rng.standard_normal() - 2 * np.log10(np.mean(kappa)) for _ in range(2)]
            for seed in range(2):
                rows.append(row("kappa", config, seed, scores[seed], baseline=config == "w64-0", attn_dim=width,
                                kappa_mean=kappa[seed]))  # fmt: skip
            configs.append((config, width, float(np.mean(kappa)), float(np.mean(scores))))
    results = tmp_path / "results"
    write_rows(results, "kappa", rows)
    return results, configs


def test_kappa_accuracy_spearman_and_bootstrap_equal_numpy(kappa_rows):
    results, configs = kappa_rows
    got = {(r["scope"], r["attn_dim"]): r for r in query(results, "FROM kappa_accuracy")}
    assert set(got) == {("across_widths", None), ("fixed_width", 64), ("fixed_width", 128)}
    groups = {("across_widths", None): configs, **{("fixed_width", w): [c for c in configs if c[1] == w]
                                                    for w in (64, 128)}}  # fmt: skip
    for key, members in groups.items():
        members = sorted(members)  # the view numbers configs in config_id order
        kappa, score = np.array([m[2] for m in members]), np.array([m[3] for m in members])
        have = got[key]
        assert have["n_configs"] == len(members)
        assert have["spearman_rho"] == pytest.approx(stats.spearmanr(kappa, score).statistic, abs=1e-12)
        low, high, kept = bootstrap_interval(kappa, score)
        assert (have["rho_lo"], have["rho_hi"], have["resamples"]) == (
            pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9), kept)  # fmt: skip
        assert have["rho_lo"] <= have["spearman_rho"] <= have["rho_hi"]
    assert got[("fixed_width", 64)]["embed_dim"] == 64 and got[("fixed_width", 64)]["mlp_dim"] == 128
    again = {(r["scope"], r["attn_dim"]): (r["rho_lo"], r["rho_hi"]) for r in query(results, "FROM kappa_accuracy")}
    assert again == {key: (r["rho_lo"], r["rho_hi"]) for key, r in got.items()}  # deterministic


def test_kappa_accuracy_interval_narrows_with_more_configs(tmp_path):
    rng = np.random.default_rng(11)
    results = tmp_path / "results"
    rows = []
    for space, count in (("few", 6), ("many", 60)):
        for k in range(count):
            kappa = 10.0 ** rng.uniform(1, 4)
            score = 80 - 3 * np.log10(kappa) + rng.standard_normal()
            rows.append(row(space, f"c{k:02d}", 0, score, baseline=k == 0, kappa_mean=kappa))
    write_rows(results, "narrow", rows)
    got = {r["space"]: r for r in query(results, "FROM kappa_accuracy WHERE scope = 'across_widths'")}
    widths = {space: r["rho_hi"] - r["rho_lo"] for space, r in got.items()}
    assert widths["many"] < widths["few"] / 2 and got["many"]["rho_hi"] < 0


# --- the plain duckdb shell ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not DUCKDB_SHELL.exists(), reason="the duckdb shell (dev dependency duckdb-cli) is not installed")
def test_plain_duckdb_shell_agrees_on_the_new_views(matched, kappa_rows):
    kappa_results, _ = kappa_rows
    for results, sql, keys in (
        (matched, "SELECT config_id, cost_kind, matched_config_id, verdict, delta_lo FROM matched_budget", 2),
        (kappa_results, "SELECT scope, attn_dim, spearman_rho, rho_lo, rho_hi FROM kappa_accuracy", 2),
        (matched, "SELECT family, space, bartlett_p, equal_variance FROM variance_check", 2),
        (matched, "SELECT config_id, method, evidence, delta_lo, pooled_hi FROM vs_baseline", 1),
    ):
        shell = subprocess.run([str(DUCKDB_SHELL), "-init", str(VIEWS), "-json", "-c", sql], cwd=results.parent,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert shell.returncode == 0, shell.stderr
        from_shell, from_tool = json.loads(shell.stdout), query(results, sql)
        assert len(from_shell) == len(from_tool) > 0

        def key(r, keys=keys):
            return tuple(str(v) for v in list(r.values())[:keys])

        for a, b in zip(sorted(from_shell, key=key), sorted(from_tool, key=key), strict=True):
            assert a.keys() == b.keys()
            for name in a:
                assert a[name] == (pytest.approx(b[name]) if isinstance(b[name], float) else b[name]), (sql, name)
