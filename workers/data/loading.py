"""DataLoader machinery for data read from disk by each trial (``workers.data.imagefolder``): how many
loader processes, and samplers that make augmentation and data order a function of the trial's seed alone,
whatever the number of loader processes, a resume, or a data-parallel rank."""

from __future__ import annotations

import random

import torch

# Batches each DataLoader worker keeps decoded ahead (torch's default is 2). JPEG decode times vary from image
# to image; a deeper queue absorbs that, and N workers × 4 batches of 224 px images is still small.
LOADER_PREFETCH_BATCHES = 4


def loader_workers(num_workers: int | None, cpus: int) -> int:
    """DataLoader worker processes: ``num_workers`` when given (``data.num_workers``, ``--data-workers``),
    else the trial's ``cpus`` minus one, the one left for the training process (1 CPU: 0 workers, so the
    training process loads the data itself)."""
    return max(cpus - 1, 0) if num_workers is None else num_workers


def loader_settings(num_workers: int | None, cpus: int, device_type: str) -> dict:
    """Keyword arguments for an on-disk data set's ``torch.utils.data.DataLoader``.

    - ``num_workers``: :func:`loader_workers`;
    - ``pin_memory``: on CUDA only, so batches are copied to the device asynchronously (page-locked host
      memory is useless without a device to copy to);
    - ``persistent_workers`` and ``prefetch_factor`` (:data:`LOADER_PREFETCH_BATCHES` batches per worker):
      only with workers (torch rejects them without); workers outlive an epoch, so an epoch does not start
      by forking and importing again.
    """
    workers = loader_workers(num_workers, cpus)
    settings: dict = {"num_workers": workers, "pin_memory": device_type == "cuda"}
    if workers > 0:
        settings.update(persistent_workers=True, prefetch_factor=LOADER_PREFETCH_BATCHES)
    return settings


class SeededSamples(torch.utils.data.Dataset):
    """A training set whose random augmentation is a function of (epoch seed, sample index) alone.

    Keys are ``(index, epoch_seed)`` pairs (from :class:`EpochSeededSampler`); before transforming sample
    ``index`` the Python and torch random streams (those timm's and torchvision's transforms draw from) are
    seeded from the pair, and restored afterwards, so loading in the training process (0 workers) leaves the
    trial's own streams (dropout, drop-path) as they were. Hence the same images reach the model whatever the
    number of workers, and persistent workers (whose streams a checkpoint cannot hold) do not make a resumed
    trial differ from an uninterrupted one.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple[int, int]):
        index, epoch_seed = key
        sample_seed = (epoch_seed * 1_000_003 + index) % 2**63
        python_state = random.getstate()
        random.seed(sample_seed)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(sample_seed)
                return self.dataset[index]
        finally:
            random.setstate(python_state)


class EpochSeededSampler(torch.utils.data.Sampler):
    """``(index, epoch_seed)`` keys for :class:`SeededSamples`: each epoch draws a seed and a permutation from
    ``generator`` (the trial's data generator, whose state a checkpoint holds), in the training process."""

    def __init__(self, size: int, generator: torch.Generator):
        self.size = size
        self.generator = generator

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        epoch_seed = int(torch.randint(0, 2**62, (), generator=self.generator))
        for index in torch.randperm(self.size, generator=self.generator).tolist():
            yield index, epoch_seed


class ShareBatchSampler(torch.utils.data.Sampler):
    """One rank's share of each global batch, as lists of keys for a DataLoader's ``batch_sampler``.

    ``sampler``'s keys are cut into global batches of ``batch_size`` (the ragged last one dropped), exactly as
    a DataLoader with ``batch_size`` and ``drop_last=True`` cuts them; of each, only keys
    [rank·B/N, (rank+1)·B/N) are kept (B = ``batch_size``, N = ``world_size``), so the loader decodes only
    those samples. The sampler is iterated whole, so it draws from its generator as a 1-worker loader does
    and every rank sees the same global batches. ``shard=(0, 1)``: the whole global batch."""

    def __init__(self, sampler: torch.utils.data.Sampler, batch_size: int, shard: tuple[int, int] = (0, 1)):
        rank, world_size = shard
        if batch_size % world_size or not 0 <= rank < world_size:
            raise ValueError(f"cannot take share {rank} of {world_size} from a batch of {batch_size}")
        self.batches = torch.utils.data.BatchSampler(sampler, batch_size, drop_last=True)
        share = batch_size // world_size
        self.start, self.stop = rank * share, (rank + 1) * share

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for keys in self.batches:
            yield keys[self.start : self.stop]
