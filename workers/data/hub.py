"""Data sets from the Hugging Face Hub, through ``datasets`` and its cache: ``data.source: hub``.

A :class:`HubSource` names a dataset repository (``repo``; a local folder in the Hub's layout works the same:
Parquet shards and a README whose ``configs:`` say which files are which split), its ``config``, a pinned
``revision`` (a commit sha or tag: a branch moves under you) and, where this tool's split names differ
from the repo's, ``splits`` (``{"val": "validation"}``). ``datasets.load_dataset`` reads it, so its cache
(``HF_HOME`` / ``HF_DATASETS_CACHE``), its token (``HF_TOKEN``, ``huggingface-cli login``) and its offline
switches (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``) hold as they do for any ``datasets`` user.

Trials never download by surprise: ``sweep data fetch SPACE`` downloads (or finds in the cache) what a
space needs, and a trial on a machine that is offline and lacks it fails in one line naming that command.
Each trial row records the data's identity: ``hub:<repo>[/<config>]@<revision>``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data.base import DataNotFoundError
from workers.data.cache import files_identity, hash_key

GATED = ("GatedRepoError",)
# datasets turns huggingface_hub's RevisionNotFoundError into a DatasetNotFoundError with this message, and
# re-raises it ``from None``: the message is all that is left to tell a wrong revision from a missing repo.
REVISION_MISSING = ("RevisionNotFoundError",)
REVISION_MISSING_MESSAGE = "Revision '"
MISSING = ("RepositoryNotFoundError", "RevisionNotFoundError", "DatasetNotFoundError", "DataFilesNotFoundError")
OFFLINE = ("OfflineModeIsEnabled", "LocalEntryNotFoundError", "ConnectionError", "ConnectError")


class HubSource(StrictModel):
    """Where on the Hub (or in a folder in its layout) a data set's splits are."""

    repo: str | None = Field(default=None, description="dataset repository id, or a local folder; None: the data set's")
    config: str | None = Field(default=None, description="the repository's config (subset); None: its default")
    revision: str = Field(min_length=1, description="a commit sha or tag, pinned so every trial reads the same data")
    splits: dict[str, str] = Field(default_factory=dict, description="this tool's split name → the repository's")


class HubFile(StrictModel):
    """One file of a repository on the Hub (a model's ``tokenizer.json``), at a pinned revision."""

    repo: str = Field(min_length=1, description="repository id, e.g. openai-community/gpt2")
    revision: str = Field(min_length=1, description="a commit sha or tag, pinned so every trial reads the same file")
    filename: str = Field(default="tokenizer.json", min_length=1, description="the file's path in the repository")
    repo_type: Literal["model", "dataset"] = Field(default="model", description="the repository's kind")


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set to a true value."""
    return any(
        os.environ.get(name, "").lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub (``HF_ENDPOINT``, default https://huggingface.co) opens within
    ``timeout_s``: a machine with no network fails at once, where ``datasets`` would retry for about 25 s."""
    import socket
    from urllib.parse import urlsplit

    endpoint = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def identity(repo: str, source: HubSource, config: str | None = None) -> str:
    """``hub:<repo>[/<config>]@<revision>`` (a local folder in the Hub's layout: its absolute path)."""
    where = str(Path(repo).resolve()) if Path(repo).is_dir() else repo
    config = config or source.config
    return f"hub:{where}{'/' + config if config else ''}@{source.revision}"


def load_split(repo: str, source: HubSource, split: str, what: str, config: str | None = None):
    """One split of the repository as a ``datasets.Dataset`` (from the cache when it is there); a failure to
    find it is a one-line :class:`DataNotFoundError` saying why and what to run."""
    import datasets

    name = source.splits.get(split, split)
    try:
        return datasets.load_dataset(
            repo, config or source.config, revision=source.revision, split=name, cache_dir=local_cache_dir(repo)
        )
    except Exception as exc:
        raise hub_error(exc, repo, source, name, what) from exc


