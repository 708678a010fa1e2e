"""Control arms (a space's ``controls:``): the half-MLP control of ViT-B and DeiT-B plans with the parameter count
timm gives and the published rows of arXiv 2512.01059 match it; controls add configs without moving an id; bad
controls are reported together; ``mlp_control`` judges fewer-blocks configs against the control as numpy/scipy
do; ``sweep report`` says whether extra heads beat it."""

import json
import re
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from scipy import stats

from sweep.analysis.report import write_report
from sweep.analysis.sql import connect
from sweep.cli import main
from sweep.errors import SpaceError
from sweep.headline import Headline
from sweep.markdown import query as report_query
from sweep.plan.plan import compare_published, make_plan
from sweep.questions.controls import control_rows, control_section
from sweep.results.importer import import_file
from sweep.results.sink import TrialRows
from sweep.space.loader import load_space
from tests.fixtures.pin_plan_ids import PINNED
from tests.helpers import TINY_SPACE_BODY, query, trial_row, write_csv

HALF_MLP_SPACES = ("vit_b_fixed_mlp", "deit_b_fixed_mlp", "vit_b_paper")


def plan_of(name, profile=None):
    return make_plan(*load_space(name, profile))


def timm_params(**kwargs) -> int:
    """timm's own count of vit_base_patch16_224 with ``kwargs``, built on the meta device (no weights)."""
    import timm

    with torch.device("meta"):
        model = timm.create_model("vit_base_patch16_224", pretrained=False, **kwargs)
    return sum(p.numel() for p in model.parameters())


def test_half_mlp_is_32_7_percent_fewer_parameters_as_timm_counts_it():
    """The control's count against an independent one: timm's ViT-B/16 with mlp_ratio 2 (MLP 1536)."""
    plan = plan_of("vit_b_fixed_mlp")
    (row,) = control_rows(plan)
    full, half = timm_params(), timm_params(mlp_ratio=2.0)
    assert (plan.baseline.params, row["params"]) == (full, half) == (86_567_656, 58_237_672)
    assert row["params_change"] == pytest.approx(half / full - 1) and f"{row['params_change']:.1%}" == "-32.7%"
    assert (row["depth"], row["num_heads"], row["head_dim"], row["mlp_dim"]) == (12, 12, 64, 1536)
    assert not row["in_grid"]
    # 8 blocks at fixed d_model, whatever the heads, are the matched comparison: within 0.04% of the control
    assert {c.params for c in plan.configs if c.shape.depth == 8} == {58_216_168}


@pytest.mark.parametrize("name", ["vit_b_fixed_mlp", "deit_b_fixed_mlp"])
def test_the_published_rows_of_2512_01059_are_the_control_and_the_baseline(name):
    rows = {r["label"].split(",")[0].split(" (")[0]: r for r in compare_published(plan_of(name, "paper"))}
    shallow, base = rows["ViT-B/16 ShallowMLP"], rows["ViT-B/16 baseline"]
    assert shallow["control"] == "half_mlp" and base["control"] is None
    assert (shallow["published_score"], base["published_score"]) == (81.25, 81.05)
    assert shallow["published_params_m"] == pytest.approx(86.6 * (1 - 0.327), abs=0.05)
    assert shallow["reproduced"] and base["reproduced"] and abs(shallow["difference"]) < 0.01
    assert shallow["shape"] == {"depth": 12, "num_heads": 12, "mlp_dim": 1536}
    assert "2512.01059" in shallow["source"] and "not shown to be" in shallow["source"]
    if name == "deit_b_fixed_mlp":  # the published run is a ViT-B/16, and the label says so
        assert "not DeiT-B" in shallow["label"] and "not DeiT-B" in shallow["source"]


@pytest.mark.parametrize("name", HALF_MLP_SPACES)
def test_every_profile_carries_the_control_at_half_its_own_mlp(name):
    _, space, _ = load_space(name)
    for profile in [None, *space.profiles]:
        plan = plan_of(name, profile)
        (control,) = plan.answers["controls"]
        base, shape = plan.baseline.shape, control.config.shape
        assert control.label == "half_mlp" and control.config.label("control") == "half_mlp"
        assert (shape.depth, shape.num_heads, shape.head_dim, shape.embed_dim) == (
            base.depth, base.num_heads, base.head_dim, base.embed_dim
        )  # fmt: skip
        assert shape.mlp_dim * 2 == base.mlp_dim, (name, profile)
        assert [c.config_id for c in plan.configs if c.label("control")] == [control.config.config_id]
    assert plan_of(name, "smoke").answers["controls"][0].config.shape.mlp_dim == 96


