"""Experiment trackers, through Ray Tune's own logger callbacks: MLflow, TensorBoard, Weights & Biases.

``--log mlflow|tensorboard|wandb`` or a space's ``log:`` adds one Tune callback per tracker beside the
Parquet sink, which stays the record: a tracker shows the same numbers, it is never read back. Each is
Tune's own callback (``MLflowLoggerCallback``, ``TBXLoggerCallback``, ``WandbLoggerCallback``) with three
things set here:

- **What it logs.** A trial's config: the worker's trial config flattened (``model.depth``, ``train.lr``)
  with the space, config id, seed and shape. Each epoch's numbers under the ``epochs`` table's names
  (``train_loss``, ``val_top1``, ``val_score``, ``kappa_mean``, ``lr``) and each attention layer's κ
  (``kappa_layer_00``…); the final record's numbers under the ``trials`` table's names (``score``, ``top1``,
  ``params``, ``train_samples_per_s``…). The step is Tune's iteration: epoch N is step N, the final record
  step epochs + 1. The status (``ok``, ``oom``, ``pruned``…) at the end.
- **Names.** A run is ``<space>-<config_id>-seed<seed>``, tagged with ``space``, ``config_id``, ``seed``,
  ``sweep_id``, ``trial_id`` (MLflow tags; W&B tags, grouped by config id so seeds aggregate; TensorBoard:
  the run folder, and hparams at the end).
- **Failure.** A package that does not import is found before Ray starts (:func:`check_installed`): one
  line naming the ``pip install``, exit 2. A tracker that raises during the sweep (a server that does not
  answer, a full disk) is switched off with one warning, and the sweep and its Parquet rows go on.

This module imports MLflow and W&B (when installed) through Ray's integrations; ``sweep/run/tuner.py`` imports
it only for a sweep that asks for a tracker.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import numbers
import os
import socket
import time
import urllib.parse
from pathlib import Path

import pyarrow.fs
from ray.air.integrations.mlflow import MLflowLoggerCallback
from ray.air.integrations.wandb import WandbLoggerCallback
from ray.tune.logger import TBXLoggerCallback

from sweep.errors import TrackerUnavailableError
from sweep.results.schema import EPOCHS
from sweep.results.sink import RECORD_COLUMNS
from sweep.space.model import Log, MLflowSettings, TensorBoardSettings, WandbSettings
from workers.metrics import epoch_score, score_of
from workers.vocabulary import TrialStatus

log = logging.getLogger("sweep.run.trackers")

# tracker -> (the module Tune's callback needs, what pip installs for it)
PACKAGES = {
    "mlflow": ("mlflow", "mlflow-skinny"),
    "tensorboard": ("tensorboardX", "tensorboardX tensorboard"),
    "wandb": ("wandb", "wandb"),
}
EXTRA = "heads-for-depth[trackers]"
SERVER_TIMEOUT_S = 5.0  # a tracking server that does not accept a connection in this long counts as down


def check_installed(trackers: list[str]) -> None:
    """Import each tracker's package; any that fails is a :class:`TrackerUnavailableError` naming the
    ``pip install`` that brings it (one line, exit 2), raised before Ray starts or any trial runs."""
    problems = []
    for name in trackers:
        module, pip_names = PACKAGES[name]
        try:
            importlib.import_module(module)
        except Exception as exc:  # not only ImportError: a broken install can raise anything on import
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            problems.append(
                f"the {name} tracker (--log / log:) needs the {module} package, which does not import here "
                f"({reason}); install it: pip install {pip_names} (or pip install '{EXTRA}')"
            )
    if problems:
        raise TrackerUnavailableError("; ".join(problems))


def tracker_callbacks(settings: Log, space_name: str, sweep_id: str) -> list:
    """One Tune callback per tracker in ``settings.trackers``, after :func:`check_installed`."""
    check_installed(settings.trackers)
    makers = {
        "mlflow": lambda: MLflowTracker(settings.mlflow, space_name, sweep_id),
        "tensorboard": lambda: TensorBoardTracker(settings.tensorboard, sweep_id),
        "wandb": lambda: WandbTracker(settings.wandb, space_name, sweep_id),
    }
    return [makers[name]() for name in settings.trackers]


# --- what a tracker is told ------------------------------------------------------------------------------


def run_name(payload: dict) -> str:
    """``<space>-<config_id>-seed<seed>``: readable, and what the Parquet rows are keyed by."""
    return f"{payload['space']}-{payload['config_id']}-seed{payload['seed']}"


def run_tags(payload: dict, sweep_id: str, trial) -> dict[str, str]:
    return {
        "space": payload["space"],
        "config_id": payload["config_id"],
        "seed": str(payload["seed"]),
        "sweep_id": sweep_id,
        "trial_id": trial.trial_id,
        "profile": str(payload["profile"]),
        "is_baseline": str(payload["is_baseline"]).lower(),
    }


def flatten(tree: dict, prefix: str = "") -> dict:
    """Nested dicts as ``a.b.c`` keys; lists and None as JSON text, so every tracker takes them."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= flatten(value, f"{prefix}{key}.")
        elif value is None or isinstance(value, (list, tuple)):
            flat[f"{prefix}{key}"] = json.dumps(value)
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def trial_params(payload: dict) -> dict:
    """A trial's config as flat parameters: its identity and shape, then the worker's trial config."""
    identity = {k: payload[k] for k in ("space", "profile", "config_id", "seed", "is_baseline", "metric")}
    return flatten({**identity, **payload["shape"], **payload["trial_config"]})


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def report_numbers(result: dict, metric: str) -> dict[str, float]:
    """The numbers of one Tune report, named as the Parquet columns. The final report (``record``): the
    numbers the trials row takes from the worker's record (not the plan's shape and seed) and ``score``,
    the headline metric's value. An epoch's report: the epochs row's
    numbers, its ``val_score``, and each attention layer's κ as ``kappa_layer_NN``."""
    if "record" in result:
        record = result["record"]
        found = {k: v for k, v in record.items() if k in RECORD_COLUMNS}
        found["score"] = score_of(record, metric)
    elif "epoch_row" in result:
        row = result["epoch_row"]
        found = {k: v for k, v in row.items() if k in EPOCHS.names}
        found["val_score"] = epoch_score(row, metric)
        for layer in result.get("kappa_rows") or []:
            if layer.get("epoch") == row.get("epoch"):
                found[f"kappa_layer_{layer['layer']:02d}"] = layer.get("kappa")
    else:
        return {}
    return {k: float(v) for k, v in found.items() if is_number(v)}


