"""Several workers per trial: one trial trained data-parallel (PyTorch DDP) through Ray Train.

With ``resources.workers_per_trial: N`` (N > 1) the Tune trial becomes a driver: it starts Ray Train's
``TorchTrainer`` (Train V2, the default since Ray 2.5x) with N workers, DDP over gloo on CPU and NCCL on
CUDA, forwards rank 0's epoch rows and checkpoints to Tune exactly as a 1-worker trial reports them, and
returns rank 0's record. A 1-worker trial never comes here (no Ray Train, no process group).

What every number of such a trial means (N workers, global batch B = ``train.batch_size``):

- **Global batch.** B is the global batch. Every rank draws the same global batch a 1-worker trial draws
  (same generator, same seed, same augmentation) and trains on its share: rank r takes samples
  [r·B/N, (r+1)·B/N). So the samples, their order, the steps per epoch and the learning-rate schedule are a
  1-worker trial's. B must be divisible by N (a config error otherwise).
- **Gradients.** DDP averages the ranks' gradients, each the mean over its B/N samples: the mean over the
  global batch, as one worker computes it, up to float32 summation order. Clipping sees the averaged
  gradient. Where the loss is a mean over *scored tokens* (language models), each rank's mean is over its
  own scored tokens, so the average equals the global mean only when the ranks score equally many.
- **train_loss** (epochs table): the mean over ranks of each rank's epoch loss (itself the mean over its
  steps of its shard's loss): the mean over steps of the global batch's loss.
- **train_samples_per_s** (and ``train_tokens_per_s``): summed over workers, Σ_r of rank r's steady-state
  samples/s (each rank's own warm-up excluded): global samples per second.
- **peak_mem_bytes**: per worker. Rank 0's training step on its share (``peak_mem_batch_size`` = B/N),
  measured after training with the DDP wrapper removed (DDP's gradient buckets are the gradients
  themselves, ``gradient_as_bucket_view``), by the same probe as a 1-worker trial.
- **Held-out scores and κ**: rank 0's, on the whole held-out split and probe batch (every rank holds the
  same weights after every step; the other ranks' copies are not reported). Inference throughput and
  batch-1 latency are rank 0's too, on one worker's device (its GPU, or its share of the CPUs).
- **flops_per_sample**: unchanged (forward FLOPs of one sample do not depend on the workers).
- **wall_s**: the driver's, starting the workers included; **train_s**: rank 0's.
- **workers_per_trial**: N; ``device``: rank 0's device.

Where N workers differ from one by more than rounding: dropout and drop-path masks (each rank draws its
own), and BatchNorm statistics on CPU (per rank; on CUDA BatchNorm becomes SyncBatchNorm). No shipped
transformer has BatchNorm in its swept blocks.

Every rank draws each global batch's sample order whole (so the data generator advances as one worker's
does) and keeps its share. For in-memory data the share is a slice of the global batch; a DataLoader-backed
source (image folders) is asked for the share itself and decodes and augments only rank r's B/N samples
(``loads_shares``; ``workers.data.loading.ShareBatchSampler``): each image is decoded by one rank, not by all N.

The ranks are launched, and their failures told apart, by ``workers/ray_train.py``. Failures stay data: a
rank whose trial fails raises :class:`~workers.ray_train.RankFailed` carrying its record (so Ray Train
stops the other ranks, which would otherwise wait in an all-reduce), and the driver returns that record
(``oom``, ``diverged`` or ``error``, never retried), cut back to the last epoch the ranks merged. A worker
*process* that dies (a lost node, the OOM killer) makes the driver raise, and so does a rank whose only
failure is a collective that lost that peer: Tune restarts the trial from its last checkpoint, on fresh
workers, as it restarts a lost 1-worker trial.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from workers.batch import Inputs
from workers.batch_split import DRIVER_CPUS, RESOURCE_UNIT, BatchSplitError, per_worker_batch  # noqa: F401

log = logging.getLogger("workers.distributed")


@dataclass(frozen=True)
class WorkerPlan:
    """How one trial's resources split over its workers (built by the driver from the space's resources)."""

    num_workers: int
    cpus_per_worker: float
    gpus_per_worker: float
    threads_per_worker: int

    @classmethod
    def split(cls, cpus_per_trial: float, gpus_per_trial: float, num_workers: int) -> WorkerPlan:
        """The trial's CPUs less :data:`DRIVER_CPUS`, and its GPUs, shared equally by ``num_workers``;
        torch threads per worker: its whole CPUs, at least 1."""
        cpus = math.floor((cpus_per_trial - DRIVER_CPUS) / num_workers / RESOURCE_UNIT) * RESOURCE_UNIT
        threads = max(1, int(cpus_per_trial // num_workers))
        return cls(num_workers, round(cpus, 4), gpus_per_trial / num_workers, threads)

    @property
    def backend(self) -> str:
        return "nccl" if self.gpus_per_worker > 0 else "gloo"


@dataclass(frozen=True)
class Rank:
    """Where this process sits in the trial's process group (already initialised by Ray Train)."""

    rank: int
    world_size: int
    device: torch.device | None = None  # the worker's device as Ray Train assigned it; None: the config's

    @property
    def is_lead(self) -> bool:
        return self.rank == 0


