"""bench/edge_replay.py: the replay draws each config's recorded seeds without replacement (a failed seed stays
failed), and the reference verdicts and edges follow their definitions, checked against scipy's own tests on a tiny
planted lattice."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("edge_replay", ROOT / "bench" / "edge_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["edge_replay"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = load_bench()
Cell = bench.Cell

# One column (depths 1-3, the baseline at 3) beside a one-config column. Tolerance 2 points, higher is better.
BASELINE = [90.0, 91.0, 89.0, 90.5, 89.5]
POOLS = {
    "d1": [70.0, 72.0, None, 71.0, 69.0],  # far below: breaks; one failed seed
    "d2": [90.0, 89.0, 91.0, 90.0, 90.5],  # at the baseline: holds
    "d3": BASELINE,
    "other": [85.0, 89.5, None, None, 87.0],  # near the bound: neither
}


def tiny_lattice():
    column = (("num_heads", 4),)
    cells = [Cell("d1", column, 1), Cell("d2", column, 2), Cell("d3", column, 3), Cell("other", (("num_heads", 1),), 3)]
    costs = {"d1": 1.0, "d2": 2.0, "d3": 3.0, "other": 5.0}
    lattice = bench.Lattice("tiny", cells, "d3", 2.0, "max", {k: list(v) for k, v in POOLS.items()}, costs)
    finished = {k: [x for x in v if x is not None] for k, v in POOLS.items()}
    lattice.reference = bench.pooled_verdicts(finished, "d3", 2.0, "max")
    return lattice


def test_the_replay_draws_each_configs_seeds_without_replacement():
    lattice = tiny_lattice()
    settings = bench.EdgeSettings(tolerance=2.0, mode="max", check_ends=True)
    orders = []
    for r in range(6):
        result = bench.replay(lattice, settings, random.Random(r), width=3)
        drawn: dict[str, list] = {}
        for obs in result.observations:
            drawn.setdefault(obs.config_id, []).append(obs.score)
        for config_id, scores in drawn.items():
            pool = Counter(map(repr, POOLS[config_id]))
            assert not Counter(map(repr, scores)) - pool, f"{config_id} drew a seed twice or one it never recorded"
        # No (config, seed) is trained twice, and the cost is each trial's config's cost.
        pairs = [(o.config_id, o.seed) for o in result.observations]
        assert len(pairs) == len(set(pairs))
        assert result.device_s == pytest.approx(sum(lattice.cost_s[o.config_id] for o in result.observations))
        assert result.state.finished
        orders.append(tuple(drawn["d3"]))
    assert len(drawn["d3"]) == 5  # the baseline's five seeds, each once
    assert len(set(orders)) > 1  # the draw order changes with the replay's random state


def test_a_failed_recorded_seed_stays_failed():
    lattice = tiny_lattice()
    lattice.pools["d1"] = [None] * 5  # every recorded seed failed: the config can only fail
    result = bench.replay(lattice, bench.EdgeSettings(tolerance=2.0, mode="max"), random.Random(0))
    scores = [o.score for o in result.observations if o.config_id == "d1"]
    assert scores and all(s is None for s in scores)
    assert result.state.cells["d1"].verdict == "failed"


def pooled_interval(xs, base, groups, confidence=0.95):
    """An independent pooled-t interval: s_p² from every group's deviations, df Σ(n − 1)."""
    df = sum(len(g) - 1 for g in groups)
    sp = math.sqrt(sum(((g - g.mean()) ** 2).sum() for g in map(_array, groups)) / df)
    half = stats.t.ppf(0.5 + confidence / 2, df) * sp * math.sqrt(1 / len(xs) + 1 / len(base))
    gain = sum(xs) / len(xs) - sum(base) / len(base)
    return gain - half, gain + half


def _array(xs):
    import numpy as np

    return np.asarray(xs, dtype=float)


def test_the_reference_verdicts_and_edge_on_a_planted_lattice():
    lattice = tiny_lattice()
    finished = {k: [x for x in v if x is not None] for k, v in POOLS.items()}
    groups = [g for g in finished.values() if len(g) >= 2]
    for config_id, expected in (("d1", "breaks"), ("d2", "holds"), ("other", None)):
        lo, hi = pooled_interval(finished[config_id], BASELINE, groups)
        independent = "holds" if lo >= -2.0 else "breaks" if hi < -2.0 else None
        assert independent == expected
        assert lattice.reference[config_id] == expected
    edges = bench.lattice_edges(lattice, lattice.reference)
    assert edges[(("num_heads", 4),)] == (1, 2)  # breaks at depth 1, holds from depth 2
    assert edges[(("num_heads", 1),)] is None  # its one config is neither


@pytest.mark.parametrize(
    ("verdicts", "edge"),
    [
        (["breaks", "holds", "holds"], (1, 2)),
        (["holds", "holds", "holds"], (None, 1)),
        (["breaks", "breaks", "breaks"], (3, None)),
        (["breaks", None, "holds"], None),  # an undecided config sits in the bracket
        (["holds", "breaks", None], None),  # a break deeper than a hold: not monotone, no edge
        ([None, "holds", "breaks"], None),
    ],
)
def test_a_columns_edge_follows_the_definition(verdicts, edge):
    assert bench.column_edge_of([1, 2, 3], verdicts) == edge


def test_the_full_grids_welch_verdict_is_scipys_welch_interval():
    xs, base = [82.0, 85.0, 83.5], [90.0, 91.0, 89.0]
    ci = stats.ttest_ind(xs, base, equal_var=False).confidence_interval(0.95)
    expected = "holds" if ci.low >= -2.0 else "breaks" if ci.high < -2.0 else None
    assert bench.welch_verdict(xs, base, 2.0, "max") == expected == "breaks"
    # For a metric where lower is better the gain flips sign.
    assert bench.welch_verdict([1.0, 1.1, 0.9], [1.0, 1.05, 0.95], 0.5, "min") == "holds"
    assert bench.welch_verdict([5.0], base, 2.0, "max") is None  # one seed: no interval


def test_a_planted_lattice_is_deterministic_and_its_reference_is_the_planted_truth():
    def make(seed):
        return bench.planted((4, 4), 0, 3, "x", 0, [1.0], random.Random(seed), 0.1, 0.0)

    a, b = make(7), make(7)
    assert a.pools == b.pools and a.truth == b.truth and a.reference == b.reference
    for cells in a.columns().values():
        verdicts = [a.truth[c.config_id] for c in cells]
        assert bench.column_edge_of([c.depth for c in cells], verdicts) is not None  # monotone: an edge exists
    assert a.truth[a.baseline_id] == a.reference[a.baseline_id] == "holds"
