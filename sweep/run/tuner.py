"""Ray Tune wiring: a plan becomes a Tuner (grid or Optuna, optional ASHA), run on local Ray or on the
cluster at ``$RAY_ADDRESS``, with the Parquet sink as the single writer of results."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path, PurePath

import numpy as np
import optuna
import ray
import torch
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from sweep.errors import DataLoadError, SweepInterrupted
from sweep.plan.plan import Plan, devices_held
from sweep.questions import QUESTIONS
from sweep.results.sink import ParquetSink, record_space, search_json
from sweep.results.storage import resolved, tune_storage
from sweep.run.budget import DeviceHoursLimiter, DeviceHoursSummary, PlannedTrials, recorded_device_s
from sweep.run.edge import EdgeRecord, EdgeSearch, EdgeSummary, edge_record, most_trials
from sweep.run.progress import ProgressLine
from sweep.run.rerun import SearchRecord, search_record
from sweep.run.search import ResumedSearch, StudySummary, make_searcher
from sweep.run.tuned_search import TunedRecord, TunedSearch, runs_per_config, tuned_search_record
from sweep.space import validation
from sweep.space.model import REPORTED_METRICS, Resources
from workers.data.registry import load_arrays
from workers.distributed import DRIVER_CPUS, WorkerPlan
from workers.metrics import record_key
from workers.ray_train import run_data_parallel
from workers.trial import run_trial

log = logging.getLogger("sweep.run.tuner")

# Tune's own per-trial JSON/CSV/TensorBoard logs would duplicate what the sink writes.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
# Reports carry only the metrics a trial actually has (a failed trial has no top-1); the searcher and
# scheduler below handle a missing metric, so Tune's strict presence check would only get in the way.
os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
# Keeping only the latest checkpoints makes Tune snapshot its experiment state often; on short epochs
# it warns about that on every snapshot. The snapshots are cheap here (tens of KB), so the warning goes.
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
# With those logs off, Tune's end-of-run analysis warns that it found no result.json: expected, not news.
logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)


@dataclass
class SweepOutcome:
    sweep_id: str
    trials: int
    statuses: dict[str, int]
    wall_s: float
    results_dir: Path  # or the ObjectStore of an s3:// or gs:// prefix
    study: StudySummary | None = None  # an Optuna search's study and what it did
    device_hours: DeviceHoursSummary | None = None  # --max-gpu-hours: what was spent and what was not started
    edge: EdgeSummary | None = None  # an edge search's verdicts, edges and contradictions at the end
    tuning: str | None = None  # a tuned Optuna search's selection and verdict runs, in one line


# --- the trial, as Tune runs it ---------------------------------------------------------------------------


CHECKPOINT_FILE = "trial_state.pt"


def tune_trial(config: dict, arrays=None, workers: WorkerPlan | None = None) -> None:
    """Run one planned trial on a Ray worker and report to Tune.

    Every epoch reports the epoch's row and κ rows (so a scheduler can stop the trial, and so the driver
    keeps them if it does) with a checkpoint of the trial's whole state; if the worker process dies, Tune
    starts the trial again and it resumes after its last checkpointed epoch. The last report carries the
    worker's whole record. Failures are records too, never exceptions, so Tune does not retry a
    deterministic failure such as an OOM.

    ``workers``: train data-parallel on several Ray Train workers (``resources.workers_per_trial`` > 1);
    this process then only drives them (``workers/distributed.py``), and reports and checkpoints the
    same way. None: this process trains, as it always has.
    """
    payload = config["payload"]
    static = {
        "params": payload["planned_params"],
        "flops_per_sample": payload["planned_flops_per_sample"],
        "node_id": ray.get_runtime_context().get_node_id(),
    }

    def on_epoch(row: dict, kappa_rows: list[dict], snapshot) -> None:
        known = epoch_metrics(row)
        with tempfile.TemporaryDirectory() as folder:
            save_checkpoint(snapshot(), Path(folder))
            checkpoint = tune.Checkpoint.from_directory(folder)
            tune.report({**static, **known, "epoch_row": row, "kappa_rows": kappa_rows}, checkpoint=checkpoint)

    if workers is None:
        record = run_trial(payload["trial_config"], arrays=arrays, on_epoch=on_epoch, resume_from=last_checkpoint())
    else:
        trial_dir = tune.get_context().get_trial_dir()  # Ray Train's run state goes beside the trial's
        record = run_data_parallel(
            payload["trial_config"], workers, arrays, on_epoch, resume_from=last_checkpoint(), storage_path=trial_dir
        )
    final = {
        **static,
        **{name: record.get(name) for name in REPORTED_METRICS if record.get(name) is not None},
    }
    tune.report({**final, "status": record["status"], "record": record})


def epoch_metrics(row: dict) -> dict:
    """What an epoch reports to Tune, for schedulers and searchers: every held-out metric of the epoch row
    under the record's name (``val_top1`` → ``top1``, ``val_accuracy`` → ``accuracy``, ``val_loss`` as is)
    and ``kappa_mean``; metrics without a value are left out."""
    metrics = {record_key(key): value for key, value in row.items() if key.startswith("val_")}
    metrics["kappa_mean"] = row.get("kappa_mean")
    return {name: value for name, value in metrics.items() if value is not None}


def last_checkpoint() -> dict | None:
    """The trial state of this trial's last checkpoint, when Tune is restarting it after a failure."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as folder:
        return load_checkpoint(Path(folder))