def test_controls_add_configs_at_the_end_and_move_no_id():
    name_space_profile = load_space("vit_b_fixed_mlp", "smoke")
    plan = make_plan(*name_space_profile)
    name, space, profile = name_space_profile
    grid = make_plan(name, space.model_copy(update={"controls": []}), profile)
    assert [c.config_id for c in plan.configs[:-1]] == [c.config_id for c in grid.configs]
    assert plan.configs[-1].label("control") == "half_mlp" and len(plan.configs) == len(grid.configs) + 1
    # deit_b_fixed_mlp's paper_row grid holds MLP 1536 already: the control labels that config, adds none
    row = plan_of("deit_b_fixed_mlp", "paper_row")
    pinned = json.loads(PINNED.read_text())["deit_b_fixed_mlp/paper_row"]
    assert [[c.config_id, c.params, c.flops_per_sample] for c in row.configs] == pinned
    assert row.answers["controls"][0].in_grid and sum(c.label("control") == "half_mlp" for c in row.configs) == 1


def test_the_label_travels_in_the_payload_and_the_trials_row_but_not_the_id():
    plan = plan_of("vit_b_fixed_mlp", "smoke")
    payloads = {p["config_id"]: p for p in plan.trials()}
    control = plan.answers["controls"][0].config
    assert payloads[control.config_id]["control"] == "half_mlp"
    assert {p["control"] for p in payloads.values()} == {None, "half_mlp"}
    assert "control" not in control.model and "half_mlp" not in json.dumps(payloads[control.config_id]["trial_config"])
    row = TrialRows(payloads[control.config_id], "s1", "t1", "sha").trial_row(None, [], "error", "boom", 0)
    assert row["control"] == "half_mlp" and row["mlp_dim"] == 96


