"""Search spaces: every shipped one validates and plans; malformed ones fail together, clearly, and run nothing."""

import json
import textwrap

import pytest

from sweep.cli import main
from sweep.errors import SpaceError, UnknownSpaceError
from sweep.plan.plan import make_plan
from sweep.space.loader import load_space, shipped_spaces
from tests.fixtures.pin_plan_ids import PINNED as PINNED_PATH

SHIPPED = sorted(shipped_spaces())


def all_profiles(name):
    _, space, _ = load_space(name)
    return [None, *space.profiles]


PINNED = json.loads(PINNED_PATH.read_text())


def test_the_pinned_ids_cover_exactly_the_shipped_spaces_and_profiles():
    """A space or profile added or removed needs the pins written again, on purpose (tests/fixtures/)."""
    assert set(PINNED) == {f"{name}/{profile or '-'}" for name in SHIPPED for profile in all_profiles(name)}


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_space_and_profile_validates_and_plans(name):
    """Each profile plans, and keeps the config ids, parameter counts and FLOPs pinned in
    tests/fixtures/plan_ids.json (sweep/plan/identity.py states the id rule; tests/sweep/plan/test_identity.py
    tests it)."""
    for profile in all_profiles(name):
        space_name, space, chosen = load_space(name, profile)
        plan = make_plan(space_name, space, chosen)
        planned = [[c.config_id, c.params, c.flops_per_sample] for c in plan.configs]
        assert planned == PINNED[f"{name}/{profile or '-'}"], f"ids, params or FLOPs of {name}/{profile} moved"
        assert plan.configs and plan.baseline.is_baseline and plan.baseline.shape.family == space.model.family
        baselines = [c.shape.family for c in plan.configs if c.is_baseline]
        assert sorted(baselines) == sorted(space.families())  # one per family
        assert len({c.config_id for c in plan.configs}) == len(plan.configs)
        assert space.question.strip()


def test_required_spaces_are_shipped():
    assert {"local_digits", "vit_b_fixed_mlp", "vit_b_paper", "width_control"} <= set(SHIPPED)


def test_vit_b_fixed_mlp_baseline_is_86_6m(capsys):
    assert main(["plan", "vit_b_fixed_mlp"]) == 0
    out = capsys.readouterr().out
    assert "baseline: depth 12 × 12 heads of 64, 86.6M params (86,567,656)" in out
    _, space, profile = load_space("vit_b_fixed_mlp")
    plan = make_plan("vit_b_fixed_mlp", space, profile)
    assert {c.shape.depth for c in plan.configs} == {4, 6, 8, 10, 12}
    assert {c.shape.num_heads for c in plan.configs} == {12, 16, 24, 32, 48}
    control = {c.config_id: c.label("control") for c in plan.configs}
    # the grid holds the MLP fixed
    assert {c.shape.mlp_dim for c in plan.configs if control[c.config_id] is None} == {3072}
    assert [(control[c.config_id], c.shape.mlp_dim) for c in plan.configs if control[c.config_id]] == [
        ("half_mlp", 1536)
    ]  # its control
    assert {c.params for c in plan.configs if c.shape.depth == 12 and control[c.config_id] is None} == {86_567_656}


def test_width_control_has_both_arms_sharing_the_12_head_config():
    _, space, profile = load_space("width_control")
    plan = make_plan("width_control", space, profile)
    twelve = [c for c in plan.configs if c.shape.num_heads == 12]
    assert {c.shape.rule for c in twelve} == {"fixed_d_model+fixed_head_dim"}
    wide = {(c.shape.num_heads, c.shape.attn_dim) for c in plan.configs if c.shape.rule == "fixed_head_dim"}
    assert wide == {(24, 1536), (48, 3072)}
    fixed = {(c.shape.num_heads, c.shape.head_dim) for c in plan.configs if c.shape.rule == "fixed_d_model"}
    assert fixed == {(24, 32), (48, 16)}


def test_default_space_spans_depth_1_and_head_dim_4_or_less():
    _, space, profile = load_space("local_digits")
    plan = make_plan("local_digits", space, profile)
    assert min(c.shape.depth for c in plan.configs) == 1
    assert min(c.shape.head_dim for c in plan.configs) <= 4
    assert space.data.name == "digits"


def test_plan_lists_removed_combinations_with_reasons(tmp_path, capsys):
    path = write_space(tmp_path, axes="axes: {depth: [1, 2], num_heads: [1, 3, 4]}")
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "removed by the rules (2)" in out and "num_heads=3 does not divide embed_dim=16" in out