# --- inside each worker -----------------------------------------------------------------------------------


def shard(inputs: Inputs, start: int, stop: int) -> Inputs:
    if isinstance(inputs, dict):
        return {name: tensor[start:stop] for name, tensor in inputs.items()}
    return inputs[start:stop]


class ShardedBatches:
    """A batch source whose training batches are this rank's share of each global batch; everything
    else (held-out batches, probe images, metadata, steps per epoch) is the whole source's.

    A source with ``loads_shares`` (a DataLoader: decoding is the cost) is asked for the share and loads only
    it; any other (in memory: the global batch is a cheap gather) is sliced."""

    def __init__(self, source, rank: Rank):
        self.source, self.rank = source, rank

    def train_batches(self, batch_size: int, generator: torch.Generator):
        share = per_worker_batch(batch_size, self.rank.world_size)
        if getattr(self.source, "loads_shares", False):
            yield from self.source.train_batches(batch_size, generator, shard=(self.rank.rank, self.rank.world_size))
            return
        start = self.rank.rank * share
        for inputs, labels in self.source.train_batches(batch_size, generator):
            yield shard(inputs, start, start + share), labels[start : start + share]

    def __getattr__(self, name: str):
        return getattr(self.source, name)


class DataParallel:
    """One rank's part of a data-parallel trial, installed by ``workers.trial.execute``.

    The model stays the module the probes know (its state dict, its layers); only its forward passes
    *with gradients* go through DDP (:meth:`wrap`), so training steps all-reduce their gradients while
    evaluation and κ run the plain module and need no other rank.
    """

    def __init__(self, rank: Rank, model: nn.Module, source, record, batch_size: int):
        self.rank, self.model, self.source, self.record = rank, model, source, record
        self.share = per_worker_batch(batch_size, rank.world_size)
        self.data = ShardedBatches(source, rank)
        self._ddp = self.wrap(model)

    def wrap(self, model: nn.Module) -> nn.Module:
        """Route ``model``'s gradient-enabled forward passes through DDP (an instance ``forward``); DDP's
        construction broadcasts rank 0's parameters and buffers, so every rank starts identical."""
        from torch.nn.parallel import DistributedDataParallel

        device = next(model.parameters()).device
        if device.type == "cuda":
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        ddp = DistributedDataParallel(
            _Body(model),
            device_ids=[device.index] if device.type == "cuda" else None,
            forward_sync_buffers=False,  # synced once at init; they change only in BatchNorm (SyncBatchNorm on CUDA)
            gradient_as_bucket_view=True,  # the buckets are the gradients: no second copy per worker
        )
        plain_forward = type(model).forward

        def forward(*args, **kwargs):
            if torch.is_grad_enabled():
                return ddp(*args, **kwargs)
            return plain_forward(model, *args, **kwargs)

        model.forward = forward
        return ddp

    def epoch_hook(self, lead_on_epoch: Callable | None) -> Callable:
        """The per-epoch callback every rank runs (it all-reduces, so all must): merge the epoch's numbers
        over the ranks, then hand rank 0's row and state to ``lead_on_epoch``."""

        def on_epoch(row: dict, kappa_rows: list[dict], snapshot: Callable[[], dict]) -> None:
            self.merge_epoch(row)
            if self.rank.is_lead and lead_on_epoch is not None:
                lead_on_epoch(row, kappa_rows, snapshot)

        return on_epoch

    def merge_epoch(self, row: dict) -> None:
        """``train_loss`` → mean over ranks; ``train_samples_per_s`` (and tokens/s) → sum over ranks."""
        import torch.distributed as dist

        fields = self.record.fields
        rate = fields.get("train_samples_per_s")
        device = self.rank.device if self.rank.device is not None and self.rank.device.type == "cuda" else "cpu"
        totals = torch.tensor([row["train_loss"], rate or 0.0], dtype=torch.float64, device=device)
        dist.all_reduce(totals)
        row["train_loss"] = totals[0].item() / self.rank.world_size
        if rate:
            if fields.get("train_tokens_per_s") is not None:
                fields["train_tokens_per_s"] *= totals[1].item() / rate
            fields["train_samples_per_s"] = totals[1].item()

    def finish(self) -> bool:
        """Unwrap the model (what follows runs on one rank, without collectives); True on rank 0, which
        goes on to measure, False on the others, which are done."""
        self.model.__dict__.pop("forward", None)
        self._ddp = None
        return self.rank.is_lead

    def per_worker(self, cfg):
        """``cfg`` with ``train.batch_size`` = one worker's share, for the probes after training."""
        return cfg.model_copy(update={"train": cfg.train.model_copy(update={"batch_size": self.share})})


class _Body(nn.Module):
    """What DDP wraps: the model's own (class) forward, so the model's instance ``forward`` can call DDP
    without calling itself."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        return type(self.model).forward(self.model, *args, **kwargs)