def save_checkpoint(state: dict, folder: Path) -> None:
    """Write a trial state as tensors and plain data only (:func:`plain`), so that it loads with
    ``weights_only=True``: a checkpoint under the results folder can never run code when it is read."""
    torch.save(plain(state), folder / CHECKPOINT_FILE)


def load_checkpoint(folder: Path) -> dict:
    """A trial state written by :func:`save_checkpoint`; only tensors and plain data are unpickled."""
    return torch.load(folder / CHECKPOINT_FILE, map_location="cpu", weights_only=True)


def plain(value, where: str = "state"):
    """``value`` as what ``torch.load(weights_only=True)`` reads: tensors, None, bool, int, float, str,
    and dicts, lists and tuples of them. Subclasses become their base (``torch.__version__`` is a ``str``
    subclass), NumPy scalars numbers, NumPy arrays lists, datetimes ISO text, dataclasses dicts, paths text;
    anything else is a TypeError naming where it is, rather than a pickled object."""
    if value is None or torch.is_tensor(value):
        return value
    for kind in (bool, int, float, str):  # bool before int: a bool is an int
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, dict):
        return {plain(key, where): plain(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value), where)
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(
        f"{where} is of type {type(value).__name__}; a checkpoint holds only tensors and plain data "
        "(convert it where the trial state is built)"
    )


def make_scheduler(plan: Plan):
    rules = plan.space.scheduler
    if rules.kind != "asha":
        return None
    return ASHAScheduler(
        metric=rules.metric,
        mode=rules.mode,
        time_attr="training_iteration",
        max_t=plan.space.train.epochs + 1,  # +1: the final report is one more iteration
        grace_period=rules.grace_period_epochs,
        reduction_factor=rules.reduction_factor,
    )


# --- starting Ray and checking data -----------------------------------------------------------------------


def configure_output(verbose: bool) -> int:
    """What Ray, Tune and Optuna print on the terminal during a sweep, and Tune's verbosity to run at.

    Quiet (the default), the sweep's own lines and progress line are all there is: Tune's legacy reporter at
    verbosity 0 prints nothing (its newer one prints a configuration box and a results path at any
    verbosity), Ray's notice that token authentication is on (docs/clusters.md says so once) and Optuna's
    "a new study created" stay out. ``--verbose`` lets all of them through, with Tune's status table."""
    os.environ["RAY_AIR_NEW_OUTPUT"] = "1" if verbose else "0"
    quiet_level = logging.INFO if verbose else logging.ERROR
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(quiet_level)
    optuna.logging.set_verbosity(optuna.logging.INFO if verbose else optuna.logging.WARNING)
    return 1 if verbose else 0


def init_ray(num_cpus: int | None = None) -> str:
    """Connect to ``$RAY_ADDRESS`` if set, else start a local Ray bound to 127.0.0.1 with no dashboard: a new one
    (``address="local"``) even while another Ray runs on this machine, which ``ray.init()`` would join."""
    if ray.is_initialized():
        return "already initialised"
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False)
        return f"cluster at {address}"
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=True,
        logging_level=logging.WARNING,
    )
    return "local (127.0.0.1)"


