"""Where results live: a local folder, or a prefix on object storage (``s3://bucket/prefix``, ``gs://bucket/prefix``).

A local folder stays a ``Path``, and every module treats it exactly as it always has. A prefix is an
:class:`ObjectStore`, reached through pyarrow's own filesystems (``pyarrow.fs.FileSystem.from_uri``): S3 takes
its endpoint and credentials from the usual AWS variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ``AWS_PROFILE``, an instance role) plus ``AWS_ENDPOINT_URL`` for S3-compatible servers (MinIO,
Ceph); GCS takes Google's application default credentials. The layout under the prefix is the folder's.

- Writing: a file is built in memory and stored in one request (a single PUT below pyarrow's 10 MiB part size;
  larger ones go as a multipart upload). An object store makes an object visible whole or not at all, so
  there is no temporary and no rename, and a crash never leaves a torn file.
- Reading: listings and Parquet footers through pyarrow (:meth:`ObjectStore.readable`); ``sweep/analysis/sql.py`` hands
  the files to DuckDB as pyarrow datasets, which DuckDB scans itself. DuckDB's own ``httpfs`` extension is
  not in the duckdb wheel and would be downloaded on first use; pyarrow's S3 and GCS clients are.
- One sweep per space and prefix: :func:`hold_lock`, a lease on an object ``.locks/SPACE.lock``.

Both kinds share :class:`Footer`, what a file's Parquet footer says (readable or why not, its schema, and for a
compacted file the files it replaced: ``sweep/results/compact.py``), and :func:`superseded`, the files a reader leaves
out because a compacted file in their folder holds their rows.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import parse_qs

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweep.errors import ResultsError, SweepError, SweepLocked

log = logging.getLogger("sweep.results.storage")

SCHEMES = ("s3", "gs", "gcs")  # what pyarrow's from_uri opens as object storage
LEASE_S = 120.0  # a lock not renewed for this long is stale: its holder is gone (renewed every LEASE_S / 4)
POLL_S = 2.0  # how often a waiting sweep looks at the lock again
FOOTER_THREADS = 16  # footers read at once: each is a ranged GET, mostly waiting on the network
# A compacted file's key-value metadata: the names (in its own folder) of the files whose rows it holds
REPLACES_KEY = b"sweep.replaces"


@dataclass(frozen=True)
class Footer:
    """What a results file's Parquet footer says: why it cannot be read (None when it can), its schema, and,
    for a compacted file, the names of the files in its folder whose rows it holds."""

    problem: str | None
    schema: pa.Schema | None = None
    replaces: tuple[str, ...] = ()


_footers: dict[tuple[str, int, int], Footer] = {}  # (path, size, mtime) -> read once per process


def read_footer(path: str, filesystem: pafs.FileSystem | None = None) -> Footer:
    """``path``'s :class:`Footer` (a local path, or an object's path in ``filesystem``)."""
    try:
        metadata = pq.read_metadata(path, filesystem=filesystem)
        schema = metadata.schema.to_arrow_schema()
        replaces = json.loads((metadata.metadata or {}).get(REPLACES_KEY, b"[]"))
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return Footer(f"cannot be read as Parquet: {detail}")
    return Footer(None, schema.remove_metadata(), tuple(str(name) for name in replaces))


def cached_footer(path: str, size: int, mtime_ns: int, filesystem: pafs.FileSystem | None = None) -> Footer:
    """:func:`read_footer`, remembered per (path, size, modification time): a process that connects often (the
    report, adaptive reruns) reads each footer once."""
    key = (path, size, mtime_ns)
    if key not in _footers:
        _footers[key] = read_footer(path, filesystem)
    return _footers[key]


def split_path(path: str) -> tuple[str, str]:
    """(folder, name) of a ``/``-separated path, local or an object's."""
    folder, _, name = str(path).rpartition("/")
    return folder, name


def superseded(footers: Iterable[tuple[str, Footer]]) -> set[str]:
    """The paths among ``footers`` whose rows a compacted file in the same folder holds: left out by every
    reader, deleted by ``sweep compact``. A compacted file replaced by a later one is among them."""
    replaced = {(split_path(path)[0], name) for path, footer in footers for name in footer.replaces}
    return {path for path, _ in footers if split_path(path) in replaced}


def superseding(footers: Iterable[tuple[str, Footer]]) -> dict[str, str]:
    """:func:`superseded`, each path with the compacted file whose rows hold its own (the later one if several)."""
    by_name = {(split_path(path)[0], name): path for path, footer in footers for name in footer.replaces}
    return {path: by_name[split_path(path)] for path, _ in footers if split_path(path) in by_name}


