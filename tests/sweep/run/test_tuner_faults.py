"""Faults: nothing lost, nothing twice. Each test ends by proving the set of trial rows is exactly the
expected set of (config_id, seed) pairs."""

import os
import signal
import subprocess
import time

import pytest
import ray
from ray import tune

from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.run.tuner import run_sweep
from sweep.space.loader import load_space
from tests.helpers import SWEEP, SharedRay

# Every test here runs whole sweeps (slow). Those that kill drivers, workers or Ray nodes are `serial`: run
# beside other Ray tests, a killed node can take a neighbour's cluster with it, so make test runs them alone
# after the parallel part. The others run in the parallel part, on the local Ray a fixture started.
pytestmark = [pytest.mark.slow]

SPACE = """
question: fault-test space
model: {{family: vit, embed_dim: 16, patch_size: 2}}
axes: {{depth: [1, 2], num_heads: [2, 4], mlp_dim: {mlps}}}
baseline: {{depth: 2, num_heads: 4, mlp_dim: 32}}
seeds: {seeds}
data: {{name: digits}}
train: {{epochs: {epochs}, batch_size: 128, lr: {lr}, warmup_steps: 1, grad_clip_norm: {clip}}}
probes: {{kappa_samples: 2, throughput_steps: 1, latency_iters: 1, memory: false}}
resources: {{cpus_per_trial: 1}}
"""


def write_space(tmp_path, name="faults", mlps="[32]", seeds="[0]", epochs=2, lr=1e-3, clip=1.0):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPACE.format(mlps=mlps, seeds=seeds, epochs=epochs, lr=lr, clip=clip))
    return path


def planned_pairs(path, seeds=None):
    name, space, profile = load_space(str(path))
    plan = make_plan(name, space, profile, seeds)
    return plan, {(c.config_id, s) for c in plan.configs for s in plan.seeds}


def recorded(results, space="faults"):
    _, rows = run_query(results, f"SELECT config_id, seed, status, restarts FROM trials WHERE space = '{space}'")
    return rows


def assert_exactly(results, expected: set, space="faults"):
    rows = recorded(results, space)
    pairs = [(config_id, seed) for config_id, seed, _, _ in rows]
    assert len(pairs) == len(set(pairs)), "a (config, seed) pair was written twice"
    assert set(pairs) == expected, "rows missing or unexpected"
    return rows


def run_here(capfd, *args) -> subprocess.CompletedProcess:
    """``sweep ARGS`` through the CLI's entry point in this process, on the local Ray a fixture started
    (``local_ray``, shared with the other modules of this test process), answered as ``subprocess.run`` would:
    a driver that is not killed and runs beside no other of this process needs no Python, torch and Ray start
    of its own (about 10-15 s of two cores each). Drivers that are killed, or hold the lock while another
    tries it, are processes of their own (``SWEEP``)."""
    code = main([str(arg) for arg in args])
    printed = capfd.readouterr()
    return subprocess.CompletedProcess(["sweep", *args], code, printed.out, printed.err)


