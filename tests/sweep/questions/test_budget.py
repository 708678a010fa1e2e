"""A parameter budget spent three ways (``budget:``, sweep/questions/budget.py): each way's solved shape hits the target
within the tolerance and its count is the model's own (checked against a closed form written here and
timm's count), a budget that cannot be met is an error naming the nearest miss, labels change no config
id, and the budget_ways / budget_pairs views agree with numpy and scipy on planted rows."""

import math
import textwrap

import numpy as np
import pytest
import torch
from scipy import stats
from timm.models.vision_transformer import VisionTransformer

from sweep.analysis.report import write_report
from sweep.cli import main
from sweep.errors import SpaceError
from sweep.plan.plan import make_plan
from sweep.questions.budget import nearest_step
from sweep.results.importer import import_file
from sweep.space.loader import load_space
from tests.helpers import query, write_csv

# digits: 8×8 pixels, 1 channel, 10 classes; patch 2 → 16 patches + the class token
TOKENS, PATCH_PIXELS, CLASSES = 17, 4, 10

SPACE = """\
question: one budget three ways
model: {family: vit, embed_dim: 48, mlp_dim: 192, patch_size: 2}
axes: {depth: [2], num_heads: [4]}
baseline: {depth: 2, num_heads: 4}
data: {name: digits}
budget: {from: baseline, target: {factor: 2.0}, tolerance: 0.02, ways: [deeper, wider, more_heads]}
"""


def vit_params(depth: int, width: int, attn: int, mlp: int) -> int:
    """A digits ViT's parameters, counted by hand (timm's layout: qkv with bias, pre-norm blocks)."""
    embed = PATCH_PIXELS * width + width + width + TOKENS * width  # patch conv + bias, class token, positions
    block = 2 * width + width * 3 * attn + 3 * attn + attn * width + width  # norm1, qkv (+ bias), proj (+ bias)
    block += 2 * width + width * mlp + mlp + mlp * width + width  # norm2, fc1, fc2
    head = 2 * width + width * CLASSES + CLASSES  # final norm, classifier
    return embed + depth * block + head


def timm_params(depth: int, width: int, heads: int, mlp: int) -> int:
    """timm's own count of a plain VisionTransformer (head_dim = width / heads), built on the meta device."""
    with torch.device("meta"):
        model = VisionTransformer(img_size=8, patch_size=2, in_chans=1, num_classes=CLASSES, embed_dim=width,
                                  depth=depth, num_heads=heads, mlp_ratio=mlp / width)  # fmt: skip
    return sum(p.numel() for p in model.parameters())


