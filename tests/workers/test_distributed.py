"""Several workers per trial (``resources.workers_per_trial``): each rank's share of the global batch, the
config rules, DDP inside a trial (resumed from a checkpoint), and a 2-worker trial through the sweep on
CPU (gloo) whose loss trajectory matches one worker's at the same global batch."""

import copy
import json

import numpy as np
import pytest
import torch
import torch.distributed as dist

from sweep.analysis.sql import run_query
from sweep.errors import SpaceError
from sweep.plan.plan import make_plan
from sweep.run.tuner import run_sweep, trial_resources
from sweep.space.loader import load_space
from workers.data.batches import TensorBatches
from workers.data.registry import data_spec
from workers.data.splits import ArraySplits
from workers.distributed import DRIVER_CPUS, Rank, ShardedBatches, WorkerPlan
from workers.trial import run_trial

# The per-epoch training loss of N workers equals one worker's at the same global batch in exact
# arithmetic: DDP averages the ranks' gradients, each the mean over an equal share, which is the mean over
# the global batch. In float32 the sums run in another order (B/2 samples per rank, then the all-reduce,
# instead of B at once): about 1e-7 relative per step. AdamW normalises the update, so over these ~30
# steps the trajectories stay within ~1e-6 (measured: 1.1e-7 and 0 on the two epochs). A wrong split or
# a missing all-reduce moves the loss by more than 1e-3.
LOSS_RTOL = 1e-5

SPACE = """
question: data-parallel test space
model: {{family: vit, embed_dim: 32, patch_size: 2}}
axes: {{depth: [2], num_heads: [4], mlp_dim: [64]}}
baseline: {{depth: 2, num_heads: 4, mlp_dim: 64}}
seeds: [0]
data: {{name: digits}}
train: {{epochs: 2, max_steps: 30, batch_size: {batch}, warmup_steps: 2, lr: 2.0e-3}}
probes: {{kappa_samples: 4, throughput_steps: 2, latency_iters: 2}}
resources: {{cpus_per_trial: 2, workers_per_trial: {workers}{gpus}}}
"""


def write_space(tmp_path, batch=64, workers=2, gpus=""):
    path = tmp_path / "ddp.yaml"
    path.write_text(SPACE.format(batch=batch, workers=workers, gpus=gpus))
    return path


def tiny_splits(rows=40) -> ArraySplits:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(rows, 1, 4, 4), dtype=np.uint8)
    labels = np.arange(rows) % 3
    return ArraySplits("tiny", images, labels, images[:8], labels[:8], 3, (0.5,), (0.25,), augment=True)


def test_ranks_train_on_disjoint_shares_that_make_up_the_one_worker_batches():
    splits, spec = tiny_splits(), data_spec(name="digits")
    source = TensorBatches(splits, spec, torch.device("cpu"))
    one_worker = list(source.train_batches(8, torch.Generator().manual_seed(3)))
    shares = [list(ShardedBatches(source, Rank(r, 4)).train_batches(8, torch.Generator().manual_seed(3))) for r in range(4)]  # fmt: skip  # noqa: E501
    assert len(one_worker) == 5 and all(len(share) == 5 for share in shares)
    for step, (images, labels) in enumerate(one_worker):  # augmentation included: same crops and flips
        assert torch.equal(torch.cat([share[step][0] for share in shares]), images)
        assert torch.equal(torch.cat([share[step][1] for share in shares]), labels)
    assert ShardedBatches(source, Rank(1, 4)).steps_per_epoch(8) == source.steps_per_epoch(8) == 5


def test_batch_not_divisible_by_the_workers_is_a_config_error_with_the_fix(tmp_path):
    with pytest.raises(SpaceError) as error:
        load_space(str(write_space(tmp_path, batch=64, workers=3)))
    assert "train.batch_size: must be divisible by resources.workers_per_trial=3" in str(error.value)
    assert "use 63 or 66" in str(error.value)


def test_workers_need_whole_gpus(tmp_path):
    with pytest.raises(SpaceError, match=r"resources: `gpus_per_trial` must be a whole multiple"):
        load_space(str(write_space(tmp_path, workers=2, gpus=", gpus_per_trial: 1")))
    _, space, _ = load_space(str(write_space(tmp_path, workers=2, gpus=", gpus_per_trial: 4")))
    assert space.resources.gpus_per_trial == 4
    assert WorkerPlan.split(2, 4, 2).gpus_per_worker == 2 and WorkerPlan.split(2, 4, 2).backend == "nccl"


