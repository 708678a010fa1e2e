"""The Parquet sink: a Ray Tune Callback on the driver, the only writer of the results tables.

Workers report; the driver writes. Each trial's rows are written once, when Tune says the trial ended
(completed, stopped early, or errored), as one file per table, each written under a temporary name and
renamed into place so a crash never leaves a torn file (on object storage, ``sweep/results/storage.py``, each file
goes up in one request instead, which the store makes visible whole or not at all). Tune calls callbacks
on the driver's event loop, so the work here is kept small: a few hundred rows at most per trial. When
the sweep ends, ``sweep/results/compact.py`` merges its per-trial files into one per table.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from ray import tune

from sweep.errors import ResultsError
from sweep.questions import declared_axes, declared_labels
from sweep.results.schema import SCHEMA_VERSION, TABLES, current_schema, table_from_rows
from sweep.results.storage import is_remote, write_atomic
from workers.metrics import epoch_key, epoch_metrics, epoch_score, score_of
from workers.vocabulary import TrialStatus

log = logging.getLogger("sweep.results.sink")

# The trials columns the driver fills (from the plan, the run and Ray), never from the worker's record.
DRIVER_COLUMNS = frozenset({
    "schema_version", "space", "profile", "sweep_id", "trial_id", "config_id", "seed", "is_baseline", "family",
    "depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim", "head_dim_rule", "metric", "metric_mode",
    "score", "restarts", "node_id", "git_sha", "trial_config", "chance_score", "devices_held", "device_s",
})  # fmt: skip


def label_names() -> list[str]:
    """The questions' label columns (``Question.labels``): the driver fills them from the trial's payload."""
    return [label.name for label in declared_labels()]


def record_columns() -> tuple[str, ...]:
    """Every other trials column, taken from the worker's record (``sweep/results/schema.py`` is the one list of
    columns), as the schema and the questions stand when called."""
    driven = DRIVER_COLUMNS | set(label_names())
    return tuple(name for name in current_schema("trials").names if name not in driven)


RECORD_COLUMNS = record_columns()  # as they stand at import (the trackers' filter)
# Keys of a record that are not columns: the per-epoch and per-layer rows, written to their own tables.
RECORD_TABLES = frozenset({"epochs", "kappa"})


def epoch_columns() -> dict[str, str]:
    """What a trial that ended without a record (stopped early, lost) keeps of its last epoch row: each
    per-epoch metric's ``val_<name>`` (workers/metrics.py) as its trials column, and the epoch and step."""
    metrics = {epoch_key(name): name for name in epoch_metrics()}
    return {**metrics, "epoch": "epochs_run", "step": "steps_run"}


def git_sha() -> str:
    """The driver's commit, with ``-dirty`` when the tree has uncommitted changes; ``unknown`` outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if sha.returncode != 0:
        return "unknown"
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def parse_time(value):
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def store_table(results, table, *parts: str) -> None:
    """Write one results file at ``parts`` under ``results``: a folder's via :func:`write_atomic`, an object
    store's in one request."""
    if is_remote(results):
        results.put_parquet("/".join(parts), table)
    else:
        write_atomic(table, Path(results).joinpath(*parts))


def record_space(
    results_dir,
    space: str,
    sweep_id: str,
    profile,
    question,
    metric: str = "top1",
    metric_mode: str = "max",
    tolerance: float | None = None,
    questions: str | None = None,
    search: str | None = None,
) -> None:
    """One ``spaces`` row for a sweep (or an import): the settings the analysis reads for the space, its
    headline metric, that metric's direction and the tolerance in its units (None: the analysis default),
    what its questions record (JSON, ``Question.record``; None for an import) and its search
    (JSON, :func:`search_json`; None for an import)."""
    row = {
        "schema_version": SCHEMA_VERSION,
        "space": space,
        "sweep_id": sweep_id,
        "profile": profile,
        "question": question,
        "metric": metric,
        "metric_mode": metric_mode,
        "tolerance": tolerance,
        "questions": questions,
        "search": search,
        "written_at": datetime.now(UTC),
    }
    store_table(results_dir, table_from_rows("spaces", [row]), "spaces", space, f"{sweep_id}.parquet")


def search_json(plan) -> str:
    """The ``spaces.search`` JSON of ``plan``: its space's ``search:`` as validated (every field, whatever its
    kind), and for an edge search (``kind: edge``) its ``lattice``: every planned config as ``{config_id,
    is_baseline, depth, column}``, where ``column`` is the config's shape without its depth (family, num_heads,
    head_dim, embed_dim, mlp_dim, each declared question axis, ``Question.axes``, and the questions' labels, as the
    search's columns: ``Shape.depth_column``): the configs an edge search
    may train, untried ones included, which the ``edge_verdicts`` view lists (a config never trained has no
    trials row)."""
    search = plan.space.search.model_dump(mode="json")
    if search.get("kind") == "edge":
        search["lattice"] = [lattice_entry(config) for config in plan.configs]
    return json.dumps(search, sort_keys=True)


