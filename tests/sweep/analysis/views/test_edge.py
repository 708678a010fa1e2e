"""The edge search's views (sweep/analysis/views/edge.sql) against an independent float64 computation with scipy on
rows written here: the pooled Bonferroni interval, the measured verdicts (a failed seed, a config whose every
trial failed, one inconclusive at the cap, one stopped for futility with the seeds it would need), implied
verdicts and the config each comes from, a column whose measurements contradict the monotone assumption, each
column's edge; the t quantile at any level against scipy.stats.t.ppf; files without the search column (or without
the futility setting); and the views that show nothing for a config never trained."""

import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from sweep.results.schema import SCHEMAS, table_from_rows
from sweep.results.sink import record_space
from sweep.results.storage import write_atomic
from tests.helpers import query

SPACE = "edgy"
WIDTH = 64
DEPTHS = (1, 2, 3, 4, 5)
HEADS = (2, 4, 8, 16)
BASELINE = (5, 4)  # (depth, heads)
TOLERANCE = 0.5
SETTINGS = {"kind": "edge", "min_seeds": 2, "max_seeds": 4, "baseline_seeds": 4, "alpha": 0.05, "max_trials": None,
            "futility": True}  # fmt: skip

# Planted (mean score, [status of each seed: 'ok' or a failure]) per (depth, heads); absent: never trained.
PLANTED = {
    (5, 4): (90.0, ["ok"] * 4),  # the baseline
    (3, 4): (90.5, ["ok"] * 3 + ["error"]),  # holds: implies depth 4 (untried) holds; an errored seed counts nowhere
    (2, 4): (88.0, ["ok", "diverged"]),  # one seed failed: n = 1 < min_seeds, open
    (1, 4): (80.0, ["ok"] * 2),  # breaks
    (3, 8): (90.5, ["ok"] * 3),  # holds: implies 4 and 5 hold
    (2, 8): (82.0, ["ok"] * 2),  # breaks: implies depth 1 breaks (its every trial failed)
    (1, 8): (0.0, ["diverged", "oom"]),  # failed
    (2, 16): (90.5, ["ok"] * 3),  # holds ...
    (4, 16): (84.0, ["ok"] * 3),  # ... but the deeper depth 4 breaks: a contradiction, nothing implied
    (5, 2): (89.5, ["ok"] * 4),  # on the tolerance bound at the cap: inconclusive
    (3, 2): (90.0, ["ok"] * 2),  # 0.5 above the bound, within the cap's half-width (0.62): futile, inconclusive
    (4, 2): (0.0, ["oom"]),  # one trial, failed: fewer than min_seeds trials, so open (not failed)
}
NOISE = 0.3


def config_id(depth: int, heads: int) -> str:
    return f"d{depth}h{heads}"


def lattice() -> list[dict]:
    """The search record's lattice, as sweep/results/sink.py search_json writes it."""
    cells = []
    for heads in HEADS:
        column = {"family": "vit", "num_heads": heads, "head_dim": WIDTH // heads, "embed_dim": WIDTH, "mlp_dim": 128,
                  "num_kv_heads": heads, "conditioning": "none"}  # fmt: skip
        for depth in DEPTHS:
            cells.append({"config_id": config_id(depth, heads), "is_baseline": (depth, heads) == BASELINE,
                          "depth": depth, "column": column})  # fmt: skip
    return cells


def trial_rows(mode: str, rng) -> list[dict]:
    """One row per planted (config, seed); a min metric's scores are the max ones negated (lower is better)."""
    rows = []
    for (depth, heads), (mean, statuses) in PLANTED.items():
        for seed, status in enumerate(statuses):
            score = mean + NOISE * rng.standard_normal() if status == "ok" else None
            rows.append({
                "schema_version": 2, "space": SPACE, "sweep_id": "s1", "trial_id": f"t-{depth}-{heads}-{seed}",
                "config_id": config_id(depth, heads), "seed": seed, "is_baseline": (depth, heads) == BASELINE,
                "family": "vit", "depth": depth, "num_heads": heads, "head_dim": WIDTH // heads, "embed_dim": WIDTH,
                "mlp_dim": 128, "attn_dim": WIDTH, "status": status, "metric": "top1" if mode == "max" else "val_loss",
                "metric_mode": mode, "score": None if score is None else (score if mode == "max" else -score),
                "params": 1000 * depth + heads, "train_samples_per_s": 100.0 / depth,
                "infer_samples_per_s": 300.0 / depth, "kappa_mean": 10.0 * heads,
            })  # fmt: skip
    return rows