def short_trial_name(trial) -> str:
    """Tune's default names embed the whole config; ours are the trial id."""
    return trial.trial_id


def new_sweep_id(plan: Plan) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{os.urandom(2).hex()}"


# --- resources -------------------------------------------------------------------------------------------


def trial_resources(resources: Resources) -> tuple[dict, dict]:
    """What Tune reserves for each trial, and the extra parameters ``tune_trial`` gets.

    One worker: the trial's CPUs and GPUs, for the process that trains. Several: the trial's process only
    drives them, so Tune reserves :data:`~workers.distributed.DRIVER_CPUS` for it, and Ray Train reserves
    the workers' shares (its own placement group, outside Tune's). Reserving them in Tune's placement
    group as well would count them twice, and a 2-CPU machine could never start a 2-worker trial.
    """
    if resources.workers_per_trial == 1:
        return {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}, {}
    plan = WorkerPlan.split(resources.cpus_per_trial, resources.gpus_per_trial, resources.workers_per_trial)
    return {"cpu": DRIVER_CPUS}, {"workers": plan}


def concurrent_trials(resources: Resources, device_hours_limited: bool = False) -> int | None:
    """``max_concurrent_trials``: the space's; else, for data-parallel trials or a run under ``--max-gpu-hours``,
    as many as the cluster's CPUs and GPUs hold whole trials (at least 1). Tune would otherwise start a driver for
    every data-parallel trial at once (each reserves only :data:`~workers.distributed.DRIVER_CPUS`), and their Ray
    Train runs would wait on one another for workers; and it would create trials ahead of free slots, before the
    device-hours limiter (sweep/run/budget.py) could see what the running ones spend."""
    if resources.max_concurrent_trials is not None or (resources.workers_per_trial == 1 and not device_hours_limited):
        return resources.max_concurrent_trials
    cluster = ray.cluster_resources()
    fits = [cluster.get("CPU", 0.0) // resources.cpus_per_trial]
    if resources.gpus_per_trial > 0:
        fits.append(cluster.get("GPU", 0.0) // resources.gpus_per_trial)
    return max(1, int(min(fits)))


# --- running ---------------------------------------------------------------------------------------------


def build_tuner(
    plan: Plan,
    trainable,
    results_dir: Path,
    sweep_id: str,
    callbacks: list,
    reuse_actors: bool,
    data_parallel: bool,
    search: tuple[ResumedSearch | EdgeSearch | DeviceHoursLimiter, int] | None = None,
    verbosity: int = 0,
) -> tune.Tuner:
    """``search``: the searcher (an Optuna or edge search's, or the device-hours limiter over any kind) and how many
    trials it hands out (None: a grid without ``--max-gpu-hours``, run as ``tune.grid_search``); ``verbosity``:
    Tune's (:func:`configure_output`)."""
    searcher, trials = search if search is not None else (None, 1)
    return tune.Tuner(
        trainable,
        param_space={"payload": tune.grid_search(plan.trials())} if search is None else {},
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=make_scheduler(plan),
            num_samples=trials,
            max_concurrent_trials=concurrent_trials(plan.space.resources, isinstance(searcher, DeviceHoursLimiter)),
            # A new actor per trial would start a new process and import torch and timm again (seconds
            # per trial); reusing them keeps the slots busy. Trials share nothing else across a reuse.
            # A data-parallel trial's process only drives its workers (fresh processes either way), and
            # a fresh one per trial takes its Ray Train run down with it when Tune stops the trial.
            reuse_actors=reuse_actors and not data_parallel,
            trial_name_creator=short_trial_name,
            trial_dirname_creator=short_trial_name,
        ),
        run_config=tune.RunConfig(
            name=f"{plan.space_name}-{sweep_id}",
            **tune_storage(results_dir),  # RESULTS/_tune: on object storage, checkpoints reach every node
            callbacks=callbacks,
            verbose=verbosity,
            failure_config=tune.FailureConfig(max_failures=3),  # a lost worker or node: retried from checkpoint
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),  # the latest, and one in case it is torn
        ),
    )


