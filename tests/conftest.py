import os
import tempfile

# No test may reach the network: the Hugging Face libraries read these when first imported, so they are set
# before any test module loads them. Their cache is this session's own, never the user's ~/.cache.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-home-")

import pytest
import torch

from tests.helpers import TORCH_THREADS, SharedRay, trial_row, write_csv

# Tests run on CPU with few threads; the CI machine has 2 cores (one thread per pytest-xdist process).
torch.set_num_threads(TORCH_THREADS)


def pytest_collection_modifyitems(items):
    """Tests marked ``serial`` go to one pytest-xdist process, one after another (``--dist loadgroup`` in
    ``make test``): each starts and kills Ray clusters, nodes and drivers of its own (found by PID, never by
    name), which is safe beside one other test but would double the Ray start-ups two of them make at once."""
    for item in items:
        if item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.xdist_group("serial"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    """``--dist loadgroup`` groups tests by a ``@group`` suffix pytest-xdist's workers add to each node id; xdist
    3.8 writes it to ``item._nodeid``, which pytest 9.2 no longer reads (the id is ``item._id``), so no test was
    grouped: ``serial`` tests ran on both processes at once and a module fixture was built on each. Add it here,
    before the worker sends its collection, wherever it is missing (a later xdist that adds it is left alone)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})  # fmt: skip
        if not groups or item.nodeid.endswith("@" + "_".join(groups)):
            continue
        grouped = f"{item.nodeid}@{'_'.join(groups)}"
        if hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(grouped)
        else:
            item._nodeid = grouped


@pytest.fixture(autouse=True, scope="session")
def private_data_cache(tmp_path_factory):
    """Generated data (ListOps) is cached under $SWEEP_CACHE_DIR: one folder for this test session, never
    the user's ~/.cache. Set before any Ray worker starts, so workers see it too."""
    os.environ["SWEEP_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield


@pytest.fixture
def tiny_vit_config():
    """A small ViT on the embedded digits: trains in seconds on a CPU."""
    return {
        "model": {
            "family": "vit",
            "depth": 2,
            "num_heads": 4,
            "embed_dim": 32,
            "mlp_dim": 64,
            "patch_size": 2,
        },
        "data": {"name": "digits"},
        "train": {"epochs": 1, "batch_size": 64, "max_steps": 8, "warmup_steps": 2},
        "probes": {"kappa_samples": 4, "throughput_steps": 2, "latency_iters": 2},
        "seed": 0,
        "threads": TORCH_THREADS,
    }


@pytest.fixture(scope="session")
def shared_ray():
    """tests/helpers.py's :class:`SharedRay`, shut down at the end of the session (each pytest-xdist process
    has its own)."""
    yield SharedRay
    SharedRay.stop()


@pytest.fixture(scope="module")
def local_ray(shared_ray):
    """A local Ray of two CPUs for every test of a module that asks for it: this process's shared one
    (:class:`tests.helpers.SharedRay`), started anew only where the environment changed. Yields its GCS
    address."""
    yield shared_ray.start()


# The space `planted_adaptive` plants rows of (tests/sweep/analysis/test_adaptive.py,
# tests/sweep/run/test_rerun_selections.py).
ADAPTIVE_SPACE = """\
question: which depths hold?
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1, 2, 4], num_heads: [1, 4]}
baseline: {depth: 4, num_heads: 4}
seeds: [0, 1]
data: {name: digits}
train: {epochs: 1}
"""

# Planted (depth, heads): scores per seed. Tolerance 0.5 points (top-1's default):
#   4 × 4 baseline; 2 × 4 holds and 1 × 4 breaks, both significant (settled);
#   4 × 1 one seed (open: single seed), 2 × 1 seeds far apart (open: inconclusive), 1 × 1 never ran (open).
ADAPTIVE_PLANTED = {(4, 4): [90.0, 90.1], (2, 4): [90.0, 90.1], (1, 4): [60.0, 60.1], (4, 1): [89.8],
                    (2, 1): [80.0, 95.0]}  # fmt: skip


@pytest.fixture
def planted_adaptive(tmp_path, monkeypatch):
    """The space ``adaptive`` (found through $SWEEP_SPACES_DIR) and a results folder of the rows planted above:
    returns its plan, the results folder and the config ids by (depth, heads)."""
    from sweep.plan.plan import make_plan
    from sweep.results.importer import import_file
    from sweep.space.loader import load_space
    from sweep.space.model import SPACES_DIR_ENV

    spaces = tmp_path / "spaces"
    spaces.mkdir()
    (spaces / "adaptive.yaml").write_text(ADAPTIVE_SPACE)
    monkeypatch.setenv(SPACES_DIR_ENV, str(spaces))
    plan = make_plan(*load_space("adaptive"))
    ids = {(c.shape.depth, c.shape.num_heads): c.config_id for c in plan.configs}
    rows = []
    for (depth, heads), scores in ADAPTIVE_PLANTED.items():
        for seed, score in enumerate(scores):
            row = trial_row("adaptive", depth, heads, seed, score, width=16)
            rows.append({**row, "config_id": ids[(depth, heads)], "mlp_dim": 32})
    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "planted.csv", rows), results)
    return plan, results, ids