def lattice_entry(config) -> dict:
    """One planned config of an edge search's lattice (:func:`search_json`)."""
    shape = config.shape.as_dict()
    keys = ["family", "num_heads", "head_dim", "embed_dim", "mlp_dim", *(axis.name for axis in declared_axes())]
    column = {key: shape[key] for key in keys} | dict(config.shape.labels)  # a control of the same shape: another
    return {"config_id": config.config_id, "is_baseline": config.is_baseline, "depth": shape["depth"], "column": column}


def warn_unknown_keys(record: dict) -> None:
    """Log a record key with no column: a measurement the worker took and no table would keep."""
    unknown = sorted(set(record) - set(current_schema("trials").names) - RECORD_TABLES)
    if unknown:
        log.warning("trial record keys with no trials column (not written): %s; add them to sweep/results/schema.py", unknown)


def device_seconds(devices_held: float | None, record_wall_s: float | None, driver_wall_s: float | None) -> dict:
    """``devices_held`` and ``device_s`` (sweep/results/schema.py): wall seconds × devices held, the wall seconds
    the worker's record (every attempt's) or else the driver's; NULL where either factor is unknown (a payload from
    before devices were planned)."""
    wall_s = record_wall_s if record_wall_s is not None else driver_wall_s
    device_s = wall_s * devices_held if devices_held is not None and wall_s is not None else None
    return {"devices_held": devices_held, "device_s": device_s}


class TrialRows:
    """Build a trial's rows for the three tables from its plan payload and what the worker reported."""

    def __init__(self, payload: dict, sweep_id: str, trial_id: str, sha: str):
        self.payload, self.sweep_id, self.trial_id, self.sha = payload, sweep_id, trial_id, sha
        # The headline metric, named by the plan (payloads from before it did: top-1, higher is better).
        self.metric = payload.get("metric", "top1")
        self.metric_mode = payload.get("metric_mode", "max")

    def identity(self) -> dict:
        p = self.payload
        return {
            "schema_version": SCHEMA_VERSION,
            "space": p["space"],
            "sweep_id": self.sweep_id,
            "trial_id": self.trial_id,
            "config_id": p["config_id"],
            "seed": p["seed"],
        }

    def trial_row(
        self,
        record: dict | None,
        epochs: list[dict],
        status: str,
        error: str | None,
        restarts: int,
        driver_wall_s: float | None = None,
    ) -> dict:
        """``driver_wall_s``: the driver's seconds from the trial's first start to now, the wall time of
        ``device_s`` when the record has none (a trial stopped early or lost)."""
        p = self.payload
        row = {
            **self.identity(),
            "profile": p["profile"],
            "is_baseline": p["is_baseline"],
            **{name: p.get(name) for name in label_names()},  # the plan's labels (a payload from before one: none)
            "family": p["family"],
            **p["shape"],
            "params": p["planned_params"],
            "flops_per_sample": p["planned_flops_per_sample"],
            "git_sha": self.sha,
            "trial_config": json.dumps(p["trial_config"], sort_keys=True),
            "restarts": restarts,
            "metric": self.metric,
            "metric_mode": self.metric_mode,
            "chance_score": p.get("chance_score"),  # payloads from before chance levels: unknown
        }
        if record:
            warn_unknown_keys(record)
            row.update({k: record[k] for k in record_columns() if record.get(k) is not None})
            row["score"] = score_of(record, self.metric)
        elif epochs:  # stopped early or lost: keep what the epochs said
            last = epochs[-1]
            row.update({column: last.get(key) for key, column in epoch_columns().items()})
            row["score"] = epoch_score(last, self.metric)
            kappas = [e for e in epochs if e.get("kappa_mean") is not None]
            if kappas:
                row.update(kappa_mean=kappas[-1]["kappa_mean"], kappa_max=kappas[-1]["kappa_max"])
        row.update(status=status, error=error)
        row.update(device_seconds(p.get("devices_held"), (record or {}).get("wall_s"), driver_wall_s))
        row["started_at"], row["finished_at"] = (
            parse_time(row.get("started_at")),
            parse_time(row.get("finished_at")),
        )
        return row

    def child_rows(self, rows: list[dict]) -> list[dict]:
        return [{**self.identity(), **row} for row in rows]

    def epoch_rows(self, rows: list[dict]) -> list[dict]:
        """Epochs rows, each with ``val_score``: the headline metric's held-out value after that epoch."""
        return [{**row, "val_score": epoch_score(row, self.metric)} for row in self.child_rows(rows)]


