"""How a trial's global batch and CPUs split over its workers, the part of ``workers/distributed.py`` that
validating a space reads: kept apart from it (it imports torch) so that ``sweep validate`` and ``sweep plan``
import none."""

from __future__ import annotations

# CPUs the trial's Tune process reserves while it drives the workers: it only waits on them and writes
# checkpoints. Small, so that a trial's workers fit where a 1-worker trial of the same resources fits.
DRIVER_CPUS = 0.01
# Ray accounts fractional resources in units of 1e-4; shares are rounded down to that so they add up.
RESOURCE_UNIT = 1e-4


class BatchSplitError(ValueError):
    """The global batch cannot be split evenly over the workers."""


def per_worker_batch(batch_size: int, world_size: int) -> int:
    """B / N, each rank's share of every global batch; :class:`BatchSplitError` unless N divides B."""
    if batch_size % world_size:
        lower = batch_size - batch_size % world_size
        raise BatchSplitError(
            f"train.batch_size={batch_size} must be divisible by workers_per_trial={world_size} (each worker "
            f"trains on batch_size / {world_size} samples of every global batch); use {lower or world_size} "
            f"or {lower + world_size}"
        )
    return batch_size // world_size
