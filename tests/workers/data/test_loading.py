"""Data pipelines: loader settings from the trial's CPUs, per-sample seeded augmentation (the same images
whatever the worker count), and the data wait fraction each trial records."""

import random
import time

import duckdb
import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from sweep.analysis.report.data import data_wait_fractions
from sweep.analysis.report.sections import loader_bound_section
from sweep.cli.parsers import build_parser
from sweep.cli.run import load_plan
from sweep.plan.plan import trial_payload
from sweep.results.schema import TRIALS
from sweep.results.sink import RECORD_COLUMNS
from workers.config import TrainSpec
from workers.data.imagefolder import FolderBatches
from workers.data.loading import LOADER_PREFETCH_BATCHES, EpochSeededSampler, SeededSamples, loader_settings
from workers.data.registry import data_spec
from workers.distributed import Rank, ShardedBatches
from workers.train import make_context, train_one_epoch
from workers.trial import run_trial

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("num_workers", "cpus", "device", "expected"),
    [
        # derived: one CPU stays with the training process
        (None, 8, "cuda", {"num_workers": 7, "pin_memory": True, "persistent_workers": True}),
        (None, 2, "cpu", {"num_workers": 1, "pin_memory": False, "persistent_workers": True}),
        (None, 1, "cpu", {"num_workers": 0, "pin_memory": False}),  # loads in the training process
        # --data-workers / data.num_workers wins over the CPU count
        (3, 16, "cpu", {"num_workers": 3, "pin_memory": False, "persistent_workers": True}),
        (0, 16, "cuda", {"num_workers": 0, "pin_memory": True}),
    ],
)
def test_loader_settings_follow_the_trial_cpus(num_workers, cpus, device, expected):
    if expected["num_workers"] > 0:
        expected = {**expected, "prefetch_factor": LOADER_PREFETCH_BATCHES}
    assert loader_settings(num_workers, cpus, device) == expected


def write_jpeg_folders(root, classes=("a", "b"), per_class=4, size=20):
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for name in classes:
            (root / split / name).mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(
                    root / split / name / f"{i}.jpg"
                )
    return root


def first_epoch(root, workers: int, seed: int = 7) -> list[torch.Tensor]:
    spec = data_spec(name="imagefolder", root=str(root), img_size=16, num_workers=workers)
    batches = FolderBatches(spec, CPU, cpus=2)
    return [images for images, _ in batches.train_batches(4, torch.Generator().manual_seed(seed))]


def test_augmentation_does_not_depend_on_loader_workers_and_spares_the_trial_rng(tmp_path):
    """Random crops and flips are seeded per (epoch, sample): 0 and 1 workers give the same pixels, and
    loading in the training process leaves its torch and Python streams where they were."""
    root = write_jpeg_folders(tmp_path)
    torch.manual_seed(123)
    random.seed(5)
    in_process = first_epoch(root, workers=0)
    assert torch.rand(()).item() == torch.rand((), generator=torch.Generator().manual_seed(123)).item()
    assert random.random() == random.Random(5).random()
    one_worker = first_epoch(root, workers=1)
    assert len(in_process) == len(one_worker) == 2
    assert all(torch.equal(a, b) for a, b in zip(in_process, one_worker, strict=True))
    other_seed = first_epoch(root, workers=0, seed=8)  # the augmentation is random: another seed, other pixels
    assert not all(torch.equal(a, b) for a, b in zip(in_process, other_seed, strict=True))


class CountingSet(torch.utils.data.Dataset):
    """A data set that records every index read (each read decodes and augments one image)."""

    def __init__(self, dataset):
        self.dataset, self.reads = dataset, []

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        self.reads.append(index)
        return self.dataset[index]


def folder_source(root, reads: bool = False, workers: int = 0) -> FolderBatches:
    spec = data_spec(name="imagefolder", root=str(root), img_size=16, num_workers=workers)
    source = FolderBatches(spec, CPU, cpus=1)
    if reads:
        source.train_set = CountingSet(source.train_set)  # loaders are built on first use, after this
    return source


def epochs_of(batches, epochs: int, seed: int = 7) -> list[list[tuple]]:
    """``epochs`` epochs drawn from one generator, as a trial draws them."""
    generator = torch.Generator().manual_seed(seed)
    return [list(batches.train_batches(4, generator)) for _ in range(epochs)]


def reference_epochs(root, epochs: int, seed: int = 7) -> list[list[tuple]]:
    """One worker's global batches as the loader built them before ranks could load shares: a plain
    DataLoader with batch_size and drop_last over the seeded sampler."""
    source, generator = folder_source(root), torch.Generator().manual_seed(seed)
    sampler = EpochSeededSampler(len(source.train_set), generator)
    loader = torch.utils.data.DataLoader(SeededSamples(source.train_set), batch_size=4, sampler=sampler, drop_last=True)
    return [list(loader) for _ in range(epochs)]


