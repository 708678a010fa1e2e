import os
import tempfile

# No test may reach the network: the Hugging Face libraries read these when first imported, so they are set
# before any test module loads them. Their cache is this session's own, never the user's ~/.cache.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-home-")

import pytest
import torch

# Tests run on CPU with few threads; the CI machine has 2 cores.
torch.set_num_threads(min(2, os.cpu_count() or 1))


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
        "threads": 2,
    }
