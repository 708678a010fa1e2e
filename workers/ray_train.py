"""Launching a data-parallel trial's ranks through Ray Train (``TorchTrainer``, Train V2), from the Tune
trial that drives them, and telling a rank's own failure (data: the trial's record) from a lost worker
(Tune retries from the last checkpoint). What the numbers of such a trial mean: ``workers/distributed.py``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from workers.distributed import Rank, WorkerPlan

log = logging.getLogger("workers.ray_train")


class RankFailed(RuntimeError):
    """A rank's trial failed; carries its record (status, error, everything measured before)."""

    def __init__(self, record: dict):
        super().__init__(f"rank failed ({record.get('status')}): {record.get('error')}")
        self.record = record
        self.peer_lost = is_peer_lost(record.get("error"))

    def __reduce__(self):
        return (RankFailed, (self.record,))


def train_worker(loop_config: dict) -> None:
    """Ray Train's per-worker function: run the trial as this rank; rank 0 sends its epochs (each with
    the whole state, so the checkpoint does not depend on this process living on) and its record to the
    driver. The queue holds one item: rank 0 runs at most one epoch ahead of the checkpoint written."""
    import ray
    import ray.train
    import ray.train.torch

    from workers.trial import run_trial

    context = ray.train.get_context()
    device = ray.train.torch.get_device()
    rank = Rank(context.get_world_rank(), context.get_world_size(), device if device.type == "cuda" else None)
    outbox = loop_config["outbox"]

    def send_epoch(row: dict, kappa_rows: list[dict], snapshot: Callable[[], dict]) -> None:
        outbox.put(("epoch", row, kappa_rows, snapshot()))

    arrays = ray.get(loop_config["arrays"]) if loop_config["arrays"] is not None else None
    resume = ray.get(loop_config["resume"]) if loop_config["resume"] is not None else None
    record = run_trial(
        loop_config["config"],
        arrays=arrays,
        on_epoch=send_epoch if rank.is_lead else None,
        resume_from=resume,
        rank=rank,
    )
    if record["status"] != "ok":
        raise RankFailed(record)
    if rank.is_lead:
        outbox.put(("record", record))


# --- on the driver (the Tune trial's process) -------------------------------------------------------------


def run_data_parallel(
    config: dict,
    plan: WorkerPlan,
    arrays=None,
    on_epoch: Callable | None = None,
    resume_from: dict | None = None,
    storage_path: str | None = None,
) -> dict:
    """Train the trial ``config`` on ``plan.num_workers`` Ray Train workers and return rank 0's record.

    ``on_epoch`` gets rank 0's epoch rows and state exactly as ``run_trial`` gives them, ``resume_from``
    is such a state (every rank continues from it). Raises when a worker process was lost (Tune's restart
    then resumes from the last checkpoint); a trial that failed in a rank comes back as its record.
    """
    import ray
    from ray.util.queue import Queue

    started = time.perf_counter()
    outbox = Queue(maxsize=1, actor_options={"num_cpus": 0})
    loop_config = {
        "config": {**config, "threads": plan.threads_per_worker},
        "arrays": ray.put(arrays) if arrays is not None else None,
        "resume": ray.put(resume_from) if resume_from is not None else None,
        "outbox": outbox,
    }
    trainer = make_trainer(plan, loop_config, storage_path)
    outcome: dict = {}
    fitting = threading.Thread(target=_fit, args=(trainer, outcome), daemon=True, name="ddp-fit")
    fitting.start()
    try:
        record, relayed = relay(outbox, fitting, on_epoch)
        fitting.join()
    finally:  # also when Tune stops the trial inside on_epoch: rank 0 then fails at its next send
        outbox.shutdown(force=True)
    if "error" in outcome:
        failed = rank_failure(outcome["error"])
        if failed is None:
            raise outcome["error"]
        resumed = resume_from["loop"]["epoch"] if resume_from is not None else 0
        record = merged_only(failed.record, max([resumed, *relayed]))
    if record is None:
        raise RuntimeError("the data-parallel trial ended without a record from rank 0")
    earlier_s = resume_from["loop"]["elapsed_s"] if resume_from is not None else 0.0
    record["wall_s"] = time.perf_counter() - started + earlier_s
    return record


