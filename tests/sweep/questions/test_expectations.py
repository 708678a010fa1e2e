"""Known answers (``expect:``, sweep/questions/expectations.py and expectations.sql): the ``expectations`` view
judges planted results as numpy/scipy's Welch computation does; each sign and verdict, one seed and a config
not run; the claims come from the space's latest sweep's ``spaces`` row (an import leaves them in place); the
``Expect`` model rejects unknown keys; validation names a side that picks out no planned config, or several;
``sweep plan`` prints one line per expectation and the report a Known answers section."""

import json
import textwrap

import numpy as np
import pytest
from scipy import stats

from sweep.analysis.sql import connect
from sweep.cli import main
from sweep.errors import SpaceError
from sweep.plan.plan import make_plan
from sweep.questions.expectations import DIRECTIONS, QUESTION, Expect, side_words
from sweep.results.importer import import_file
from sweep.results.sink import record_space
from sweep.space.loader import load_space
from tests.helpers import TINY_SPACE_BODY, query, trial_row, write_csv

# (depth, heads): top-1 of each seed. Baseline 4 × 4.
PLANTED = {
    (4, 4): [90.0, 90.4, 89.6],
    (1, 1): [80.0, 81.0, 79.5],  # well below 4 × 4
    (2, 4): [90.1, 89.9, 90.2],  # within 0.5 of 4 × 4
    (2, 16): [85.0, 92.0, 88.0],  # noisy: the interval straddles
    (1, 16): [70.0],  # one seed
}
# name, claim, a, b, direction, tolerance: a and b are (depth, heads)
CLAIMS = [
    ("deep_beats_shallow", "four blocks beat one", (4, 4), (1, 1), "a_beats_b", 2.0),
    ("wrong_way", "one block beats four", (4, 4), (1, 1), "b_beats_a", 2.0),
    ("two_blocks_hold", "two blocks are as good", (2, 4), (4, 4), "no_difference", 1.0),
    ("two_blocks_beat", "two blocks are better", (2, 4), (4, 4), "a_beats_b", 1.0),
    ("noisy", "sixteen heads do not matter", (2, 16), (4, 4), "no_difference", 1.0),
    ("one_seed", "one seed", (4, 4), (1, 16), "a_beats_b", 1.0),
    ("missing", "not run", (4, 4), (8, 4), "a_beats_b", 1.0),
]
EXPECTED = {  # name: (found, verdict)
    "deep_beats_shallow": ("a beats b", "agrees"),
    "wrong_way": ("a beats b", "disagrees"),
    "two_blocks_hold": ("no difference", "agrees"),
    "two_blocks_beat": ("no difference", "disagrees"),
    "noisy": ("unclear", "inconclusive"),
    "one_seed": ("no interval", "inconclusive"),
    "missing": ("not run", "inconclusive"),
}


def claim(space: str, name: str, text: str, a: tuple, b: tuple, direction: str, tolerance: float) -> dict:
    """A claim as a sweep records it (``ExpectationsQuestion.record``), its configs as ``trial_row`` names them."""
    shape = lambda side: side_words({"depth": side[0], "num_heads": side[1]})  # noqa: E731
    return {"name": name, "claim": text, "source": "planted", "expected": DIRECTIONS[direction],
            "tolerance": tolerance, "a_shape": shape(a), "b_shape": shape(b),
            "a_config": f"{space}-d{a[0]}-h{a[1]}", "b_config": f"{space}-d{b[0]}-h{b[1]}"}  # fmt: skip


def plant(tmp_path, space: str, rows: list[dict], claims: list[dict], metric="top1", mode="max"):
    """The rows imported, then a sweep's ``spaces`` row recording ``claims`` (as ``sweep run`` writes it)."""
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / f"{space}.csv", rows), results)
    record_space(results, space, "sweep", None, "q", metric, mode, None, json.dumps({"expectations": claims}))
    return results