def test_two_ranks_decode_shares_that_make_up_the_one_worker_global_batches(tmp_path):
    """Rank 0's then rank 1's batch at each step, over two epochs, is the global batch a 1-worker loader
    yields, pixels (augmentation included) and labels alike; rank 1 loads in a worker process."""
    root = write_jpeg_folders(tmp_path, per_class=5)  # 10 images, batch 4: 2 steps, 2 images dropped
    reference = reference_epochs(root, epochs=2)
    one_worker = epochs_of(folder_source(root), epochs=2)
    ranks = [epochs_of(ShardedBatches(folder_source(root, workers=r), Rank(r, 2)), epochs=2) for r in range(2)]
    assert [len(epoch) for epoch in reference] == [2, 2]
    assert not torch.equal(reference[0][0][0], reference[1][0][0])  # the second epoch is another draw
    for epoch, global_batches in enumerate(reference):
        for step, (images, labels) in enumerate(global_batches):
            assert torch.equal(one_worker[epoch][step][0], images) and torch.equal(one_worker[epoch][step][1], labels)
            shares = [rank[epoch][step] for rank in ranks]
            assert [len(share_labels) for _, share_labels in shares] == [2, 2]
            assert torch.equal(torch.cat([share_images for share_images, _ in shares]), images)
            assert torch.equal(torch.cat([share_labels for _, share_labels in shares]), labels)


def test_each_rank_decodes_only_its_share_of_the_epoch(tmp_path):
    """Over an epoch of 3 global batches of 4 (12 images), each of 2 ranks reads 6 images: the half of every
    global batch it trains on, read in that order, and the two ranks' reads are the epoch's 12 once each."""
    root = write_jpeg_folders(tmp_path, per_class=6)
    order = torch.Generator().manual_seed(7)
    torch.randint(0, 2**62, (), generator=order)  # the sampler draws the epoch's seed first
    permutation = torch.randperm(12, generator=order).tolist()
    reads = []
    for rank in range(2):
        source = folder_source(root, reads=True)
        assert len(epochs_of(ShardedBatches(source, Rank(rank, 2)), epochs=1)[0]) == 3
        reads.append(source.train_set.reads)
    assert reads[0] == [i for step in range(3) for i in permutation[4 * step : 4 * step + 2]]
    assert reads[1] == [i for step in range(3) for i in permutation[4 * step + 2 : 4 * step + 4]]
    whole = folder_source(root, reads=True)
    epochs_of(whole, epochs=1)
    assert whole.train_set.reads == permutation  # one worker reads the whole global batch, as before


def test_data_wait_fraction_is_the_share_of_the_window_spent_in_next():
    """A source that sleeps ``fetch_s`` before each batch and a model that sleeps ``step_s`` in each forward:
    the wait covers at least the sleeps in fetches, the rest of the window at least the sleeps in steps, and
    the fraction lands near fetch_s / (fetch_s + step_s) = 0.5."""
    fetch_s, step_s, steps, warmup = 0.08, 0.08, 6, 1

    class SleepyModel(nn.Linear):
        def forward(self, x):
            time.sleep(step_s)
            return super().forward(x)

    def batches():
        for _ in range(steps):
            time.sleep(fetch_s)
            yield torch.randn(4, 3), torch.randint(0, 2, (4,))

    ctx = make_context(SleepyModel(3, 2), TrainSpec(warmup_steps=0), CPU, total_steps=100)
    stats = train_one_epoch(ctx, batches(), warmup_steps_left=warmup)
    timed = steps - warmup
    assert stats.timed_samples == 4 * timed
    assert stats.data_wait_s >= timed * fetch_s  # time.sleep never returns early
    assert stats.timed_s - stats.data_wait_s >= timed * step_s
    assert 0.3 < stats.data_wait_fraction < 0.7
    assert ctx.data_wait_fraction() == pytest.approx(stats.data_wait_s / stats.timed_s)


@pytest.mark.slow
def test_trial_records_data_wait_fraction_and_the_sink_keeps_it(tiny_vit_config):
    record = run_trial(tiny_vit_config)
    assert record["status"] == "ok", record["error"]
    assert 0.0 <= record["data_wait_fraction"] <= 1.0
    assert record["compile_s"] is None  # train.compile is off
    assert {"data_wait_fraction", "compile_s"} <= set(TRIALS.names) & set(RECORD_COLUMNS)


def test_report_names_loader_bound_trials():
    con = duckdb.connect()
    con.execute(
        "CREATE VIEW trials AS FROM (VALUES ('s', 0.5), ('s', 0.25), ('s', 0.01), ('s', NULL), ('other', 0.9)) "
        "AS t(space, data_wait_fraction)"
    )
    section = loader_bound_section(data_wait_fractions(con, "s"))
    assert "2 of 3 trials" in section and "worst 50%" in section
    assert loader_bound_section([0.5, 0.25, 0.01]) == section  # the section reads the gathered fractions only
    con.execute("CREATE OR REPLACE VIEW trials AS FROM (VALUES ('s', 0.01)) AS t(space, data_wait_fraction)")
    assert loader_bound_section(data_wait_fractions(con, "s")) == ""
    con.execute("CREATE OR REPLACE VIEW trials AS FROM (VALUES ('s', 1)) AS t(space, top1)")  # older results
    assert loader_bound_section(data_wait_fractions(con, "s")) == ""


def test_data_workers_flag_reaches_the_trial_configs_and_keeps_config_ids():
    base = load_plan(build_parser().parse_args(["run", "local_digits"]))
    flagged = load_plan(build_parser().parse_args(["run", "local_digits", "--data-workers", "3"]))
    assert [c.config_id for c in flagged.configs] == [c.config_id for c in base.configs]  # a machine setting
    assert trial_payload(flagged, flagged.configs[0], 0)["trial_config"]["data"]["num_workers"] == 3
    assert trial_payload(base, base.configs[0], 0)["trial_config"]["data"]["num_workers"] is None  # CPUs - 1
