"""The data sets, by name: each is one pydantic class in its own module (``workers/data/<name>.py``) whose
``name`` field is its tag. ``data:`` in a space or a trial config is validated as :data:`DataSpec`, the union
of them all, picked by ``name`` (``digits`` when absent).

Adding a data set: write its module (a subclass of ``workers.data.base.ImageDataSpec``,
``SequenceDataSpec`` or ``LanguageDataSpec`` with a ``name: Literal[...]`` field and the methods its base
leaves open: ``load_arrays`` / ``open_batches``, and ``require_local`` for files on disk), then add its class
to :data:`DATA_SETS` below. docs/data.md walks through an example.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Discriminator, Tag, TypeAdapter

from workers.data.base import BatchSource, DataSetSpec, Modality
from workers.data.cifar import CifarData
from workers.data.digits import DigitsData
from workers.data.imagefolder import ImageFolderData
from workers.data.index_lookup import IndexLookupData
from workers.data.listops import ListOpsData
from workers.data.lra_listops import LRAListOpsData
from workers.data.mlm_corpus import MLMCorpusData
from workers.data.mqar import MQARData
from workers.data.nearest_neighbor import NearestNeighborData
from workers.data.repeated_tokens import RepeatedTokensData
from workers.data.stand_in import StandInData
from workers.data.tinystories import TinyStoriesData
from workers.vocabulary import DEFAULT_DATA_SET

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

DATA_SETS: tuple[type[DataSetSpec], ...] = (
    DigitsData,
    CifarData,
    ImageFolderData,
    ListOpsData,
    LRAListOpsData,
    MQARData,
    TinyStoriesData,
    MLMCorpusData,
    RepeatedTokensData,
    IndexLookupData,
    NearestNeighborData,
)


def names_of(cls: type[DataSetSpec]) -> tuple[str, ...]:
    """The ``name`` values a data set class answers to (CIFAR's class: cifar10 and cifar100)."""
    return typing.get_args(cls.model_fields["name"].annotation)


BY_NAME: dict[str, type[DataSetSpec]] = {name: cls for cls in DATA_SETS for name in names_of(cls)}
DATA_SET_NAMES = tuple(BY_NAME)


def _data_set_name(value: Any) -> str | None:
    """The tag pydantic picks the class by: ``name``, ``digits`` when a dict leaves it out."""
    if isinstance(value, dict):
        return value.get("name", DEFAULT_DATA_SET)
    return getattr(value, "name", None)


DataSpec = Annotated[
    typing.Union[tuple(Annotated[BY_NAME[name], Tag(name)] for name in DATA_SET_NAMES)],  # noqa: UP007
    Discriminator(_data_set_name, custom_error_type="unknown_data_set", custom_error_message="unknown data set"),
]


def data_set_class(name: str) -> type[DataSetSpec]:
    """The class of data set ``name``; ``KeyError`` listing the known names otherwise."""
    if name not in BY_NAME:
        raise KeyError(f"unknown data set {name!r}; known: {', '.join(DATA_SET_NAMES)}")
    return BY_NAME[name]


def modality_of(name: str) -> Modality:
    """What data set ``name`` gives a model: ``image``, ``sequence`` (token sequences to classify),
    ``causal_lm`` (next-token prediction) or ``masked_lm`` (masked-token prediction, then GLUE)."""
    return data_set_class(name).modality


def fields_taken_by(key: str) -> list[str]:
    """The data sets that take ``key`` under ``data:`` (for error messages about a misplaced key)."""
    return [name for name, cls in BY_NAME.items() if key in cls.model_fields]


def load_arrays(spec: DataSetSpec) -> Any:
    """The in-memory splits of ``spec``, or None for data each trial reads from disk."""
    return spec.load_arrays()


def open_batches(spec: DataSetSpec, device: torch.device, arrays: Any = None) -> BatchSource:
    """The trial's batch source; ``arrays`` are in-memory splits the driver already loaded, or
    ``sweep preflight``'s stand-in for data that is elsewhere (``workers/data/stand_in.py``)."""
    if isinstance(arrays, StandInData):
        return arrays.open(device)
    return spec.open_batches(device, arrays)


_ADAPTER = TypeAdapter(DataSpec)


def data_spec(**fields: Any) -> DataSetSpec:
    """A validated data config from keyword fields: ``data_spec(name="mqar", seq_len=64)``
    (``pydantic.ValidationError`` as for ``data:`` in a space)."""
    return _ADAPTER.validate_python(fields)