@pytest.fixture
def planted(tmp_path):
    rows = [trial_row("kx", depth, heads, seed, score) for (depth, heads), scores in PLANTED.items()
            for seed, score in enumerate(scores)]  # fmt: skip
    return plant(tmp_path, "kx", rows, [claim("kx", *c) for c in CLAIMS])


def welch(a, b):
    """numpy/scipy: a's mean minus b's and the exact 95% Welch interval (scipy's t quantile)."""
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    delta, half = a.mean() - b.mean(), stats.t.ppf(0.975, dof) * np.sqrt(va + vb)
    return delta, delta - half, delta + half


def test_expectations_judge_planted_results_as_scipy_does(planted):
    rows = {r["name"]: r for r in query(planted, "FROM expectations")}
    assert {name: (r["found"], r["verdict"]) for name, r in rows.items()} == EXPECTED
    for name, _, a_shape, b_shape, _, _ in CLAIMS:
        r = rows[name]
        a, b = PLANTED.get(a_shape), PLANTED.get(b_shape)
        if a is None or b is None:
            assert r["delta"] is None and r["delta_lo"] is None and 0 in (r["n_a"], r["n_b"])
            continue
        assert (r["n_a"], r["n_b"]) == (len(a), len(b))
        assert r["delta"] == pytest.approx(np.mean(a) - np.mean(b))
        if len(a) < 2 or len(b) < 2:
            assert r["delta_lo"] is None and r["delta_hi"] is None
            continue
        delta, low, high = welch(a, b)
        # macros.sql's t95 interpolates fractional dof: never narrower than scipy's, at most 2.9% wider
        assert r["delta"] - r["delta_lo"] == pytest.approx(delta - low, rel=0.03)
        assert r["delta"] - r["delta_lo"] >= (delta - low) * (1 - 1e-9)
        assert r["delta_hi"] - r["delta"] == pytest.approx(high - delta, rel=0.03)
    assert rows["deep_beats_shallow"]["expected"] == "a beats b" and rows["wrong_way"]["expected"] == "b beats a"
    assert rows["deep_beats_shallow"]["a_shape"] == "depth=4 num_heads=4" and rows["missing"]["b_config"] == "kx-d8-h4"


def test_lower_is_better_flips_the_sign(tmp_path):
    """With a `min` metric (val_loss) a's lower loss is a's win: delta is mean(b) − mean(a)."""
    rows = []
    for (depth, heads), losses in {(4, 4): [1.0, 1.1, 0.9], (1, 1): [2.0, 2.2, 2.1]}.items():
        for seed, loss in enumerate(losses):
            row = trial_row("kl", depth, heads, seed, None)
            row.update(metric="val_loss", metric_mode="min", val_loss=loss, score=loss, family="gpt2")
            rows.append(row)
    results = plant(tmp_path, "kl", rows, [claim("kl", "deep", "c", (4, 4), (1, 1), "a_beats_b", 0.5)],
                    "val_loss", "min")  # fmt: skip
    [row] = query(results, "FROM expectations")
    assert row["metric"] == "val_loss" and row["delta"] == pytest.approx(2.1 - 1.0)
    assert (row["found"], row["verdict"]) == ("a beats b", "agrees")


def test_the_latest_sweep_states_the_claims_and_an_import_leaves_them(tmp_path, planted):
    record_space(planted, "kx", "later", None, "q", "top1", "max", None, json.dumps({"expectations": []}))
    assert query(planted, "FROM expectations") == []  # the latest sweep expects nothing
    record_space(planted, "kx", "latest", None, "q", "top1", "max", None, json.dumps({"expectations": [
        claim("kx", *CLAIMS[0])]}))  # fmt: skip
    record_space(planted, "kx", "import", None, "q", "top1", "max")  # an import records no questions
    assert [r["name"] for r in query(planted, "FROM expectations")] == ["deep_beats_shallow"]
    bare = tmp_path / "bare"
    import_file(write_csv(tmp_path / "b.csv", [trial_row("kb", 1, 1, 0, 50.0)]), bare)
    assert query(bare, "FROM expectations") == []  # imports only: no claims, and the view still binds