def local_cache_dir(repo: str) -> str | None:
    """For a folder in the Hub's layout, a cache folder of its own contents: ``datasets`` keys a local folder's
    cache by its name, so two folders of one name (or one folder rewritten) would share a stale cache. None
    (the datasets cache) for a Hub id, whose cache is keyed by its revision."""
    if not Path(repo).is_dir():
        return None
    import datasets

    files = sorted(path for path in Path(repo).rglob("*") if path.is_file() and ".cache" not in path.parts)
    key = hash_key({"files": files_identity(files)})
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "local-folders" / key)


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from or while handling (``__cause__``, ``__context__``)."""
    chain, todo = [], [exc]
    while todo:
        current = todo.pop()
        if current is not None and all(current is not seen for seen in chain):
            chain.append(current)
            todo += [current.__cause__, current.__context__]
    return chain


def is_missing_revision(chain: list[BaseException]) -> bool:
    """huggingface_hub's RevisionNotFoundError anywhere in the chain, or datasets' rewording of it."""
    return any(
        type(e).__name__ in REVISION_MISSING
        or (type(e).__name__ == "DatasetNotFoundError" and str(e).startswith(REVISION_MISSING_MESSAGE))
        for e in chain
    )


def hub_error(
    exc: Exception, repo: str, source: HubSource | HubFile, split: str, what: str, part: str | None = None
) -> Exception:
    """The one-line error for a Hub failure, or ``exc`` itself when it is not about finding the data.
    ``part`` names what was asked for when it is not a split (a file)."""
    chain = exception_chain(exc)
    kinds = {type(e).__name__ for e in chain}
    part = part or f"split {split!r}"
    where = f"{repo}@{source.revision} ({part})"
    if is_missing_revision(chain):
        return DataNotFoundError(
            f"{what}: revision {source.revision} does not exist in {repo} on the Hub ({part}): pin a commit sha "
            f"or tag of that repository (its history: https://huggingface.co/{hub_kind_path(source)}{repo}/commits)"
        )
    if kinds & set(GATED):
        return DataNotFoundError(
            f"{what}: {where} is gated and access was refused: accept its terms on huggingface.co, then "
            "`huggingface-cli login` or set HF_TOKEN"
        )
    if kinds & set(OFFLINE) or (is_offline() and kinds & set(MISSING)):
        return DataNotFoundError(
            f"{what}: {where} is not in the datasets cache and the Hub is offline (HF_HUB_OFFLINE / "
            "HF_DATASETS_OFFLINE, or no network): run `sweep data fetch SPACE` where the Hub is reachable, "
            "with the same HF_HOME"
        )
    if kinds & set(MISSING):
        return DataNotFoundError(f"{what}: {where} was not found on the Hub ({exc}); check data.hub.repo and revision")
    return exc


def hub_kind_path(source: HubSource | HubFile) -> str:
    """The URL path prefix of the repository's kind: ``datasets/`` for a data set, nothing for a model."""
    return "" if isinstance(source, HubFile) and source.repo_type == "model" else "datasets/"


def hub_file(source: HubFile, what: str, download: bool) -> Path | None:
    """The file's path in the ``huggingface_hub`` cache. ``download``: fetched when it is not cached (the offline
    flags honoured; a failure is a one-line :class:`DataNotFoundError`); otherwise the cached copy or None,
    so that planning never touches the network."""
    import huggingface_hub

    if not download:
        cached = huggingface_hub.try_to_load_from_cache(
            source.repo, source.filename, revision=source.revision, repo_type=source.repo_type
        )
        return Path(cached) if isinstance(cached, str) else None
    try:
        return Path(
            huggingface_hub.hf_hub_download(
                source.repo, source.filename, revision=source.revision, repo_type=source.repo_type
            )
        )
    except Exception as exc:
        raise hub_error(exc, source.repo, source, "", what, part=source.filename) from exc


