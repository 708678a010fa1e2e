"""``search: {kind: edge}`` in a space (sweep/space/model.py's EdgeSearchSpec, sweep/space/validation.py's column
rule): its defaults, each bound with the value and the fix in the message, and a lattice column with fewer than
two depths refused, all reported at once through ``sweep validate``."""

import pytest

from sweep.cli import main
from sweep.space.loader import load_space

SPACE = """\
question: where does the trade break?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: DEPTHS, num_heads: [2, 4]}
baseline: {depth: 2, num_heads: 4}
data: {name: digits}
search: SEARCH
"""


def write(tmp_path, search: str, depths: str = "[1, 2, 3]"):
    path = tmp_path / "edgy.yaml"
    path.write_text(SPACE.replace("SEARCH", search).replace("DEPTHS", depths))
    return path


def test_the_edge_search_defaults(tmp_path):
    _, space, _ = load_space(str(write(tmp_path, "{kind: edge}")))
    search = space.search
    settings = (search.kind, search.min_seeds, search.max_seeds, search.baseline_seeds, search.alpha)
    assert settings == ("edge", 2, 5, 5, 0.05) and search.max_trials is None and search.check_ends is True
    assert search.futility is True


@pytest.mark.parametrize(
    ("search", "said"),
    [
        ("{kind: edge, min_seeds: 0}", "search.edge.min_seeds: Input should be greater than or equal to 1 (got 0)"),
        ("{kind: edge, baseline_seeds: 1}", "search.edge.baseline_seeds: Input should be greater than or equal to 2"),
        ("{kind: edge, alpha: 0}", "search.edge.alpha: Input should be greater than 0 (got 0)"),
        ("{kind: edge, alpha: 1}", "search.edge.alpha: Input should be less than 1 (got 1)"),
        ("{kind: edge, max_trials: 0}", "search.edge.max_trials: Input should be greater than or equal to 1"),
        (
            "{kind: edge, min_seeds: 4, max_seeds: 3}",
            "`min_seeds <= max_seeds` must hold, but got (min_seeds=4, max_seeds=3); raise max_seeds",
        ),
        (
            "{kind: edge, min_seed: 3}",
            "search.edge.min_seed: Extra inputs are not permitted (got 3); fix: remove `min_seed` or correct its "
            "spelling (did you mean min_seeds",
        ),
    ],
)
def test_each_rule_is_said_with_its_value(tmp_path, capsys, search, said):
    assert main(["validate", str(write(tmp_path, search))]) == 2
    err = capsys.readouterr().err
    assert said in err, err


def test_several_problems_are_reported_together(tmp_path, capsys):
    assert main(["validate", str(write(tmp_path, "{kind: edge, min_seeds: 0, alpha: 2, baseline_seeds: 0}"))]) == 2
    err = capsys.readouterr().err
    assert "(3 problems)" in err and "min_seeds" in err and "alpha" in err and "baseline_seeds" in err, err


def test_a_column_with_fewer_than_two_depths_is_an_error_that_says_so(tmp_path, capsys):
    path = write(tmp_path, "{kind: edge}", depths="[2]")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "search.kind: the edge search needs at least 2 depths in every column" in err, err
    assert "2 of 2 columns have fewer, e.g. num_heads=2" in err and "depth [2]" in err, err
    # the same space as a grid is valid: the rule is the edge search's
    path.write_text(path.read_text().replace("{kind: edge}", "{kind: grid}"))
    assert main(["validate", str(path)]) == 0