def write_edge_space(results: Path, mode: str = "max", seed: int = 0) -> list[dict]:
    rows = trial_rows(mode, np.random.default_rng(seed))
    write_atomic(table_from_rows("trials", rows), results / "trials" / SPACE / "s1" / "rows.parquet")
    search = json.dumps({**SETTINGS, "lattice": lattice()}, sort_keys=True)
    metric = "top1" if mode == "max" else "val_loss"
    record_space(results, SPACE, "s1", None, "where does it break?", metric, mode, TOLERANCE, "{}", search)
    return rows


# --- the independent computation ----------------------------------------------------------------------------


def expected_cells(rows: list[dict], mode: str) -> dict[str, dict]:
    """Every lattice config's verdict, as the design states it (float64, scipy's t quantile)."""
    better = 1 if mode == "max" else -1
    scores: dict[str, list[float]] = {}
    trials: dict[str, int] = {}
    for row in rows:
        if row["status"] == "error":  # run again by the search (as by every resume): not a trial of the record
            continue
        trials[row["config_id"]] = trials.get(row["config_id"], 0) + 1
        if row["status"] == "ok":
            scores.setdefault(row["config_id"], []).append(row["score"])
    pooled = [np.asarray(s) for s in scores.values() if len(s) >= 2]
    df = sum(len(s) - 1 for s in pooled)
    sp = math.sqrt(sum(((s - s.mean()) ** 2).sum() for s in pooled) / df)
    looks = SETTINGS["max_seeds"] - SETTINGS["min_seeds"] + 1
    t = stats.t.ppf(1 - SETTINGS["alpha"] / (2 * looks), df)
    base = np.asarray(scores[config_id(*BASELINE)])
    base_trials = trials[config_id(*BASELINE)]
    cells = {}
    for cell in lattice():
        cid, x = cell["config_id"], np.asarray(scores.get(cell["config_id"], []))
        n_trials = trials.get(cid, 0)
        state = {"depth": cell["depth"], "heads": cell["column"]["num_heads"], "n_seeds": len(x),
                 "n_trials": n_trials, "gain": None, "gain_lo": None, "gain_hi": None}  # fmt: skip
        if len(x):
            state["gain"] = better * (x.mean() - base.mean())
        if len(x) >= SETTINGS["min_seeds"] and not cell["is_baseline"]:
            half = t * sp * math.sqrt(1 / len(x) + 1 / len(base))
            state.update(gain_lo=state["gain"] - half, gain_hi=state["gain"] + half)
        if cell["is_baseline"]:
            verdict = "baseline"
        elif n_trials == 0:
            verdict = "untried"
        elif len(x) == 0 and n_trials >= SETTINGS["min_seeds"]:
            verdict = "failed"
        elif state["gain_lo"] is not None and state["gain_lo"] >= -TOLERANCE:
            verdict = "holds"
        elif state["gain_lo"] is not None and state["gain_hi"] < -TOLERANCE:
            verdict = "breaks"
        elif n_trials >= SETTINGS["max_seeds"]:
            verdict = "inconclusive"
        elif state["gain_lo"] is not None and abs(state["gain"] + TOLERANCE) < half_at_cap(
            len(x), n_trials, len(base), base_trials, df, sp
        ):
            verdict, state["futile"] = "inconclusive", True
        else:
            verdict = "open"
        if verdict == "inconclusive" and state["gain_lo"] is not None:
            state["needs_seeds"] = math.ceil(2 * (t * sp / abs(state["gain"] + TOLERANCE)) ** 2)
        cells[cid] = {"futile": False, "needs_seeds": None, **state, "verdict": verdict}
    imply(cells)
    return cells


def half_at_cap(n_c: int, trials_c: int, n_b: int, trials_b: int, df: int, sp: float) -> float:
    """The interval's half-width were every trial left to the config (max_seeds in all, its failed ones lost) and
    to the baseline (baseline_seeds) to finish, at the same level, with their seeds added to the pooled df."""
    n_c_cap = SETTINGS["max_seeds"] - (trials_c - n_c)
    n_b_cap = n_b + max(0, SETTINGS["baseline_seeds"] - trials_b)
    looks = SETTINGS["max_seeds"] - SETTINGS["min_seeds"] + 1
    t = stats.t.ppf(1 - SETTINGS["alpha"] / (2 * looks), df + n_c_cap - n_c + n_b_cap - n_b)
    return t * sp * math.sqrt(1 / n_c_cap + 1 / n_b_cap)