def test_a_trial_reserves_its_cpus_once_driver_and_workers_together():
    plan = WorkerPlan.split(cpus_per_trial=2, gpus_per_trial=0, num_workers=2)
    assert plan.backend == "gloo" and plan.threads_per_worker == 1
    assert plan.cpus_per_worker == 0.995  # (2 - 0.01) / 2: a 2-CPU machine holds the whole trial
    assert DRIVER_CPUS + plan.num_workers * plan.cpus_per_worker <= 2
    three = WorkerPlan.split(cpus_per_trial=2, gpus_per_trial=0, num_workers=3)
    assert DRIVER_CPUS + 3 * three.cpus_per_worker <= 2 and three.cpus_per_worker == 0.6633


@pytest.fixture
def one_rank_group(tmp_path):
    """A gloo process group of one: the DDP path of a trial, in this process, without Ray."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield Rank(0, 1)
    dist.destroy_process_group()


# The digits have one channel: the patch embedding's weight gradient (C, 1, p, p) comes with a different
# stride on its size-1 dimension than DDP's bucket view, which DDP reports although a size-1 dimension's
# stride addresses nothing (RGB images give matching strides).
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Grad strides do not match bucket view strides:UserWarning")
def test_ddp_trial_resumed_from_a_checkpoint_repeats_the_plain_trial(tiny_vit_config, one_rank_group):
    train = {**tiny_vit_config["train"], "epochs": 2, "batch_size": 128, "max_steps": 16}  # 11 + 5 steps
    config = {**tiny_vit_config, "train": train}
    states = []
    keep = lambda row, kappa, snapshot: states.append(copy.deepcopy(snapshot()))  # noqa: E731 (it holds live tensors)
    plain = run_trial(config, on_epoch=keep)  # one process, no DDP: the reference
    resumed = run_trial(config, resume_from=states[0], rank=one_rank_group)  # epoch 2 through DDP
    assert plain["status"] == resumed["status"] == "ok", resumed.get("error")
    assert resumed["workers_per_trial"] == 1 and resumed["peak_mem_batch_size"] == 128
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2] and resumed["steps_run"] == 16
    for mine, reference in zip(resumed["epochs"], plain["epochs"], strict=True):
        assert mine["train_loss"] == pytest.approx(reference["train_loss"], rel=LOSS_RTOL)
        assert mine["val_loss"] == pytest.approx(reference["val_loss"], rel=LOSS_RTOL)
    assert resumed["kappa_mean"] == pytest.approx(plain["kappa_mean"], rel=1e-6)


@pytest.mark.slow
def test_two_worker_trial_through_the_sweep_matches_one_worker_at_the_same_global_batch(tmp_path, local_ray):
    path = write_space(tmp_path, batch=64, workers=2)
    name, space, profile = load_space(str(path))
    plan = make_plan(name, space, profile)
    assert trial_resources(space.resources)[0] == {"cpu": DRIVER_CPUS}
    results = tmp_path / "results"
    outcome = run_sweep(plan, results, str(path), progress=False)
    assert outcome.statuses == {"ok": 1}
    _, rows = run_query(results, "SELECT status, workers_per_trial, trial_config, train_samples_per_s FROM trials")
    (status, workers, trial_config, samples_per_s) = rows[0]
    assert (status, workers) == ("ok", 2) and samples_per_s > 0
    _, epochs = run_query(results, "SELECT epoch, train_loss, val_loss FROM epochs ORDER BY epoch")
    one_worker = run_trial(json.loads(trial_config) | {"threads": 1})
    assert [row[0] for row in epochs] == [e["epoch"] for e in one_worker["epochs"]] == [1, 2]
    for (_, train_loss, val_loss), reference in zip(epochs, one_worker["epochs"], strict=True):
        assert train_loss == pytest.approx(reference["train_loss"], rel=LOSS_RTOL)
        assert val_loss == pytest.approx(reference["val_loss"], rel=LOSS_RTOL)
