"""Exact parameter and FLOP counts of a model, kept on disk so that planning a space measured before builds no
model (and imports no torch).

A count is measured by building the model on the meta device (``workers.models.build_on_meta``) and counting
its parameters (``workers.probes.params.count_params``) and its forward FLOPs on one sample
(``workers.probes.flops.forward_flops_per_sample``). The result is stored under
``$SWEEP_CACHE_DIR/model_counts/<identity>/`` (default ``~/.cache/heads-for-depth/model_counts/…``), one
JSON file per model, named by the hash of the model's fields (``sweep.space.shapes.freeze``) and holding the
fields themselves, so a file is used only for exactly the fields it was measured for.

``<identity>`` is the hash of everything else a count depends on (:func:`counts_identity`): the installed
versions of torch, timm and transformers (read from the package metadata, without importing them), and the
SHA-256 of the project's source files that build and count models (the family modules, ``workers/models.py``,
``workers/config.py``, the conditioning and the two probes). An upgraded library or an edited family starts a
fresh folder, so a stale count is never read; the old folder is left for ``rm -r`` (a few KiB).

Writers are safe together: each file is written to a unique temporary name and renamed (``os.replace``), so
a reader sees a whole file or none, and two writers of one model write the same counts. A file that cannot
be read or written is logged and the model is measured again: the cache can make planning faster, never wrong.
``SWEEP_COUNT_CACHE=0`` switches it off (every count is measured).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import workers
from workers.data.cache import atomic_file, cache_dir, hash_key

log = logging.getLogger(__name__)

COUNT_CACHE_ENV = "SWEEP_COUNT_CACHE"  # "0": measure every count, read and write no file
COUNTS_FORMAT = 1  # bumped when what a file holds, or how a count is made, changes
LIBRARIES = ("torch", "timm", "transformers")
# The project's files (under workers/) whose code decides a model's parameters and FLOPs: a folder means its
# every .py file.
COUNTING_SOURCES = (
    "families",
    "models.py",
    "config.py",
    "conditioning.py",
    "batch.py",
    "probes/params.py",
    "probes/flops.py",
)


@dataclass(frozen=True)
class Counts:
    """A model's exact counts: ``params`` (scalar parameters, each shared tensor once) and ``flops`` (forward
    FLOPs of one sample; None when only the parameters were measured)."""

    params: int
    flops: int | None


def enabled() -> bool:
    return os.environ.get(COUNT_CACHE_ENV, "1") != "0"


def library_version(name: str) -> str | None:
    """The installed version of ``name`` from its package metadata (no import), or None when not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def sources_digest(root: Path | None = None) -> str:
    """SHA-256 over the :data:`COUNTING_SOURCES` under ``root`` (default: the ``workers`` package), each file's
    path relative to ``root`` and its bytes, in sorted order."""
    root = root or Path(workers.__file__).parent
    files: list[Path] = []
    for name in COUNTING_SOURCES:
        path = root / name
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def counts_identity() -> dict:
    """What every count of this installation depends on besides the model's fields (the module docstring)."""
    return {
        "format": COUNTS_FORMAT,
        "versions": {name: library_version(name) for name in LIBRARIES},
        "sources": sources_digest(),
    }


def folder() -> Path:
    """This installation's folder of counts: ``$SWEEP_CACHE_DIR/model_counts/<hash of counts_identity()>``."""
    return cache_dir("model_counts") / hash_key(counts_identity())


def fields_json(frozen: tuple) -> list:
    """The frozen model fields as JSON values: [[name, value], …], tuples as lists."""
    return json.loads(json.dumps([[name, value] for name, value in frozen]))


def entry_path(frozen: tuple) -> Path:
    return folder() / f"{hash_key({'fields': fields_json(frozen)})}.json"


def read(frozen: tuple) -> Counts | None:
    """The stored counts of the model with these frozen fields, or None (none stored, another model's file,
    an unreadable file, or the cache switched off)."""
    if not enabled():
        return None
    path = entry_path(frozen)
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("model counts: %s is unreadable (%s); measuring again", path, exc)
        return None
    if not isinstance(stored, dict) or stored.get("fields") != fields_json(frozen):
        return None
    params, flops = stored.get("params"), stored.get("flops")
    if not isinstance(params, int) or not (flops is None or isinstance(flops, int)):
        return None
    return Counts(params, flops)


def write(frozen: tuple, counts: Counts) -> None:
    """Store ``counts`` for the model with these frozen fields, atomically; a failure is a warning."""
    if not enabled():
        return
    path = entry_path(frozen)
    record = {"fields": fields_json(frozen), "params": counts.params, "flops": counts.flops}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, "w") as handle:
            json.dump(record, handle)
    except OSError as exc:
        log.warning("model counts: could not write %s (%s); continuing without it", path, exc)


def measure(frozen: tuple, flops: bool = True) -> Counts:
    """The model's counts, from the cache or measured on the meta device (and then stored). ``flops=False``:
    the parameters are enough (a stored count without FLOPs serves; none is traced)."""
    cached = read(frozen)
    if cached is not None and (cached.flops is not None or not flops):
        return cached
    counts = measure_on_meta(frozen, flops)
    write(frozen, counts)
    return counts


def measure_on_meta(frozen: tuple, flops: bool = True) -> Counts:
    """Build the model on the meta device and count it (imports torch and the family's library)."""
    from workers.config import ModelSpec
    from workers.models import build_on_meta
    from workers.probes.flops import forward_flops_per_sample
    from workers.probes.params import count_params

    spec = ModelSpec(**dict(frozen))
    model = build_on_meta(spec)
    return Counts(count_params(model), forward_flops_per_sample(spec, model) if flops else None)