def make_trainer(plan: WorkerPlan, loop_config: dict, storage_path: str | None):
    """Ray Train's TorchTrainer for the plan's workers: the backend, each worker's CPUs and GPUs, and no
    restarts of its own (restarts are Tune's, from its checkpoints)."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    return TorchTrainer(
        train_worker,
        train_loop_config=loop_config,
        torch_config=TorchConfig(backend=plan.backend),
        scaling_config=ScalingConfig(
            num_workers=plan.num_workers,
            use_gpu=plan.gpus_per_worker > 0,
            resources_per_worker={"CPU": plan.cpus_per_worker, "GPU": plan.gpus_per_worker},
        ),
        run_config=RunConfig(
            name=f"ddp-{uuid.uuid4().hex[:8]}",
            storage_path=storage_path,
            failure_config=FailureConfig(max_failures=0),
        ),
    )


def _fit(trainer, outcome: dict) -> None:
    try:
        trainer.fit()
    except Exception as exc:  # handed to the driver's thread, which decides
        outcome["error"] = exc


def relay(outbox, fitting: threading.Thread, on_epoch: Callable | None) -> tuple[dict | None, list[int]]:
    """Pass rank 0's epochs to ``on_epoch`` until the run ends; rank 0's record and the epochs passed."""
    from ray.util.queue import Empty

    record, relayed = None, []
    while fitting.is_alive() or not outbox.empty():
        try:
            item = outbox.get(timeout=0.5)
        except Empty:
            continue
        if item[0] == "record":
            record = item[1]
            continue
        _, row, kappa_rows, state = item
        relayed.append(row["epoch"])
        if on_epoch is not None:
            on_epoch(row, kappa_rows, lambda state=state: state)
    return record, relayed


def merged_only(record: dict, last_epoch: int) -> dict:
    """A failed rank's record without the epoch it failed in before the ranks merged it (its
    ``train_loss`` would be that rank's share's alone): epochs and κ rows up to ``last_epoch``, and
    ``epochs_run``/``steps_run`` as of that epoch."""
    epochs = [row for row in record["epochs"] if row["epoch"] <= last_epoch]
    kappa = [row for row in record["kappa"] if row["epoch"] <= last_epoch]
    counts = {"epochs_run": epochs[-1]["epoch"], "steps_run": epochs[-1]["step"]} if epochs else {}
    return {**record, "epochs": epochs, "kappa": kappa, **counts}


def rank_failure(error: BaseException) -> RankFailed | None:
    """The trial's own failure behind a Ray Train error: the lowest rank's :class:`RankFailed` that is not
    a lost peer. None when there is none (a worker process died, and any rank that failed only lost its
    connection to it): then Tune restarts the trial from its checkpoint."""
    failures = getattr(error, "worker_failures", None) or {}
    for _, failure in sorted(failures.items()):
        found = find_rank_failed(failure)
        if found is not None and not found.peer_lost:
            return found
    return None


def find_rank_failed(error: BaseException | None) -> RankFailed | None:
    """``error`` or the exception behind it (Ray wraps a worker's exception) if it is a :class:`RankFailed`."""
    while error is not None:
        if isinstance(error, RankFailed):
            return error
        error = getattr(error, "cause", None) or error.__cause__
    return None


# What a rank's collective raises when another rank's process is gone: torch.distributed's errors, and
# gloo's RuntimeErrors, whose messages name gloo's transport. Never a trial's own outcome.
PEER_LOST_TYPES = ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError")


def is_peer_lost(error: str | None) -> bool:
    """Whether a record's ``error`` ("Type: message") is a collective that lost its peer."""
    kind, _, message = (error or "").partition(": ")
    return kind in PEER_LOST_TYPES or (kind == "RuntimeError" and "gloo/transport" in message)
