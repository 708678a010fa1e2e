"""Helpers several test files share. (Fixtures live in tests/conftest.py.)"""

import contextlib
import csv
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

# Torch threads per test process: one under pytest-xdist with several processes (two processes on the 2 CI cores;
# two threads each would put four on two cores and slow both), else up to two. Trials tests run pass it as
# `threads`, since a trial sets its own count.
TORCH_THREADS = 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else min(2, os.cpu_count() or 1)

# A space whose trial takes about a second: one-layer ViTs of d_model 16 on the embedded digits (90 held out), one
# training step, the cheapest probes. Tests add the question and what they vary (profiles, epochs).
TINY_SPACE_BODY = """\
model: {family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}
axes: {depth: [1], num_heads: [2, 4]}
baseline: {depth: 1, num_heads: 4}
seeds: [0]
data: {name: digits, limit_val: 90}
train: {epochs: 1, max_steps: 1, batch_size: 32, warmup_steps: 0}
probes: {kappa_samples: 2, throughput_warmup_steps: 0, throughput_steps: 1, latency_iters: 1}
resources: {cpus_per_trial: 1, max_concurrent_trials: 1}
"""


def print_views() -> Path:
    """Every analysis view's SQL in one file, as ``sweep sql --print-views > views.sql`` writes it for
    ``duckdb -init views.sql`` (written once per test process, under the system's temporary folder)."""
    from sweep.analysis.views import views_text

    path = Path(tempfile.gettempdir()) / f"sweep-views-{os.getpid()}.sql"
    path.write_text(views_text())
    return path


VIEWS = print_views()
SWEEP = str(Path(sys.executable).parent / "sweep")  # the console script of the interpreter under test


# What ``ray.init`` is given for a local Ray of two CPUs; address="local": a Ray of its own, even while a serial
# test's cluster runs beside it (ray.init() would join it).
LOCAL_RAY = {"address": "local", "num_cpus": 2, "include_dashboard": False, "_node_ip_address": "127.0.0.1",
             "log_to_driver": False}  # fmt: skip
PREEMPTION_WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"  # "0": one process fewer to start on a 2-core machine
# Environment variables that change from test to test, or that a sweep's driver sets for itself the first time
# it runs, so not a reason to start Ray anew: `sweep run` sets RAY_AIR_NEW_OUTPUT for its own output
# (sweep/run/tuner.py's configure_output), and Tune the others in its first run (they stay set).
VOLATILE_ENV = ("PYTEST_CURRENT_TEST", "RAY_AIR_NEW_OUTPUT", "TUNE_DISABLE_SIGINT_HANDLER", "KMP_INIT_AT_FORK",
                "KMP_DUPLICATE_LIB_OK")  # fmt: skip


def ray_environment() -> tuple:
    """What a Ray's worker processes inherit from the process that started it: its working folder and its
    environment (less what changes from test to test)."""
    return os.getcwd(), tuple(sorted((k, v) for k, v in os.environ.items() if k not in VOLATILE_ENV))


class SharedRay:
    """One local Ray of two CPUs for this test process, shared by every module that asks for ``local_ray``
    (tests/conftest.py): a Ray start is about 5-10 s of the 2 cores, and its first trial's worker processes
    another few seconds each to import torch, once instead of once per module. It is shared only where it would
    have been started the same: when this process's working folder or environment differs from when it started
    (a module's fixture set variables its workers must inherit, such as W&B's or S3's), it is stopped and started
    anew. A test that needs a Ray or cluster of its own stops it first (:func:`running_local_ray`,
    :meth:`stop`); the next ``local_ray`` starts it again."""

    started_in: tuple | None = None  # ray_environment() just after it started; None: not running

    @classmethod
    def start(cls) -> str:
        """The shared Ray, started unless it runs in this process's present environment; its GCS address."""
        import ray

        if cls.started_in is not None and (cls.started_in != ray_environment() or not ray.is_initialized()):
            cls.stop()
        if cls.started_in is None:
            os.environ[PREEMPTION_WATCHER] = "0"
            ray.init(**LOCAL_RAY)
            cls.started_in = ray_environment()  # after: ray.init sets variables of its own, and they stay
        return ray.get_runtime_context().gcs_address

    @classmethod
    def stop(cls) -> None:
        """Shuts the shared Ray down, if it runs (at the end of the session, or for a test's own Ray)."""
        import ray

        if cls.started_in is None:
            return
        cls.started_in = None
        ray.shutdown()
        os.environ.pop(PREEMPTION_WATCHER, None)