def test_plan_prints_each_control_with_its_change_against_the_baseline(capsys):
    assert main(["plan", "vit_b_fixed_mlp"]) == 0
    out = capsys.readouterr().out
    assert (
        "control half_mlp (mlp_dim 1536; depth 12 × 12 heads of 64, MLP 1536): 58.2M params (58,237,672), "
        "-32.7% vs the baseline" in out
    )
    assert "one config added to the grid" in out and "[the half_mlp control], planned 58.24M (-0.1%): reproduced" in out
    assert main(["plan", "vit_b_fixed_mlp", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [c["label"] for c in plan["controls"]] == ["half_mlp"] and plan["trials"][-1]["control"] == "half_mlp"


CONTROLS = """\
controls:
  - {label: half_mlp, shape: {mlp_dim: 16}}
  - {label: same, shape: {depth: 1}}
  - {label: odd_heads, shape: {num_heads: 3}}
  - {label: again, shape: {mlp_dim: 16}}
  - {label: typo, shape: {mlp_dims: 8}}
  - {label: Bad-Label, shape: {mlp_dim: 8}}
"""


def write_space(tmp_path, controls: str):
    path = tmp_path / "space.yaml"
    path.write_text("question: q\n" + TINY_SPACE_BODY + controls)
    return path


def test_every_bad_control_is_reported_together_with_its_path_rule_and_fix(tmp_path):
    with pytest.raises(SpaceError) as info:
        load_space(str(write_space(tmp_path, CONTROLS)))
    text = str(info.value)
    assert "controls[5].label" in text and "pattern" in text  # pydantic's rule on the label
    with pytest.raises(SpaceError) as info:
        load_space(str(write_space(tmp_path, CONTROLS.replace("Bad-Label", "fine"))))
    issues = {(i.path, i.rule.split(" (")[0].split(";")[0]) for i in info.value.issues}
    assert ("controls[4].shape.mlp_dims", "keys must be among depth, num_heads, head_dim, embed_dim, mlp_dim, "
            "num_kv_heads, conditioning") in issues  # fmt: skip
    text = str(info.value)
    assert "did you mean mlp_dim" in text
    with pytest.raises(SpaceError) as info:
        fixed = CONTROLS.replace("Bad-Label", "fine").replace("mlp_dims: 8", "mlp_dim: 12")
        load_space(str(write_space(tmp_path, fixed)))
    rules = {i.path: i.rule for i in info.value.issues}
    assert rules["controls[1].shape"] == "a control must differ from the baseline"
    assert "buildable" in rules["controls[2].shape"] and "num_heads=3 does not divide embed_dim=16" in str(info.value)
    assert rules["controls[3].shape"].startswith("two controls have the same shape")
    assert len(info.value.issues) == 3  # all together, one per bad control


def test_a_profile_scales_the_control_and_unknown_keys_are_rejected(tmp_path):
    body = "controls: [{label: half_mlp, shape: {mlp_dim: 16}}]\nprofiles:\n  wide:\n    model: {mlp_dim: 64}\n"
    path = write_space(tmp_path, body + "    controls: [{label: half_mlp, shape: {mlp_dim: 32}}]\n")
    assert make_plan(*load_space(str(path), "wide")).answers["controls"][0].config.shape.mlp_dim == 32
    assert make_plan(*load_space(str(path))).answers["controls"][0].config.shape.mlp_dim == 16
    bad = write_space(tmp_path, body + "    controls: [{label: half_mlp, shape: {mlp_dim: 64}}]\n")
    with pytest.raises(SpaceError) as info:  # the profile's control is the baseline: said where it is
        load_space(str(bad))
    assert [i.path for i in info.value.issues] == ["profiles.wide.controls[0].shape"]
    with pytest.raises(SpaceError, match=r"controls\[0\]\.shap.*did you mean shape"):
        load_space(str(write_space(tmp_path, "controls: [{label: x, shap: {mlp_dim: 16}}]\n")))


# --- the mlp_control view -------------------------------------------------------------------------------

# (depth, heads, mlp) → (params, scores over seeds, control label); baseline 4 × 4, MLP 128
PLANTED = {
    (4, 4, 128): (4000, [90.0, 90.4, 89.6], None),
    (4, 4, 64): (2700, [89.0, 89.5, 89.3, 88.9], "half_mlp"),  # mean 89.175: no tie at a rounding edge
    (2, 16, 128): (2650, [91.0, 91.3, 91.1], None),  # matched (0.98×), more heads, ≈ +2: the best at or under
    (2, 8, 128): (2690, [89.1, 89.2, 89.15], None),  # matched, more heads, ≈ 0 with a narrow interval: a tie
    (2, 32, 128): (2680, [88.0, 90.5, 89.0], None),  # matched, more heads, noisy: inconclusive
    (2, 4, 128): (2600, [86.0], None),  # as many heads as the baseline; one seed
    (3, 16, 128): (3300, [92.0, 92.4], None),  # more params than the control: not matched, not "at or under"
}


def planted_rows(space="mc"):
    rows = []
    for (depth, heads, mlp), (params, scores, control) in PLANTED.items():
        for seed, score in enumerate(scores):
            row = trial_row(space, depth, heads, seed, score, width=64)
            row.update(config_id=f"{space}-{depth}-{heads}-{mlp}", mlp_dim=mlp, params=params)
            row["is_baseline"] = (depth, heads, mlp) == (4, 4, 128)
            rows.append({**row, **({"control": control} if control else {})})
    return rows


@pytest.fixture
def planted(tmp_path):
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "mc.csv", planted_rows()), results)
    return results


def welch(a, b):
    """numpy/scipy: mean difference and its exact 95% Welch interval half-width (scipy's t quantile)."""
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return a.mean() - b.mean(), stats.t.ppf(0.975, dof) * np.sqrt(va + vb), dof