def imply(cells: dict[str, dict]) -> None:
    """Implied verdicts and contradictions, column by column (here a column is a head count)."""
    for heads in HEADS:
        column = sorted((c for c in cells.values() if c["heads"] == heads), key=lambda c: c["depth"])
        holds = [c["depth"] for c in column if c["verdict"] in ("holds", "baseline")]
        breaks = [c["depth"] for c in column if c["verdict"] == "breaks"]
        contradiction = any(b > h for b in breaks for h in holds)
        for c in column:
            c["contradiction"], c["implied"], c["implied_from"] = contradiction, None, None
            if contradiction or c["verdict"] in ("holds", "breaks", "baseline"):
                continue
            below = [h for h in holds if h < c["depth"]]
            above = [b for b in breaks if b > c["depth"]]
            gain = c["gain"]  # a trained config's own gain on the other side of the tolerance: nothing implied
            if below:
                if gain is None or gain >= -TOLERANCE:
                    c["implied"], c["implied_from"] = "holds", config_id(max(below), heads)
            elif above and (gain is None or gain < -TOLERANCE):
                c["implied"], c["implied_from"] = "breaks", config_id(min(above), heads)


def expected_edge(cells: dict[str, dict], heads: int) -> tuple:
    """(breaks_at_depth, holds_from_depth, found, contradiction) of a column."""
    column = sorted((c for c in cells.values() if c["heads"] == heads), key=lambda c: c["depth"])
    holds = [c["depth"] for c in column if c["verdict"] in ("holds", "baseline")]
    breaks = [c["depth"] for c in column if c["verdict"] == "breaks"]
    hold, brk = min(holds, default=None), max(breaks, default=None)
    contradiction = column[0]["contradiction"]
    depths = [c["depth"] for c in column]
    if contradiction:
        return None, None, False, True
    if brk is None:
        found = hold == depths[0]
    elif hold is None:
        found = brk == depths[-1]
    else:
        found = depths.index(hold) == depths.index(brk) + 1
    return brk, hold, found, contradiction


# --- the tests ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["max", "min"])
def test_edge_verdicts_match_an_independent_computation(tmp_path, mode):
    results = tmp_path / "results"
    rows = write_edge_space(results, mode)
    expected = expected_cells(rows, mode)
    got = {r["config_id"]: r for r in query(results, "FROM edge_verdicts")}
    assert set(got) == set(expected)
    for cid, want in expected.items():
        row = got[cid]
        assert (row["verdict"], row["implied"], row["implied_from"]) == (
            want["verdict"], want["implied"], want["implied_from"]), cid  # fmt: skip
        assert (row["n_seeds"], row["n_trials"], row["contradiction"]) == (
            want["n_seeds"], want["n_trials"], want["contradiction"]), cid  # fmt: skip
        assert (row["futile"], row["needs_seeds"]) == (want["futile"], want["needs_seeds"]), cid
        for key in ("gain", "gain_lo", "gain_hi"):
            if want[key] is None:
                assert row[key] is None, (cid, key)
            else:
                assert row[key] == pytest.approx(want[key], rel=1e-6, abs=1e-6), (cid, key)
    # the planted cases this file is about did occur (so the comparison above covered each of them)
    states = {cid: (c["verdict"], c["implied"]) for cid, c in expected.items()}
    assert states["d4h4"] == ("untried", "holds") and got["d4h4"]["implied_from"] == "d3h4"
    assert states["d2h4"] == ("open", None)  # one failed seed of two: n = 1, no interval; nothing implies it
    assert states["d1h8"] == ("failed", "breaks") and got["d1h8"]["implied_from"] == "d2h8"
    assert states["d5h8"] == ("untried", "holds") and got["d5h8"]["implied_from"] == "d3h8"
    assert states["d5h2"][0] == "inconclusive" and states["d4h2"] == ("open", None)
    assert states["d3h2"] == ("inconclusive", None) and expected["d3h2"]["futile"]  # stopped at 2 of 4 trials
    needs = expected["d3h2"]["needs_seeds"]
    assert needs > SETTINGS["max_seeds"] and got["d3h2"]["verdict_words"] == (
        f"inconclusive (noise: needs ~{needs} seeds a side; stopped at 2 of 2 trials finished: the cap could not "
        "settle it)")  # fmt: skip
    assert got["d5h2"]["verdict_words"].startswith("inconclusive at the cap (4 of 4 trials finished; noise: needs ~")
    assert all(c["contradiction"] and c["implied"] is None for c in expected.values() if c["heads"] == 16)
    assert got["d4h4"]["verdict_words"] == "holds (implied by depth 3, measured)"
    assert got["d1h8"]["verdict_words"] == "failed (all 2 trials); breaks (implied by depth 2, measured)"


