"""The data cache (workers/data/cache.py): where, keys, atomic writes, and a cache that never breaks a trial."""

import hashlib
import json
import logging

import numpy as np
import pytest

from workers.data.cache import CACHE_DIR_ENV, atomic_file, cache_dir, hash_key, read_arrays, write_arrays


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    assert cache_dir("mqar") == tmp_path / "mqar"


def test_the_key_is_the_hash_of_sorted_json():
    assert hash_key({"b": 1, "a": [2]}) == hashlib.sha256(b'{"a": [2], "b": 1}').hexdigest()[:20]
    assert hash_key({"a": [2], "b": 1}) == hash_key({"b": 1, "a": [2]}) != hash_key({"a": [3], "b": 1})
    assert json.dumps({"b": 1, "a": [2]}, sort_keys=True) == '{"a": [2], "b": 1}'


def test_an_interrupted_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), atomic_file(target, "w") as handle:
        handle.write("half")
        raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []
    with atomic_file(target, "w") as handle:
        handle.write("whole")
    assert target.read_text() == "whole" and list(tmp_path.iterdir()) == [target]


def test_arrays_come_back_under_their_key_only(tmp_path, caplog):
    path = tmp_path / "c" / "data.npz"
    arrays = {"x": np.arange(6).reshape(2, 3), "y": np.array([1.5, 2.5])}
    write_arrays(path, "k1", arrays, "test", compressed=True)
    back = read_arrays(path, "k1", "test")
    assert set(back) == {"x", "y"} and all(np.array_equal(back[n], arrays[n]) for n in arrays)
    assert read_arrays(path, "k2", "test") is None and read_arrays(tmp_path / "none.npz", "k1", "test") is None
    path.write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING):
        assert read_arrays(path, "k1", "test") is None
    assert "unreadable" in caplog.text