def tracker_callbacks(plan: Plan, sweep_id: str) -> list:
    """The experiment trackers the space's ``log:`` (and ``--log``) asks for, as Tune callbacks
    (``sweep/run/trackers.py``, imported only then: it imports MLflow and W&B)."""
    if not plan.space.log.trackers:
        return []
    from sweep.run.trackers import tracker_callbacks as make

    return make(plan.space.log, plan.space_name, sweep_id)


def record_plan_space(plan: Plan, results_dir: Path, sweep_id: str) -> None:
    metric = plan.space.metric
    record_space(
        results_dir,
        plan.space_name,
        sweep_id,
        plan.profile,
        plan.space.question,
        metric.name,
        metric.mode,
        metric.tolerance,
        json.dumps({q.name: record for q in QUESTIONS if (record := q.record(plan)) is not None}),
        search_json(plan),  # the search's settings, and an edge search's lattice (edge_verdicts reads it)
    )


def count_statuses(written: dict) -> dict[str, int]:
    statuses: dict[str, int] = {}
    for status in written.values():
        statuses[status] = statuses.get(status, 0) + 1
    return statuses


def load_driver_arrays(plan: Plan):
    """The space's in-memory data set (None for data each trial reads from disk); a file that cannot be read
    as the data set is a :class:`DataLoadError` (one line, exit 2), not a traceback."""
    try:
        return load_arrays(plan.space.data)
    except (ValueError, OSError, pickle.UnpicklingError) as exc:
        raise DataLoadError(f"data set {plan.space.data.name!r} cannot be loaded: {exc}") from exc


def run_sweep(
    plan: Plan,
    results_dir: Path,
    space_ref: str,
    progress: bool = True,
    extra_callbacks: list | None = None,
    reuse_actors: bool = True,
    record: SearchRecord | EdgeRecord | TunedRecord | None = None,
    trials: int | None = None,
    verbose: bool = False,
    max_gpu_hours: float | None = None,
) -> SweepOutcome:
    """Run every trial of ``plan`` (or the Optuna budget) and write their rows under ``results_dir``.

    An Optuna search resumes from ``record`` (None: what ``results_dir`` records, read here;
    ``sweep/run/search.py`` says how) and trains ``trials`` (None: what its ``num_trials`` has left), never a
    (config, seed) pair twice. An edge search likewise (``record``: an :class:`EdgeRecord`; ``trials``: the most it
    hands out, None: what ``max_trials`` leaves, else no cap; ``sweep/run/edge.py``). With nothing left to train
    it returns at once, having run nothing.
    ``extra_callbacks``: more Tune callbacks (tests use one to see exactly what trials reported).
    ``verbose``: Ray's, Tune's and Optuna's own output too (:func:`configure_output`).
    ``reuse_actors``: keep a finished trial's worker process for the next trial (the default, see below).
    Off, every trial keeps the node its actor was placed on: with reuse on, Tune hands a trial whose
    actor is still starting to an idle cached actor instead, wherever that one is.
    ``max_gpu_hours``: stop starting trials at this budget of the space's device-hours (sweep/run/budget.py).
    """
    validation.check_data(plan.space, space_ref)
    results_dir = resolved(results_dir)  # a folder made absolute, or an object-store prefix
    sweep_id = new_sweep_id(plan)
    kind = plan.space.search.kind
    grid = kind == "grid"
    if kind == "optuna":
        read = tuned_search_record if plan.space.tune is not None else search_record
        record = record if record is not None else read(results_dir, plan)
        trials = trials if trials is not None else record.remaining(plan.space.search.num_trials)
    elif kind == "edge":
        record = record if record is not None else edge_record(results_dir, plan)
        trials = trials if trials is not None else record.remaining(plan.space.search.max_trials)
    if not grid and trials is not None and trials < 1:
        return SweepOutcome(sweep_id, 0, {}, 0.0, results_dir)
    trackers = tracker_callbacks(plan, sweep_id)  # before Ray starts: a tracker's missing package is one line
    started = time.monotonic()
    tune_verbosity = configure_output(verbose)
    arrays = load_driver_arrays(plan)  # once, on the driver, before Ray starts; trials read the object store
    where = init_ray()
    log.info("ray: %s", where)
    resources, parameters = trial_resources(plan.space.resources)
    trainable = tune.with_resources(tune.with_parameters(tune_trial, arrays=arrays, **parameters), resources)
    data_parallel = "workers" in parameters
    searcher, total = make_search(plan, record, trials)
    sink = ParquetSink(results_dir, sweep_id)
    limiter = (
        None if max_gpu_hours is None else device_hours_limiter(plan, results_dir, sink, searcher, max_gpu_hours, total)
    )
    search = (limiter, total) if limiter is not None else (None if grid else (searcher, total))
    record_plan_space(plan, results_dir, sweep_id)
    callbacks = [sink, *trackers, *(extra_callbacks or [])] + ([ProgressLine(total)] if progress else [])
    interruption = Interruption()
    tuner = build_tuner(
        plan, trainable, results_dir, sweep_id, [*callbacks, interruption], reuse_actors, data_parallel, search,
        tune_verbosity,
    )  # fmt: skip
    with interruption.catching():
        try:
            tuner.fit()
        except KeyboardInterrupt:
            for callback in callbacks:
                if isinstance(callback, ProgressLine):
                    callback.on_experiment_end(trials=[])  # end the live line before the one that says why
            raise SweepInterrupted(len(sink.written)) from None
    statuses = count_statuses(sink.written)
    # Tune drives the searcher it was given, in this process
    study = searcher.summary() if isinstance(searcher, (ResumedSearch, TunedSearch)) else None
    tuning = searcher.tuning_line() if isinstance(searcher, TunedSearch) else None
    edge = searcher.summary() if isinstance(searcher, EdgeSearch) else None
    spent = limiter.summary() if limiter else None
    wall_s = time.monotonic() - started
    return SweepOutcome(sweep_id, len(sink.written), statuses, wall_s, results_dir, study, spent, edge, tuning)