def write_space(tmp_path, body: str = SPACE, name: str = "budget.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_each_way_hits_the_target_and_counts_as_the_closed_form_and_timm(tmp_path):
    name, space, profile = load_space(str(write_space(tmp_path)))
    plan = make_plan(name, space, profile)
    (budget,) = plan.answers["budget"]
    base = vit_params(2, 48, 48, 192)
    assert budget.base_params == base == timm_params(2, 48, 4, 192)
    assert budget.target == round(2.0 * base)
    by_way = {c.label("budget_way"): c for c in plan.configs}
    assert set(by_way) == {"base", "deeper", "wider", "more_heads"} and by_way["base"].is_baseline

    # each way's free dimension, and its neighbours' counts (by hand) are no nearer the target
    def closed_form(way: str, k: int) -> int:
        if way == "deeper":
            return vit_params(k, 48, 48, 192)
        if way == "wider":  # d_model k · 4 (4 heads), MLP 4 · d_model
            return vit_params(2, 4 * k, 4 * k, 16 * k)
        return vit_params(2, 48, 12 * k, 192)  # k heads of 12

    free = {"deeper": ("depth", 1), "wider": ("embed_dim", 4), "more_heads": ("num_heads", 1)}
    for way, (dimension, unit) in free.items():
        config = by_way[way]
        k = getattr(config.shape, dimension) // unit
        assert config.params == closed_form(way, k)
        assert abs(config.params / budget.target - 1) <= 0.02
        miss = abs(closed_form(way, k) / budget.target - 1)
        assert miss <= abs(closed_form(way, k + 1) / budget.target - 1)
        assert miss <= abs(closed_form(way, k - 1) / budget.target - 1)
    shapes = {way: (c.shape.depth, c.shape.num_heads, c.shape.head_dim, c.shape.embed_dim, c.shape.mlp_dim)
              for way, c in by_way.items()}  # fmt: skip
    assert shapes == {"base": (2, 4, 12, 48, 192), "deeper": (4, 4, 12, 48, 192), "wider": (2, 4, 17, 68, 272),
                      "more_heads": (2, 16, 12, 48, 192)}  # fmt: skip
    assert by_way["deeper"].params == timm_params(4, 48, 4, 192)
    assert by_way["wider"].params == timm_params(2, 68, 4, 272)
    # the labels travel to the trials rows, and every config is a distinct experiment
    payloads = {t["budget_way"]: t for t in plan.trials()}
    assert payloads["wider"]["budget_target_params"] == budget.target
    assert len({c.config_id for c in plan.configs}) == 4


def test_the_labels_change_no_config_id(tmp_path):
    """The base planned with a budget has the id it has without one (budget_way is not a model field)."""
    with_budget = make_plan(*load_space(str(write_space(tmp_path))))
    plain = make_plan(*load_space(str(write_space(tmp_path, SPACE.rsplit("budget:", 1)[0], "plain.yaml"))))
    assert [c.config_id for c in plain.configs] == [with_budget.baseline.config_id]
    assert plain.baseline.label("budget_way") is None and "budget_way" not in plain.baseline.shape.as_dict()


def test_nearest_step_finds_the_nearest_of_a_monotone_count():
    assert nearest_step(lambda k: k * k, 50) == (7, 49)
    assert nearest_step(lambda k: 10 * k, 15) == (1, 10)  # a tie goes to the smaller step
    assert nearest_step(lambda k: 100 + k, 3) == (1, 101)


def test_a_budget_out_of_reach_is_one_issue_naming_the_nearest_miss(tmp_path):
    body = SPACE.replace("tolerance: 0.02", "tolerance: 0.005")
    with pytest.raises(SpaceError) as caught:
        load_space(str(write_space(tmp_path, body)))
    text = str(caught.value)
    # every way misses ±0.5%: deeper by -1.5% at depth 4, wider -1.1% at 68, more heads -1.8% at 16
    assert "budget.ways: deeper must reach 116,468 params within ±0.5% (solving depth for family vit)" in text
    assert "nearest depth=4: 114,778 params (-1.5%)" in text
    assert "nearest embed_dim=68: 115,134 params (-1.1%)" in text
    assert "nearest num_heads=16: 114,394 params (-1.8%)" in text
    assert "set budget.tolerance to at least 0.015" in text and "drop deeper from budget.ways" in text


def test_the_plan_prints_each_way_and_the_match(tmp_path, capsys):
    assert main(["plan", str(write_space(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "target 116,468 params (2.00× the base), within ±2%" in out
    assert "deeper     depth 4: 114,778 params, matched within ±2%: -1.5%" in out
    assert "more_heads num_heads 16: 114,394 params, matched within ±2%: -1.8%" in out


@pytest.mark.parametrize(
    ("budget", "path", "words"),
    [
        ("{target: {factor: 2}, tolerence: 0.02}", "budget.tolerence", "did you mean"),
        ("{target: {factor: 2, params: 1000}}", "budget.target", "exactly one of `params` and `factor`"),
        ("{target: {factor: 2}, ways: [deeper, taller]}", "budget.ways[1]", "deeper"),
        ("{target: {factor: 2}, from: {depth: 2, heads: 4}}", "budget.from", "keys must be among"),
        ("{target: {factor: 2}, from: {depth: 3}}", "budget.from", "must name one of the space's shapes"),
    ],
)
def test_a_malformed_budget_names_the_key_and_the_rule(tmp_path, budget, path, words):
    body = SPACE.rsplit("budget:", 1)[0] + f"budget: {budget}\n"
    with pytest.raises(SpaceError) as caught:
        load_space(str(write_space(tmp_path, body)))
    assert f": {path}" in str(caught.value) and words in str(caught.value)


def test_a_profile_overrides_the_budget_and_its_typos_are_reported_there(tmp_path):
    body = SPACE + "profiles:\n  triple: {budget: {target: {factor: null, params: 174702}}}\n"
    _, space, _ = load_space(str(write_space(tmp_path, body)), "triple")
    assert space.budget.target.params == 174702 and space.budget.ways == ["deeper", "wider", "more_heads"]
    with pytest.raises(SpaceError, match=r"profiles\.typo\.budget\.wayz"):
        load_space(str(write_space(tmp_path, SPACE + "profiles:\n  typo: {budget: {wayz: [deeper]}}\n")))


# --- the views, on planted rows -----------------------------------------------------------------------------

TARGET = 100_000
# way: (depth, heads, head_dim, width, params, scores over seeds)
PLANTED = {
    "base": (2, 4, 12, 48, 50_000, [70.0, 72.0, 71.0]),
    "deeper": (4, 4, 12, 48, 98_500, [80.0, 84.0, 81.0, 83.5]),
    "wider": (2, 4, 17, 68, 101_200, [76.0, 75.0, 79.0]),
    "more_heads": (2, 16, 12, 48, 99_000, [84.0, 86.5, 83.0, 85.0, 84.5]),
}


def planted_budget_rows() -> list[dict]:
    rows = []
    for way, (depth, heads, head_dim, width, params, scores) in PLANTED.items():
        for seed, score in enumerate(scores):
            rows.append({
                "space": "plant", "config_id": f"plant-{way}", "seed": seed, "is_baseline": way == "base",
                "family": "vit", "depth": depth, "num_heads": heads, "head_dim": head_dim, "embed_dim": width,
                "mlp_dim": 4 * width, "status": "ok", "top1": score, "params": params,
                "flops_per_sample": 40 * params, "train_samples_per_s": 1e8 / params, "kappa_mean": 100.0 / heads,
                "budget_way": way, "budget_target_params": TARGET,
            })  # fmt: skip
    # a config outside the budget stays out of both views
    rows.append({**rows[0], "config_id": "plant-other", "budget_way": None, "budget_target_params": None,
                 "depth": 1, "is_baseline": False})  # fmt: skip
    return rows


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("budget")
    results = tmp / "results"
    import_file(write_csv(tmp / "plant.csv", planted_budget_rows()), results)
    return results


def test_budget_ways_puts_each_way_beside_the_others(planted):
    ways = {r["budget_way"]: r for r in query(planted, "FROM budget_ways WHERE space = 'plant'")}
    assert list(ways) == ["base", "deeper", "wider", "more_heads"]
    for way, (_, _, _, _, params, scores) in PLANTED.items():
        row, n = ways[way], len(scores)
        assert row["n_seeds"] == n and row["score_mean"] == pytest.approx(np.mean(scores))
        half = stats.t.ppf(0.975, n - 1) * np.std(scores, ddof=1) / math.sqrt(n)
        assert (row["score_lo"], row["score_hi"]) == pytest.approx((np.mean(scores) - half, np.mean(scores) + half),
                                                                   rel=1e-4)  # fmt: skip
        assert row["params_miss"] == pytest.approx(params / TARGET - 1)
        assert row["target_params"] == TARGET and row["kappa_mean"] == pytest.approx(100.0 / row["num_heads"])
    assert {w: r["rank"] for w, r in ways.items()} == {"base": None, "more_heads": 1, "deeper": 2, "wider": 3}


@pytest.mark.parametrize("tolerance", [1.0, 2.0])
def test_budget_pairs_match_welch_intervals_from_scipy(planted, tolerance):
    pairs = query(planted, "FROM budget_pairs WHERE space = 'plant'", tolerance=tolerance)
    assert [(p["way_a"], p["way_b"]) for p in pairs] == [("deeper", "wider"), ("deeper", "more_heads"),
                                                         ("wider", "more_heads")]  # fmt: skip
    for pair in pairs:
        a, b = PLANTED[pair["way_a"]][5], PLANTED[pair["way_b"]][5]
        delta = np.mean(a) - np.mean(b)
        exact = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
        assert pair["delta"] == pytest.approx(delta)
        # t95 interpolates fractional Welch dof: never narrower than exact, at most 0.5% wider from dof 2 on
        half, exact_half = pair["delta_hi"] - delta, (exact.high - exact.low) / 2
        assert exact_half <= half * (1 + 1e-9) and half == pytest.approx(exact_half, rel=0.005)
        if exact.low - (half - exact_half) > tolerance:
            expected = "wins"
        elif exact.high + (half - exact_half) < -tolerance:
            expected = "loses"
        elif -tolerance <= pair["delta_lo"] and pair["delta_hi"] <= tolerance:
            expected = "tie (within tolerance)"
        else:
            expected = "inconclusive"
        assert pair["verdict"] == expected and pair["evidence"] == "welch t, 95%"
        assert pair["params_ratio"] == pytest.approx(PLANTED[pair["way_a"]][4] / PLANTED[pair["way_b"]][4])
    verdicts = {(p["way_a"], p["way_b"]): p["verdict"] for p in pairs}
    # more heads: 84.6 against deeper's 82.1 and wider's 76.7
    assert verdicts[("wider", "more_heads")] == "loses"
    assert verdicts[("deeper", "wider")] == ("wins" if tolerance == 1.0 else "inconclusive")


@pytest.mark.slow
def test_the_report_says_which_way_spent_the_budget_best_and_how_sure(planted, tmp_path):
    index = write_report("plant", planted, tmp_path / "report", tolerance=1.0)
    text = index.read_text()
    section = text.split("## Which way spent the parameter budget best?")[1]
    assert "Target 100,000 parameters, spent 3 ways (best first): more heads (2 blocks × 16 heads of 12" in section
    assert "99,000 params, -1.0%): 84.6% (95% CI 83.0%…86.2%, 5 seeds)" in section
    assert "Against deeper: Δ +2.5 (95% CI -0.4…+5.4), inconclusive." in section
    assert "Against wider: Δ +7.9 (95% CI +3.6…+12.2), wins." in section
    assert "No way is confidently best" in section  # against deeper the interval does not clear 1 point