@contextlib.contextmanager
def running_local_ray() -> Iterator[None]:
    """A local Ray of two CPUs for the block, of its own (the shared one stopped first): ``sweep run`` and
    ``run_sweep`` find it initialised and use it."""
    import ray

    SharedRay.stop()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PREEMPTION_WATCHER, "0")
        ray.init(**LOCAL_RAY)
        try:
            yield
        finally:
            ray.shutdown()


def query(results: Path, sql: str, tolerance: float | None = None) -> list[dict]:
    """``sql`` over a results folder (as ``sweep sql`` runs it), each row a dict by column."""
    from sweep.analysis.sql import run_query

    columns, rows = run_query(results, sql, tolerance=tolerance)
    return [dict(zip(columns, row, strict=True)) for row in rows]


# --- planted trial rows, imported as CSV --------------------------------------------------------------------


def trial_row(space, depth, heads, seed, top1, width=64, status="ok", baseline=(4, 4), conditioning=None, kappa=None):
    """One planted trial; ``conditioning`` (an intervention, or None: the column left out, read as 'none')
    joins the config id, and ``kappa`` replaces the default kappa_mean of 1000 / heads."""
    row = {
        "space": space, "config_id": f"{space}-d{depth}-h{heads}", "seed": seed,
        "is_baseline": (depth, heads) == baseline, "family": "vit", "depth": depth, "num_heads": heads,
        "head_dim": width // heads, "embed_dim": width, "mlp_dim": 128, "status": status,
        "top1": top1 if status == "ok" else None, "params": 1000 * depth + heads, "train_samples_per_s": 100.0 / depth,
        "infer_samples_per_s": 300.0 / depth, "peak_mem_bytes": 10**6 * depth,
        "kappa_mean": 1000.0 / heads if kappa is None else kappa,
    }  # fmt: skip
    if conditioning is not None:
        row["conditioning"] = conditioning
        row["config_id"] += f"-{conditioning}"
        row["is_baseline"] = row["is_baseline"] and conditioning == "none"
    return row


def planted_rows(space: str, means: dict[tuple[int, int], float], noise: float) -> list[dict]:
    """Three seeds of each (depth, heads) in ``means``, their top-1 at the mean and ``noise`` either side."""
    return [trial_row(space, depth, heads, seed, mean + (seed - 1) * noise)
            for (depth, heads), mean in means.items() for seed in range(3)]  # fmt: skip


# Planted truth, baseline depth 4 × 4 heads (head_dim 16 at d_model 64), three seeds of tiny noise:
#   4 heads:  holds at depth 2, breaks at depth 1          16 heads: holds all the way down to depth 1
#   1 head:   breaks at depth 2 already                    64 heads: holds at 4, breaks at 2 and 1
PLANTED_MEANS = {(1, 1): 85, (2, 1): 85, (4, 1): 90, (1, 4): 80, (2, 4): 90, (4, 4): 90, (1, 16): 90, (2, 16): 90,
                 (4, 16): 90, (1, 64): 70, (2, 64): 70, (4, 64): 89.9}  # fmt: skip