def make_search(plan: Plan, record, trials: int | None) -> tuple:
    """The run's searcher (None: a grid) and how many trials Tune may start: a grid's trials, an Optuna search's
    ``trials``, an edge search's cap (else the most it can hand out); an Optuna search with ``tune:`` counts
    ``trials`` in configs, each its selection and verdict runs (sweep/run/tuned_search.py)."""
    kind = plan.space.search.kind
    if kind == "grid":
        return None, len(plan.trials())
    if kind == "edge":
        return EdgeSearch(plan, record, trials), trials if trials is not None else most_trials(plan, record)
    if isinstance(record, TunedRecord):
        return TunedSearch(make_searcher(plan, record.search), plan, record, trials), trials * runs_per_config(plan)
    return make_searcher(plan, record), trials


class Interruption(tune.Callback):
    """Ctrl-C (SIGINT) during a sweep: the first one stops it at the end of Tune's current step, after the sink has
    written every trial that finished in it, by raising KeyboardInterrupt out of ``tuner.fit()``. No running trial
    is written (Tune's own clean-up would record each as stopped early, and a resume would not run it again), and
    Tune's own handler, which prints how to resume with ``Tuner.restore``, is not installed: the same command
    continues (sweep/run/rerun.py). A second Ctrl-C stops at once."""

    def __init__(self):
        self.requested = False

    def handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def on_step_end(self, iteration, trials, **info):
        if self.requested:
            raise KeyboardInterrupt

    @contextmanager
    def catching(self):
        """This handler for SIGINT while the block runs (on the main thread only; elsewhere Ctrl-C is not ours)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # read by tuner.fit() each time it starts
        previous = signal.signal(signal.SIGINT, self.handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def device_hours_limiter(
    plan: Plan, results_dir, sink: ParquetSink, searcher, max_gpu_hours: float, planned: int
) -> DeviceHoursLimiter:
    """The run's ``planned`` trials (``searcher``'s, or the grid's in plan order) handed out while ``max_gpu_hours``
    lasts."""
    recorded_s, recorded_rows = recorded_device_s(results_dir, plan.space_name)
    inner = searcher if searcher is not None else PlannedTrials(plan.trials())
    held = devices_held(plan.space.resources)
    return DeviceHoursLimiter(inner, sink, max_gpu_hours * 3600, recorded_s, recorded_rows, held, planned)
