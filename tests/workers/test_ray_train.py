"""Launching a data-parallel trial through Ray Train (workers/ray_train.py): a rank's own failure is the
trial's data, a lost peer is retried; a failed rank's record is cut back to the merged epochs."""

import pickle

from workers.ray_train import RankFailed, is_peer_lost, merged_only, rank_failure


def test_a_ranks_own_failure_is_data_and_a_lost_peer_is_retried():
    from ray.exceptions import ActorDiedError
    from ray.train import WorkerGroupError

    oom = {"status": "oom", "error": "OutOfMemoryError: CUDA out of memory", "epochs": []}
    cut_off = {"status": "error", "error": "RuntimeError: [../gloo/transport/tcp/pair.cc:545] Read error: reset"}
    wrapped = RuntimeError("the worker's task raised")  # as Ray hands a worker's exception back
    wrapped.__cause__ = pickle.loads(pickle.dumps(RankFailed(oom)))  # it crosses processes
    found = rank_failure(WorkerGroupError("failed", {0: RankFailed(cut_off), 1: wrapped}))
    assert found is not None and found.record == oom  # the root cause, not rank 0's broken connection
    assert rank_failure(WorkerGroupError("lost", {0: RankFailed(cut_off)})) is None
    assert rank_failure(WorkerGroupError("lost", {1: ActorDiedError()})) is None  # Tune restarts these


def test_a_lost_peer_is_a_collective_error_and_nothing_else():
    assert is_peer_lost("DistBackendError: NCCL communicator was aborted")
    assert is_peer_lost("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed")
    assert not is_peer_lost("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert not is_peer_lost("OutOfMemoryError: CUDA out of memory")
    assert not is_peer_lost(None) and not is_peer_lost("")
    assert RankFailed({"status": "error", "error": "DistNetworkError: timed out"}).peer_lost


def test_a_failed_ranks_record_keeps_only_the_merged_epochs():
    record = {
        "status": "oom",
        "epochs": [{"epoch": 1, "step": 10}, {"epoch": 2, "step": 20}, {"epoch": 3, "step": 25}],
        "kappa": [{"epoch": 1, "kappa": 3.0}, {"epoch": 3, "kappa": 9.0}],
        "epochs_run": 3,
        "steps_run": 25,
    }
    cut = merged_only(record, 2)
    assert cut["epochs"] == record["epochs"][:2] and cut["kappa"] == record["kappa"][:1]
    assert (cut["epochs_run"], cut["steps_run"], cut["status"]) == (2, 20, "oom")
    none = merged_only(record, 0)
    assert none["epochs"] == [] and none["kappa"] == [] and none["epochs_run"] == 3  # nothing merged: counts kept