def test_plan_formats(tmp_path, capsys):
    import json

    path = write_space(tmp_path)
    assert main(["plan", str(path), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["trials"]) == 4 and plan["trials"][0]["params"] > 0
    assert main(["plan", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("config_id,baseline,depth")


def test_unknown_space_suggests_close_names():
    with pytest.raises(UnknownSpaceError, match="did you mean vit_b_fixed_mlp"):
        load_space("vit_b_fixed_mpl")


# --- malformed spaces ---------------------------------------------------------------------------------


VALID = """
question: a tiny test space
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
{axes}
baseline: {depth: 2, num_heads: 4}
seeds: [0]
data: {name: digits}
train: {epochs: 1, max_steps: 4, batch_size: 32, warmup_steps: 1}
probes: {kappa_samples: 2, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1}
profiles:
  smoke: {description: even smaller, train: {max_steps: 2}}
"""


DEFAULT_AXES = "axes: {depth: [1, 2], num_heads: [2, 3, 4]}"  # 3 heads do not divide d_model 16


def write_space(tmp_path, text=None, axes=DEFAULT_AXES, name="space.yaml"):
    path = tmp_path / name
    body = text if text is not None else VALID.replace("{axes}", axes)
    path.write_text(textwrap.dedent(body))
    return path


MALFORMED = {
    "unknown key": ("train: {epochs: 1", "train: {epochz: 1", "train.epochz", "correct its spelling"),
    "heads not dividing d_model (baseline)": (
        "baseline: {depth: 2, num_heads: 4}", "baseline: {depth: 2, num_heads: 3}", "baseline",
        "num_heads=3 does not divide embed_dim=16",
    ),
    "zero depth": ("depth: [1, 2]", "depth: [0, 2]", "axes.depth[0]", "greater than or equal to 1"),
    "negative depth": ("depth: [1, 2]", "depth: [-1, 2]", "axes.depth[0]", "greater than or equal to 1"),
    "empty axis": ("num_heads: [2, 3, 4]", "num_heads: []", "axes.num_heads", "at least 1 item"),
    "unknown family": ("family: vit", "family: vitt", "model.family", "did you mean vit"),
    "baseline outside the space": (
        "baseline: {depth: 2, num_heads: 4}", "baseline: {depth: 7, num_heads: 4}", "baseline",
        "not among the space's configurations",
    ),
    "bad resources": ("cpus_per_trial: 1", "cpus_per_trial: 0", "resources.cpus_per_trial", "greater than 0"),
    "fractional multi-gpu": (
        "cpus_per_trial: 1", "cpus_per_trial: 1, gpus_per_trial: 1.5", "resources.gpus_per_trial",
        "fractions are allowed below 1 GPU only",
    ),
    "wrong type": ("seeds: [0]", "seeds: zero", "seeds", "valid list"),
    "objective no trial reports": (
        "seeds: [0]",
        "seeds: [0]\nsearch: {kind: optuna, num_trials: 2, objectives: [{metric: bleu, mode: max}]}",
        "search.objectives[0].metric", "no trial reports this metric",
    ),
    "objective the data set does not report": (
        "seeds: [0]",
        "seeds: [0]\nsearch: {kind: optuna, num_trials: 2, objectives: [{metric: accuracy, mode: max}]}",
        "search.objectives[0].metric", "data set 'digits' does not report this metric",
    ),
    "metric mode against its direction": (
        "seeds: [0]", "seeds: [0]\nmetric: {name: val_loss, mode: max, tolerance: 0.05}", "metric.mode",
        "must be min for val_loss (lower is better) (got 'max'); fix: write mode: min",
    ),
    "metric the data set does not report": (
        "seeds: [0]", "seeds: [0]\nmetric: {name: accuracy}", "metric.name",
        "must be a metric that data set 'digits' reports (got 'accuracy'); fix: digits reports: top1, top5, val_loss",
    ),
    "loss without a tolerance": (
        "seeds: [0]", "seeds: [0]\nmetric: {name: val_loss}", "metric.tolerance", "no default tolerance",
    ),
    "analysis left over": (
        "seeds: [0]", "seeds: [0]\nanalysis: {tolerance_top1: 2.0}", "analysis",
        "fix: analysis.tolerance_top1 moved to metric.tolerance",
    ),
    "unknown search kind": ("seeds: [0]", "seeds: [0]\nsearch: {kind: bayes}", "search", "kind"),
    "range low above high": ("depth: [1, 2]", "depth: {low: 4, high: 1}", "axes.depth", "`low <= high` must hold"),
    "bad profile override": ("train: {max_steps: 2}", "train: {max_steps: -2}", "profiles.smoke.train.max_steps",
                             "greater than or equal to 1"),
    "patch not dividing image": ("patch_size: 2", "patch_size: 3", "model.patch_size", "must divide the image size 8"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_space_reports_file_path_rule_and_value(tmp_path, case):
    old, new, path, rule = MALFORMED[case]
    text = VALID.replace("{axes}", DEFAULT_AXES)
    assert old in text, case
    file = write_space(tmp_path, text.replace(old, new, 1))
    with pytest.raises(SpaceError) as info:
        load_space(str(file))
    lines = [str(issue) for issue in info.value.issues]
    matching = [line for line in lines if f": {path}:" in line and rule in line]
    assert matching, f"{case}: no issue at {path} with {rule!r} in {lines}"
    assert str(file.name) in matching[0]


def test_metric_takes_its_direction_and_reaches_the_trials(tmp_path):
    file = write_space(tmp_path, VALID.replace("{axes}", DEFAULT_AXES) + "metric: {name: val_loss, tolerance: 0.05}\n")
    name, space, profile = load_space(str(file))
    assert (space.metric.name, space.metric.mode, space.metric.tolerance) == ("val_loss", "min", 0.05)
    payload = make_plan(name, space, profile).trials()[0]
    assert (payload["metric"], payload["metric_mode"]) == ("val_loss", "min")
    _, default, _ = load_space("vit_b_fixed_mlp")
    assert (default.metric.name, default.metric.mode, default.metric.tolerance) == ("top1", "max", 0.5)
    assert load_space("local_digits")[1].metric.tolerance == 2.0


def test_analysis_in_a_profile_is_reported_where_it_is(tmp_path):
    text = VALID.replace("{axes}", DEFAULT_AXES).replace(
        "smoke: {description: even smaller,", "smoke: {analysis: {tolerance_top1: 1.0}, description: even smaller,"
    )
    with pytest.raises(SpaceError) as info:
        load_space(str(write_space(tmp_path, text)))
    issue = next(i for i in info.value.issues if i.path.endswith("analysis"))
    assert issue.path == "profiles.smoke.analysis" and "moved to metric.tolerance" in issue.fix


def test_every_problem_is_reported_together(tmp_path):
    text = VALID.replace("{axes}", "axes: {depth: [0, 2], num_heads: []}").replace("epochs: 1", "epochz: 1")
    with pytest.raises(SpaceError) as info:
        load_space(str(write_space(tmp_path, text)))
    paths = {issue.path for issue in info.value.issues}
    assert {"axes.depth[0]", "axes.num_heads", "train.epochz"} <= paths


# Files of several mistakes each, of different kinds (a rule across keys, a baseline outside the grid, an axis
# value the rules remove, a misspelt key, a bound): one run of `sweep validate` must name every one of them.
SEVERAL_MISTAKES = {
    "rules": (
        """question: q
model: {family: vit, embed_dim: 64, mlp_dim: 128, patch_size: 2}
axes: {depth: [1, 2], num_heads: [1, 3, 4]}
baseline: {depth: 4, num_heads: 4}
seeds: [0]
metric: {name: top1, mode: min}
""",
        {"metric.mode", "axes.num_heads[1]", "baseline"},
    ),
    "structure_and_rules": (
        """question: q
model: {family: vit, embed_dim: 64, mlp_dim: 128, patch_size: 2}
axes: {depth: [1, 2], num_heads: [4, 6, 1]}
baseline: {depth: 2, num_heads: 4}
seeds: [0]
trian: {epochs: 2}
resources: {cpus_per_trial: 0}
metric: {name: val_loss, mode: max, tolerance: 0.1}
""",
        {"trian", "resources.cpus_per_trial", "metric.mode", "axes.num_heads[1]"},
    ),
}


@pytest.mark.parametrize("case", SEVERAL_MISTAKES)
def test_validate_reports_every_mistake_of_a_file_in_one_run(case, tmp_path, capsys):
    text, wanted = SEVERAL_MISTAKES[case]
    file = tmp_path / f"{case}.yaml"
    file.write_text(text)
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    lines = [line.strip().removeprefix("note: ") for line in err.splitlines()[1:]]
    assert err.startswith(f"error: invalid search space ({len(wanted) - 1} problems; 1 note)")
    assert len(lines) == len(wanted) and {line.split(": ")[1] for line in lines} == wanted
    # the value the rules drop is named as such, with the rule that drops it (a note: the rest still runs)
    dropped = err.splitlines()[-1].strip()
    value = 3 if case == "rules" else 6
    assert dropped.startswith("note: ") and ": axes.num_heads[1]: " in dropped
    assert (
        f"every configuration with num_heads={value} is removed by the rules (num_heads={value} does not divide "
        in (dropped)
    )


def test_validate_names_an_axis_value_the_rules_remove_in_a_valid_space(tmp_path, capsys):
    assert main(["validate", str(write_space(tmp_path))]) == 0  # num_heads 3 at d_model 16
    out = capsys.readouterr().out
    assert "space: valid (4 configs, 2 combinations removed by the rules" in out
    assert "note: " in out and "axes.num_heads[1]: every configuration with num_heads=3 is removed by the rules" in out


def test_a_space_of_ones_own_extends_a_shipped_space(tmp_path, monkeypatch):
    # the natural first space: a copy of local_digits with other axes, in ./search_spaces/
    (tmp_path / "search_spaces").mkdir()
    (tmp_path / "search_spaces" / "my_digits.yaml").write_text(
        "extends: local_digits\nquestion: does 8 heads at depth 2 hold?\naxes: {depth: [2, 4], num_heads: [4, 8]}\n"
    )
    monkeypatch.chdir(tmp_path)
    name, space, profile = load_space("my_digits")
    _, shipped, _ = load_space("local_digits")
    assert (name, profile) == ("my_digits", None)
    assert space.axis_values("depth") == [2, 4] and space.axis_values("num_heads") == [4, 8]
    assert space.train == shipped.train and space.data == shipped.data and space.metric == shipped.metric
    assert set(space.profiles) == set(shipped.profiles)
    with pytest.raises(SpaceError, match="must name a recipe or a space that exists"):
        (tmp_path / "search_spaces" / "typo.yaml").write_text("extends: local_digit\nquestion: q\n")
        load_space("typo")


def test_spaces_shows_each_profile_with_its_description_from_the_yaml(capsys):
    import yaml

    assert main(["spaces", "local_digits"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    profiles = yaml.safe_load((shipped_spaces()["local_digits"]).read_text())["profiles"]
    for name, body in profiles.items():
        assert f"{name}: {' '.join(body['description'].split())}" in out
    assert "quick: one seed, depths 1 and 4, four head counts; about a minute" in out and "why: " in out
    assert main(["spaces"]) == 0
    everything = " ".join(capsys.readouterr().out.split())
    assert "cpu: the smallest recall task (2 pairs, 16 tokens, 32 ids), 3,000 steps, 2 CPU cores, about 7" in everything


def test_unknown_profile_lists_defined_ones(tmp_path):
    with pytest.raises(SpaceError, match="profiles in this space: smoke"):
        load_space(str(write_space(tmp_path)), profile="smok")


def test_invalid_space_runs_nothing_and_exits_2(tmp_path, capsys):
    file = write_space(tmp_path, axes="axes: {depth: [0], num_heads: [2]}")
    results = tmp_path / "results"
    assert main(["run", str(file), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid search space") and "Traceback" not in err
    assert not results.exists()


def test_debug_flag_shows_the_traceback(tmp_path):
    file = write_space(tmp_path, axes="axes: {depth: [0], num_heads: [2]}")
    with pytest.raises(SpaceError):
        main(["--debug", "validate", str(file)])


def test_yaml_syntax_error_names_the_line(tmp_path):
    file = write_space(tmp_path, "question: x\naxes: {depth: [1\n")
    with pytest.raises(SpaceError, match="line"):
        load_space(str(file))


def test_missing_imagenet_fails_fast_pointing_at_a_profile_that_runs_here(monkeypatch, capsys):
    """The hint names the space's `cpu` profile (one that answers on a CPU) where it has one, else `smoke`."""
    monkeypatch.delenv("IMAGENET_ROOT", raising=False)
    assert main(["run", "vit_b_fixed_mlp"]) == 2
    err = capsys.readouterr().err
    assert "IMAGENET_ROOT" in err and "make sweep SPACE=vit_b_fixed_mlp PROFILE=cpu" in err
    assert main(["run", "xcit_m"]) == 2
    assert "make sweep SPACE=xcit_m PROFILE=smoke" in capsys.readouterr().err


def test_every_optuna_profile_survives_the_pickling_tune_does():
    """Tune pickles the searcher (sampler included) into its experiment state before any trial runs; Optuna
    5.x's NSGA-II held a lock that cannot be pickled, which crashed `sweep run local_digits --profile optuna`."""
    import pickle

    from sweep.run.search import make_searcher

    checked = []
    for name in SHIPPED:
        for profile in all_profiles(name):
            space_name, space, chosen = load_space(name, profile)
            if space.search.kind != "optuna":
                continue
            searcher = pickle.loads(pickle.dumps(make_searcher(make_plan(space_name, space, chosen))))
            checked.append((name, chosen, type(searcher._sampler).__name__))
    assert ("local_digits", "optuna", "NSGAIISampler") in checked


# --- family variants from the registry -------------------------------------------------------------------


def test_a_variant_fills_the_models_fields_from_the_registry(tmp_path):
    """``model.variant`` takes its sizes from workers.models.VARIANTS (timm's shapes); fields the file gives
    win, and a profile can override them like any other."""
    from workers.models import VARIANTS

    text = VALID.replace(
        "model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}",
        "model: {variant: tnt_b_patch16_224, mlp_dim: 1280, patch_size: 2}",
    ).replace("{axes}", "axes: {depth: [1, 2], num_heads: [5, 10]}")
    text = text.replace("baseline: {depth: 2, num_heads: 4}", "baseline: {depth: 2, num_heads: 10}")
    text = text.replace("max_steps: 2}}", "max_steps: 2}, model: {embed_dim: 320}}")
    _, space, _ = load_space(str(write_space(tmp_path, text)))
    tnt = VARIANTS["tnt_b_patch16_224"]
    assert (space.model.family, space.model.embed_dim, space.model.inner_dim) == ("tnt", 640, tnt["inner_dim"])
    assert space.model.qkv_bias is False and space.model.mlp_dim == 1280  # the file's own value wins
    assert load_space(str(write_space(tmp_path, text)), "smoke")[1].model.embed_dim == 320


def test_an_unknown_variant_is_one_issue_with_the_close_names(tmp_path):
    text = VALID.replace("model: {family: vit,", "model: {variant: deit_base_patch16_244, family: vit,")
    with pytest.raises(SpaceError) as caught:
        load_space(str(write_space(tmp_path, text.replace("{axes}", DEFAULT_AXES.replace("2, 3, 4", "2, 4")))))
    [issue] = caught.value.issues
    assert issue.path == "model" and "did you mean deit_base_patch16_224" in issue.rule


# --- shared recipes ---------------------------------------------------------------------------------------


RECIPE = """
seeds: [0]
data: {name: digits}
train: {epochs: 1, max_steps: 4, batch_size: 32, warmup_steps: 1, lr: 3.0e-3}
probes: {kappa_samples: 2, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1}
profiles:
  smoke: {description: even smaller, train: {max_steps: 2, batch_size: 16}}
"""

EXTENDING = """
extends: {recipe}
question: a space that shares its recipe
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1, 2], num_heads: [2, 4]}
baseline: {depth: 2, num_heads: 4}
train: {lr: 1.0e-3}
profiles:
  smoke: {train: {batch_size: 8}}
"""


def write_recipe(tmp_path, name="tiny_cpu", text=RECIPE):
    (tmp_path / "recipes").mkdir(exist_ok=True)
    (tmp_path / "recipes" / f"{name}.yaml").write_text(textwrap.dedent(text))


def test_a_space_extends_a_recipe_key_by_key(tmp_path):
    write_recipe(tmp_path)
    path = write_space(tmp_path, EXTENDING.replace("{recipe}", "tiny_cpu"))
    _, space, _ = load_space(str(path))
    assert (space.train.lr, space.train.max_steps, space.seeds, space.data.name) == (1.0e-3, 4, [0], "digits")
    _, smoke, _ = load_space(str(path), "smoke")  # the recipe's profile, with the space's own override on top
    assert (smoke.train.max_steps, smoke.train.batch_size, smoke.train.lr) == (2, 8, 1.0e-3)


def test_recipes_chain_and_a_loop_or_an_unknown_name_is_one_issue(tmp_path):
    write_recipe(tmp_path, "base", RECIPE)
    write_recipe(tmp_path, "faster", "extends: base\ntrain: {max_steps: 3}\n")
    _, space, _ = load_space(str(write_space(tmp_path, EXTENDING.replace("{recipe}", "faster"))))
    assert (space.train.max_steps, space.train.batch_size) == (3, 32)
    write_recipe(tmp_path, "base", "extends: faster\n")
    with pytest.raises(SpaceError, match=r"extends: recipes extend each other in a loop \(space → faster → base"):
        load_space(str(write_space(tmp_path, EXTENDING.replace("{recipe}", "faster"))))
    with pytest.raises(SpaceError, match=r"extends: must name a recipe or a space that exists.*did you mean faster"):
        load_space(str(write_space(tmp_path, EXTENDING.replace("{recipe}", "fastr"))))
