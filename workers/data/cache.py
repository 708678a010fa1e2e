"""The data cache every data set shares: its folder, atomic writes, keys, and ``.npz`` files of arrays.

Generated or tokenised data is kept under ``$SWEEP_CACHE_DIR/<data set>/`` (default
``~/.cache/heads-for-depth/<data set>/``), one ``.npz`` per key. A key is a hash of everything the arrays
depend on (options, seeds, the source files' identities, a format number the module bumps when it changes
how it reads or encodes); the file stores its key too, so a file of another key or a torn one is never
read. Files are written to a temporary name and renamed (``os.replace``), so readers see a whole file or
none. A cache that cannot be read or written is logged, never a failure: the data is made again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "SWEEP_CACHE_DIR"
DEFAULT_CACHE_ROOT = "~/.cache/heads-for-depth"


def cache_dir(data_set: str) -> Path:
    """``$SWEEP_CACHE_DIR/<data_set>`` (default ``~/.cache/heads-for-depth/<data_set>``)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_ROOT).expanduser() / data_set


def hash_key(identity: dict) -> str:
    """The first 20 hex digits of the SHA-256 of ``identity`` as sorted JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


class atomic_file:
    """Open a temporary file beside ``path``; on a clean exit rename it to ``path`` (os.replace), on an
    error remove it."""

    def __init__(self, path: Path, mode: str, **kwargs):
        self.path, self.mode, self.kwargs = Path(path), mode, kwargs

    def __enter__(self):
        # A unique name opened with "x" (not mkstemp) so the file gets the usual permissions (umask).
        self.temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        self.handle = open(self.temp, self.mode.replace("w", "x"), **self.kwargs)
        return self.handle

    def __exit__(self, kind, exc, tb) -> None:
        self.handle.close()
        if kind is None:
            os.replace(self.temp, self.path)
        else:
            Path(self.temp).unlink(missing_ok=True)


def files_identity(paths) -> list[list]:
    """[path, size, mtime_ns] of each file: what a cache key sees of source data."""
    identity = []
    for path in paths:
        stat = Path(path).stat()
        identity.append([str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns])
    return identity


def read_arrays(path: Path, key: str, what: str) -> dict[str, np.ndarray] | None:
    """The arrays stored at ``path`` under ``key`` (all but the key itself); None when the file is absent,
    holds another key, or cannot be read (logged, naming ``what``)."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as stored:
            if str(stored["key"]) != key:
                return None
            arrays = {name: stored[name] for name in stored.files if name != "key"}
    except (OSError, ValueError, KeyError) as exc:
        log.warning("%s: cache file %s is unreadable (%s); making the data again", what, path, exc)
        return None
    log.info("%s: read %s", what, path)
    return arrays


def write_arrays(path: Path, key: str, arrays: dict[str, np.ndarray], what: str, compressed: bool = False) -> None:
    """Store ``arrays`` with ``key`` at ``path`` atomically; a cache that cannot be written is a warning."""
    save = np.savez_compressed if compressed else np.savez
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, "wb") as handle:
            save(handle, key=np.array(key), **arrays)
        log.info("%s: cached in %s", what, path)
    except OSError as exc:
        log.warning("%s: could not write the cache file %s (%s); continuing without it", what, path, exc)