def tracker_result(result: dict, trial) -> dict:
    """What a Tune logger callback gets instead of the raw report: the numbers, and Tune's iteration (its
    step). Tune's own bookkeeping (times, pid, host) and the nested rows stay out."""
    return {
        **report_numbers(result, trial.config["payload"]["metric"]),
        "training_iteration": result["training_iteration"],
    }


def end_status(final: str | None, failed: bool) -> str:
    """A trial's status as its Parquet row says it: the record's, else error (Tune saw it fail) or pruned
    (ended without a record: a scheduler stopped it), as the sink decides."""
    if final is not None:
        return final
    return TrialStatus.ERROR.value if failed else TrialStatus.PRUNED.value


# --- failure does not spread -----------------------------------------------------------------------------

HOOKS = (
    "setup",
    "on_trial_start",
    "on_trial_restore",
    "on_trial_save",
    "on_trial_result",
    "on_trial_complete",
    "on_trial_error",
    "on_checkpoint",
    "on_experiment_end",
)


def guarded(cls):
    """Wrap every Tune hook of a tracker's callback: the first exception switches the tracker off for the
    rest of the sweep, with one warning; the sweep, and the sink that writes its results, go on."""

    def wrap(hook: str, method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            if getattr(self, "off", False):
                return None
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                self.off = True
                log.warning(
                    "%s stopped (%s failed: %s: %s); the sweep goes on without it, every trial is still "
                    "written to the Parquet results",
                    self.tracker,
                    hook,
                    type(exc).__name__,
                    str(exc).splitlines()[0] if str(exc) else "",
                )
                return None

        return call

    for hook in HOOKS:
        setattr(cls, hook, wrap(hook, getattr(cls, hook)))
    return cls


def check_server(uri: str | None) -> None:
    """An http(s) tracking server that does not accept a connection fails here within seconds, rather than
    after MLflow's retries (minutes, with the driver's loop waiting)."""
    parsed = urllib.parse.urlparse(uri or "")
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    with socket.create_connection((parsed.hostname, port), timeout=SERVER_TIMEOUT_S):
        pass


# An MLflow run's status for a trial's: ok finished, pruned killed (stopped early), anything else failed.
MLFLOW_STATUS = {TrialStatus.OK.value: "FINISHED", TrialStatus.PRUNED.value: "KILLED"}
MLFLOW_TAG_CHARS = 5000  # the longest tag value every MLflow store takes


# --- the trackers ----------------------------------------------------------------------------------------


def batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


@guarded
class MLflowTracker(MLflowLoggerCallback):
    """Tune's MLflow callback: one run per trial in the experiment (default: the space's name), params
    and tags at the start, each report's numbers in one ``log_batch`` call, the status at the end
    (``ok`` → FINISHED, ``pruned`` → KILLED, anything else FAILED, as a run status and a ``status`` tag)."""

    tracker = "mlflow"

    def __init__(self, settings: MLflowSettings, space_name: str, sweep_id: str):
        experiment = settings.experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or space_name
        super().__init__(tracking_uri=settings.tracking_uri, experiment_name=experiment)
        self.sweep_id = sweep_id
        self._final: dict = {}  # trial -> its final record

    def setup(self, *args, **kwargs):
        check_server(self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"))
        super().setup(*args, **kwargs)  # sets MLflow's tracking URI and finds or creates the experiment
        import mlflow

        self._client = mlflow.MlflowClient(tracking_uri=mlflow.get_tracking_uri())

    def log_trial_start(self, trial):
        if trial in self._trial_runs:  # restarted after a lost worker: the same run goes on
            return
        from mlflow.entities import Param

        payload = trial.config["payload"]
        tags = {"trial_name": run_name(payload), **run_tags(payload, self.sweep_id, trial)}
        run = self.mlflow_util.start_run(run_name=run_name(payload), tags=tags)
        self._trial_runs[trial] = run.info.run_id
        params = [Param(key, str(value)) for key, value in trial_params(payload).items()]
        for batch in batches(params, 100):  # MLflow takes at most 100 params per call
            self._client.log_batch(run.info.run_id, params=batch)

    def log_trial_result(self, iteration, trial, result):
        from mlflow.entities import Metric

        if trial not in self._trial_runs:
            self.log_trial_start(trial)
        if "record" in result:
            self._final[trial] = result["record"]
        values = tracker_result(result, trial)
        step, now_ms = values.pop("training_iteration"), int(time.time() * 1000)
        metrics = [Metric(key, value, now_ms, step) for key, value in values.items()]
        for batch in batches(metrics, 1000):
            self._client.log_batch(self._trial_runs[trial], metrics=batch)

    def log_trial_end(self, trial, failed: bool = False):
        run_id = self._trial_runs.pop(trial, None)
        if run_id is None:
            return
        record = self._final.pop(trial, {})
        status = end_status(record.get("status"), failed)
        self._client.set_tag(run_id, "status", status)
        if record.get("error"):  # the failure's message, as in the trials row's `error`
            self._client.set_tag(run_id, "error", str(record["error"])[:MLFLOW_TAG_CHARS])
        self._client.set_terminated(run_id, status=MLFLOW_STATUS.get(status, "FAILED"))


@guarded
class TensorBoardTracker(TBXLoggerCallback):
    """Tune's TensorBoardX callback, writing each trial to a folder named for it:
    ``<results>/_tune/<space>-<sweep_id>/tensorboard/<run>-<trial_id>/`` (Tune's experiment folder, so the
    files go wherever Tune's state goes), or ``<dir>/<space>-<sweep_id>/<run>-<trial_id>/`` with
    ``log.tensorboard.dir``. Scalars are Tune's ``ray/tune/<name>``; the config and status are hparams."""

    tracker = "tensorboard"

    def __init__(self, settings: TensorBoardSettings, sweep_id: str):
        super().__init__()
        self.dir = settings.dir
        self.sweep_id = sweep_id
        self._final: dict = {}

    def run_folder(self, trial) -> Path:
        base = Path(self.dir) / trial.experiment_dir_name if self.dir else Path(trial.local_experiment_path)
        folder = base / ("" if self.dir else "tensorboard") / f"{run_name(trial.config['payload'])}-{trial.trial_id}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def log_trial_start(self, trial):
        if trial in self._trial_writer:
            self._trial_writer[trial].close()
        self._trial_writer[trial] = self._summary_writer_cls(str(self.run_folder(trial)), flush_secs=30)
        self._trial_result[trial] = {}

    def log_trial_result(self, iteration, trial, result):
        if "record" in result:
            self._final[trial] = result["record"].get("status")
        values = tracker_result(result, trial)
        if len(values) > 1:  # a report with numbers (Tune keeps the last one's for the hparams)
            super().log_trial_result(iteration, trial, values)

    def log_trial_end(self, trial, failed: bool = False):
        self._final[trial] = end_status(self._final.get(trial), failed)
        super().log_trial_end(trial, failed)
        self._final.pop(trial, None)

    def _try_log_hparams(self, trial, result):
        from tensorboardX.summary import hparams

        params = {**trial_params(trial.config["payload"]), "status": self._final.get(trial)}
        for summary in hparams(hparam_dict=params, metric_dict=result):
            self._trial_writer[trial].file_writer.add_summary(summary)


@guarded
class WandbTracker(WandbLoggerCallback):
    """Tune's W&B callback: one run per trial (id ``<sweep_id>-<trial_id>``), grouped by config id so W&B
    aggregates the seeds, tagged with the space, config id and seed. Offline by default: each run is
    written beside Tune's trial state (``<results>/_tune/<space>-<sweep_id>/<trial_id>/wandb/``), with no
    API key and no network; ``wandb sync`` uploads it later. Tune's callback finishes its runs after Tune's
    last copy of the trial folders to the results; this one copies the runs' folders once more then."""

    tracker = "wandb"

    def __init__(self, settings: WandbSettings, space_name: str, sweep_id: str):
        project = settings.project or os.environ.get("WANDB_PROJECT") or space_name
        extra = {"entity": settings.entity} if settings.entity else {}
        super().__init__(project=project, mode=settings.mode, **extra)
        self.sweep_id = sweep_id
        self._final: dict = {}

    def setup(self, *args, **kwargs):
        if self.kwargs.get("mode") == "offline":  # no API key needed, nothing leaves the machine
            return
        super().setup(*args, **kwargs)

    def log_trial_start(self, trial):
        payload = trial.config["payload"]
        tags = run_tags(payload, self.sweep_id, trial)
        init = {
            "id": f"{self.sweep_id}-{trial.trial_id}",
            "name": run_name(payload),
            "group": payload["config_id"],
            "tags": [f"{key}:{tags[key]}" for key in ("space", "config_id", "seed")],
            "project": self.project,
            "config": {**trial_params(payload), "sweep_id": self.sweep_id, "trial_id": trial.trial_id},
            "resume": False,
            "allow_val_change": True,
            **self.kwargs,
        }
        self._start_logging_actor(trial, [*self._exclude_results, "config"], **init)

    def on_experiment_end(self, trials, **info):
        super().on_experiment_end(trials, **info)  # waits for every run's wandb.finish()
        for trial in trials:  # Tune's last sync of the trial folders came before that: the runs' ends again
            source = Path(trial.local_path) / "wandb"
            if source.is_dir():
                destination = trial.storage.storage_filesystem
                pyarrow.fs.copy_files(str(source), f"{trial.path}/wandb", destination_filesystem=destination)

    def log_trial_result(self, iteration, trial, result):
        values = tracker_result(result, trial)
        if "record" in result:  # W&B logs numbers; the status goes to the run's config
            values["config"] = {"status": result["record"].get("status")}
        super().log_trial_result(iteration, trial, values)