def test_report_section_states_claim_sign_interval_and_verdict(planted):
    section = QUESTION.report_section(connect(planted), "kx", None, None)
    assert section.startswith("\n## Known answers")
    assert "**wrong_way: disagrees.** one block beats four (planted)" in section
    row = next(r for r in query(planted, "FROM expectations") if r["name"] == "deep_beats_shallow")
    assert f"Δ {row['delta']:+.2f} (95% CI {row['delta_lo']:+.2f} … {row['delta_hi']:+.2f})" in section
    assert "found no interval" in section and "found not run" in section
    assert QUESTION.report_section(connect(planted), "other", None, None) == ""


def test_expect_rejects_unknown_keys_and_shape_keys():
    good = {"name": "x", "claim": "c", "source": "s", "a": {"depth": 1}, "b": {"depth": 2},
            "direction": "a_beats_b", "tolerance": 1.0}  # fmt: skip
    assert Expect(**good).expected == "a beats b"
    with pytest.raises(ValueError, match="extra"):
        Expect(**good, sign="+")
    with pytest.raises(ValueError, match=r"shape keys must be among depth, .*but got \['heads'\]"):
        Expect(**{**good, "b": {"heads": 2}})
    with pytest.raises(ValueError, match="direction"):
        Expect(**{**good, "direction": "up"})


def write_space(tmp_path, expect: str):
    path = tmp_path / "tiny.yaml"
    path.write_text("question: tiny\n" + TINY_SPACE_BODY + textwrap.dedent(expect))
    return path


def test_validation_names_a_side_that_picks_no_or_several_configs(tmp_path):
    path = write_space(
        tmp_path,
        """\
        expect:
          - {name: ok, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: a_beats_b, tolerance: 1}
          - {name: none, claim: c, source: s, a: {num_heads: 8}, b: {num_heads: 4}, direction: a_beats_b, tolerance: 1}
          - {name: many, claim: c, source: s, a: {depth: 1}, b: {num_heads: 4}, direction: a_beats_b, tolerance: 1}
          - {name: ok, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 4}, direction: a_beats_b, tolerance: 1}
        """,
    )
    with pytest.raises(SpaceError) as caught:
        load_space(str(path))
    text = str(caught.value)
    assert "must be unique" in text and "['ok']" in text
    path = write_space(tmp_path, "\n".join(textwrap.dedent(path.read_text()).splitlines()[:-1]) + "\n")
    with pytest.raises(SpaceError) as caught:
        load_space(str(path))
    text = str(caught.value)
    assert "expect[1].a" in text and "picks out none" in text
    assert "expect[2].a" in text and "picks out 2" in text and "add the key that tells them apart" in text
    assert "expect[0]" not in text
    same = "expect:\n  - {name: same, claim: c, source: s, a: {num_heads: 2}, b: {num_heads: 2}, direction: a_beats_b, "
    same += "tolerance: 1}\n"
    with pytest.raises(SpaceError, match=r"expect\[0\].*a and b must differ"):
        load_space(str(write_space(tmp_path, same)))


def test_plan_prints_one_line_per_expectation_and_a_sweep_records_it(tmp_path, capsys):
    path = write_space(
        tmp_path,
        """\
        expect:
          - {name: fewer_heads, claim: c, source: Paper 2020 Table 1, a: {num_heads: 2}, b: {num_heads: 4},
             direction: no_difference, tolerance: 1.5}
        """,
    )
    name, space, profile = load_space(str(path))
    plan = make_plan(name, space, profile)
    [row] = QUESTION.record(plan)
    by_heads = {c.shape.num_heads: c.config_id for c in plan.configs}
    assert (row["a_config"], row["b_config"]) == (by_heads[2], by_heads[4])
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    line = (f"expect fewer_heads: num_heads=2 ({by_heads[2]}) vs num_heads=4 ({by_heads[4]}): no difference "
            "(tolerance 1.5 top1); Paper 2020 Table 1")  # fmt: skip
    assert line in out
    assert main(["plan", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["expectations"] == [row]
