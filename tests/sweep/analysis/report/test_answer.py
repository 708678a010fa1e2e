"""The report's answer agrees with the views and with itself: every count, verdict and edge it prints is
read back and compared with vs_baseline and depth_edge on planted results; the baseline is never a
verdict, a single seed never a hold or a break; chance levels, baselines and seeds that did not learn are
flagged and named; the suggested rerun budget is what the adaptive rule needs."""

import math
import re

import pytest

from sweep.analysis.adaptive import MAX_EXPECTED_SEEDS, expected_trials
from sweep.analysis.report import write_report
from sweep.results.importer import import_file
from tests.helpers import query, trial_row, write_csv


def accuracy_rows(space, scores: dict[tuple[int, int], list[float]], baseline, chance=50.0) -> list[dict]:
    """Planted trials judged on accuracy with a chance level: ``scores`` per (depth, heads), one per seed."""
    rows = []
    for (depth, heads), values in scores.items():
        for seed, value in enumerate(values):
            row = trial_row(space, depth, heads, seed, value, baseline=baseline)
            row.pop("top1")
            rows.append({**row, "metric": "accuracy", "score": value, "chance_score": chance})
    return rows


# MQAR's cpu profile as it came out (2 pairs: chance 50%), baseline 2 × 1: one seed of 2 × 4 stuck at 55% while
# its siblings reached 100%, every 1-block model at chance, and 1 × 16 and 2 × 64 run on a single seed.
MQAR_LIKE = {(2, 1): [99.8, 99.9, 99.7], (2, 4): [100.0, 55.0, 99.9], (2, 16): [99.9, 100.0, 99.6],
             (1, 1): [55.2, 55.3, 55.4], (1, 4): [55.3, 55.2, 55.4], (1, 16): [55.4], (2, 64): [99.0]}  # fmt: skip


@pytest.fixture
def mqar_like(tmp_path):
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "mq.csv", accuracy_rows("mq", MQAR_LIKE, baseline=(2, 1))), results)
    return results


def answer_of(text: str) -> str:
    return text.split("## The answer\n", 1)[1].strip().split("\n")[0]


@pytest.mark.slow
def test_every_count_verdict_and_edge_of_the_report_agrees_with_the_views(mqar_like, tmp_path):
    text = write_report("mq", mqar_like, tmp_path / "report").read_text()
    rows = query(mqar_like, "FROM vs_baseline WHERE space = 'mq'")
    judged = [r for r in rows if not r["is_baseline"]]
    count = {v: sum(r["verdict"] == v for r in judged) for v in ("holds", "breaks", "inconclusive")}
    assert [r["verdict"] for r in rows if r["is_baseline"]] == ["baseline"]
    # holds and breaks are exactly the significant verdicts; no single seed among them
    assert {r["config_id"] for r in judged if r["verdict"] in ("holds", "breaks")} == {
        r["config_id"] for r in judged if r["significant"]
    }
    assert all(r["verdict"] == "inconclusive" for r in judged if r["evidence"] == "single seed")

    answer = answer_of(text)
    first = re.search(r"Of (\d+) configs .*?, (\d+) hold and (\d+) break with 95% confidence; (\d+) (?:is|are) open",
                      answer)  # fmt: skip
    assert first is not None, answer
    assert tuple(map(int, first.groups())) == (len(judged), count["holds"], count["breaks"], count["inconclusive"])
    assert (len(judged), count["holds"], count["breaks"], count["inconclusive"]) == (6, 1, 2, 3)
    tally = re.search(r"Verdicts of the (\d+) configs besides the baseline: (\d+) hold, (\d+) break, "
                      r"(\d+) inconclusive", text)  # fmt: skip
    assert tally is not None and tuple(map(int, tally.groups())) == tuple(map(int, first.groups()))

    # each point of each edge sentence is the config's vs_baseline verdict; "(the baseline)" only on the baseline
    by_depth_heads = {(r["depth"], r["num_heads"]): r for r in rows}
    edges = {e["num_heads"]: e for e in query(mqar_like, "FROM depth_edge WHERE space = 'mq'")}
    depth_part = text.split("## Along depth", 1)[1].split("## Along head_dim", 1)[0]
    sentences = re.findall(r"- \*\*(\d+) heads? of \d+\*\*: (.*?)\.  \n  (.*)", depth_part)
    assert len(sentences) == len(edges) == 4
    for heads, conclusion, points in sentences:
        edge = edges[int(heads)]
        held = re.search(r"holds down to depth (\d+)", conclusion)
        broke = re.search(r"breaks (?:already )?at depth (\d+)", conclusion)
        assert (int(held[1]) if held else None) == edge["holds_down_to_depth"], conclusion
        assert (int(broke[1]) if broke else None) == edge["breaks_at_depth"], conclusion
        for depth, words in re.findall(r"depth (\d+): ([^;]*)", points):
            row = by_depth_heads[(int(depth), int(heads))]
            if row["is_baseline"]:
                assert words.endswith("(the baseline)")
            else:
                assert words.startswith(row["verdict"] + " (") and "(the baseline)" not in words
    # the baseline's own row does not make an edge: 1 head holds "down to" nothing, and breaks at depth 1
    assert (edges[1]["holds_down_to_depth"], edges[1]["breaks_at_depth"]) == (None, 1)
    # 16 heads: 2 holds on 3 seeds; 1 × 16 is a single seed: no edge rests on it
    assert (edges[16]["holds_down_to_depth"], edges[16]["breaks_at_depth"]) == (2, None)
    assert "depth 1: inconclusive (single seed; Δ -44.4 leans breaks)" in text