def test_edge_columns_bracket_each_edge_by_measurements(tmp_path):
    results = tmp_path / "results"
    rows = write_edge_space(results)
    cells = expected_cells(rows, "max")
    got = {r["num_heads"]: r for r in query(results, "FROM edge_columns")}
    assert sorted(got) == sorted(HEADS)
    for heads in HEADS:
        row = got[heads]
        assert (row["breaks_at_depth"], row["holds_from_depth"], row["found"], row["contradiction"]) == (
            expected_edge(cells, heads)), heads  # fmt: skip
        assert row["depths"] == list(DEPTHS)
    assert got[8]["description"] == "breaks at depth 2, holds from depth 3"
    assert got[4]["description"] == "not found: still measuring"  # depth 2 is open between a break and a hold
    assert got[2]["description"] == "not found: depth 3 inconclusive; depth 5 inconclusive"
    assert got[16]["description"] == "not found: depth is not monotone in this column"

    def interval(cid):
        c = cells[cid]
        return f"gain {c['gain']:+.3g} ± {(c['gain_hi'] - c['gain_lo']) / 2:.3g}, {c['n_seeds']} seeds"

    assert got[16]["contradiction_words"] == (
        f"edge search: column num_heads=16, head_dim=4: depth 4 breaks ({interval('d4h16')}) but depth 2 holds "
        f"({interval('d2h16')}): depth is not monotone here; measuring the whole column"
    )
    assert got[4]["contradiction_words"] is None and got[4]["column_words"] == "num_heads=4, head_dim=16"


def test_a_tolerance_given_judges_the_edge_views_too(tmp_path):
    results = tmp_path / "results"
    write_edge_space(results)
    wide = {r["config_id"]: r["verdict"] for r in query(results, "FROM edge_verdicts", tolerance=50.0)}
    assert wide["d1h4"] == "holds"  # 10 points worse holds at a tolerance of 50


def test_t_quantile_matches_scipy_across_dof_and_levels():
    """Levels 1 − α/(2L) for α from 0.2 to 0.001 and L from 1 to 20 looks, dof 1 … 40 and beyond."""
    dofs = [*range(1, 41), 50, 60, 80, 100, 150, 200, 333, 999, 1000, 1001, 5000, 100000]
    levels = [1 - alpha / (2 * looks) for alpha in (0.2, 0.1, 0.05, 0.01, 0.001) for looks in (1, 2, 3, 4, 5, 10, 20)]
    con = duckdb.connect(":memory:")
    con.execute((Path(__file__).parents[4] / "sweep/analysis/views/edge.sql").read_text().split("-- edge_settings:")[0])
    got = con.execute(
        "SELECT p, dof, t_quantile(p, dof) FROM unnest(?::DOUBLE[]) a(p), unnest(?::BIGINT[]) b(dof)", [levels, dofs]
    ).fetchall()
    worst = max(abs(t - stats.t.ppf(p, dof)) for p, dof, t in got)
    assert worst < 1e-4
    assert con.execute("SELECT t_quantile(0.975, 0), t_quantile(0.4, 5), t_quantile(NULL, 5)").fetchone() == (
        None, None, None)  # fmt: skip


def test_spaces_files_without_the_search_column_read_as_no_edge_search(tmp_path):
    results = tmp_path / "results"
    write_edge_space(results)
    old = SCHEMAS["spaces"].remove(SCHEMAS["spaces"].get_field_index("search"))
    for path in (results / "spaces").rglob("*.parquet"):  # the same row, written before the column existed
        pq.write_table(pq.read_table(path).select(old.names), path)
    assert query(results, "SELECT search FROM space_settings") == [{"search": None}]
    assert query(results, "FROM edge_verdicts") == [] and query(results, "FROM edge_columns") == []
    assert len(query(results, "FROM vs_baseline")) == len(PLANTED)


def test_configs_never_trained_get_no_row_in_the_pareto_throughput_or_kappa_views(tmp_path):
    results = tmp_path / "results"
    rows = write_edge_space(results)
    untried = {r["config_id"] for r in query(results, "FROM edge_verdicts WHERE verdict = 'untried'")}
    trained = {row["config_id"] for row in rows}  # an errored trial's config included
    finished = {row["config_id"] for row in rows if row["status"] == "ok"}
    assert len(untried) == 8 and not untried & trained
    for view in ("configs", "vs_baseline", "pareto", "matched_budget"):
        shown = [r for r in query(results, f"FROM {view}")]
        ids = {r["config_id"] for r in shown} | {r.get("matched_config_id") for r in shown} - {None}
        assert shown and ids <= trained, view
    # κ against the score: one point per config with a finished seed and κ, never one for an untried config
    counted = query(results, "SELECT max(n_configs) AS n FROM kappa_accuracy")[0]["n"]
    assert counted == len(finished)


