"""Results and checkpoints on object storage, against a real S3-compatible server: moto in server mode on
127.0.0.1, started here (no network). The CLI is run as users run it, with ``--results s3://bucket/prefix``:
the sink's files, `sweep sql`, `sweep doctor`, the sweep lock, a sweep whose checkpoints land in the bucket,
and a driver killed mid-sweep and resumed against the bucket (nothing lost, nothing twice)."""

import functools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import ray

import sweep.results.compact
import sweep.results.storage
import sweep.run.tuner
from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.errors import SweepLocked
from sweep.results.compact import COMPACTED_PREFIX, compact_space
from sweep.results.sink import ParquetSink
from sweep.results.storage import LockHeld, ObjectStore, hold_lock, lock_key
from sweep.results.storage import RETENTION_ENV, sweep_lock
from tests.sweep.run.test_tuner_faults import KillWorkerOnce
from tests.sweep.results.test_sink import epoch_result, fake_trial, record

SWEEP = str(Path(sys.executable).parent / "sweep")
BUCKET = "sweep-results"
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 on a free port of 127.0.0.1, with one bucket; the AWS variables point every client at it
    (pyarrow, boto3, and the Ray workers and `sweep` processes started after this, which inherit them)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):  # a developer's own settings
            env.delenv(name, raising=False)
        for name, value in {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
            env.setenv(name, value)
        import boto3

        boto3.client("s3").create_bucket(Bucket=BUCKET)
        yield endpoint
    server.stop()


@pytest.fixture
def prefix(s3_server, request):
    """A fresh prefix in the bucket for each test."""
    return f"s3://{BUCKET}/{request.node.name.replace('[', '-').replace(']', '')}"


@pytest.fixture(scope="module")
def local_ray(s3_server, shared_ray):
    """conftest's ``local_ray`` for the sweeps here, asked for after the server started, so its workers inherit the
    AWS variables (the shared Ray starts anew: the environment changed). Yields its GCS address."""
    yield shared_ray.start()


def objects(prefix: str) -> list[str]:
    """Every object under ``prefix``, as paths relative to it."""
    store = ObjectStore(prefix)
    infos = store.filesystem.get_file_info(pafs.FileSelector(store.root, recursive=True, allow_not_found=True))
    return sorted(store.relative(i.path) for i in infos if i.is_file)


def sql(prefix: str, query: str, capsys) -> list[dict]:
    assert main(["sql", query, "--results", prefix, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sink_writes_each_trial_once_to_the_bucket_and_sql_reads_it(prefix, capsys):
    sink = ParquetSink(ObjectStore(prefix), "sweepA")
    for trial in (fake_trial("t1"), fake_trial("t2", seed=1)):
        sink.on_trial_result(0, [], trial, epoch_result(1, 80.0))
        sink.on_trial_result(0, [], trial, {"record": record()})
        sink.on_trial_complete(0, [], trial)
        sink.on_trial_complete(0, [], trial)  # a second completion writes nothing twice
    files = [f"{table}/unit/sweepA/{t}.parquet" for table in ("epochs", "kappa", "trials") for t in ("t1", "t2")]
    assert objects(prefix) == files  # exactly the trials' files: no temporaries, nothing written twice
    rows = sql(prefix, "SELECT trial_id, seed, status, top1 FROM trials ORDER BY trial_id", capsys)
    assert rows == [
        {"trial_id": "t1", "seed": 0, "status": "ok", "top1": 91.5},
        {"trial_id": "t2", "seed": 1, "status": "ok", "top1": 91.5},
    ]
    assert sql(prefix, "SELECT count(*) AS n FROM kappa", capsys) == [{"n": 8}]


def test_a_damaged_object_is_left_out_then_doctor_sets_it_aside(prefix, capsys):
    store = ObjectStore(prefix)
    sink = ParquetSink(store, "sweepA")
    trial = fake_trial("t1")
    sink.on_trial_result(0, [], trial, {"record": record()})
    sink.on_trial_complete(0, [], trial)
    store.put(store.path("trials/unit/old/torn.parquet"), b"PAR1 half a file")
    assert main(["sql", "SELECT trial_id FROM trials", "--results", prefix, "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["trial_id", "t1"]  # the torn object is left out, the rest is read
    assert f"left out 1 damaged results file that cannot be read as Parquet ({prefix}/trials/unit/old/torn" in err
    assert main(["doctor", "--results", prefix]) == 1
    out = capsys.readouterr().out
    assert f"problem: {prefix}/trials/unit/old/torn.parquet: cannot be read as Parquet" in out
    assert main(["doctor", "--results", prefix, "--fix"]) == 0
    assert any(
        name.startswith(".quarantine/") and name.endswith("trials/unit/old/torn.parquet") for name in objects(prefix)
    )
    assert main(["doctor", "--results", prefix]) == 0
    assert "no problems" in capsys.readouterr().out


class Killed(BaseException):
    """Stands for the process dying mid-way (not an Exception: nothing catches it)."""


def test_compaction_on_the_bucket_reads_every_row_as_before_even_when_stopped_half_way(prefix, capsys, monkeypatch):
    """`sweep compact` against the bucket with a retention of 0 (what it merged is deleted at once): one object
    per sweep folder and table; stopped after a merged object is stored and before the objects it holds are
    deleted, nothing is counted twice; run again, it finishes."""
    monkeypatch.setenv(RETENTION_ENV, "0")
    store = ObjectStore(prefix)
    for sweep_id, seeds in (("sweepA", range(3)), ("sweepB", range(3, 5))):
        sink = ParquetSink(store, sweep_id)
        for seed in seeds:
            trial = fake_trial(f"t{seed}", seed=seed)
            sink.on_trial_result(0, [], trial, epoch_result(1, 80.0))
            sink.on_trial_result(0, [], trial, {"record": record()})
            sink.on_trial_complete(0, [], trial)
    queries = ("SELECT trial_id, seed, status, top1 FROM trials ORDER BY ALL", "SELECT * FROM kappa ORDER BY ALL")
    before = [sql(prefix, query, capsys) for query in queries]
    assert len(before[0]) == 5 and len(before[1]) == 5 * 4

    def killed(self, path):
        raise Killed

    real_delete = sweep.results.compact.Prefix.delete
    monkeypatch.setattr(sweep.results.compact.Prefix, "delete", killed)
    with pytest.raises(Killed):
        compact_space(store, "unit")
    monkeypatch.setattr(sweep.results.compact.Prefix, "delete", real_delete)
    stored = objects(prefix)
    assert [n for n in stored if n.startswith("trials/unit/sweepA/")][-3:] == [f"trials/unit/sweepA/t{i}.parquet"
                                                                              for i in range(3)]  # fmt: skip
    assert sum(n.startswith("trials/unit/sweepA/compacted-") for n in stored) == 1
    assert [sql(prefix, query, capsys) for query in queries] == before  # the three superseded objects left out
    assert main(["doctor", "--results", prefix]) == 1
    assert capsys.readouterr().out.count("its rows are in a compacted file beside it") == 3
    assert main(["compact", "--results", prefix]) == 0
    assert "unit: 12 files merged into 5; deleted 3 merged files past their retention" in capsys.readouterr().out
    stored = objects(prefix)
    assert len(stored) == 6 and all(n.split("/")[3].startswith(COMPACTED_PREFIX) for n in stored), stored
    assert [sql(prefix, query, capsys) for query in queries] == before
    assert main(["doctor", "--results", prefix]) == 0


@pytest.fixture(params=["S3Objects", "PlainObjects"])
def lock_requests(request, monkeypatch):
    """Each way the lock talks to the store: S3's conditional requests, and the check-then-write that GCS gets
    (run here against the same S3 server through pyarrow)."""
    kind = getattr(sweep.results.storage, request.param)
    monkeypatch.setattr(sweep.results.storage, "objects_for", kind)
    return kind


def test_the_lock_refuses_a_second_sweep_and_is_released(prefix, lock_requests):
    store = ObjectStore(prefix)
    refused = rf"another sweep of 'space' is writing to {prefix} \(pid {os.getpid()} on "
    with sweep_lock(store, "space", wait=False):
        assert objects(prefix) == [".locks/space.lock"]
        with pytest.raises(SweepLocked, match=refused), sweep_lock(store, "space", wait=False):
            pass
        with sweep_lock(store, "other", wait=False):  # another space is not held
            pass
    assert objects(prefix) == []  # released: the lock object is gone


def test_a_lock_whose_holder_is_gone_is_taken_over(prefix, lock_requests):
    """A holder killed on this machine (its pid no longer runs) at once; one on another machine once its lease
    has not been renewed for ``lease_s``."""
    store = ObjectStore(prefix)
    backend, key = lock_requests(store), lock_key(store, "space")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    holder = {"pid": int(dead.stdout), "host": socket.gethostname(), "since": "then", "token": "killed"}
    assert backend.create(key, json.dumps(holder).encode())
    with hold_lock(store, "space", wait=False):
        assert backend.read(key).holder["pid"] == os.getpid()
    elsewhere = {**holder, "host": "another-machine", "token": "elsewhere"}
    assert backend.create(key, json.dumps(elsewhere).encode())
    with pytest.raises(LockHeld, match=r"pid \d+ on another-machine since then"), hold_lock(store, "space", False):
        pass
    time.sleep(1.1)  # object times count whole seconds: now at least 1 s old
    with hold_lock(store, "space", wait=False, lease_s=0.5):  # not renewed for longer than its lease: stale
        assert backend.read(key).holder["token"] != "elsewhere"


def test_a_live_holder_keeps_its_lock_by_renewing_it(prefix):
    """The holder renews its lease every ``lease_s / 4``, so however long its sweep runs the lock stays fresh."""
    store = ObjectStore(prefix)
    with hold_lock(store, "space", wait=False, lease_s=1.5):
        time.sleep(2.2)  # longer than the lease: only the renewals keep it
        with pytest.raises(LockHeld), hold_lock(store, "space", wait=False, lease_s=1.5):
            pass


def test_results_on_an_unknown_scheme_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sql", "SELECT 1", "--results", "ftp://host/results"])
    assert exit_.value.code == 2
    assert "neither a folder nor an object-store prefix" in capsys.readouterr().err
    assert str(ObjectStore("gs://bucket/a/b/")) == "gs://bucket/a/b" and ObjectStore("gs://bucket").root == "bucket"


# A trial in about a second (tests/sweep/cli/test_run_profiles.py's TINY): two one-step epochs, so each trial checkpoints.
TINY = """
question: results on object storage
model: {{family: vit, embed_dim: 16, mlp_dim: 32, patch_size: 2}}
axes: {{depth: [1], num_heads: [2, 4]}}
baseline: {{depth: 1, num_heads: 4}}
seeds: {seeds}
data: {{name: digits, limit_train: 32, limit_val: 90}}
train: {{epochs: 2, batch_size: 32, warmup_steps: 0}}
probes: {{kappa_samples: 2, throughput_warmup_steps: 0, throughput_steps: 1, latency_iters: 1, memory: false}}
resources: {{cpus_per_trial: 1, max_concurrent_trials: 1}}
"""


def write_space(tmp_path, seeds="[0]") -> Path:
    path = tmp_path / "bucket_space.yaml"
    path.write_text(textwrap.dedent(TINY.format(seeds=seeds)))
    return path


def checkpoints(prefix: str) -> dict[str, int]:
    """Trial id -> checkpoints of it that Tune stored under ``PREFIX/_tune/``."""
    found: dict[str, int] = {}
    for name in objects(prefix):
        parts = name.split("/")
        if parts[0] == "_tune" and parts[-1] == "trial_state.pt":
            found[parts[2]] = found.get(parts[2], 0) + 1
    return found


@pytest.mark.slow
@pytest.mark.serial
def test_a_sweep_killed_mid_way_resumes_against_the_bucket_nothing_lost_nothing_twice(
    tmp_path, prefix, local_ray, capsys, monkeypatch
):
    """tests/sweep/run/test_tuner_faults.py's kills, against the bucket. The killed driver runs on the Ray at ``RAY_ADDRESS`` (a
    cluster outlives its driver) and leaves its lock object behind; the resumed one (this process, on the same
    Ray) takes the lock over and runs only what is missing, and there a worker killed after its first epoch
    resumes from its checkpoint in the bucket. Then `sweep sql` and `rerun` read the bucket. (`sweep report`
    reads through the same ``connect`` as `sweep sql`; its figures would add seconds here, not coverage.)"""
    path = write_space(tmp_path, seeds="[0, 1]")
    store = ObjectStore(prefix)
    driver = subprocess.Popen([SWEEP, "run", str(path), "--results", prefix, "--quiet"],
                              env={**os.environ, "RAY_ADDRESS": local_ray}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not store.files("trials") and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver alone: the Ray it runs on stays up
    driver.wait()
    partial = run_query(store, "SELECT config_id, seed FROM trials")[1]
    assert 1 <= len(partial) < 4, partial
    assert any(n.startswith(".locks/") for n in objects(prefix))  # the killed driver's lock is left behind
    killer = KillWorkerOnce()
    monkeypatch.setattr(
        sweep.run.tuner, "run_sweep", functools.partial(sweep.run.tuner.run_sweep, extra_callbacks=[killer])
    )
    assert main(["run", str(path), "--results", prefix, "--quiet"]) == 0
    assert f"{len(partial)} of 4 trials already recorded" in capsys.readouterr().err
    rows = sql(prefix, "SELECT trial_id, config_id, seed, status, epochs_run, restarts FROM trials", capsys)
    pairs = [(r["config_id"], r["seed"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 4 and set(partial) <= set(pairs)  # none lost, none twice
    assert {(r["status"], r["epochs_run"]) for r in rows} == {("ok", 2)}
    assert [r["restarts"] for r in rows if r["trial_id"] == killer.killed_trial] == [1]
    epochs = sql(prefix, "SELECT trial_id, epoch FROM epochs ORDER BY trial_id, epoch", capsys)
    assert [e["epoch"] for e in epochs if e["trial_id"] == killer.killed_trial] == [1, 2]  # resumed, not redone
    assert len(epochs) == 8
    stored = checkpoints(prefix)  # every trial's checkpoints are in the bucket, where any node can read them
    assert all(stored.get(r["trial_id"]) == 2 for r in rows), stored
    assert not any(n.startswith(".locks/") for n in objects(prefix))  # released
    monkeypatch.undo()
    assert main(["run", str(path), "--results", prefix, "--quiet"]) == 0
    assert "nothing missing" in capsys.readouterr().err
    assert main(["rerun", str(path), "--seeds", "2", "--results", prefix, "--dry-run"]) == 0
    assert "nothing missing" in capsys.readouterr().err


@pytest.mark.slow
def test_queries_in_a_loop_during_a_compaction_on_the_bucket_all_answer_right(prefix, capsys):
    """Issue 38: `sweep sql` run again and again while a compaction merges 600 objects on the bucket (kept for
    the retention period, as on a folder): every answer right, none failed."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    from sweep.results.schema import table_from_rows

    store = ObjectStore(prefix)

    def put(index: int) -> None:
        row = {"space": "unit", "sweep_id": f"s{index % 4}", "trial_id": f"t{index}", "config_id": f"c{index}",
               "seed": index % 4, "status": "ok"}  # fmt: skip
        store.put_parquet(f"trials/unit/s{index % 4}/t{index}.parquet", table_from_rows("trials", [row]))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(600)))
    assert isinstance(store.filesystem, pa.fs.FileSystem)
    done, answers = threading.Event(), []
    worker = threading.Thread(target=lambda: (compact_space(store, "unit"), done.set()))
    worker.start()
    while not done.is_set() or len(answers) < 3:
        answers.append(main(["sql", "SELECT count(*) AS n FROM trials", "--results", prefix, "--format", "csv"]))
        out, err = capsys.readouterr()
        assert out.split() == ["n", "600"], (out, err)
    worker.join()
    assert answers == [0] * len(answers) and len(answers) >= 3
    assert sum(n.split("/")[-1].startswith(COMPACTED_PREFIX) for n in objects(prefix)) == 4
    assert len(objects(prefix)) == 604  # the merged objects kept for the retention period