@pytest.mark.serial
def test_driver_killed_mid_sweep_then_rerun_completes_it(tmp_path, local_ray, capfd):
    path = write_space(tmp_path, seeds="[0, 1]", epochs=3)
    _, expected = planned_pairs(path)
    results = tmp_path / "results"
    driver = subprocess.Popen([SWEEP, "run", str(path), "--results", str(results), "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while len(list(results.glob("trials/faults/*/*.parquet"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver, its local Ray and the trials in flight
    driver.wait()
    partial = recorded(results)
    assert 2 <= len(partial) < len(expected)
    finished = run_here(capfd, "run", path, "--results", results, "--quiet")  # another driver: this process
    assert finished.returncode == 0, finished.stderr
    assert f"{len(partial)} of {len(expected)} trials already recorded" in finished.stderr
    assert_exactly(results, expected)
    again = run_here(capfd, "run", path, "--results", results, "--quiet")
    assert again.returncode == 0 and "nothing missing" in again.stderr
    assert_exactly(results, expected)


def test_torn_temporary_file_is_ignored_and_nothing_is_lost(tmp_path, local_ray, capfd):
    path = write_space(tmp_path)
    _, expected = planned_pairs(path)
    results = tmp_path / "results"
    torn = results / "trials" / "faults" / "old-sweep" / ".abc.parquet.1234.tmp"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b"PAR1 half a file")
    done = run_here(capfd, "run", path, "--results", results, "--quiet")
    assert done.returncode == 0, done.stderr
    assert_exactly(results, expected)
    assert torn.exists()  # left alone: not ours to delete, and never read
    # the sweep compacted its per-trial files when it ended: one file per table for its 4 trials
    assert "[sweep] compacted faults: 12 files merged into 3" in done.stderr
    names = sorted(p.name for p in results.glob("*/faults/*/*.parquet"))  # the 12 merged kept for the retention
    assert [name[:10] for name in names if name.startswith("compacted-")] == ["compacted-"] * 3 and len(names) == 15


def test_two_reruns_at_once_the_second_refuses_clearly(tmp_path, local_ray, capfd):
    path = write_space(tmp_path)
    _, expected = planned_pairs(path, seeds=[0, 1])
    results = tmp_path / "results"
    first = subprocess.Popen([SWEEP, "rerun", str(path), "--seeds", "2", "--results", str(results), "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    lock = results / ".locks" / "faults.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.2)
    second = run_here(capfd, "rerun", path, "--seeds", "2", "--results", results, "--quiet")  # this process
    assert second.returncode == 3
    assert "another sweep of 'faults' is writing to" in second.stderr and "--wait" in second.stderr
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert_exactly(results, expected)
    queued = run_here(capfd, "rerun", path, "--seeds", "2", "--results", results, "--wait", "--quiet")
    assert queued.returncode == 0 and "nothing missing" in queued.stderr
    assert_exactly(results, expected)


def test_oom_and_nan_are_recorded_once_and_not_retried(tmp_path, local_ray, capfd):
    results = tmp_path / "results"
    oom_path = write_space(tmp_path, mlps=f"[32, {2**36}]")
    nan_path = write_space(tmp_path, name="nan", lr=1e6, clip="null", epochs=1)
    _, oom_expected = planned_pairs(oom_path)
    _, nan_expected = planned_pairs(nan_path)
    for path in (oom_path, nan_path):
        done = run_here(capfd, "run", path, "--results", results, "--quiet")
        assert done.returncode == 0, done.stderr
    oom_rows = assert_exactly(results, oom_expected)
    assert sorted({status for _, _, status, _ in oom_rows}) == ["ok", "oom"]
    nan_rows = assert_exactly(results, nan_expected, space="nan")
    assert {status for _, _, status, _ in nan_rows} == {"diverged"}
    again = run_here(capfd, "rerun", nan_path, "--seeds", "1", "--results", results, "--quiet")
    assert again.returncode == 0 and "nothing missing" in again.stderr  # a divergence is an outcome
    assert_exactly(results, nan_expected, space="nan")


def test_read_only_results_folder_is_a_clear_error(tmp_path, capsys):
    path = write_space(tmp_path)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the results folder should be")
    code = main(["run", str(path), "--results", str(blocker)])  # cannot even take the lock
    printed = capsys.readouterr()
    # SweepError's exit code (sweep/errors.py): not a bad space (2), not another sweep's lock (3)
    assert code == 1, printed.err
    # one line, no traceback: the folder it could not write, why, and what to check
    assert printed.err.startswith(f"error: cannot create the lock under {blocker / '.locks'}: "), printed.err
    assert "Not a directory" in printed.err and printed.err.endswith("; is the results folder writable?\n")
    assert len(printed.err.splitlines()) == 1 and printed.out == ""
    assert blocker.read_text() == "a file where the results folder should be"  # left as it was


class KillWorkerOnce(tune.Callback):
    """Kills the worker process of the first trial that reports its first epoch (SIGKILL, like the OOM killer)."""

    def __init__(self):
        self.killed_trial = None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        row = result.get("epoch_row")
        if self.killed_trial is None and row and row["epoch"] == 1:
            self.killed_trial = trial.trial_id
            os.kill(result["pid"], signal.SIGKILL)


@pytest.mark.serial
def test_killed_worker_resumes_from_its_checkpoint(tmp_path, local_ray):
    path = write_space(tmp_path, epochs=3)
    plan, expected = planned_pairs(path)
    results = tmp_path / "results"
    killer = KillWorkerOnce()
    run_sweep(plan, results, str(path), progress=False, extra_callbacks=[killer])  # Ray starts a new worker
    rows = assert_exactly(results, expected)
    assert {status for _, _, status, _ in rows} == {"ok"}
    killed = f"trial_id = '{killer.killed_trial}'"
    _, restarted = run_query(results, f"SELECT restarts, epochs_run FROM trials WHERE {killed}")
    assert restarted == [(1, 3)]
    _, epochs = run_query(results, f"SELECT epoch FROM epochs WHERE {killed} ORDER BY 1")
    assert epochs == [(1,), (2,), (3,)]  # resumed after epoch 1: nothing trained or written twice


CLUSTER = {}  # the test's Cluster, outside the callback: Tune pickles callbacks, and a Cluster holds locks


class NodeWatcher(tune.Callback):
    """Records which node each trial ran on, and removes the worker node once a trial there has reported."""

    def __init__(self, worker_node_id: str):
        self.worker_node_id, self.removed = worker_node_id, False
        self.nodes_seen = set()

    def on_trial_result(self, iteration, trials, trial, result, **info):
        node = result.get("node_id")
        self.nodes_seen.add(node)
        if not self.removed and node == self.worker_node_id and result.get("epoch_row"):
            self.removed = True
            CLUSTER["cluster"].remove_node(CLUSTER["worker"])


@pytest.mark.serial
def test_trials_run_on_two_nodes_and_losing_one_loses_no_row(tmp_path):
    from ray.cluster_utils import Cluster

    SharedRay.stop()  # this process's shared Ray, if up: the driver below joins the cluster instead
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    CLUSTER.update(cluster=cluster, worker=worker)
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        assert len([node for node in ray.nodes() if node["Alive"]]) == 2
        path = write_space(tmp_path, seeds="[0, 1]", epochs=3)
        plan, _ = planned_pairs(path)
        # Two trials for two 1-CPU nodes: both are placed at once, one per node. Fresh actors keep them
        # there; with actor reuse, a head that finishes first could take the worker's trial while that
        # node's actor is still importing torch, and nothing would run on the worker (seen on 2-core CI).
        plan.pairs = [(plan.configs[0], 0), (plan.configs[0], 1)]
        expected = {(plan.configs[0].config_id, 0), (plan.configs[0].config_id, 1)}
        results = tmp_path / "results"
        watcher = NodeWatcher(worker.node_id)
        run_sweep(plan, results, str(path), progress=False, extra_callbacks=[watcher], reuse_actors=False)
        assert watcher.removed and len(watcher.nodes_seen) == 2  # both nodes ran trials; one was lost
        rows = assert_exactly(results, expected)
        assert {status for _, _, status, _ in rows} == {"ok"}
        assert sum(restarts for *_, restarts in rows) >= 1
    finally:
        ray.shutdown()
        cluster.shutdown()
        CLUSTER.clear()