@pytest.mark.slow
def test_configs_and_seeds_that_did_not_learn_are_flagged_and_named(mqar_like, tmp_path):
    rows = {(r["depth"], r["num_heads"]): r for r in query(mqar_like, "FROM vs_baseline")}
    assert {k for k, r in rows.items() if r["at_chance"]} == {(1, 1), (1, 4), (1, 16)}
    assert {k: r["n_unlearned"] for k, r in rows.items() if r["n_unlearned"]} == {(2, 4): 1}
    columns = "depth, num_heads, seed, score, siblings_learned, siblings_mean"
    stuck = query(mqar_like, f"SELECT {columns} FROM unlearned_seeds")
    assert stuck == [{"depth": 2, "num_heads": 4, "seed": 1, "score": 55.0, "siblings_learned": 2,
                      "siblings_mean": pytest.approx(99.95)}]  # fmt: skip
    answer = answer_of(write_report("mq", mqar_like, tmp_path / "report").read_text())
    assert "At chance (chance 50.0%: 3 configs learned nothing at this budget): 1 block × 1 head of 64 (55.3%)" in (
        answer
    )
    assert "A seed failed to learn while its siblings did: 2 blocks × 4 heads of 16, seed 1 at 55.0% while 2 " in answer


@pytest.mark.slow
def test_no_verdict_rests_on_a_baseline_at_chance(tmp_path):
    # a smoke profile: every config, baseline included, at 10% on 10 classes; 2 × 16 above it by luck
    scores = {(2, 4): [10.0, 10.1], (1, 4): [10.0, 10.0], (1, 16): [10.1, 9.9], (2, 16): [31.0, 33.0]}
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "s.csv", accuracy_rows("smoke", scores, baseline=(2, 4), chance=10.0)), results)
    columns = "depth, num_heads, verdict, evidence, significant, baseline_at_chance"
    rows = query(results, f"SELECT {columns} FROM vs_baseline")
    judged = [r for r in rows if (r["depth"], r["num_heads"]) != (2, 4)]
    assert {(r["verdict"], r["evidence"], r["significant"], r["baseline_at_chance"]) for r in judged} == {
        ("inconclusive", "baseline at chance", False, True)
    }
    assert query(results, "SELECT count(*) AS n FROM depth_edge WHERE holds_down_to_depth IS NOT NULL") == [{"n": 0}]
    text = write_report("smoke", results, tmp_path / "report").read_text()
    answer = answer_of(text)
    assert "0 hold and 0 break with 95% confidence; 3 are open" in answer
    assert "The baseline (2 blocks × 4 heads of 16) did not learn: 10.1% against a chance level of 10.0%" in answer
    assert "make rerun" not in answer  # more seeds cannot settle a verdict against a baseline that did not learn
    assert "holds down to" not in text


