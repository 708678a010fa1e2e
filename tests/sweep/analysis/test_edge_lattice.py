"""A plan as the edge search sees it (sweep/analysis/edge_lattice.py): one lattice per family with its columns (every
axis but depth, said by the axes that vary), and the expected cost ``sweep plan`` prints, checked against the
search traced by hand on a 4 × 2 lattice (the baseline at the deepest config of its column)."""

import pytest

from sweep.analysis.edge_lattice import expected, lattices
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.space.loader import load_space

SPACE = """\
question: where does the trade break?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1, 2, 3, 4], num_heads: [2, 4]}
baseline: {depth: 4, num_heads: 4}
data: {name: digits}
metric: {name: top1, mode: max, tolerance: 2.0}
search: {kind: edge}
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("edge") / "lattice.yaml"
    path.write_text(SPACE)
    return make_plan(*load_space(str(path)))


def ids_of(plan) -> dict[tuple[int, int], str]:
    return {(c.shape.depth, c.shape.num_heads): c.config_id for c in plan.configs}


def test_one_lattice_a_column_per_head_count_said_by_the_axes_that_vary(plan):
    (lattice,) = lattices(plan)
    ids = ids_of(plan)
    assert lattice.family == "vit" and lattice.baseline_id == ids[(4, 4)]
    columns = {cell.config_id: cell.column for cell in lattice.cells}
    assert columns[ids[(1, 2)]] == columns[ids[(4, 2)]] == (("num_heads", 2), ("head_dim", 8))
    assert columns[ids[(3, 4)]] == (("num_heads", 4), ("head_dim", 4))
    assert sorted(cell.depth for cell in lattice.cells) == [1, 1, 2, 2, 3, 3, 4, 4]


def test_the_typical_and_worst_cases_are_the_search_traced_by_hand(plan):
    ids = ids_of(plan)
    cases = expected(plan, train_s={c.config_id: 10.0 * c.shape.depth for c in plan.configs})
    # typical: depths 3 and 4 hold, 1 and 2 break. Wave 1: the baseline's 5 seeds and each column's middle of its
    # untried run (depth 2 of 1-3 beside the baseline; depth 2 of 1-4), 2 seeds each; both break, depth 1 is implied.
    # Wave 2: depth 3 of each column (the run left), holds; depth 4 of heads 2 is implied. Wave 3 (check_ends, on
    # by default): each column's ends whose verdicts are only implied, depth 1 of both and depth 4 of heads 2.
    typical = cases["typical"]
    assert typical.trials == {ids[(4, 4)]: 5, ids[(2, 4)]: 2, ids[(2, 2)]: 2, ids[(3, 4)]: 2, ids[(3, 2)]: 2,
                              ids[(1, 4)]: 2, ids[(1, 2)]: 2, ids[(4, 2)]: 2}  # fmt: skip
    assert typical.waves == 3
    assert typical.device_s == pytest.approx(5 * 40 + 2 * (20 + 20 + 30 + 30) + 2 * (10 + 10 + 40))
    # worst: every config open to max_seeds (5): nothing is implied but what the baseline implies (nothing: it is
    # its column's deepest). A config takes 4 waves (2 seeds, then one a wave to 5); a column's configs go one after
    # another: heads 4 has 3 to measure (12 waves), heads 2 has 4 (16 waves).
    worst = cases["worst"]
    assert worst.trials == {config_id: 5 for config_id in ids.values()}
    assert worst.waves == 16
    grid = cases["grid"]
    assert grid.total == 8 * 3 and grid.waves == 1 and grid.device_s == pytest.approx(3 * 2 * (10 + 20 + 30 + 40))


def test_sweep_plan_prints_the_cases_beside_the_grid(plan, tmp_path, capsys):
    path = tmp_path / "lattice.yaml"
    path.write_text(SPACE)
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "edge search over these 8 configs: 2 to 5 seeds a config, 5 for the baseline, alpha 0.05" in out
    assert ("typical: 19 trials in 3 waves (79% of the grid's trials); worst: 40 trials in 16 waves (167% of the "
            "grid's trials); the full grid at 3 seeds: 24 trials in 1 wave") in out  # fmt: skip
    assert "typical: a noise-free lattice whose edge sits mid-column, every config settling at min_seeds" in out