def write_csv(path: Path, rows: list[dict]) -> Path:
    """Rows to CSV with the union of their keys as columns (a cell a row lacks is empty: null)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- whole sweeps ---------------------------------------------------------------------------------------


def run_smoke_profile(space: str, results: Path, capfd) -> list[dict]:
    """``sweep run SPACE --profile smoke --quiet`` through the CLI's entry point (``sweep.cli.main``) in this
    process, on the local Ray a test fixture started (``local_ray``): the sweeps of this test process share it
    and its warm worker processes (a subprocess would start both anew, about 15 s of two cores; tests/sweep/run/
    test_tuner_faults.py runs the console script in subprocesses only where a driver is killed or holds a lock).
    It must succeed and print none of Ray's, Tune's or Optuna's own lines. Returns the trials it recorded, by
    family, depth and number of heads."""
    from sweep.cli import main

    code = main(["run", space, "--profile", "smoke", "--results", str(results), "--quiet"])
    printed = capfd.readouterr()
    assert code == 0, printed.err[-3000:]
    noise = [line for line in RAY_TUNE_OPTUNA_NOISE if line in printed.out + printed.err]
    assert not noise, f"printed without --verbose: {noise}"
    return query(results, "SELECT * FROM trials ORDER BY family, depth, num_heads")


# What Ray, Tune and Optuna print on their own; a sweep shows it only with --verbose (sweep.run.tuner.configure_output).
RAY_TUNE_OPTUNA_NOISE = ("Configuration for experiment", "View detailed results here",
                         "Token authentication is enabled", "A new study created", "Trial status:")  # fmt: skip


# --- models ---------------------------------------------------------------------------------------------


def capture_layer_inputs(model: torch.nn.Module, layers, inputs: dict) -> dict:
    """Each probed layer's first input (its hidden states) on one forward of ``model`` over ``inputs``,
    by the layer's name, captured here (not by the probe under test)."""
    captured = {}
    handles = [
        layer.module.register_forward_pre_hook(lambda _m, args, name=layer.name: captured.__setitem__(name, args[0]))
        for layer in layers
    ]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def assert_tables_agree(results) -> None:
    """Across the three tables a sweep wrote: each trial's ``kappa_mean`` is the mean over layers of its
    ``kappa`` rows at its last epoch, and the same as its last ``epochs`` row's; its token rates are its
    sample rates × seq_len (for token sequences)."""
    from sweep.analysis.sql import run_query

    _, rows = run_query(
        results,
        """SELECT t.kappa_mean, avg(k.kappa), any_value(e.kappa_mean), t.train_tokens_per_s,
                  t.train_samples_per_s * t.seq_len
           FROM trials t
           JOIN kappa k ON k.trial_id = t.trial_id AND k.sweep_id = t.sweep_id AND k.epoch = t.epochs_run
           JOIN epochs e ON e.trial_id = t.trial_id AND e.sweep_id = t.sweep_id AND e.epoch = t.epochs_run
           WHERE t.status = 'ok' GROUP BY ALL""",
    )
    assert rows, "no finished trial has κ rows at its last epoch"
    for kappa_mean, over_layers, in_epochs, tokens_per_s, samples_times_len in rows:
        assert kappa_mean == pytest.approx(over_layers, rel=1e-12) == pytest.approx(in_epochs, rel=1e-12)
        assert tokens_per_s == (pytest.approx(samples_times_len) if samples_times_len is not None else None)


# --- stories in TinyStories' layout (tests/workers/data/test_tinystories.py, tests/workers/data/test_hub.py) --

TEXT = "once upon a time there was little girl named lily she loved to play with her red ball in the park"
WORDS = tuple(TEXT.split(" "))


def make_stories(count, seed):
    rng = np.random.default_rng(seed)
    return [
        " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=rng.integers(3, 12))) + "." for _ in range(count)
    ]


TRAIN_STORIES = make_stories(200, 0)
VAL_STORIES = make_stories(30, 1)


def write_text_layout(root, train=TRAIN_STORIES, val=VAL_STORIES):
    """The release's layout: stories separated by a line <|endoftext|>, with a multi-line story first."""
    root.mkdir(parents=True, exist_ok=True)
    for name, stories in (("TinyStories-train.txt", train), ("TinyStories-valid.txt", val)):
        (root / name).write_text("".join(f"{story}\n<|endoftext|>\n" for story in stories), encoding="utf-8")
    return root