RETENTION_ENV = "SWEEP_COMPACT_RETENTION_S"
RETENTION_S = 3600.0  # superseded files are kept this long after the compacted file that holds their rows


def retention_s() -> float:
    """How long a compaction keeps the files it merged (``$SWEEP_COMPACT_RETENTION_S``, else an hour): a reader
    that listed them before the compacted file existed still finds them (as Delta Lake and Iceberg keep
    superseded files), and every reader that sees the compacted file leaves them out."""
    text = os.environ.get(RETENTION_ENV)
    try:
        return max(0.0, float(text)) if text else RETENTION_S
    except ValueError:
        raise SweepError(f"${RETENTION_ENV} takes seconds, got {text!r}") from None


def age_s(path: str, filesystem: pafs.FileSystem | None = None) -> float | None:
    """Seconds since ``path`` (local, or an object in ``filesystem``) was last written; None when it is gone."""
    try:
        if filesystem is None:
            return time.time() - os.stat(path).st_mtime
        info = filesystem.get_file_info(path)
    except (OSError, pa.ArrowException):
        return None
    return None if info.mtime is None else time.time() - info.mtime.timestamp()


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` via a temporary file in the same folder and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def is_remote(results) -> bool:
    return isinstance(results, ObjectStore)


def locate(results):
    """``results`` as the commands use it: an :class:`ObjectStore` for ``s3://…``/``gs://…`` text, else as given
    (a local folder, which every caller already handles as a ``Path``)."""
    if isinstance(results, str) and "://" in results:
        return ObjectStore(results)
    return results


def resolved(results):
    """``results`` as :func:`locate` gives it, a folder made absolute."""
    results = locate(results)
    return results if is_remote(results) else Path(results).resolve()


def parse_results(text: str):
    """``--results``: a folder (a ``Path``, as before) or an object-store prefix (an :class:`ObjectStore`)."""
    try:
        return ObjectStore(text) if "://" in text else Path(text)
    except SweepError as exc:  # argparse turns this into its usage error (exit 2)
        raise argparse.ArgumentTypeError(str(exc)) from None


class ObjectStore:
    """A results prefix on object storage. The filesystem is opened on first use (it may ask the server for the
    bucket's region), so parsing ``--results`` needs no network."""

    def __init__(self, uri: str):
        scheme, _, rest = uri.partition("://")
        location, _, self.query = rest.partition("?")
        self.scheme, self.root = scheme.lower(), location.strip("/")
        if self.scheme not in SCHEMES or not self.root:
            raise SweepError(
                f"results location {uri!r} is neither a folder nor an object-store prefix; give a folder, "
                "s3://bucket/prefix or gs://bucket/prefix"
            )
        self._filesystem: pafs.FileSystem | None = None

    def __str__(self) -> str:
        return self.uri_of(self.root)

    def __repr__(self) -> str:
        return f"ObjectStore({str(self)!r})"

    @property
    def bucket(self) -> str:
        return self.root.split("/", 1)[0]

    @property
    def filesystem(self) -> pafs.FileSystem:
        if self._filesystem is None:
            self._filesystem = open_filesystem(self.scheme, self.root, self.query)
        return self._filesystem

    def path(self, *parts: str) -> str:
        """The filesystem path of ``parts`` under the prefix: ``bucket/prefix/trials/…``."""
        return "/".join((self.root, *parts))

    def uri_of(self, path: str) -> str:
        return f"{self.scheme}://{path}"

    def relative(self, path: str) -> str:
        return path[len(self.root) + 1 :]

    def exists(self) -> bool:
        try:
            return self.filesystem.get_file_info(self.root).type != pafs.FileType.NotFound
        except OSError as exc:
            raise ResultsError(f"cannot reach {self}: {exc}") from exc

    def files(self, folder: str, suffix: str = ".parquet") -> list[pafs.FileInfo]:
        """Every object under ``folder`` whose name ends in ``suffix``, in path order."""
        selector = pafs.FileSelector(self.path(folder), recursive=True, allow_not_found=True)
        try:
            infos = self.filesystem.get_file_info(selector)
        except OSError as exc:
            raise ResultsError(f"cannot list {self.uri_of(self.path(folder))}: {exc}") from exc
        return sorted((i for i in infos if i.is_file and i.base_name.endswith(suffix)), key=lambda i: i.path)

    def put(self, path: str, data: bytes) -> None:
        with self.filesystem.open_output_stream(path) as out:
            out.write(data)

    def put_parquet(self, relative: str, table: pa.Table) -> None:
        """Write ``table`` as Parquet to ``relative`` under the prefix, built in memory and stored in one request."""
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        self.put(self.path(relative), buffer.getvalue().to_pybytes())

    def move(self, source: str, target: str) -> None:
        self.filesystem.move(source, target)

    def delete(self, path: str) -> None:
        self.filesystem.delete_file(path)

    def footer(self, info: pafs.FileInfo) -> Footer:
        """The object's :class:`Footer`, remembered per (path, size, modification time)."""
        return cached_footer(info.path, info.size or 0, info.mtime_ns or 0, self.filesystem)

    def footers(self, folder: str) -> list[tuple[str, Footer]]:
        """(path, footer) of every Parquet file under ``folder`` (a table, or a table's space: ``trials/SPACE``),
        in path order; the footers read at once."""
        infos = self.files(folder)
        with ThreadPoolExecutor(FOOTER_THREADS) as pool:
            return list(zip((i.path for i in infos), pool.map(self.footer, infos), strict=True))

    def readable(self, table: str) -> tuple[list[tuple[str, pa.Schema]], list[tuple[str, str]]]:
        """A table's files: (path, schema) of those the analysis reads, and (path, why) of the damaged ones.
        Files a compacted file holds (:func:`superseded`) are in neither."""
        footers = self.footers(table)
        replaced = superseded(footers)
        good = [(path, f.schema) for path, f in footers if f.problem is None and path not in replaced]
        bad = [(path, f.problem) for path, f in footers if f.problem]
        return good, bad


def open_filesystem(scheme: str, root: str, query: str) -> pafs.FileSystem:
    """pyarrow's filesystem for the prefix. S3 opens with ``allow_delayed_open``: a file under the part size then
    goes up as one PutObject when it is closed, not as a multipart upload started when it is opened."""
    options = [query] if query else []
    if scheme == "s3" and "allow_delayed_open" not in query:
        options.append("allow_delayed_open=true")
    uri = f"{scheme}://{root}" + ("?" + "&".join(options) if options else "")
    try:
        filesystem, _ = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ResultsError(
            f"cannot open {scheme}://{root}: {exc}. S3 reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, for an "
            "S3-compatible server, AWS_ENDPOINT_URL; GCS reads Google's application default credentials"
        ) from exc
    return filesystem


def tune_storage(results) -> dict:
    """Tune's ``RunConfig`` storage for a sweep's checkpoints and experiment state: ``RESULTS/_tune``."""
    if is_remote(results):
        return {"storage_path": results.path("_tune"), "storage_filesystem": results.filesystem}
    return {"storage_path": str(Path(results) / "_tune")}


# --- one sweep per space and prefix: a lease on a lock object ------------------------------------------------


class LockHeld(Exception):
    """Another holder has the lock; ``holder`` says who, as far as the lock object tells."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


@dataclass(frozen=True)
class Lease:
    """The lock object as read: what its holder wrote, its version (for a compare-and-swap), its age in s."""

    holder: dict
    version: str
    age_s: float


class S3Objects:
    """The lock's conditional requests on S3: a create-only put (``If-None-Match: *``) and a compare-and-swap
    put or delete (``If-Match: ETag``), which AWS S3, MinIO, Ceph and moto refuse with 412 when the
    condition fails. Through boto3 (the ``cloud`` extra): pyarrow's filesystems send no conditions."""

    REFUSED = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "404")

    def __init__(self, store: ObjectStore):
        try:
            import boto3
            import botocore.exceptions
        except ImportError as exc:
            raise SweepError(
                "results on s3:// need boto3 for the sweep lock: pip install 'heads-for-depth[cloud]'"
            ) from exc
        self.failures = (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError)
        self.client = boto3.client("s3", **s3_client_options(store))
        self.bucket, self.where = store.bucket, str(store)

    def _request(self, operation: str, **params):
        """One request's answer, or None when S3 refused its condition (412) or has no such object."""
        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **params)
        except self.failures as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in self.REFUSED:
                return None
            raise ResultsError(
                f"cannot use the sweep lock under {self.where} ({operation}): {exc}; check the AWS credentials "
                "and, for an S3-compatible server, AWS_ENDPOINT_URL"
            ) from exc

    def create(self, key: str, body: bytes) -> str | None:
        answer = self._request("put_object", Key=key, Body=body, IfNoneMatch="*")
        return answer and answer["ETag"]

    def replace(self, key: str, body: bytes, version: str) -> str | None:
        answer = self._request("put_object", Key=key, Body=body, IfMatch=version)
        return answer and answer["ETag"]

    def read(self, key: str) -> Lease | None:
        answer = self._request("get_object", Key=key)
        if answer is None:
            return None
        server_now = parse_http_date(answer["ResponseMetadata"]["HTTPHeaders"].get("date"))
        age = (server_now - answer["LastModified"]).total_seconds() if server_now else 0.0  # the server's clock
        return Lease(parse_holder(answer["Body"].read()), answer["ETag"], age)

    def delete(self, key: str, version: str) -> None:
        self._request("delete_object", Key=key, IfMatch=version)  # refused: no longer ours, left alone


class PlainObjects:
    """The lock's requests where pyarrow offers no condition (GCS): check, then write, then read back. Two sweeps
    that start within the same second can both pass the check; the read-back catches most such races, not all."""

    def __init__(self, store: ObjectStore):
        self.store = store

    def _path(self, key: str) -> str:
        return f"{self.store.bucket}/{key}"

    def create(self, key: str, body: bytes) -> str | None:
        if self.read(key) is not None:
            return None
        self.store.put(self._path(key), body)
        return json.loads(body)["token"]

    def replace(self, key: str, body: bytes, version: str) -> str | None:
        lease = self.read(key)
        if lease is None or lease.version != version:
            return None
        self.store.put(self._path(key), body)
        return json.loads(body)["token"]

    def read(self, key: str) -> Lease | None:
        filesystem = self.store.filesystem
        info = filesystem.get_file_info(self._path(key))
        if info.type == pafs.FileType.NotFound:
            return None
        with filesystem.open_input_stream(info.path) as stream:
            holder = parse_holder(stream.read())
        age = time.time() - info.mtime.timestamp() if info.mtime else 0.0
        return Lease(holder, str(holder.get("token", "")), age)

    def delete(self, key: str, version: str) -> None:
        lease = self.read(key)
        if lease is not None and lease.version == version:
            self.store.filesystem.delete_file(self._path(key))


def s3_client_options(store: ObjectStore) -> dict:
    """boto3's client options matching pyarrow's: the URI's ``endpoint_override``/``scheme``/``region`` if given
    (boto3 reads AWS_ENDPOINT_URL and the credentials itself), else the region pyarrow resolved."""
    query = {key: values[-1] for key, values in parse_qs(store.query).items()}
    options = {"region_name": query.get("region") or getattr(store.filesystem, "region", None) or None}
    if "endpoint_override" in query:
        endpoint = query["endpoint_override"]
        options["endpoint_url"] = endpoint if "://" in endpoint else f"{query.get('scheme', 'https')}://{endpoint}"
    return options


def parse_http_date(text: str | None) -> datetime | None:
    try:
        return parsedate_to_datetime(text) if text else None
    except (TypeError, ValueError):
        return None


def parse_holder(data: bytes) -> dict:
    try:
        holder = json.loads(data)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def pid_alive(pid) -> bool:
    if not isinstance(pid, int):
        return True  # cannot tell: let the lease decide
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def is_stale(lease: Lease, lease_s: float) -> bool:
    """Whether the lock's holder is gone: not renewed for ``lease_s``, or a process of this machine that has
    exited (a driver killed here leaves its lock behind; the next sweep here takes it at once)."""
    if lease.age_s > lease_s:
        return True
    return lease.holder.get("host") == socket.gethostname() and not pid_alive(lease.holder.get("pid"))


def describe_holder(lease: Lease | None) -> str:
    if lease is None:
        return "unknown"
    holder = lease.holder
    return (
        f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {holder.get('since', '?')}, "
        f"renewed {lease.age_s:.0f} s ago"
    )


def objects_for(store: ObjectStore):
    return S3Objects(store) if store.scheme == "s3" else PlainObjects(store)


def lock_body(token: str) -> bytes:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "token": token,
    }
    return json.dumps(holder).encode()


def try_acquire(objects, key: str, body: bytes, lease_s: float) -> tuple[str | None, Lease | None]:
    """One attempt: (our version, None) when we hold the lock now, else (None, the holder's lease)."""
    version = objects.create(key, body)
    lease = None
    if version is None:
        lease = objects.read(key)
        if lease is None:  # released between the two requests: try again at once
            return try_acquire(objects, key, body, lease_s)
        if not is_stale(lease, lease_s):
            return None, lease
        version = objects.replace(key, body, lease.version)  # take it over, unless another did first
    now = objects.read(key)  # read back: a server that ignores the conditions shows here who won
    if version is not None and now is not None and now.holder.get("token") == json.loads(body)["token"]:
        return now.version, None
    return None, now or lease


class Renewal:
    """Keeps a held lock's lease fresh from a daemon thread, and deletes the lock when the sweep ends."""

    def __init__(self, objects, key: str, body: bytes, version: str, every_s: float):
        self.objects, self.key, self.body, self.version, self.every_s = objects, key, body, version, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True, name="sweep-lock")
        self.thread.start()

    def run(self) -> None:
        """Renew every ``every_s`` until stopped; warn and give up if another sweep took the lock meanwhile."""
        while not self.stop.wait(self.every_s):
            try:
                version = self.objects.replace(self.key, self.body, self.version)
            except Exception as exc:  # a network error: try again next time, the lease has slack
                log.warning("could not renew the sweep lock %s: %s", self.key, exc)
                continue
            if version is None:
                log.warning("the sweep lock %s was taken over by another sweep (not renewed for too long)", self.key)
                return
            self.version = version

    def release(self) -> None:
        self.stop.set()
        self.thread.join()
        try:
            self.objects.delete(self.key, self.version)  # only if it is still ours
        except Exception as exc:  # never hide the sweep's own outcome behind this one
            log.warning("could not delete the sweep lock %s (%s); the next sweep takes it over as stale", self.key, exc)


def lock_key(store: ObjectStore, space: str) -> str:
    """The lock's key inside the bucket: ``PREFIX/.locks/SPACE.lock``."""
    return "/".join(part for part in (store.root.partition("/")[2], ".locks", f"{space}.lock") if part)


@contextmanager
def hold_lock(store: ObjectStore, space: str, wait: bool, lease_s: float = LEASE_S, poll_s: float = POLL_S):
    """Hold ``PREFIX/.locks/SPACE.lock`` for a sweep: created only if absent, renewed every ``lease_s / 4``,
    deleted at the end. A lock whose holder is gone (see :func:`is_stale`) is taken over by a compare-and-swap.
    Raises :class:`LockHeld` when another sweep holds it (with ``wait``, polls until it is free)."""
    objects, key, body = objects_for(store), lock_key(store, space), lock_body(uuid.uuid4().hex)
    while True:
        try:
            version, lease = try_acquire(objects, key, body, lease_s)
        except OSError as exc:  # pyarrow's requests (S3's are ResultsErrors already)
            raise ResultsError(f"cannot use the sweep lock under {store}: {exc}") from exc
        if version is not None:
            break
        if not wait:
            raise LockHeld(describe_holder(lease))
        time.sleep(poll_s)
    renewal = Renewal(objects, key, body, version, lease_s / 4)
    try:
        yield
    finally:
        renewal.release()


# --- one sweep per space and results folder at a time -----------------------------------------------------


@contextmanager
def sweep_lock(results_dir: Path, space: str, wait: bool):
    """Hold an exclusive lock on ``results/.locks/SPACE.lock`` for the duration of a sweep or rerun.

    A second one on the same space and results folder fails at once with who holds it (or, with
    ``wait``, blocks until it is free). The lock is the kernel's (``flock``), so it is released when
    its holder exits, even if it was killed. On object storage it is a lease on a lock object instead
    (:func:`hold_lock`).
    """
    results_dir = locate(results_dir)  # s3://… or gs://… text: the object store
    if is_remote(results_dir):
        with object_store_lock(results_dir, space, wait):
            yield
        return
    lock_dir = Path(results_dir) / ".locks"
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        handle = (lock_dir / f"{space}.lock").open("a+")
    except OSError as exc:
        raise SweepError(f"cannot create the lock under {lock_dir}: {exc}; is the results folder writable?") from exc
    try:
        flags = fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
        try:
            fcntl.flock(handle, flags)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise SweepLocked(
                f"another sweep of {space!r} is writing to {results_dir} ({holder}); wait for it to finish, "
                "or pass --wait to queue behind it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
        handle.flush()
        yield
    finally:
        handle.close()


@contextmanager
def object_store_lock(store, space: str, wait: bool):
    """:func:`sweep_lock` on an object-store prefix: the same refusal (exit 3) and ``--wait``."""
    try:
        with hold_lock(store, space, wait):
            yield
    except LockHeld as held:
        raise SweepLocked(
            f"another sweep of {space!r} is writing to {store} ({held.holder}); wait for it to finish, or pass "
            "--wait to queue behind it (a lock its holder stopped renewing is taken over after "
            f"{LEASE_S:.0f} s)"
        ) from None