class ParquetSink(tune.Callback):
    """Tune Callback: collects each trial's reports and writes its rows once, when the trial ends."""

    def __init__(self, results_dir, sweep_id: str):
        self.results_dir = results_dir if is_remote(results_dir) else Path(results_dir)
        self.sweep_id = sweep_id
        self.sha = git_sha()
        self._records: dict[str, dict] = {}
        self._epochs: dict[str, dict[int, dict]] = {}  # by epoch: a restarted trial may report one again
        self._kappa: dict[str, list[dict]] = {}
        self._nodes: dict[str, str] = {}  # trial_id -> Ray node that ran it last
        self._started: dict[str, float] = {}  # trial_id -> time.monotonic() at its first start
        self.written: dict[str, str] = {}  # trial_id -> status
        self.device_s: dict[str, float] = {}  # trial_id -> the device_s of its row (sweep/run/budget.py sums them)

    def on_trial_start(self, iteration, trials, trial, **info):
        self._started.setdefault(trial.trial_id, time.monotonic())

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if "record" in result:
            self._records[trial.trial_id] = result["record"]
        elif "epoch_row" in result:
            epoch = result["epoch_row"]["epoch"]
            self._epochs.setdefault(trial.trial_id, {})[epoch] = result["epoch_row"]
            kappa = self._kappa.setdefault(trial.trial_id, [])
            kappa[:] = [row for row in kappa if row["epoch"] != epoch] + list(result.get("kappa_rows") or [])
        if result.get("node_id"):
            self._nodes[trial.trial_id] = result["node_id"]

    def on_trial_complete(self, iteration, trials, trial, **info):
        record = self._records.get(trial.trial_id)
        if record is not None:
            self._write(trial, record["status"], record.get("error"))
        else:  # ended without a final record: a scheduler stopped it
            self._write(trial, TrialStatus.PRUNED.value, "stopped early by the scheduler")

    def on_trial_error(self, iteration, trials, trial, **info):
        record = self._records.get(trial.trial_id)
        if record is not None:  # the trial finished its work and failed afterwards: keep what it measured
            self._write(trial, record["status"], record.get("error"))
        else:
            self._write(trial, TrialStatus.ERROR.value, error_message(trial))

    def _write(self, trial, status: str, error: str | None) -> None:
        if trial.trial_id in self.written:
            return
        payload = trial.config["payload"]
        rows = TrialRows(payload, self.sweep_id, trial.trial_id, self.sha)
        record = self._records.pop(trial.trial_id, None)
        epochs = record["epochs"] if record else [v for _, v in sorted(self._epochs.get(trial.trial_id, {}).items())]
        kappa = record["kappa"] if record else self._kappa.get(trial.trial_id, [])
        started = self._started.get(trial.trial_id)
        driver_wall_s = time.monotonic() - started if started is not None else None
        trial_row = rows.trial_row(record, epochs, status, error, trial.num_failures, driver_wall_s)
        trial_row["node_id"] = self._nodes.get(trial.trial_id)
        tables = {
            "trials": [trial_row],
            "epochs": rows.epoch_rows(epochs),
            "kappa": rows.child_rows(kappa),
        }
        try:
            # The trials row last: it is what marks the (config, seed) pair recorded, so a driver killed between
            # these writes leaves at worst child rows of a trial that is not recorded (run again on resume, and
            # left out of every view that joins on trials), never a recorded trial whose epochs are lost.
            for table in sorted(TABLES, key=lambda name: name == "trials"):
                parts = (table, payload["space"], self.sweep_id, f"{trial.trial_id}.parquet")
                store_table(self.results_dir, table_from_rows(table, tables[table]), *parts)
        except OSError as exc:
            raise ResultsError(
                f"cannot write results under {self.results_dir}: {exc}. Rows already written are intact; "
                "free space or fix permissions, then run the same command again to continue."
            ) from exc
        self._epochs.pop(trial.trial_id, None)
        self._kappa.pop(trial.trial_id, None)
        self.written[trial.trial_id] = status
        if trial_row["device_s"] is not None:
            self.device_s[trial.trial_id] = trial_row["device_s"]


def error_message(trial) -> str:
    """The last line of the trial's error (Tune keeps the full traceback in the trial's error file)."""
    try:
        text = Path(trial.error_file).read_text() if trial.error_file else ""
    except OSError:
        text = ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:2000] if lines else "the trial's process failed without an error message"