@dataclass(frozen=True)
class HubSplits:
    """A data set's repository on the Hub: ``repo`` (``source.repo``, else the data set's default), the
    source's settings, and the data set's own split names for the repo's (``source.splits`` wins)."""

    repo: str
    source: HubSource
    what: str
    default_splits: tuple[tuple[str, str], ...] = ()

    def split_name(self, split: str) -> str:
        return {**dict(self.default_splits), **self.source.splits}.get(split, split)

    def load(self, split: str, config: str | None = None):
        """One split as a ``datasets.Dataset``, through the cache (:func:`load_split`)."""
        renamed = self.source.model_copy(update={"splits": {split: self.split_name(split)}})
        return load_split(self.repo, renamed, split, self.what, config)

    def identity(self, config: str | None = None) -> str:
        return identity(self.repo, self.source, config)


def iter_text(dataset, column: str, what: str) -> Iterator[str]:
    """Each row's ``column``, stripped, empty ones skipped, read in batches."""
    if column not in dataset.column_names:
        raise ValueError(f"{what}: the Hub split has no {column!r} column (columns: {', '.join(dataset.column_names)})")
    for batch in dataset.select_columns([column]).iter(batch_size=1024):
        for text in batch[column]:
            document = (text or "").strip()
            if document:
                yield document


def fetched(dataset) -> tuple[int, int, str]:
    """(rows, bytes in the cache, the cache folder) of a loaded split."""
    files = [Path(entry["filename"]) for entry in dataset.cache_files]
    size = sum(path.stat().st_size for path in files if path.is_file())
    return len(dataset), size, str(files[0].parent) if files else "(in memory)"


def check_hub_fields(source: str, hub: HubSource | None, what: str) -> None:
    """``source: hub`` needs ``hub`` (at least its pinned revision); ``hub`` goes with ``source: hub`` only."""
    if source == "hub" and hub is None:
        raise ValueError(
            f"{what}: source: hub needs data.hub with a pinned revision (a commit sha or tag), e.g. "
            "hub: {revision: <sha>}"
        )
    if source != "hub" and hub is not None:
        raise ValueError(f"{what}: data.hub is read with source: hub only, but got (source={source!r})")


def fetch_line(splits: HubSplits, split: str, config: str | None = None) -> str:
    """Load one split into the cache and say what it holds: rows, bytes and the folder."""
    rows, size, folder = fetched(splits.load(split, config))
    name = f"{splits.what} {config + ' ' if config else ''}{split}"
    return f"{name}: {rows:,} rows, {size:,} bytes in {folder} ({splits.identity(config)})"


class HubSourced(StrictModel):
    """The fields and methods of a data set that can be read from the Hub as well as from a folder: mix it in
    before the data set's base (``class CifarData(HubSourced, ImageDataSpec)``). ``hub_repo`` is the default
    repository and ``hub_split_names`` maps this tool's split names to the repository's."""

    hub_repo: ClassVar[str | None] = None
    hub_split_names: ClassVar[tuple[tuple[str, str], ...]] = (("val", "validation"),)

    source: Literal["folder", "hub"] = Field(default="folder", description="a local folder, or the Hub (data.hub)")
    hub: HubSource | None = Field(default=None, description="source: hub: repo, config, pinned revision, splits")

    @model_validator(mode="after")
    def _hub_given(self) -> HubSourced:
        check_hub_fields(self.source, self.hub, self.name)
        return self

    def default_hub_repo(self) -> str | None:
        return self.hub_repo

    def hub_splits(self) -> HubSplits:
        return HubSplits(self.hub.repo or self.default_hub_repo(), self.hub, self.name, self.hub_split_names)

    def data_identity(self) -> str:
        return self.hub_splits().identity() if self.source == "hub" else super().data_identity()

    def fetch(self) -> list[str]:
        if self.source != "hub":
            return super().fetch()
        return [fetch_line(self.hub_splits(), split) for split in ("train", "val")]