@pytest.mark.parametrize("mode", ["max", "min"])
def test_the_views_judge_as_the_searchs_own_core_does(tmp_path, mode):
    """The SQL and the search's Python core (sweep/analysis/edge.py, the lead's) on the same rows: every config's
    verdicts and interval, every column's edge and its words, the contradiction line."""
    edge = pytest.importorskip("sweep.analysis.edge")
    results = tmp_path / "results"
    rows = write_edge_space(results, mode)
    settings = edge.EdgeSettings(tolerance=TOLERANCE, mode=mode, min_seeds=SETTINGS["min_seeds"],
                                 max_seeds=SETTINGS["max_seeds"], baseline_seeds=SETTINGS["baseline_seeds"],
                                 alpha=SETTINGS["alpha"])  # fmt: skip
    cells = [
        edge.Cell(c["config_id"], (("num_heads", c["column"]["num_heads"]), ("head_dim", c["column"]["head_dim"])),
                  c["depth"])
        for c in lattice()
    ]  # fmt: skip
    observations = [edge.Observation(r["config_id"], r["seed"], r["score"]) for r in rows if r["status"] != "error"]
    state = edge.assess(cells, config_id(*BASELINE), settings, observations)
    got = {r["config_id"]: r for r in query(results, "FROM edge_verdicts")}
    for cid, want in state.cells.items():
        row = got[cid]
        assert (row["verdict"], row["implied"], row["implied_from"], row["n_seeds"], row["n_trials"]) == (
            want.verdict, want.implied, want.implied_from, want.n_seeds, want.n_trials), cid  # fmt: skip
        assert (row["futile"], row["needs_seeds"]) == (want.futile, want.needs_seeds), cid
        if want.verdict not in ("holds", "breaks", "baseline") and want.implied is None:
            assert row["verdict_words"] == edge.state_words(want), cid
        for key in ("gain", "gain_lo", "gain_hi"):
            value = getattr(want, key)
            assert row[key] == (value if value is None else pytest.approx(value, rel=1e-6, abs=1e-6)), (cid, key)
    columns = {r["column_words"]: r for r in query(results, "FROM edge_columns")}
    for want in state.edges:
        row = columns[edge.column_words(want.column)]
        assert (row["breaks_at_depth"], row["holds_from_depth"], row["found"], row["description"]) == (
            want.breaks_at_depth, want.holds_from_depth, want.found, want.description)  # fmt: skip
    said = sorted(r["contradiction_words"] for r in columns.values() if r["contradiction"])
    assert sorted(state.contradictions) == said and len(said) == 1


def test_a_record_without_the_futility_setting_was_judged_without_it(tmp_path):
    """A search recorded before ``futility`` existed stopped configs only at the cap: the views judge it so."""
    results = tmp_path / "results"
    rows = trial_rows("max", np.random.default_rng(0))
    write_atomic(table_from_rows("trials", rows), results / "trials" / SPACE / "s1" / "rows.parquet")
    old = {k: v for k, v in SETTINGS.items() if k != "futility"}
    search = json.dumps({**old, "lattice": lattice()}, sort_keys=True)
    record_space(results, SPACE, "s1", None, "where does it break?", "top1", "max", TOLERANCE, "{}", search)
    got = {r["config_id"]: r for r in query(results, "FROM edge_verdicts")}
    assert query(results, "SELECT futility FROM edge_settings")[0]["futility"] is False
    assert (got["d3h2"]["verdict"], got["d3h2"]["futile"], got["d3h2"]["needs_seeds"]) == ("open", False, None)


def test_a_config_whose_own_gain_leans_against_the_implied_hold_gets_none(tmp_path, monkeypatch):
    """Depth 4 at 8 heads trained below the bound without a verdict: depth 3's hold does not imply it (the
    independent computation says the same), while untried depth 5 is still implied."""
    monkeypatch.setitem(PLANTED, (4, 8), (89.3, ["ok"] * 2))
    results = tmp_path / "results"
    rows = write_edge_space(results)
    expected = expected_cells(rows, "max")
    got = {r["config_id"]: r for r in query(results, "FROM edge_verdicts")}
    assert expected["d4h8"]["gain"] < -TOLERANCE < expected["d4h8"]["gain_hi"]
    assert (got["d4h8"]["verdict"], got["d4h8"]["implied"]) == (expected["d4h8"]["verdict"], None)
    assert (got["d5h8"]["implied"], got["d5h8"]["implied_from"]) == ("holds", "d3h8")