@pytest.mark.slow
def test_a_space_judged_on_single_seeds_reports_no_hold_and_no_break(tmp_path):
    # local_digits --profile quick: one seed each; the answer and the tally must both say nothing is settled
    scores = {(4, 4): [92.0], (4, 1): [90.0], (4, 16): [93.0], (1, 1): [60.0], (1, 4): [80.0], (1, 16): [95.0]}
    results = tmp_path / "results"
    rows = accuracy_rows("quick", scores, baseline=(4, 4), chance=10.0)
    import_file(write_csv(tmp_path / "q.csv", rows), results)
    text = write_report("quick", results, tmp_path / "report").read_text()
    assert "0 hold and 0 break with 95% confidence; 5 are open (5 of them on a single seed" in answer_of(text)
    assert "Verdicts of the 5 configs besides the baseline: 0 hold, 0 break, 5 inconclusive" in text
    assert "holds down to" not in text and "breaks at depth" not in text


def welch_settles(gain, sd_c, n_c, sd_b, n_b, tolerance):
    from scipy.stats import t

    va, vb = sd_c**2 / n_c, sd_b**2 / n_b
    dof = (va + vb) ** 2 / (va**2 / (n_c - 1) + vb**2 / (n_b - 1))
    half = t.ppf(0.975, dof) * math.sqrt(va + vb)
    return gain - half >= -tolerance or gain + half < -tolerance


def verdict_row(config_id, gain, sd, n, baseline=False, significant=False, evidence="welch t, 95%"):
    return {"config_id": config_id, "family": "vit", "is_baseline": baseline, "significant": significant,
            "evidence": evidence, "gain": gain, "score_sd": sd, "n_seeds": n, "tolerance": 0.5,
            "pooled_sd": None}  # fmt: skip


def test_the_suggested_budget_is_what_the_adaptive_rule_needs_to_settle():
    rows = [verdict_row("base", 0.0, 1.0, 2, baseline=True), verdict_row("far", -3.0, 1.0, 2),
            verdict_row("on_the_bound", -0.5, 1.0, 2), verdict_row("done", -9.0, 0.1, 3, significant=True)]  # fmt: skip
    expected = expected_trials(rows)
    assert (expected.open, expected.settles, expected.unsettled) == (2, 1, ("on_the_bound",))
    # by hand: each round gives both open configs a seed and the baseline one (before the first), "far" settles
    # once the Welch interval of (n, n) seeds clears -0.5; "on_the_bound" (Δ exactly -0.5) never does
    n = 2
    while not welch_settles(-3.0, 1.0, n, 1.0, n, 0.5):
        n += 1
    assert n == 3 and not welch_settles(-3.0, 1.0, n - 1, 1.0, n - 1, 0.5)
    assert expected.trials == (n - 2) * 3  # two open configs and the baseline, each round
    assert n <= MAX_EXPECTED_SEEDS


def test_each_data_set_states_its_chance_level():
    from workers.data.registry import data_spec

    assert data_spec(name="digits").chance_score("top1") == pytest.approx(10.0)
    assert data_spec(name="cifar100").chance_score("top1") == pytest.approx(1.0)
    assert data_spec(name="cifar100").chance_score("top5") == pytest.approx(5.0)
    assert data_spec(name="listops", seq_len=64).chance_score("accuracy") == pytest.approx(10.0)
    mqar = data_spec(name="mqar", seq_len=16, mqar={"vocab_size": 32, "num_kv_pairs": 2})
    assert mqar.chance_score("accuracy") == pytest.approx(50.0)  # the in-context guess: one of 2 values
    assert mqar.chance_score("val_loss") == pytest.approx(math.log(2))
    assert data_spec(name="mlm_corpus", seq_len=32).chance_score("glue_avg") is None


def test_every_trial_of_a_plan_carries_its_chance_level():
    from sweep.plan.plan import make_plan, trial_payload
    from sweep.space.loader import load_space

    for space, profile, chance in (("mqar_recall", "cpu", 50.0), ("local_digits", "quick", 10.0)):
        name, loaded, profile = load_space(space, profile)
        plan = make_plan(name, loaded, profile)
        assert {trial_payload(plan, c, 0)["chance_score"] for c in plan.configs} == {chance}