def test_mlp_control_equals_a_numpy_and_scipy_computation(planted):
    rows = {(r["depth"], r["num_heads"]): r for r in query(planted, "FROM mlp_control")}
    # the configs with fewer blocks than 4; the control (4 blocks) is not a candidate
    assert set(rows) == {(2, 16), (2, 8), (2, 32), (2, 4), (3, 16)}
    control_scores = PLANTED[(4, 4, 64)][1]
    for (depth, heads), row in rows.items():
        params, scores, _ = PLANTED[(depth, heads, 128)]
        assert row["control"] == "half_mlp" and row["control_params"] == 2700 and row["control_n_seeds"] == 4
        assert row["params_ratio"] == pytest.approx(params / 2700)
        assert row["matched"] == (abs(params / 2700 - 1) <= 0.05)
        assert row["more_heads"] == (heads > 4)
        single = (scores[0] - np.mean(control_scores), None, None)
        delta, half, dof = welch(scores, control_scores) if len(scores) > 1 else single
        assert row["delta"] == pytest.approx(delta)
        if half is None:
            assert row["evidence"] == "single seed" and row["delta_lo"] is None and not row["significant"]
            continue
        assert row["welch_df"] == pytest.approx(dof)
        # macros.sql's t95 interpolates ln t in 1/dof: never below the exact quantile, at most 3% above it
        sql_half = (row["delta_hi"] - row["delta_lo"]) / 2
        assert half <= sql_half <= 1.03 * half
        assert row["delta"] == pytest.approx((row["delta_hi"] + row["delta_lo"]) / 2)
    verdicts = {key: (r["verdict"], r["evidence"], r["best_at_or_under"]) for key, r in rows.items()}
    assert verdicts == {
        (2, 16): ("wins", "welch t, 95%", True),
        (2, 8): ("tie (within tolerance)", "welch t, 95%", False),
        (2, 32): ("inconclusive", "welch t, 95%", False),
        (2, 4): ("loses", "single seed", False),  # 86.0 − 89.175 < −0.5 on the point estimate alone
        (3, 16): ("wins", "welch t, 95%", False),  # ≈ +3 points, but at 1.22× the params: not matched
    }
    # the verdict words follow matched_budget's rule on the gain interval
    for row in rows.values():
        if row["evidence"] == "welch t, 95%":
            lo, hi = row["gain_lo"], row["gain_hi"]
            expected = ("wins" if lo > 0.5 else "loses" if hi < -0.5
                        else "tie (within tolerance)" if lo >= -0.5 and hi <= 0.5 else "inconclusive")  # fmt: skip
            assert row["verdict"] == expected


def test_mlp_control_reads_files_written_before_the_control_column(planted, tmp_path):
    """An older trials file has no `control` column: the trials view supplies it, NULL."""
    for path in (planted / "trials").rglob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.drop(["control"]), path)
    assert query(planted, "SELECT count(*) AS n FROM configs WHERE control IS NOT NULL") == [{"n": 0}]
    assert query(planted, "FROM mlp_control") == []  # no control arm recorded: nothing to compare


@pytest.mark.slow
def test_report_says_whether_extra_heads_beat_the_control(planted, tmp_path):
    index = write_report("mc", planted, tmp_path / "report")
    text = index.read_text()
    assert "## Fewer layers, more heads, against the control arms" in text
    assert "the half_mlp control (4 blocks × 4 heads of 16, MLP 64; 2,700 params; 89.2% over 4 seeds)" in text
    assert "The best config with fewer blocks and more heads at or under its parameters is 2 blocks × 16 heads" in text
    assert "within ±5%: matched" in text and "95% CI" in text
    assert (
        "Of 3 fewer-blocks, more-heads configs within ±5% of its parameters: 1 wins, 0 loses, "
        "1 tie (within tolerance), 1 inconclusive" in text
    )


def test_report_is_honest_about_single_seeds(tmp_path):
    rows = [r for r in planted_rows("one") if r["seed"] == 0]
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "one.csv", rows), results)
    headline, con = Headline(name="top1", mode="max", tolerance=0.5), connect(results)
    configs, rows = report_query(con, "FROM configs"), report_query(con, "FROM mlp_control")
    text = control_section(configs, rows, headline)
    assert "single seed: no interval" in text and "never significant" in text
    assert "(3 of the inconclusive on a single seed: a lean only)" in text
    assert re.search(r": 0 wins, 0 loses, 0 tie \(within tolerance\), 3 inconclusive", text)
    assert "no finished comparison yet" in control_section(configs, [], headline)
    lean = [{**r, "matched": False} for r in rows]
    assert "none is a matched comparison" in control_section(configs, lean, headline)
    best_lean = [{**r, "matched": r["matched"] and not r["best_at_or_under"]} for r in rows]
    assert "At matched parameters the best is 2 blocks × 8 heads of 8 (0.996× the control's)" in control_section(
        configs, best_lean, headline
    )
    assert control_section([{**c, "control": None} for c in configs], [], headline) == ""  # no control arm: no section


def test_the_view_is_listed_and_documented():
    from sweep.analysis.views import analysis_views
    from tests.helpers import VIEWS

    sql = VIEWS.read_text()
    assert "mlp_control" in analysis_views() and "CREATE OR REPLACE VIEW mlp_control AS" in sql
    assert textwrap.dedent(sql).count("-- mlp_control_at(tolerance)") == 1
